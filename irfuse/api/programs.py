"""`Program`: a compiled KAS program called like a function on NumPy arrays.

A call binds its arguments (by position in the program's `input` order, or by name),
checks them (`arguments`), and replays a run recorded once per batch size: the
program's launches with their buffers bound (on the GPU one CUDA graph). On the CPU
backend the kernels read and write C-contiguous NumPy arrays in place (`Slot`s pointed at
them), unless an output shares memory with an input; otherwise the caller's arrays are
copied into the recorded run's input buffers (on the GPU, the upload) and the outputs out
of its output buffers into new arrays or the `out=` arrays given, so an output may be an
array that is also an input. GPU arrays (`device_arrays`) are not
copied: the run recorded for them reads and writes through `Slot`s pointed at the
caller's arrays, ordered on the caller's stream. Nothing is allocated per call once a
batch size has been seen (the results excepted, unless `out=` gives them), and nothing
is verified unless asked (`check`, or `verify=True`).
"""

from __future__ import annotations

import atexit
import threading
import weakref
from collections import OrderedDict
from collections.abc import Callable

import numpy as np

from irfuse.api.arguments import (bind_inputs, bind_outputs, call_layout, check_array, check_output_array,
                                  check_uniform_array, host_array, same_batch_length)
from irfuse.api.device_arrays import (ALIGNMENT, DeviceArray, check_device_array, device_array, empty_like_family,
                                      moved_batch_axis, overlaps, stream_handle)
from irfuse.api.dlpack_export import handed_over
from irfuse.api.progress import progress_bar
from irfuse.diagnostics import CompileError, ExecutionError, UsageError
from irfuse.dialects.layouts import (OUTPUT_PREFIX, arrays_to_aos, batch_length, batch_shape, check_layout, fits,
                                     natural_strides, view_strides)
from irfuse.dialects.context import module_text
from irfuse.driver.artifact import CompiledProgram
from irfuse.runtime.dependent_launch import InPlaceRun, StreamClock
from irfuse.runtime.device import Slot
from irfuse.runtime.executor import Executor, Recorded, open_device
from irfuse.runtime.streaming import ChunkedRun, chunk_elements
from irfuse.runtime.reference import run_references, uniform_names, value_shapes
from irfuse.runtime.verify import OutputCheck, check_outputs, subset, verified_elements
from irfuse.transforms.batch_phases import PhasePlan, split_at_reductions

BOUND_SIZES = 4  # batch sizes whose recorded runs (and their buffers) a program keeps

# Programs holding a device: closed at exit, before PyCUDA's own clean-up, which aborts the
# process if a context it pushed is still on the stack.
_holding_devices: "weakref.WeakSet[Program]" = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for program in list(_holding_devices):
        program.close()


class Outputs(tuple):
    """A call's outputs in the program's `return` order: `out[0]`, `out["F"]` or `out.F`."""

    def __new__(cls, names: tuple[str, ...], values: list[np.ndarray]):
        self = super().__new__(cls, values)
        self._names = names
        return self

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._names.index(key))
            except ValueError:
                raise KeyError(f"no output '{key}' (the outputs: {', '.join(self._names)})") from None
        return tuple.__getitem__(self, key)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(str(e)) from None

    def __reduce__(self):
        # (tuple's own pickling would call __new__ without the names: a Dask task's result
        # moving between workers could not be unpickled)
        return (Outputs, (self._names, list(self)))

    def keys(self) -> tuple[str, ...]:
        return self._names

    def items(self):
        return zip(self._names, self)

    def as_dict(self) -> dict[str, np.ndarray]:
        return dict(zip(self._names, self))

    def __repr__(self) -> str:
        return "Outputs(" + ", ".join(f"{k}=<{v.dtype} {v.shape}>" for k, v in self.items()) + ")"


class Verification:
    """What `Program.check` found: one `OutputCheck` per output, on `elements` of `n`."""

    def __init__(self, checks: list[OutputCheck], elements: int, n: int):
        self.checks, self.elements, self.n = checks, elements, n

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.n == 0:
            return "verified on an empty batch: no element to check"
        where = "every element" if self.elements == self.n else f"a seeded sample of {self.elements} of {self.n} elements"
        return f"verified on {where}: " + "; ".join(c.describe() for c in self.checks)


def _to_host(dev, a: DeviceArray) -> np.ndarray:
    """A GPU array's values in a new C-contiguous host array (a strided view: the span of
    memory it covers, copied whole, then read at its strides)."""
    if a.contiguous or not a.nbytes:
        host = np.empty(a.shape, dtype=a.dtype)
        if a.nbytes:
            dev.drv.memcpy_dtoh(host, a.ptr)
        return host
    low = sum((d - 1) * s for d, s in zip(a.shape, a.strides) if s < 0)
    high = sum((d - 1) * s for d, s in zip(a.shape, a.strides) if s > 0) + a.dtype.itemsize
    span = np.empty(high - low, dtype=np.uint8)
    dev.drv.memcpy_dtoh(span, a.ptr + low)
    view = np.lib.stride_tricks.as_strided(span[-low:].view(a.dtype) if low else span.view(a.dtype), a.shape,
                                           a.strides)
    return np.ascontiguousarray(view)


