"""Binding a call's arguments to a program's inputs and outputs, and refusing bad ones.

Every refusal is a `UsageError` that names the argument and says what was expected: a
wrong shape or element type, batch lengths that disagree, a missing or unknown argument,
an object that is not an array. No array is cast: an array of another element type is
refused with the conversion to write (irfuse never changes a caller's precision behind
their back). Numbers, which have no element type a caller chose, are converted: a uniform
scalar given as a Python number, a NumPy scalar or a 0-d array (`host_scalar`).
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from operator import is_

import numpy as np

from irfuse.diagnostics import UsageError, refuse_grad
from irfuse.artifact.arrays import AOS, LAYOUTS, SOA, describe_batch_shape
from irfuse.artifact.arrays import batch_length as batch_length_of
from irfuse.artifact.arrays import fits as fits_shape

LAYOUT_NAMES = {AOS: "array of structures, the batch axis first", SOA: "structure of arrays, the batch axis last"}



def bind_inputs(names: Sequence[str], args: tuple, named: dict, program=None) -> dict[str, object]:
    """Positional arguments in `names` order, then keywords: name -> argument. With the
    `program` (its `index_inputs`, `uniform`, `shapes`), a call short of positional arguments
    is told the first one that does not fit its input (where one was left out, those after it
    moved up one place)."""
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
        misfit = _first_misfit(program, names, args) if program is not None else None
        raise UsageError(f"missing input{'s' if len(missing) > 1 else ''} {', '.join(repr(m) for m in missing)} "
                         f"(the program's inputs, in order: {', '.join(names)})" + (f"; {misfit}" if misfit else ""))
    return {n: bound[n] for n in names}


def _first_misfit(program, names: Sequence[str], args: tuple) -> str | None:
    """Where positional arguments stop fitting their inputs: a connectivity where a value is
    taken (or the other way round), or an array with axes where a uniform scalar is."""
    for k, (name, value) in enumerate(zip(names, args)):
        is_index = hasattr(value, "conn") or np.dtype(getattr(value, "dtype", np.float64)).kind in "iu"
        wants_index = name in program.index_inputs
        uniform_scalar = name in program.uniform and program.shapes.get(name) == ()
        shape = tuple(getattr(value, "shape", np.shape(value) if isinstance(value, (list, tuple)) else ()))
        if is_index != wants_index or (uniform_scalar and shape):
            dtype = getattr(value, "dtype", None)
            what = ("a Connectivity" if hasattr(value, "conn") else
                    f"an array of {dtype} shaped {shape}" if dtype is not None and shape else
                    f"a scalar of {dtype}" if dtype is not None else f"a {type(value).__name__}")
            want = ("a connectivity (int32 or int64 node numbers, (E, K))" if wants_index else
                    "a uniform scalar" if uniform_scalar else "values of the program's element type")
            return (f"argument {k + 1}, {what}, does not fit input '{name}', which takes {want}: is an argument "
                    "left out before it?")
    return None


def host_array(what: str, value: object, dtype: np.dtype | None = None) -> np.ndarray:
    """`value` as a NumPy array without copying (nested Python sequences: converted to `dtype`,
    the program's element type), or a refusal naming `what` (GPU arrays with a CUDA array
    interface are taken before this, by `device_arrays`; a masked array is refused, its mask
    having no meaning to the kernels)."""
    if hasattr(value, "__dlpack_device__") and not isinstance(value, np.ndarray) and _dlpack_on_device(value):
        raise UsageError(f"{what} is an array in device memory that is not CUDA's "
                         f"({type(value).__module__}.{type(value).__qualname__}); irfuse runs on NVIDIA GPUs and "
                         "on the CPU")
    refuse_grad(what, value)
    if isinstance(value, np.ma.MaskedArray):
        raise UsageError(f"{what} is a NumPy masked array, whose mask the kernels would ignore: pass "
                         "a.filled(value) (masked entries replaced) or a.data (the stored values)")
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "__array__"):
        return np.asarray(value)
    if isinstance(value, (list, tuple)):
        return _sequence_array(what, value, dtype)
    kind = type(value)
    if kind.__module__ == "builtins":
        raise UsageError(f"{what} is a {kind.__qualname__}, not an array")
    # (another module's type named with its module: `array.array` read "a array, not an array")
    raise UsageError(f"{what} is of type {kind.__module__}.{kind.__qualname__}, not an array (NumPy, or a GPU array)")


def host_scalar(what: str, value: object, dtype: np.dtype) -> np.ndarray | None:
    """A uniform scalar given as a Python number, a NumPy scalar or a 0-d host array, as a
    0-d array of the program's element type `dtype` (converted, as numbers have no element
    type a caller chose for the kernels; refused by name where the value is beyond the type's
    range, or is not a real number); None for anything else (an array, a GPU array)."""
    if isinstance(value, (bool, np.bool_)):
        raise UsageError(f"{what} is a bool; it takes a number")
    if isinstance(value, complex):
        raise UsageError(f"{what} is a complex number; it takes a real number")
    if isinstance(value, (int, float)):
        try:
            wide = np.float64(float(value))  # (as struct packs it: `scalar_bits`)
        except OverflowError:
            raise UsageError(f"{what} is {value}, beyond the {np.dtype(dtype).name} range") from None
    elif isinstance(value, np.generic) or (isinstance(value, np.ndarray) and value.ndim == 0):
        if value.dtype.kind not in "iuf":
            raise UsageError(f"{what} holds a {value.dtype.name} value; it takes a real number")
        wide = value
    else:
        return None
    with np.errstate(over="ignore", invalid="ignore"):
        out = np.array(wide, dtype=dtype)
    if np.isfinite(wide) and not np.isfinite(out):
        raise UsageError(f"{what} is {wide.item()!r}, beyond the {np.dtype(dtype).name} range "
                         f"(largest {float(np.finfo(dtype).max):.8g})")
    return out


def host_uniform(what: str, value: object, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A uniform input given on the host, checked: a number where it is a scalar
    (`host_scalar`), else an array shaped as its value."""
    a = host_scalar(what, value, dtype) if tuple(shape) == () else None
    if a is None:
        a = host_array(what, value, dtype)
    check_uniform_array(what, a, shape, dtype)
    return a


