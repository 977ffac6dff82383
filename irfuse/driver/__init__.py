"""The driver: compiling a program to an artifact (`compile`), the artifact (`artifact`),
and the check every hand-written implementation passes (`implementation_check`), which
importing this package hands to the op library."""

from irfuse.driver.implementation_check import check_implementation
from irfuse.library.catalogue import set_implementation_checker

set_implementation_checker(check_implementation)