class _Bound:
    """A run recorded for one batch size, with its input buffers."""

    def __init__(self, compiled: CompiledProgram, device, arrays: dict[str, np.ndarray], n: int):
        self.inputs = {name: device.upload(a) for name, a in arrays.items()}
        self.recorded: Recorded = Executor(compiled, device).prepare({}, n, uploaded=self.inputs)


def _aligned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy at a fresh allocation (NumPy aligns those for 16-byte copies)."""
    out = np.empty(a.shape, a.dtype)
    out[...] = a
    return out


def _gpu_out_array(what: str, value) -> DeviceArray:
    """An `out=` array of a call on GPU arrays, which must be a GPU array too."""
    a = device_array(value)
    if a is None:
        raise UsageError(f"{what} is a {type(value).__qualname__}; with inputs on the GPU out= takes GPU arrays")
    return a


def _may_overlap(a, b) -> bool:
    """Whether two arrays may share memory (conservatively, where an exact answer is costly)."""
    if isinstance(a, DeviceArray) or isinstance(b, DeviceArray):
        return overlaps(a, b)
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except np.exceptions.TooHardError:
        return True


def _overlapping_view(shape: tuple[int, ...], words: tuple[int, ...], layout: str) -> bool:
    """Whether two different positions of a view with these strides (words, batch axis
    first) may be the same word: each axis's stride must step over all the axes below it."""
    n = batch_length(shape, layout)
    dims = [n, *(shape[1:] if layout == "aos" else shape[:-1])]
    extent = 1
    for stride, dim in sorted(((abs(s), d) for s, d in zip(words, dims) if d > 1)):
        if stride < extent:
            return True
        extent = stride * (dim - 1) + extent
    return False


def _in_place_on_the_host(arrays: dict[str, np.ndarray], results: dict[str, np.ndarray],
                          strided: dict | None = None, alignment: int = ALIGNMENT) -> bool:
    """Whether the CPU backend's kernels can read and write these NumPy arrays themselves:
    every one C-contiguous and starting at a multiple of `alignment` bytes (the kernels'
    16-byte copies; a NumPy array made from a buffer may start anywhere), or a view the
    kernels were compiled for (`strided`), and no output sharing memory with an input or
    another output (kernels read inputs while others write outputs)."""
    strided = strided or {}

    def usable(a: np.ndarray, key: str) -> bool:
        return key in strided or (a.flags.c_contiguous and a.ctypes.data % alignment == 0)
    if not all(usable(a, name) for name, a in arrays.items()) or \
            not all(usable(a, OUTPUT_PREFIX + name) for name, a in results.items()):
        return False
    outs = list(results.values())
    return not any(_may_overlap(o, b) for k, o in enumerate(outs) for b in [*arrays.values(), *outs[k + 1:]])


class _BoundHostInPlace:
    """On the CPU backend, a run recorded for one batch size whose kernels read and write the
    caller's NumPy arrays through `Slot`s: no copy in or out."""

    def __init__(self, compiled: CompiledProgram, device, n: int, inputs: tuple[str, ...], outputs: tuple[str, ...]):
        self.inputs = {name: Slot() for name in inputs}
        self.outputs = {name: Slot() for name in outputs}
        self.recorded: Recorded = Executor(compiled, device).prepare({}, n, uploaded=self.inputs,
                                                                     outputs=self.outputs, as_graph=False)

    def run(self, arrays: dict[str, np.ndarray], results: dict[str, np.ndarray]) -> None:
        for slots, given in ((self.inputs, arrays), (self.outputs, results)):
            for name, slot in slots.items():
                a = given[name]
                slot.ptr, slot.nbytes, slot.array = a.ctypes.data, a.nbytes, a
        try:
            self.recorded.replay()
        finally:
            for slots in (self.inputs, self.outputs):
                for slot in slots.values():
                    slot.array = None  # hold no caller's array between calls


GRAPHS_KEPT = 8  # CUDA graphs a recorded in-place run keeps, one per set of addresses


