"""irfuse: a GPU kernel-fusion compiler for batched small-matrix programs, on xDSL.

Importing any part of irfuse imports the driver, which hands the op library the check
that every hand-written implementation must pass (the library itself compiles nothing).
"""

import irfuse.driver  # noqa: F401
from irfuse._version import __version__

__all__ = ["__version__"]
