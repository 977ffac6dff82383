"""The options of a compile, checked and defaulted in one place.

`compile_options` takes what `irfuse.compile` and the tools take (an element type, a
backend, a pipeline, the batch and device profile the fusion search plans for, a GPU
architecture, the layout compiled first, a register table or `"ptxas"`) and gives `CompileOptions`, every
value checked (a refusal names the option and what it takes) and every default filled: the
backend `auto` becomes the GPU where one is usable, else the CPU; the profile follows the
backend (`cpu` on the CPU, `h100` on the GPU); the batch is `DEFAULT_BATCH`. `key_fields` is
what they add to a program cache key (the profile's figures, the architecture a GPU build is
for, the register table's text, or for `"ptxas"` the NVRTC whose figures the plan rests on).
Plain data: importing this module imports no compiler.
"""

from __future__ import annotations

import os
from dataclasses import asdict

from irfuse.artifact.arrays import LAYOUTS, element_type
from irfuse.artifact.records import record
from irfuse.artifact.user_files import read_bytes, read_text
from irfuse.diagnostics import UsageError, is_whole
from irfuse.planner.profiles import DEFAULT_BATCH, backend_profile, load_profile, profile_files

BACKENDS = ("auto", "cuda", "cpu")
DTYPES = ("f32", "f64")
# The names an element type goes by in the array libraries, beside irfuse's own.
_DTYPE_NAMES = {"f32": "f32", "float32": "f32", "f64": "f64", "float64": "f64"}
# registers="ptxas": plan with the figures ptxas gives the plan's own kernels, compiled in turn
# (`driver.compile.compile_with_ptxas_figures`) instead of a table named by its path.
PTXAS = "ptxas"

__all__ = ["BACKENDS", "DTYPES", "DEFAULT_BATCH", "PTXAS", "CompileOptions", "backend_profile", "chosen_backend",
           "compile_options", "dtype_name"]


@record(frozen=True)
class CompileOptions:
    """Everything a compile reads besides its source (see the module)."""

    dtype: str = "f32"
    backend: str = "cpu"  # "cuda" (a cubin is built) or "cpu" (a host library)
    pipeline: str | None = None  # None: the default pipeline
    n: int = DEFAULT_BATCH
    profile: str = "cpu"
    arch: str | None = None  # None: the GPU present, else sm_90 (for a "cuda" build)
    layout: str = "aos"  # the layout compiled first
    registers: str | None = None  # a register table's path (`irfuse compile` writes one), or PTXAS
    # Uniform inputs fixed when compiling (`transforms.constant_inputs`): (name, shape as given,
    # numbers) in name order, the numbers float64 in C order.
    constants: tuple[tuple[str, tuple[int, ...], tuple[float, ...]], ...] = ()

    def key_fields(self) -> dict:
        """What these options add to a program cache key: every option, the profile's figures
        (a calibrated profile of the same name plans otherwise), the architecture a GPU build
        is for, the register table's text (not its path)."""
        arch = self.arch
        if arch is None and self.backend == "cuda":
            from irfuse.backend.nvrtc import default_arch  # (NVRTC's module: only a GPU build's key)

            arch = default_arch()
        return dict(dtype=self.dtype, backend=self.backend, pipeline=self.pipeline, n=self.n,
                    profile=asdict(load_profile(self.profile)), arch=arch,
                    registers=registers_text(self.registers),
                    **({"constants": [(name, list(shape), [v.hex() for v in values])
                                      for name, shape, values in self.constants]} if self.constants else {}))

    def files_read(self) -> tuple:
        """The bytes of the files these options read at a compile (the profile's calibrated
        file, the register table; None where absent): what a program kept in the process is
        kept by beside the options, so that a profile calibrated again or a table written
        again compiles anew (`key_fields` reads the same files for the disk cache, slower)."""
        paths = profile_files(self.profile) + ([self.registers] if self.registers not in (None, PTXAS) else [])
        return tuple(bytes_of(path) for path in dict.fromkeys(paths))


def bytes_of(path: str) -> bytes | None:
    """A file's bytes, or None where it cannot be read (what reads it then says why)."""
    try:
        return read_bytes(path)
    except OSError:
        return None


def chosen_backend(backend: str) -> str:
    """`auto`: the GPU where one is usable, else the CPU; `cuda` and `cpu` as they are."""
    if backend not in BACKENDS:
        raise UsageError(f"backend '{backend}' is not one of {', '.join(BACKENDS)}")
    if backend != "auto":
        return backend
    from irfuse.runtime.cuda_device import gpu_available

    return "cuda" if gpu_available() else "cpu"


def dtype_name(dtype) -> str:
    """'f32' or 'f64' for an element type as a caller names it: irfuse's names, NumPy's
    ('float32', `np.float32`, `np.dtype("float64")`, JAX's `jnp.float32`) or PyTorch's
    (`torch.float32`, read by its name: torch is not imported); refused by name otherwise."""
    if isinstance(dtype, str):
        name = _DTYPE_NAMES.get(dtype)
    elif type(dtype).__module__.split(".")[0] == "torch":
        name = _DTYPE_NAMES.get(str(dtype).removeprefix("torch."))
    else:
        import numpy as np

        # (a type or a dtype, not a value: np.dtype() would read a NumPy scalar's or array's type)
        name = _DTYPE_NAMES.get(np.dtype(dtype).name) if isinstance(dtype, (type, np.dtype)) else None
    if name is None:
        raise UsageError(f"dtype {dtype!r} is not one of {', '.join(DTYPES)} (float32 and float64 by NumPy's or "
                         "PyTorch's names and types too)")
    return name