class _BoundInPlace:
    """A run recorded for one batch size whose inputs and outputs are the caller's GPU
    arrays: `Slot`s pointed at them before each replay. The first time a set of addresses
    is seen, the launches are issued one by one; the second time, they are captured into a
    CUDA graph kept for that set (a time-stepping code calls with the same arrays again
    and again, or alternates between two sets), which later calls submit with one launch
    on the caller's stream (or, for one kernel while the previous call still runs, as a
    dependent launch: `runtime.dependent_launch`)."""

    def __init__(self, compiled: CompiledProgram, device, n: int, inputs: tuple[str, ...], outputs: tuple[str, ...]):
        self.device = device
        self.inputs = {name: Slot() for name in inputs}
        self.outputs = {name: Slot() for name in outputs}
        self.recorded: Recorded = Executor(compiled, device).prepare({}, n, uploaded=self.inputs,
                                                                     outputs=self.outputs, as_graph=False)
        self.seen: OrderedDict[tuple, None] = OrderedDict()
        self.graphs: OrderedDict[tuple, InPlaceRun] = OrderedDict()
        self.clock = StreamClock()

    def run(self, arrays: dict[str, DeviceArray], results: dict[str, DeviceArray], stream: int) -> tuple | None:
        """Runs on these arrays; returns the key of the graph it launched, if it launched one."""
        key = tuple(a.ptr for a in arrays.values()) + tuple(r.ptr for r in results.values())
        graph = self.graphs.get(key)
        if graph is not None:
            self.graphs.move_to_end(key)
            graph.launch_on(stream)
            return key
        for slots, given in ((self.inputs, arrays), (self.outputs, results)):
            for name, slot in slots.items():
                slot.ptr, slot.nbytes = given[name].ptr, given[name].nbytes
        if key in self.seen:
            del self.seen[key]
            graph = self.graphs[key] = self._capture(arrays, results)
            while len(self.graphs) > GRAPHS_KEPT:
                self.graphs.popitem(last=False)[1].destroy()
            graph.launch_on(stream)
            return key
        self.seen[key] = None
        while len(self.seen) > GRAPHS_KEPT:
            self.seen.popitem(last=False)
        self.device.on_stream(stream, self.recorded.replay)
        return None

    def _capture(self, arrays: dict[str, DeviceArray], results: dict[str, DeviceArray]) -> InPlaceRun:
        """The run on these arrays as a CUDA graph, and, where it is one launch of a kernel
        that waits for the previous grid on a GPU that takes it, as a dependent launch too
        (`runtime.dependent_launch`)."""
        launches: list = []
        graph = self.device.capture(self.recorded.replay, launches)
        dependent = None
        if len(launches) == 1 and launches[0] is not None and self.device.dependent_launches:
            dependent = self.device.dependent_launch(launches[0])
        nbytes = sum(a.nbytes for a in arrays.values()) + sum(r.nbytes for r in results.values())
        return InPlaceRun(graph, dependent, self.clock, nbytes / self.device.peak_memory_bytes_per_s)

    def release(self) -> None:
        for graph in self.graphs.values():
            graph.destroy()
        self.graphs.clear()


def _torch_signature(t) -> tuple:
    return (t.data_ptr(), t.shape, t.dtype, t.is_contiguous())


def _cupy_signature(a) -> tuple:
    return (a.data.ptr, a.shape, a.dtype, a.flags.c_contiguous)


def _torch_current_stream(device_index):
    import torch

    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch.cuda.current_stream reads
    return None if raw is None else (lambda: int(raw(device_index)))


def _cupy_current_stream(device_index):
    import cupy

    return lambda: cupy.cuda.get_current_stream().ptr


# Families whose arrays the fast path re-checks cheaply: (signature, current-stream reader).
_FAST_FAMILIES = {"torch": (_torch_signature, _torch_current_stream),
                  "cupy": (_cupy_signature, _cupy_current_stream)}


class _FastCall:
    """The last call on PyTorch tensors or CuPy arrays, with `out=`, that launched a captured
    graph: called again with the very same array objects (by position or by name), whose
    addresses, shapes, types and contiguity are unchanged, it launches the graph on the
    current stream with none of the binding and checking a call does otherwise (what those
    checks found still holds)."""

    def __init__(self, args: tuple, named: dict, out, stream, arrays: list[DeviceArray], bound: _BoundInPlace,
                 key: tuple, outputs: Outputs):
        self.args, self.named = args, dict(named)
        self.out, self.out_items = out, tuple(out) if isinstance(out, (list, tuple)) else None
        self.stream = stream
        signature, current_stream = _FAST_FAMILIES[arrays[0].family]
        self.signature = signature
        self.arrays = [a.obj for a in arrays]
        self.signatures = [signature(a) for a in self.arrays]
        self.bound, self.key, self.outputs = bound, key, outputs
        self.graph = bound.graphs[key]
        self.current_stream = current_stream(arrays[0].device)

    def matches(self, args: tuple, named: dict, out, stream) -> bool:
        # Plain loops: this runs on every call of a time-stepping code, where a microsecond
        # of Python is a tenth of the call.
        if len(args) != len(self.args) or len(named) != len(self.named) or out is not self.out \
                or stream is not self.stream or self.current_stream is None:
            return False
        for a, b in zip(args, self.args):
            if a is not b:
                return False
        for name, value in named.items():
            if self.named.get(name) is not value:
                return False
        if self.out_items is not None:
            for a, b in zip(out, self.out_items):
                if a is not b:
                    return False
        signature = self.signature
        for a, sig in zip(self.arrays, self.signatures):
            if signature(a) != sig:
                return False
        return True

    def launch(self) -> bool:
        graph = self.graph
        if not graph.alive:  # evicted (and destroyed) since
            return False
        handle = stream_handle(self.stream, None) if self.stream is not None else self.current_stream()
        graph.launch_on(handle)
        return True