def out_snapshot(out) -> tuple:
    """What a call's `out=` names, kept by a fast path (`same_out`): one array (or None), or
    the arrays of a list, tuple or dict as they are now (a caller may put others in it later)."""
    if isinstance(out, dict):
        return (dict, tuple(out.items()))
    if isinstance(out, (list, tuple)):
        return (type(out), tuple(out))
    return (None, out)


def same_out(out, snapshot: tuple) -> bool:
    """Whether `out=` names the arrays `snapshot` kept (`out_snapshot`), in the same kind of
    container (the same one or a new one)."""
    kind, kept = snapshot
    if kind is None:
        return out is kept
    if type(out) is not kind or len(out) != len(kept):
        return False
    if kind is dict:
        return all(out.get(k, out) is v for k, v in kept)
    return all(map(is_, out, kept))


def same_arguments(args: tuple, named: dict, kept_args: tuple, kept_named: dict, scalars: dict, dtype,
                   bits: list) -> bool:
    """Whether a call's arguments are a kept call's again, for its fast path: the very same
    objects by position and by name, but for uniform scalars given as numbers (`scalars`:
    position, or name, -> input), taken by value: their bytes in `dtype` put in `bits` as
    (input, bytes) (at every call, the same object too: a call between may have written
    another value where the kernels read it). Plain loops: this runs at every call of a
    time-stepping code, where a microsecond of Python is a tenth of the call."""
    if len(args) != len(kept_args) or len(named) != len(kept_named):
        return False
    bits.clear()
    for k, (a, b) in enumerate(zip(args, kept_args)):
        if k in scalars:
            value = scalar_bits(a, dtype)
            if value is None:
                return False
            bits.append((scalars[k], value))
        elif a is not b:
            return False
    for name, value in named.items():
        if name in scalars:
            value = scalar_bits(value, dtype)
            if value is None:
                return False
            bits.append((scalars[name], value))
        elif kept_named.get(name, kept_named) is not value:
            return False
    return True


def numbers_bits(args: tuple, named: dict, numbers: dict, dtype, bits: list) -> bool:
    """Whether every uniform scalar a kept call took as a number (`numbers`: position, or
    name, -> input) is a number of `dtype` in this call too: their (input, bytes) then in
    `bits`, as `same_arguments` gives them (a call on arrays alike a kept call's)."""
    bits.clear()
    for k, name in numbers.items():
        value = scalar_bits(args[k] if type(k) is int else named.get(k), dtype)
        if value is None:
            return False
        bits.append((name, value))
    return True