def compile_options(dtype: str | None = None, backend: str = "auto", pipeline: str | None = None,
                    n: int | None = None, profile: str | None = None, arch: str | None = None,
                    layout: str | None = None, registers=None, constants=None) -> CompileOptions:
    """`CompileOptions` from what a caller gave, checked and defaulted (see the module)."""
    for name, value in (("layout", layout), ("backend", backend)):
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{name}= is a name, not {value!r}")
    dtype, layout = dtype_name(dtype) if dtype is not None else "f32", layout or "aos"
    if layout not in LAYOUTS:
        raise UsageError(f"layout '{layout}' is not one of {', '.join(LAYOUTS)}")
    chosen = chosen_backend(backend)
    if n is not None and (not is_whole(n) or n < 1):
        raise UsageError(f"n= is the batch size the fusion search plans for, a positive whole number, not {n!r}")
    if pipeline is not None and not isinstance(pipeline, str):
        raise UsageError(f"pipeline= is a pass pipeline's text, not {pipeline!r}")
    for name, value in (("profile", profile), ("arch", arch)):
        if value is not None and not isinstance(value, str):
            raise UsageError(f"{name}= is a name, not {value!r}")
    if registers is not None and not isinstance(registers, (str, os.PathLike)):
        raise UsageError(f"registers= takes 'ptxas' or a register table's path, not {registers!r}")
    path = os.fspath(registers) if registers is not None else None
    registers_text(path)  # (refused here, naming the file, when it cannot be read)
    if path == PTXAS:
        check_ptxas_backend(chosen)
    return CompileOptions(dtype, chosen, pipeline, int(n) if n is not None else DEFAULT_BATCH,
                          profile or backend_profile(chosen), arch, layout, path, constant_numbers(constants, dtype))


def constant_numbers(constants, dtype: str = "f64") -> tuple[tuple[str, tuple[int, ...], tuple[float, ...]], ...]:
    """`constants=` as (name, shape, float64 numbers) in name order: a mapping of input names
    to arrays (NumPy's, PyTorch's, CuPy's, lists), each flattened in C order; refused by name
    where it is not such a mapping or an array holds anything but finite real numbers in the
    range of element type `dtype` (the kernels' literals: past it, their infinity)."""
    if constants is None:
        return ()
    if not isinstance(constants, dict):
        raise UsageError(f"constants= maps uniform input names to their values, not {type(constants).__name__}")
    import numpy as np

    out = []
    for name in sorted(constants):
        if not isinstance(name, str):
            raise UsageError(f"constants= maps input names to values: {name!r} is not a name")
        value = constants[name]
        if hasattr(value, "detach"):  # (a PyTorch tensor, on any device)
            value = value.detach().cpu().numpy()
        elif hasattr(value, "get") and hasattr(value, "__cuda_array_interface__"):  # (CuPy)
            value = value.get()
        try:
            array = np.asarray(value)
        except (TypeError, ValueError) as e:
            raise UsageError(f"constants['{name}'] is not an array of numbers: {e}") from None
        if array.dtype.kind not in "fiub" or array.size == 0:
            raise UsageError(f"constants['{name}'] holds {array.dtype} values, not real numbers"
                             if array.size else f"constants['{name}'] is empty")
        array = array.astype(np.float64)
        if not np.isfinite(array).all():
            raise UsageError(f"constants['{name}'] holds a value that is not finite: constants are written into the "
                             "kernels as literals")
        numbers = tuple(float(v) for v in array.ravel())
        beyond = element_type(dtype).beyond_range(numbers)
        if beyond is not None:
            raise UsageError(f"constants['{name}'] holds {beyond}; the program is compiled for "
                             f"{element_type(dtype).numpy.__name__}")
        out.append((name, tuple(int(n) for n in array.shape), numbers))
    return tuple(out)


def check_ptxas_backend(backend: str) -> None:
    """`registers="ptxas"` reads ptxas's figures of CUDA kernels: refused, by name, elsewhere."""
    if backend != "cuda":
        raise UsageError("registers='ptxas' plans with ptxas's registers and spills of the CUDA kernels; it needs "
                         f"the cuda backend: the {backend} backend has none")


def registers_text(path: str | None) -> str | None:
    """A register table's text (part of a compile's key), or a refusal naming the file; for
    `PTXAS`, the NVRTC version whose ptxas gives the figures."""
    if path is None:
        return None
    if path == PTXAS:
        from irfuse.backend.nvrtc import nvrtc_version

        try:
            return f"{PTXAS} {nvrtc_version()}"
        except Exception as e:  # noqa: BLE001 -- no NVRTC (the package or its library): said by name
            raise UsageError(f"registers='ptxas' compiles the plan's kernels with NVRTC, which is not usable "
                             f"here: {e}") from None
    try:
        return read_text(path)
    except (OSError, UnicodeDecodeError) as e:
        raise UsageError(f"registers={path!r}: cannot read the register table: "
                         f"{getattr(e, 'strerror', None) or e}") from None
