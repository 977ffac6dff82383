"""A program's interface and the arrays for it: its inputs and outputs by name, each value's
shape, which hold one value for the whole batch; random inputs, inputs read from an .npz
file, and the bytes a run must move. Arrays are arrays of structures, `(N, *value shape)`,
a uniform one shaped `(*value shape)`. Known from the host plan (`Interface.of_host`), so
that a saved plan runs on random or given inputs without the compiler; the reference builds
the same interface from the `kas` program (`verification.reference.interface_of`).
"""

from __future__ import annotations

import zipfile

import numpy as np

from irfuse.artifact.arrays import describe_batch_shape, fits, to_aos
from irfuse.artifact.host_plan import HostPlan
from irfuse.artifact.records import record
from irfuse.diagnostics import Diagnostic, UsageError


@record(frozen=True)
class Interface:
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    shapes: dict  # name -> value shape (inputs and outputs; an output may share an input's name)
    uniform_inputs: frozenset
    uniform_outputs: frozenset
    output_shapes: dict | None = None  # where an output's shape differs from an input's of its name

    @staticmethod
    def of_host(host: HostPlan) -> "Interface":
        values = host.values
        return Interface(host.input_names, host.output_names,
                         {name: values[v].shape for name, v in host.inputs},
                         frozenset(n for n, v in host.inputs if values[v].extent == "uniform"),
                         frozenset(n for n, v in host.outputs if values[v].extent == "uniform"),
                         {name: values[v].shape for name, v in host.outputs})

    def output_shape(self, name: str) -> tuple[int, ...]:
        return (self.output_shapes or self.shapes)[name]

    @property
    def uniform(self) -> frozenset:
        """Inputs and outputs with one value for the whole batch (no batch axis)."""
        return self.uniform_inputs | self.uniform_outputs


def spelling(shape: tuple[int, ...]) -> str:
    """How a value of this shape is declared in KAS (`matrix3x3`)."""
    keyword = {0: "scalar", 1: "vector", 2: "matrix"}.get(len(shape), "tensor")
    return keyword + "x".join(str(d) for d in shape)


def value_shape(shape: tuple[int, ...], n: int, uniform: bool = False) -> tuple[int, ...]:
    return tuple(shape) if uniform else (n, *shape)


def random_inputs(interface: Interface, n: int, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """Uniform values in [-1, 1): signs matter (abs, sqrt), zeros would hide unwritten outputs."""
    rng = np.random.default_rng(seed)
    return {name: rng.uniform(-1.0, 1.0, size=value_shape(interface.shapes[name], n,
                                                          name in interface.uniform_inputs)).astype(dtype)
            for name in interface.inputs}


def effective_bytes(interface: Interface, n: int, itemsize: int) -> int:
    """The bytes a run must move at least: every input read once, every output written once
    (a uniform one once for the batch)."""
    total = sum(int(np.prod(interface.shapes[k])) * (1 if k in interface.uniform_inputs else n)
                for k in interface.inputs)
    total += sum(int(np.prod(interface.output_shape(k))) * (1 if k in interface.uniform_outputs else n)
                 for k in interface.outputs)
    return itemsize * total


def batch_size(inputs: dict[str, np.ndarray], interface: Interface | None = None) -> int:
    """Elements in a batch of arrays of structures (the first per-element input's)."""
    uniform = interface.uniform_inputs if interface is not None else frozenset()
    return next((a.shape[0] for name, a in inputs.items() if name not in uniform), 0)


def load_inputs(path: str, interface: Interface, dtype, layout: str = "aos",
                converted: list[str] | None = None) -> dict[str, np.ndarray]:
    """Reads and checks an .npz file: one array per input, shaped (N, *shape) (or (*shape, N)
    with `layout` 'soa'), all the same N, floating point or integer values that the run's
    type can hold. The arrays come back as arrays of structures in the run's type;
    `converted` gets a line for each array stored in another type (`irfuse run` reports
    them)."""
    with open_inputs(path) as data:
        return _check_inputs(path, data, interface, dtype, layout, converted if converted is not None else [])


def open_inputs(path: str):
    """An .npz archive of inputs, opened (no pickled objects), or a `UsageError` naming the file."""
    try:
        data = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError, zipfile.BadZipFile) as e:
        raise UsageError(Diagnostic(f"cannot read inputs: {e}", path)) from None
    if not isinstance(data, np.lib.npyio.NpzFile):
        raise UsageError(Diagnostic("not an .npz archive (one named array per input, as np.savez "
                                    "writes): a single array cannot say which input it is", path))
    return data