def same_objects(args: tuple, named: dict, kept: list) -> bool:
    """Whether each of `kept` ((position, or name), object) is the very object given there
    (a call made again on arrays alike the kept call's: its connectivities the same)."""
    for k, obj in kept:
        if (args[k] if type(k) is int else named.get(k, named)) is not obj:
            return False
    return True


def scalar_bits(value: object, dtype: np.dtype) -> bytes | None:
    """The bytes of a Python float or int in `dtype` (float32 or float64), or of a NumPy
    scalar of `dtype`, as `host_scalar` makes them, for a call's fast path; None where `value`
    is something else or does not fit (the slow path then says why)."""
    if type(value) is float or type(value) is int:
        try:
            return struct.pack("<f" if dtype.itemsize == 4 else "<d", float(value))
        except (OverflowError, struct.error):
            return None
    if isinstance(value, np.generic) and value.dtype == dtype:
        return value.tobytes()
    return None


def _sequence_array(what: str, value, dtype: np.dtype | None) -> np.ndarray:
    """Nested Python sequences of numbers as an array of the program's element type `dtype`:
    they have no element type of their own, so they are converted (in either precision
    alike), refused only where a value does not fit the type or they are not numbers."""
    try:
        wide = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as e:
        raise UsageError(f"{what} is a {type(value).__qualname__} that is not a rectangular nest of numbers: "
                         f"{e}") from None
    if dtype is None:
        return wide
    with np.errstate(over="ignore"):
        out = wide.astype(dtype)
    beyond = np.isfinite(wide) & ~np.isfinite(out)
    if beyond.any():
        raise UsageError(f"{what} holds {int(beyond.sum())} values beyond the {np.dtype(dtype).name} range "
                         f"(first: {float(wide[np.unravel_index(int(np.argmax(beyond)), wide.shape)])!r})")
    return out


def _dlpack_on_device(value: object) -> bool:
    try:
        device_type, _ = value.__dlpack_device__()  # type: ignore[attr-defined]
    except Exception:
        return False
    return int(device_type) != 1  # kDLCPU


def fits(a, value_shape: tuple[int, ...], layout: str) -> bool:
    return fits_shape(tuple(a.shape), value_shape, layout)


def batch_length(a, layout: str) -> int:
    return batch_length_of(tuple(a.shape), layout)


def call_layout(arrays: Mapping[str, object], shapes: Mapping[str, tuple[int, ...]], preferred: str) -> str:
    """The layout a call's arrays are in: the one that every array's shape fits with one batch
    length, `preferred` (the program's own) when both do (a batch of scalars, or shapes like
    (3, 3, 3)). When none does, the layout most of them fit, whose check then names the
    arrays that do not."""
    order = (preferred, *(other for other in LAYOUTS if other != preferred))
    for layout in order:
        lengths = {batch_length(a, layout) for name, a in arrays.items() if fits(a, shapes[name], layout)}
        if all(fits(a, shapes[name], layout) for name, a in arrays.items()) and len(lengths) <= 1:
            return layout
    return max(order, key=lambda layout: sum(fits(a, shapes[name], layout) for name, a in arrays.items()))


def dtype_refusal(what: str, given: np.dtype, dtype: np.dtype, other_precision: bool = False) -> str:
    """Why an argument of `given` dtype is refused where the program takes `dtype`, and what
    to do. A float of the program's width in the other byte order ('>f8' on a little-endian
    machine) is named as such: its name alone reads the same as the program's."""
    if not given.isnative and given.newbyteorder("=") == dtype:
        return (f"{what} holds {dtype.name} in {'big' if given.byteorder == '>' else 'little'}-endian byte order "
                f"('{given.str}'); the kernels read this machine's byte order and irfuse does not cast: convert "
                f"it with .astype(numpy.{dtype.name})")
    # (a bool array too: a mask's values are words of the program's type, 1 where true)
    hint = f"convert it with .astype(numpy.{dtype.name})" if given.kind in "fiub" else ""
    other = {"float32": "f32", "float64": "f64"}.get(given.name) if given.isnative and other_precision else None
    if other:
        hint += f", or compile the program with dtype='{other}'"
    return (f"{what} holds {given.name}; the program was compiled for {dtype.name} and irfuse does not cast"
            f"{': ' + hint if hint else ''}")


