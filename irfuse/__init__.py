"""irfuse: a GPU kernel-fusion compiler for batched small-matrix programs, on xDSL.

`irfuse.compile(path_or_source)` gives a `Program` to call on arrays (see `irfuse.api`).

Importing any part of irfuse imports the driver, which hands the op library the check
that every hand-written implementation must pass (the library itself compiles nothing).
"""

import irfuse.driver  # noqa: F401
from irfuse._version import __version__
from irfuse import ops
from irfuse.api import IrfuseWarning, Outputs, Program, PythonProgram, Verification, compile, program
from irfuse.diagnostics import CompileError, ExecutionError, IrfuseError, UsageError
from irfuse.frontend.python import Matrix, Scalar, Tensor, Uniform, Vector
from irfuse.frontend.python import reduce_max as max, reduce_min as min, reduce_sum as sum  # noqa: A004
from irfuse.runtime.streaming import page_locked, pinned_empty

__all__ = ["__version__", "compile", "program", "ops", "Scalar", "Vector", "Matrix", "Tensor", "Uniform", "sum",
           "max", "min", "Program",
           "PythonProgram", "Outputs", "Verification", "IrfuseWarning", "IrfuseError", "CompileError",
           "UsageError", "ExecutionError", "pinned_empty", "page_locked"]