def read_input(path: str, data, name: str) -> np.ndarray:
    """Member `name` of an opened .npz archive (`open_inputs`), or a `UsageError` naming the
    file and the input: a member that cannot be read (damaged, pickled objects), one whose
    header claims more bytes than the archive holds for it (NumPy would allocate what the
    header says first: a damaged or crafted file of a few bytes asked for terabytes), one that
    does not fit this machine's memory."""
    if name + ".npy" not in data.zip.namelist():  # (NumPy hands such a member back as bytes)
        raise UsageError(Diagnostic(f"input '{name}' is not an array (.npy) member of the archive", path))
    try:
        info = data.zip.getinfo(name + ".npy")
        with data.zip.open(info) as f:
            read_header = {(1, 0): np.lib.format.read_array_header_1_0,
                           (2, 0): np.lib.format.read_array_header_2_0,
                           (3, 0): np.lib.format.read_array_header_2_0}.get(np.lib.format.read_magic(f))
            if read_header is None:
                raise ValueError("an .npy format version NumPy cannot read")
            shape, _, dtype = read_header(f)
            header = f.tell()
        claimed = int(np.prod(shape, dtype=object)) * np.dtype(dtype).itemsize
        if claimed > info.file_size - header:
            raise UsageError(Diagnostic(
                f"input '{name}' is damaged: its header says {tuple(shape)} of {np.dtype(dtype)} ({claimed:,} bytes) "
                f"and the archive holds {max(info.file_size - header, 0):,} bytes of it", path))
        return data[name]
    except (OSError, ValueError, EOFError, zipfile.BadZipFile, KeyError) as e:
        # Object arrays (they would need pickle) and damaged archive members.
        raise UsageError(Diagnostic(f"cannot read input '{name}': {e}", path)) from None
    except MemoryError:
        raise UsageError(Diagnostic(f"input '{name}' does not fit this machine's memory", path)) from None


def _check_inputs(path: str, data, interface: Interface, dtype, layout: str,
                  converted: list[str]) -> dict[str, np.ndarray]:
    out: dict[str, np.ndarray] = {}
    n: int | None = None
    names = list(data.files)
    limit = float(np.finfo(dtype).max)
    uniform = interface.uniform_inputs
    for name in interface.inputs:
        shape = tuple(interface.shapes[name])
        if name not in data.files:
            raise UsageError(Diagnostic(
                f"input '{name}' is missing (the file has: {', '.join(names) or 'no arrays'})", path))
        a = read_input(path, data, name)
        if a.dtype.kind not in "fiu":
            raise UsageError(Diagnostic(f"input '{name}' has dtype {a.dtype}; expected floating point", path))
        if name in uniform:
            if tuple(a.shape) != shape:
                raise UsageError(Diagnostic(
                    f"input '{name}' has shape {a.shape}; it is a uniform {spelling(shape)} (one value for the whole "
                    f"batch), shaped {shape}", path))
        elif not fits(tuple(a.shape), shape, layout):
            want = describe_batch_shape(layout, shape)
            raise UsageError(Diagnostic(
                f"input '{name}' has shape {a.shape}; a {spelling(shape)} batch is shaped {want} (--layout {layout})",
                path))
        else:
            a = to_aos(a, layout)
            if n is None:
                n = a.shape[0]
            elif a.shape[0] != n:
                raise UsageError(Diagnostic(
                    f"input '{name}' has {a.shape[0]} elements but earlier inputs have {n}", path))
        with np.errstate(invalid="ignore"):
            big = np.isfinite(a) & (np.abs(a.astype(np.float64)) > limit) if a.size else np.zeros(0, bool)
        if big.any():
            where = np.unravel_index(int(np.argmax(big)), a.shape)
            at = f"entry {list(where)}" if name in uniform else f"element {where[0]}"
            raise UsageError(Diagnostic(
                f"input '{name}' holds {int(big.sum())} values beyond the {np.dtype(dtype).name} range "
                f"(first: {float(a[where])!r} at {at}); run with --dtype f64", path))
        if a.dtype != np.dtype(dtype):
            given = a.dtype.name if a.dtype.isnative else f"{a.dtype.name} ({a.dtype.str}, the other byte order)"
            converted.append(f"input '{name}': {given} -> {np.dtype(dtype).name}")
        out[name] = np.array(a, dtype=dtype, order="C")  # (a uniform scalar stays 0-d)
    extra = set(data.files) - set(interface.inputs)
    if extra:
        raise UsageError(Diagnostic(
            f"the file has arrays that are not inputs of the program: {', '.join(sorted(extra))}", path))
    return out
