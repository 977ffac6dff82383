"""Binding a call's arguments to a program's inputs and outputs, and refusing bad ones.

Every refusal is a `UsageError` that names the argument and says what was expected: a
wrong shape or element type, batch lengths that disagree, a missing or unknown argument,
an object that is not an array. Nothing is cast: an array of another element type is
refused with the conversion to write (irfuse never changes a caller's precision behind
their back).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from irfuse.diagnostics import UsageError


def _describe_shape(value_shape: tuple[int, ...]) -> str:
    return "(N" + "".join(f", {d}" for d in value_shape) + ")"


def bind_inputs(names: Sequence[str], args: tuple, named: dict) -> dict[str, object]:
    """Positional arguments in `names` order, then keywords: name -> argument."""
    if len(args) > len(names):
        raise UsageError(f"the program takes {len(names)} inputs ({', '.join(names)}), "
                         f"{len(args)} were given by position")
    bound = dict(zip(names, args))
    for name, value in named.items():
        if name not in names:
            raise UsageError(f"unknown input '{name}': the program's inputs are {', '.join(names)}")
        if name in bound:
            raise UsageError(f"input '{name}' is given twice, by position and by name")
        bound[name] = value
    missing = [n for n in names if n not in bound]
    if missing:
        raise UsageError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} "
                         f"(the program's inputs, in order: {', '.join(names)})")
    return {n: bound[n] for n in names}


def host_array(what: str, value: object) -> np.ndarray:
    """`value` as a NumPy array without copying, or a refusal naming `what` (GPU arrays with
    a CUDA array interface are taken before this, by `device_arrays`)."""
    if hasattr(value, "__dlpack_device__") and not isinstance(value, np.ndarray) and _dlpack_on_device(value):
        raise UsageError(f"{what} is a GPU array ({type(value).__module__}.{type(value).__qualname__}) without a "
                         "CUDA array interface; pass it through a library that has one (cupy.from_dlpack, "
                         "torch.from_dlpack)")
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__array__") or isinstance(value, (list, tuple)):
        return np.asarray(value)
    raise UsageError(f"{what} is a {type(value).__qualname__}, not an array")


def _dlpack_on_device(value: object) -> bool:
    try:
        device_type, _ = value.__dlpack_device__()  # type: ignore[attr-defined]
    except Exception:
        return False
    return int(device_type) != 1  # kDLCPU


def check_array(what: str, a, value_shape: tuple[int, ...], dtype: np.dtype,
                n: int | None) -> int:
    """Checks one argument of a batch; returns its batch length."""
    if a.ndim != 1 + len(value_shape) or tuple(a.shape[1:]) != tuple(value_shape):
        raise UsageError(f"{what} has shape {tuple(a.shape)}; expected {_describe_shape(value_shape)}, the batch "
                         "axis first (array of structures)")
    if a.dtype != dtype:
        hint = (f"convert it with .astype(numpy.{dtype.name})" if a.dtype.kind in "fiu" else "")
        other = {"float32": "f32", "float64": "f64"}.get(a.dtype.name)
        if other:
            hint += f", or compile the program with dtype='{other}'"
        raise UsageError(f"{what} holds {a.dtype.name}; the program was compiled for {dtype.name} and irfuse "
                         f"does not cast{': ' + hint if hint else ''}")
    if n is not None and a.shape[0] != n:
        raise UsageError(f"{what} holds {a.shape[0]} elements, the other arguments {n}: every argument "
                         "needs the same batch length")
    return int(a.shape[0])


def bind_outputs(names: Sequence[str], out: object) -> dict[str, object]:
    """`out=`: a mapping by name, a sequence in the program's `return` order, or one array
    for a program with one output."""
    if isinstance(out, Mapping):
        unknown = [k for k in out if k not in names]
        if unknown:
            raise UsageError(f"out= names {', '.join(repr(u) for u in unknown)}, not outputs of the program "
                             f"(its outputs: {', '.join(names)})")
        return dict(out)
    if isinstance(out, (list, tuple)):
        if len(out) != len(names):
            raise UsageError(f"out= holds {len(out)} arrays; the program has {len(names)} outputs "
                             f"({', '.join(names)})")
        return dict(zip(names, out))
    if len(names) == 1:
        return {names[0]: out}
    raise UsageError(f"out= must be a mapping or a sequence for a program with {len(names)} outputs "
                     f"({', '.join(names)})")


def check_output_array(what: str, value: object, value_shape: tuple[int, ...], dtype: np.dtype, n: int) -> np.ndarray:
    if not isinstance(value, np.ndarray):
        raise UsageError(f"{what} is a {type(value).__qualname__}; with inputs in host memory out= takes NumPy arrays")
    check_array(what, value, value_shape, dtype, n)
    if not value.flags.writeable:
        raise UsageError(f"{what} is read-only")
    return value
