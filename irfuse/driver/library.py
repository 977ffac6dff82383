"""The op library as the compiler uses it: the default library with the check every
hand-written implementation passes installed (`implementation_check`: run alone on the CPU
against the reference). Importing this module installs the check, so whatever defines or
implements ops through the driver (the compiler, `irfuse.ops`, user libraries) has it."""

from irfuse.driver.implementation_check import check_implementation
from irfuse.library.catalogue import default_library, load_library_file, set_implementation_checker

set_implementation_checker(check_implementation)

__all__ = ["default_library", "load_library_file"]
