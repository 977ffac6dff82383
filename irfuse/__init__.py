"""irfuse: a GPU kernel-fusion compiler for batched small-matrix programs, on xDSL.

`irfuse.compile(path_or_source)` gives a `Program` to call on arrays (see `irfuse.api`).

Names are imported when first used: `import irfuse` alone loads nothing of the compiler, so
that a process running programs from the disk cache (or plans saved by `irfuse compile`)
needs neither xDSL nor the planner. The op library's check of hand-written implementations
is installed by the driver, which `irfuse.ops`, the Python annotations and any compile load.
"""

from irfuse._version import __version__
from irfuse.diagnostics import CompileError, ExecutionError, IrfuseError, NotCapturable, UsageError

__all__ = ["__version__", "compile", "program", "jvp", "vjp", "grad", "jacobian", "hessian", "linear_operator", "tangent_matrix",
           "diagonal", "derivative", "ops", "Scalar", "Mask",
           "Vector", "Matrix", "Tensor", "Uniform", "sum", "max", "min", "where", "Nodal", "Index", "gather", "scatter",
           "Program", "PythonProgram", "Outputs", "Verification", "IrfuseWarning", "IrfuseError", "CompileError",
           "UsageError", "ExecutionError", "NotCapturable", "pinned_empty", "page_locked", "time_loop"]

# name -> (module, attribute) for the names imported on first use
_LAZY = {
    "compile": ("irfuse.api", "compile"), "program": ("irfuse.api", "program"), "jvp": ("irfuse.api", "jvp"),
    "vjp": ("irfuse.api", "vjp"), "grad": ("irfuse.api", "grad"), "jacobian": ("irfuse.api.tangents", "jacobian"),
    "hessian": ("irfuse.api.tangents", "hessian"), "linear_operator": ("irfuse.api.operators", "linear_operator"),
    "tangent_matrix": ("irfuse.api.tangents", "tangent_matrix"),
    "diagonal": ("irfuse.api.tangents", "diagonal"),
    "Program": ("irfuse.api", "Program"), "PythonProgram": ("irfuse.api", "PythonProgram"),
    "Outputs": ("irfuse.api", "Outputs"), "Verification": ("irfuse.api", "Verification"),
    "IrfuseWarning": ("irfuse.api", "IrfuseWarning"), "time_loop": ("irfuse.api.time_loops", "time_loop"),
    "pinned_empty": ("irfuse.runtime.streaming", "pinned_empty"),
    "page_locked": ("irfuse.runtime.streaming", "page_locked"),
    "Scalar": ("irfuse.frontend.python", "Scalar"), "Vector": ("irfuse.frontend.python", "Vector"),
    "Matrix": ("irfuse.frontend.python", "Matrix"), "Tensor": ("irfuse.frontend.python", "Tensor"),
    "Uniform": ("irfuse.frontend.python", "Uniform"), "Mask": ("irfuse.frontend.python", "Mask"),
    "where": ("irfuse.frontend.python", "where"), "derivative": ("irfuse.frontend.python", "derivative"),
    "Nodal": ("irfuse.frontend.python", "Nodal"), "Index": ("irfuse.frontend.python", "NodeIndex"),
    "gather": ("irfuse.frontend.python", "gather"), "scatter": ("irfuse.frontend.python", "scatter"),
    "sum": ("irfuse.frontend.python", "reduce_sum"), "max": ("irfuse.frontend.python", "reduce_max"),
    "min": ("irfuse.frontend.python", "reduce_min"),
}
# Subpackages found as attributes (`irfuse.mesh.Connectivity` after `import irfuse` alone),
# imported at their first use.
SUBPACKAGES = ("ops", "mesh", "dask", "torch", "jax")
# Modules whose names need the op library with its implementation check installed.
_COMPILER_SIDE = {"irfuse.frontend.python"}


def __getattr__(name: str):
    import importlib

    if name in SUBPACKAGES:  # (the framework operators import PyTorch or JAX, irfuse.dask Dask)
        return importlib.import_module(f"irfuse.{name}")
    if name not in _LAZY:
        raise AttributeError(f"module 'irfuse' has no attribute '{name}'")
    module, attr = _LAZY[name]
    if module in _COMPILER_SIDE:
        importlib.import_module("irfuse.driver.library")  # installs the implementation check
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value  # found directly from now on
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__) | set(SUBPACKAGES))