def check_array(what: str, a, value_shape: tuple[int, ...], dtype: np.dtype,
                n: int | None, layout: str = AOS) -> int:
    """Checks one argument of a batch in `layout`; returns its batch length."""
    if not fits(a, value_shape, layout):
        other = SOA if layout == AOS else AOS
        if fits(a, value_shape, other):
            raise UsageError(f"{what} has shape {tuple(a.shape)}, {LAYOUT_NAMES[other]}, and the call's other "
                             f"arrays are laid out the other way ({LAYOUT_NAMES[layout]}): pass every argument "
                             "in one layout "
                             f"({describe_batch_shape(layout, value_shape)} for this one)")
        raise UsageError(f"{what} has shape {tuple(a.shape)}; expected {describe_batch_shape(AOS, value_shape)} "
                         f"({LAYOUT_NAMES[AOS]})" + ("" if not value_shape else
                         f" or {describe_batch_shape(SOA, value_shape)} ({LAYOUT_NAMES[SOA]})"))
    if a.dtype != dtype:
        raise UsageError(dtype_refusal(what, a.dtype, dtype, other_precision=True))
    length = batch_length(a, layout)
    if n is not None and length != n:
        raise UsageError(f"{what} holds {length} elements, the other arguments {n}: every argument "
                         "needs the same batch length")
    return length


def same_batch_length(lengths: Mapping[str, int]) -> int | None:
    """The batch length every input (name -> length) holds, or a refusal naming the inputs
    that disagree with the most common length (each input's length when none is the most
    common); None when there is no input with a batch."""
    counts: dict[int, list[str]] = {}
    for name, length in lengths.items():
        counts.setdefault(length, []).append(name)
    if len(counts) <= 1:
        return next(iter(counts), None)
    ranked = sorted(counts.items(), key=lambda kv: -len(kv[1]))
    if len(ranked[0][1]) == len(ranked[1][1]):
        listed = ", ".join(f"'{name}' {length}" for name, length in lengths.items())
        raise UsageError(f"the inputs' batch lengths disagree ({listed} elements): every argument needs the same "
                         "batch length")
    common, agree = ranked[0]
    odd = [name for name in lengths if lengths[name] != common]
    if len(odd) == 1:
        said = f"input '{odd[0]}' holds {lengths[odd[0]]} elements, the other arguments ({', '.join(agree)}) {common}"
    else:
        said = (f"inputs {', '.join(f'{chr(39)}{name}{chr(39)} ({lengths[name]})' for name in odd)} disagree with the "
                f"other arguments ({', '.join(agree)}), which hold {common} elements")
    raise UsageError(f"{said}: every argument needs the same batch length")


def check_uniform_array(what: str, a, value_shape: tuple[int, ...], dtype: np.dtype) -> None:
    """Checks an argument that holds one value for the whole batch: shaped as the value
    itself, no batch axis."""
    if tuple(a.shape) != tuple(value_shape):
        raise UsageError(f"{what} has shape {tuple(a.shape)}; it holds one value for the whole batch (it is "
                         f"uniform), shaped {tuple(value_shape)}")
    if a.dtype != dtype:
        raise UsageError(dtype_refusal(what, a.dtype, dtype))


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


def names_every_output(names: Sequence[str], out: object) -> bool:
    """Whether `out=` (bound by `bind_outputs`) gives every output an array: a mapping may
    name some, the call making the rest; a call kept to be replayed writes the arrays it
    kept, so it is kept only where they are all the caller's (the ones a call made are
    handed to it, and a replay would write them again under the earlier result)."""
    return not isinstance(out, Mapping) or len(out) == len(names)


def check_output_array(what: str, value: object, value_shape: tuple[int, ...], dtype: np.dtype, n: int | None,
                       layout: str = AOS) -> np.ndarray:
    """An `out=` NumPy array for an output with inputs in host memory, checked: of a batch of
    `n` in `layout`, or where `n` is None a uniform output's, shaped as its value."""
    if not isinstance(value, np.ndarray):
        raise UsageError(f"{what} is a {type(value).__qualname__}; with inputs in host memory out= takes NumPy arrays")
    if n is None:
        check_uniform_array(what, value, value_shape, dtype)
    else:
        check_array(what, value, value_shape, dtype, n, layout)
    if not value.flags.writeable:
        raise UsageError(f"{what} is read-only")
    return value