class Program:
    """A compiled KAS program. Call it with one array per input in the program's element
    type, every one shaped `(N, *value shape)` (array of structures, the batch axis first)
    or every one `(*value shape, N)` (structure of arrays, the batch axis last); it returns
    `Outputs` in the inputs' layout. The kernels are compiled for `layout`; a call in the
    other layout runs a variant compiled for it on first use (`variant`). `inputs`,
    `outputs` and `shapes` say what it takes and gives."""

    def __init__(self, compiled: CompiledProgram, backend: str, warnings: list,
                 variant: Callable[..., "Program"] | None = None, strides: dict | None = None):
        self.compiled = compiled
        self.backend = backend
        self.warnings = list(warnings)
        self.layout = compiled.layout
        # Inputs and outputs this program's kernels take as strided views (name -> strides in
        # words, batch axis first); the others are contiguous in `layout`.
        self.strides: dict[str, tuple[int, ...]] = dict(strides or {})
        self._variant = variant  # the program compiled for another layout or strides; None: refused
        self._variants: dict[tuple, Program] = {}
        self._host_views_copied = False  # set once kernels for host views failed to compile
        # (function, irfuse.compile's arguments) that compile it again, for pickling.
        self._spec: tuple | None = None
        self._phases: tuple[PhasePlan, list[Program]] | None = None  # made by `phases`
        # Bytes of device memory a call on host arrays may use (None: on the GPU, half of the
        # free memory); `last_chunks`: how many chunks the last such call ran in.
        self.memory_budget: int | None = None
        self.last_chunks = 0
        ref = compiled.reference_program
        self.name = ref.sym_name.data
        self.inputs: tuple[str, ...] = tuple(ref.inputs)
        self.outputs: tuple[str, ...] = tuple(ref.outputs)
        self.shapes: dict[str, tuple[int, ...]] = value_shapes(ref)
        self.dtype = np.dtype(compiled.element.numpy)
        # Inputs and outputs with one value for the whole batch: shaped as the value, no batch axis.
        self.uniform: frozenset[str] = frozenset(uniform_names(ref))
        self._device = None
        self._fast: _FastCall | None = None  # the last call on GPU arrays that launched a graph
        # Recorded runs by batch size (host arrays) or ("gpu", batch size) (GPU arrays in place).
        self._bound: OrderedDict = OrderedDict()
        self._lock = threading.Lock()

    @property
    def source(self) -> str:
        """The generated CUDA C (GPU kernels and their host versions)."""
        return self.compiled.source

    @property
    def kernels(self) -> list[str]:
        return [k.name for k in self.compiled.kernels]

    def __repr__(self) -> str:
        return (f"<irfuse.Program {self.name}({', '.join(self.inputs)}) -> ({', '.join(self.outputs)}), "
                f"{self.dtype.name}{', structure of arrays' if self.layout == 'soa' else ''}, "
                f"{len(self.compiled.kernels)} kernel(s) on {self.backend}>")

    def for_layout(self, layout: str) -> "Program":
        """This program compiled for arrays in `layout` ('aos' or 'soa'): itself, or its
        variant, compiled on first use and kept."""
        try:
            check_layout(layout)
        except ValueError as e:
            raise UsageError(str(e)) from None
        return self._for(layout, {})

    def _for(self, layout: str, strides: dict[str, tuple[int, ...]]) -> "Program":
        """The program for arrays in `layout` with these strided views: itself, or a variant
        compiled on first use and kept."""
        if layout == self.layout and strides == self.strides:
            return self
        key = (layout, tuple(sorted(strides.items())))
        program = self._variants.get(key)
        if program is None:
            if self._variant is None:
                what = f"in layout '{layout}'" if layout != self.layout else "that are strided views"
                raise UsageError(f"this program was compiled from a tuning result for contiguous arrays in layout "
                                 f"'{self.layout}', which holds no plan for arrays {what}: pass contiguous arrays "
                                 f"in '{self.layout}' or compile the program from its source")
            program = self._variants[key] = self._variant(layout, strides)
        return program

    def _chunked(self, arrays: dict, memory_budget: int | None) -> bool:
        """Whether a call on these arrays runs in chunks (`runtime.streaming`): host arrays on
        the GPU, or with a device-memory budget. Chunks are copied into buffers of their own,
        so their kernels are the contiguous ones, whatever views the caller passed."""
        first = next(iter(arrays.values()), None)
        budget = memory_budget if memory_budget is not None else self.memory_budget
        return not isinstance(first, DeviceArray) and (self.backend == "cuda" or budget is not None)

    def _view_strides(self, arrays: dict, out, layout: str, chunked: bool = False) -> dict[str, tuple[int, ...]]:
        """The inputs and `out=` arrays that are strided views (name -> strides in words,
        batch axis first), where the kernels would read and write them in place: GPU arrays,
        and NumPy arrays on the CPU backend when no output shares memory with another array
        and the call is not `chunked` (else they are copied, as any host array may be)."""
        first = next(iter(arrays.values()), None)
        on_gpu = isinstance(first, DeviceArray)
        if first is None or chunked or not (on_gpu or self.backend == "cpu" and not self._host_views_copied):
            return {}
        given = {name: (name, a) for name, a in arrays.items()  # key in kas.strides -> (argument, array)
                 if name not in self.uniform}
        if out is not None:
            for name, value in bind_outputs(self.outputs, out).items():
                if name in self.uniform:
                    continue
                a = device_array(value) if on_gpu else value
                if isinstance(a, (DeviceArray, np.ndarray)) and fits(a.shape, self.shapes[name], layout):
                    given[OUTPUT_PREFIX + name] = (name, a)
        sig = {}
        for key, (name, a) in given.items():
            raw = a.strides if isinstance(a, DeviceArray) else (None if a.flags.c_contiguous else a.strides)
            words = view_strides(a.shape, raw, self.dtype.itemsize, layout)
            # A host array that starts off the kernels' alignment is read word by word too,
            # as a view of its natural strides (on the GPU such an array is refused).
            aligned = on_gpu or a.ctypes.data % self._alignment(layout) == 0
            natural = natural_strides(layout, self.shapes[name], batch_length(a.shape, layout))
            if words is None or (words == natural and aligned):
                continue  # strides of no whole words: refused later by name
            if key.startswith(OUTPUT_PREFIX) and _overlapping_view(a.shape, words, layout):
                raise UsageError(f"out= array for '{name}' is a view whose elements overlap (strides {words} in "
                                 "words, batch axis first): the kernels would write one place twice")
            sig[key] = words
        if sig and not on_gpu:
            outs = [a for key, (_, a) in given.items() if key.startswith(OUTPUT_PREFIX)]
            if any(_may_overlap(o, b) for i, o in enumerate(outs) for b in [*arrays.values(), *outs[i + 1:]]):
                return {}
        return sig

    def _arrays(self, args: tuple, named: dict) -> tuple[dict, int, str]:
        """name -> NumPy array, or name -> `DeviceArray` (all inputs in one place), N, and the
        layout they are in."""
        bound = bind_inputs(self.inputs, args, named)
        arrays = {}
        for name, value in bound.items():
            a = device_array(value)
            arrays[name] = a if a is not None else host_array(f"input '{name}'", value, self.dtype)
        batch = {k: a for k, a in arrays.items() if k not in self.uniform}
        layout = call_layout(batch, self.shapes, self.layout)
        lengths: dict[str, int] = {}
        for name, a in arrays.items():
            if name in self.uniform:
                check_uniform_array(f"input '{name}'", a, self.shapes[name], self.dtype)
                if isinstance(a, np.ndarray) and not (a.flags.c_contiguous and a.ctypes.data % ALIGNMENT == 0):
                    arrays[name] = _aligned_copy(a)  # a few words: read whole by every block
            else:
                lengths[name] = check_array(f"input '{name}'", a, self.shapes[name], self.dtype, None, layout)
        n = same_batch_length(lengths)
        if n is None:
            n = 1  # uniform inputs only: the program computes one value, once
        if n == 0:
            uniform_out = [name for name in self.outputs if name in self.uniform]
            if uniform_out:
                raise UsageError(f"the inputs hold 0 elements and output '{uniform_out[0]}' holds one value for the "
                                 "whole batch, which a batch of no elements does not define (a maximum over "
                                 "no elements has no value): pass at least one element")
        on_gpu = [k for k, a in arrays.items() if isinstance(a, DeviceArray)]
        if on_gpu and len(on_gpu) < len(arrays):
            host = next(k for k in arrays if k not in on_gpu)
            raise UsageError(f"input '{on_gpu[0]}' is on the GPU and input '{host}' in host memory: pass every "
                             "input in one place (irfuse copies nothing between them behind your back)")
        if on_gpu:
            if self.backend != "cuda":
                raise UsageError(f"input '{on_gpu[0]}' is a GPU array and this program was compiled for the "
                                 f"{self.backend} backend: compile it with backend='cuda'")
            for k, a in arrays.items():
                check_device_array(f"input '{k}'", a, 0, self._alignment(layout))
                if k in self.uniform and not a.contiguous:
                    raise UsageError(f"input '{k}' is a strided view; a uniform input is read whole: pass a "
                                     "contiguous array")
        return arrays, n, layout

    def _alignment(self, layout: str) -> int:
        """Bytes a GPU array's address must be a multiple of: the 16-byte copies of
        array-of-structures kernels, one word for structure-of-arrays ones."""
        return ALIGNMENT if layout == "aos" else self.dtype.itemsize

    def _shape(self, name: str, n: int) -> tuple[int, ...]:
        if name in self.uniform:
            return self.shapes[name]
        return batch_shape(self.layout, self.shapes[name], n)

    def _host_out(self, what: str, name: str, value, n: int, layout: str) -> np.ndarray:
        """An `out=` NumPy array, checked (a uniform output's is shaped as its value)."""
        if name not in self.uniform:
            return check_output_array(what, value, self.shapes[name], self.dtype, n, layout)
        if not isinstance(value, np.ndarray):
            raise UsageError(f"{what} is a {type(value).__qualname__}; with inputs in host memory out= takes NumPy arrays")
        check_uniform_array(what, value, self.shapes[name], self.dtype)
        if not value.flags.writeable:
            raise UsageError(f"{what} is read-only")
        return value

    def _check_out(self, what: str, name: str, a, n: int, layout: str) -> None:
        if name in self.uniform:
            check_uniform_array(what, a, self.shapes[name], self.dtype)
        else:
            check_array(what, a, self.shapes[name], self.dtype, n, layout)

    def __call__(self, *args, out=None, verify: bool = False, stream=None, out_layout: str | None = None,
                 memory_budget: int | None = None, progress: bool | Callable[[int, int], None] = False,
                 **named) -> Outputs:
        """Runs the program. `out=`: arrays to write the outputs into (a mapping by name, a
        sequence in `return` order, or one array for one output). `out_layout=`: the layout
        of the outputs ('aos' or 'soa'; by default the inputs'), new arrays or `out=` arrays
        shaped in it. `memory_budget=`: bytes of device memory a call on host arrays may use
        (default `Program.memory_budget`; on the GPU, half the free memory), the batch then
        running in chunks that fit (`irfuse.runtime.streaming`). `progress=True` draws a bar
        of the chunks done on stderr (rich); a callable is called as `progress(done, total)`
        instead (a call that does not run in chunks reports one step when it is done).
        `verify=True` checks the
        results against the float64 NumPy reference (as `check` does) and raises
        `ExecutionError` if they disagree. GPU arrays are read and written in place and the
        call is ordered on `stream` (see `irfuse.api.device_arrays`); it returns without
        waiting for the GPU."""
        if out_layout is not None:
            return self._call_out_layout(args, named, out, out_layout, verify, stream, memory_budget, progress)
        if progress is True:
            with progress_bar(f"{self.name}: chunks") as report:
                return self(*args, out=out, verify=verify, stream=stream, memory_budget=memory_budget,
                            progress=report, **named)
        if progress is not False and not callable(progress):
            raise UsageError(f"progress= takes True, False or a callable (done, total), not a {type(progress).__qualname__}")
        report = progress or None
        if not verify and report is None:
            for program in (self, *self._variants.values()) if self._variants else (self,):
                fast = program._fast
                if fast is not None and fast.matches(args, named, out, stream):
                    with program._lock:
                        if fast.launch():
                            return fast.outputs
        arrays, n, layout = self._arrays(args, named)
        strides = self._view_strides(arrays, out, layout, self._chunked(arrays, memory_budget))
        if layout != self.layout or strides != self.strides:
            try:
                target = self._for(layout, strides)
            except CompileError:
                # Host arrays may be copied instead (a program whose loops run from the host
                # takes no strided view); GPU arrays are not copied behind the caller's back.
                if not strides or isinstance(next(iter(arrays.values())), DeviceArray):
                    raise
                target = self._for(layout, {})
                target._host_views_copied = True
            return target(*args, out=out, verify=verify, stream=stream, memory_budget=memory_budget,
                          progress=progress, **named)
        if arrays and isinstance(next(iter(arrays.values())), DeviceArray):
            outputs = self._call_in_place(arrays, n, out, stream, args, named)
            if report is not None:
                report(1, 1)
            if verify:
                report = self._verify_device(arrays, outputs, n)
                if not report.ok:
                    raise ExecutionError(f"{self.name}: the outputs disagree with the NumPy reference: {report}")
            return outputs
        if stream is not None:
            raise UsageError("stream= orders a call on GPU arrays; these inputs are in host memory")
        targets = {}
        if out is not None:
            for name, value in bind_outputs(self.outputs, out).items():
                targets[name] = self._host_out(f"out= array for '{name}'", name, value, n, self.layout)
        results = [targets.get(name) if name in targets else np.empty(self._shape(name, n), self.dtype)
                   for name in self.outputs]
        if n:
            with self._lock:
                self._run(arrays, n, dict(zip(self.outputs, results)),
                          memory_budget if memory_budget is not None else self.memory_budget, report)
        outputs = Outputs(self.outputs, results)
        if verify:
            report = self._verify(arrays, outputs, n)
            if not report.ok:
                raise ExecutionError(f"{self.name}: the outputs disagree with the NumPy reference: {report}")
        return outputs

    def _call_out_layout(self, args: tuple, named: dict, out, out_layout: str, verify: bool, stream,
                         memory_budget: int | None, progress=False) -> Outputs:
        """A call whose outputs are in `out_layout`: each output array (new, or given by
        `out=` in `out_layout`'s shape) is passed to the kernels as a view in the inputs'
        layout, which they write at its strides (`kas.strides`; one variant per batch size,
        the strides of a structure of arrays being multiples of it)."""
        try:
            check_layout(out_layout)
        except ValueError as e:
            raise UsageError(f"out_layout: {e}") from None
        arrays, n, layout = self._arrays(args, named)
        if out_layout == layout:
            return self(*args, out=out, verify=verify, stream=stream, memory_budget=memory_budget, progress=progress,
                        **named)
        first = next(iter(arrays.values()), None)
        on_gpu = isinstance(first, DeviceArray)
        given = bind_outputs(self.outputs, out) if out is not None else {}
        targets, views = {}, {}
        for name in self.outputs:
            uniform = name in self.uniform  # no batch axis to move
            shape = self.shapes[name] if uniform else batch_shape(out_layout, self.shapes[name], n)
            what = f"out= array for '{name}'"
            if on_gpu:
                if name in given:
                    a = _gpu_out_array(what, given[name])
                    self._check_out(what, name, a, n, out_layout)
                else:
                    a = empty_like_family(first, shape, self.dtype)
                targets[name], views[name] = a.obj, (a if uniform else moved_batch_axis(a, layout))
            else:
                if name in given:
                    a = self._host_out(what, name, given[name], n, out_layout)
                else:
                    a = np.empty(shape, self.dtype)
                targets[name] = a
                views[name] = a if uniform else np.moveaxis(a, -1, 0) if layout == "aos" else np.moveaxis(a, 0, -1)
        got = self(*args, out=views, stream=stream, memory_budget=memory_budget, progress=progress, **named)
        if verify:
            target = self.for_layout(layout)
            report = (target._verify_device(arrays, Outputs(self.outputs, list(views.values())), n) if on_gpu
                      else target._verify(arrays, Outputs(self.outputs, list(views.values())), n))
            if not report.ok:
                raise ExecutionError(f"{self.name}: the outputs disagree with the NumPy reference: {report}")
        return got if on_gpu else Outputs(self.outputs, [targets[name] for name in self.outputs])

    def _run(self, arrays: dict[str, np.ndarray], n: int, results: dict[str, np.ndarray],
             budget: int | None = None, progress: Callable[[int, int], None] | None = None) -> None:
        """Runs on host arrays: in chunks on the GPU or within a budget (`progress` told of
        each), else in one piece (`progress` told once, at the end)."""
        self._run_host(arrays, n, results, budget, progress)
        if progress is not None and not (self.backend == "cuda" or budget is not None):
            progress(1, 1)

    def _run_host(self, arrays: dict[str, np.ndarray], n: int, results: dict[str, np.ndarray],
                  budget: int | None, progress: Callable[[int, int], None] | None) -> None:
        dev = self._opened_device()
        if self.backend == "cuda" or budget is not None:
            if self.strides:  # `_view_strides` never chooses a strided variant for chunks
                raise ExecutionError(f"{self.name}: kernels compiled for strided views were about to read chunks")
            if budget is None:
                budget = dev.drv.mem_get_info()[0] // 2
            chunk = chunk_elements(self.compiled, n, budget)
            if any(_may_overlap(o, a) for o in results.values() for a in arrays.values()):
                arrays = {k: a.copy() for k, a in arrays.items()}  # a chunk's results must not reach later inputs
            run = self._recorded(("chunks", chunk), lambda: ChunkedRun(self.compiled, dev, chunk, self.inputs,
                                                                       self.outputs, self.shapes, self.layout))
            self.last_chunks = run.run(arrays, results, n, progress)
            return
        self.last_chunks = 0  # (not the chunks of an earlier call: the same Program may be shared)
        if self.backend == "cpu" and _in_place_on_the_host(arrays, results, self.strides,
                                                            self._alignment(self.layout)):
            self._recorded(("host", n), lambda: _BoundHostInPlace(self.compiled, dev, n, self.inputs,
                                                                  self.outputs)).run(arrays, results)
            return
        if self.strides:  # `_view_strides` chose this variant only where the arrays can be used in place
            raise ExecutionError(f"{self.name}: kernels compiled for strided views were about to read copies")
        fresh = n not in self._bound
        bound = self._recorded(n, lambda: _Bound(self.compiled, dev, arrays, n))  # made with the inputs
        if not fresh:
            for name, a in arrays.items():
                dev.write(bound.inputs[name], a)
        bound.recorded.replay()
        dev.synchronize()
        for name, (buf, _) in bound.recorded.results.items():
            dev.read_into(results[name], buf)

    def _call_in_place(self, arrays: dict[str, DeviceArray], n: int, out, stream, args: tuple = (),
                       named: dict | None = None) -> Outputs:
        model = next(iter(arrays.values()))
        results: dict[str, DeviceArray] = {}
        if out is not None:
            for name, value in bind_outputs(self.outputs, out).items():
                what = f"out= array for '{name}'"
                a = _gpu_out_array(what, value)
                self._check_out(what, name, a, n, self.layout)
                check_device_array(what, a, 0, self._alignment(self.layout))
                for k, i in arrays.items():
                    if overlaps(a, i):
                        raise UsageError(f"{what} overlaps input '{k}': on the GPU the kernels read inputs while "
                                         "others write outputs, so an output may not share an input's memory")
                for k, o in results.items():
                    if overlaps(a, o):
                        raise UsageError(f"{what} overlaps the out= array for '{k}'")
                results[name] = a
        for name in self.outputs:
            if name not in results:
                results[name] = empty_like_family(model, self._shape(name, n), self.dtype)
        handle = stream_handle(stream, model)
        if n:
            with self._lock:
                dev = self._opened_device()
                bound = self._recorded(("gpu", n), lambda: _BoundInPlace(self.compiled, dev, n, self.inputs,
                                                                          self.outputs))
                key = bound.run(arrays, results, handle)
        outputs = Outputs(self.outputs, [handed_over(results[name].obj, handle) for name in self.outputs])
        self._fast = None
        every = [*arrays.values(), *results.values()]
        named = named or {}
        if n and key is not None and out is not None and len(args) + len(named) == len(self.inputs) \
                and every[0].family in _FAST_FAMILIES and all(a.family == every[0].family for a in every):
            self._fast = _FastCall(args, named, out, stream, every, bound, key, outputs)
        return outputs

    def _opened_device(self):
        """The program's device (the CPU's or the GPU's), opened on first use."""
        if self._device is None:
            self._device = open_device(self.backend, self.compiled)
            _holding_devices.add(self)
        elif self.backend == "cuda":
            self._device.make_current()  # a call from another thread than the one that opened it
        return self._device

    def _recorded(self, key, make):
        """The recorded run kept under `key` (a batch size, or a path and a batch size), made by
        `make()` when there is none; the `BOUND_SIZES` most recently used are kept."""
        bound = self._bound.get(key)
        if bound is None:
            bound = self._bound[key] = make()
            self._evict()
        else:
            self._bound.move_to_end(key)
        return bound

    def _evict(self) -> None:
        while len(self._bound) > BOUND_SIZES:
            _, bound = self._bound.popitem(last=False)
            if isinstance(bound, (_BoundInPlace, ChunkedRun)):
                bound.release()

    def _verify_device(self, arrays: dict[str, DeviceArray], outputs: Outputs, n: int,
                       sample: int | None = 100_000, seed: int = 0) -> Verification:
        """Copies the inputs and outputs to the host (after the GPU is done) and checks them."""
        dev = self._opened_device()
        dev.drv.Context.synchronize()
        host_in = {k: _to_host(dev, a) for k, a in arrays.items()}
        host_out = Outputs(self.outputs, [_to_host(dev, device_array(o)) for o in outputs])
        return self._verify(host_in, host_out, n, sample, seed)

    def check(self, *args, sample: int | None = 100_000, seed: int = 0, **named) -> Verification:
        """Runs the program and checks its outputs against the float64 NumPy reference, on every
        element up to `sample` of them and on a seeded sample of `sample` beyond (`None`: every
        element), with the rule `irfuse run` uses."""
        arrays, n, layout = self._arrays(args, named)
        strides = self._view_strides(arrays, None, layout, self._chunked(arrays, None))
        if layout != self.layout or strides != self.strides:
            return self._for(layout, strides).check(*args, sample=sample, seed=seed, **named)
        if arrays and isinstance(next(iter(arrays.values())), DeviceArray):
            return self._verify_device(arrays, self._call_in_place(arrays, n, None, None), n, sample, seed)
        return self._verify(arrays, self(**arrays), n, sample, seed)

    def _verify(self, arrays, outputs: Outputs, n: int, sample: int | None = 100_000, seed: int = 0) -> Verification:
        """Checks outputs (in the program's layout) against the reference, on `sample` elements."""
        if n == 0:  # (an empty batch has only per-element outputs: `_arrays`)
            return Verification([OutputCheck(name, 0.0, 0.0, None, None, None, True) for name in self.outputs], 0, 0)
        index = np.arange(n) if sample is None else verified_elements(self.compiled.reference_program, n, "auto",
                                                                      seed, sample)

        def batch(arrays) -> dict:
            return subset(arrays_to_aos(dict(arrays), self.layout, self.uniform), index, self.uniform)
        refs = run_references(self.compiled.reference_program, batch(arrays), self.compiled.dtype, len(index),
                              self.compiled.sum_by)
        return Verification(check_outputs(batch(outputs), refs, self.compiled.dtype), len(index), n)

    def close(self) -> None:
        """Releases the device and the buffers of recorded runs (a later call opens them again)."""
        with self._lock:
            self._fast = None
            for bound in self._bound.values():
                if isinstance(bound, (_BoundInPlace, ChunkedRun)):
                    bound.release()
            self._bound.clear()
            if self._device is not None:
                self._device.close()
                self._device = None

    def phase_plan(self) -> PhasePlan:
        """This program cut at its reductions over the batch (`irfuse.transforms.batch_phases`):
        the phases a run over the batch in pieces takes; one, the program, when it does not
        reduce. (Cutting is cheap; compiling the phases is `phases`.)"""
        if self._phases is not None:
            return self._phases[0]
        return split_at_reductions(self.compiled.reference_module)

    def phases(self) -> tuple[PhasePlan, list[Program]]:
        """`phase_plan` and each phase compiled as this program was (the same options, layout
        and strides), kept: the first call compiles them (or loads them from the disk cache)."""
        if self._phases is None:
            plan = self.phase_plan()
            if len(plan.phases) == 1 and all(r.name in self.outputs for r in plan.phases[0].partials):
                programs = [self]  # the program itself gives its one phase's outputs and partials by name
            else:
                rebuild, spec = self.compiled_from("its phases at its reductions cannot be compiled as it was")
                strides = tuple(sorted(self.strides.items()))
                programs = [rebuild({**spec, "source": ("ir", module_text(phase.module)),
                                     "filename": f"{self.name}, phase {k}"}, self.layout, strides)
                            for k, phase in enumerate(plan.phases)]
            self._phases = (plan, programs)
        return self._phases

    def compiled_from(self, refused: str) -> tuple:
        """(function, irfuse.compile's arguments) that compile this program again; UsageError
        saying what is `refused` for a program compiled from a tuning result, which has none."""
        if self._spec is None:
            raise UsageError(f"program {self.name} was compiled from a tuning result, so {refused}: compile it from "
                             "its source")
        return self._spec

    def __reduce__(self):
        """Pickled as what it was compiled from: unpickling compiles it again (once per
        process; the disk cache usually has it), for the same layout and strides."""
        if self._spec is None:
            raise TypeError(f"program {self.name} was compiled from a tuning result and cannot be pickled: compile it "
                            "from its source with the tuning's pipeline")
        rebuild, spec = self._spec
        return (rebuild, (spec, self.layout, tuple(sorted(self.strides.items()))))

    def __enter__(self) -> "Program":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
