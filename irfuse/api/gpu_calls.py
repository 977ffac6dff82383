"""Calls on GPU arrays (PyTorch, CuPy, Numba, PyCUDA, JAX, DLPack): the kernels read and
write the caller's arrays in place, on the caller's stream. A run recorded for a batch size
binds `Slot`s to the arrays before each replay; from the second call with the same set of
addresses it is a captured CUDA graph submitted with one launch (or, for one kernel while
the previous call still runs, a programmatic dependent launch); the very same array objects
again skip binding and checks altogether (`FastCall`; uniform scalars given as numbers are
compared by value there, and a changed one written before the launch).

A uniform scalar given on the host (a Python number, a NumPy scalar, a 0-d array) goes to
the kernels through a device word of the program's own that memsets write in the order of
the call's stream (`CudaDevice.scalar`): no copy from the host, no wait.

A call may be captured into a CUDA graph by its caller (`torch.cuda.graph`): on a capturing
stream it issues its kernels (or launches a graph it captured before, as a child graph) and
never waits, copies from the host or captures a graph of its own. What a first call on
arrays of a batch size prepares (its recorded run, temporaries, the kernels' module) must be
done outside the capture: a first call made during one is refused (`NotCapturable`)."""

from __future__ import annotations

from collections import OrderedDict
from operator import is_


from irfuse.api.arguments import (bind_outputs, names_every_output, numbers_bits, out_snapshot, same_arguments,
                                  same_out)
from irfuse.api.device_arrays import DeviceArray, alike_address, check_device_array, device_array, device_of, \
    empty_like_family, first_array, overlaps, stream_handle
from irfuse.api.dlpack_export import handed_over
from irfuse.api.host_calls import refuse_overlapping_outputs
from irfuse.api.output_sets import OutputSets, Place
from irfuse.api.outputs import Outputs
from irfuse.artifact.artifact import Artifact
from irfuse.diagnostics import NotCapturable, UsageError
from irfuse.runtime.cuda_graph import stream_capturing
from irfuse.runtime.dependent_launch import InPlaceRun, StreamClock
from irfuse.runtime.device import Slot
from irfuse.runtime.executor import Executor, Recorded


def gpu_out_array(what: str, value) -> DeviceArray:
    """An `out=` array of a call on GPU arrays, which must be a GPU array too."""
    a = device_array(value)
    if a is None:
        raise UsageError(f"{what} is a {type(value).__qualname__}; with inputs on the GPU out= takes GPU arrays")
    return a


GRAPHS_KEPT = 8  # CUDA graphs a recorded in-place run keeps, one per set of addresses


class GpuInPlaceRun:
    """A run recorded for one batch size whose inputs and outputs are the caller's GPU
    arrays: `Slot`s pointed at them before each replay. The first time a set of addresses
    is seen, the launches are issued one by one; the second time, they are captured into a
    CUDA graph kept for that set (a time-stepping code calls with the same arrays again
    and again, or alternates between two sets), which later calls submit with one launch
    on the caller's stream (or, for one kernel while the previous call still runs, as a
    dependent launch: `runtime.dependent_launch`)."""

    def __init__(self, compiled: Artifact, device, n: int, inputs: tuple[str, ...], outputs: tuple[str, ...]):
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
        if stream_capturing(stream):  # (a caller's capture takes the launches, not a graph of ours)
            for slots, given in ((self.inputs, arrays), (self.outputs, results)):
                for name, slot in slots.items():
                    slot.ptr, slot.nbytes = given[name].ptr, given[name].nbytes
            self.device.on_stream(stream, self.recorded.replay)
            return None
        if self.launch_kept(key, stream):
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

    def launch_kept(self, key: tuple, stream: int) -> bool:
        """Launches the graph kept for this set of addresses on a stream not being captured;
        False where none is kept (or it was destroyed)."""
        graph = self.graphs.get(key)
        if graph is None or not graph.alive:
            return False
        self.graphs.move_to_end(key)
        graph.launch_on(stream)
        return True

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


def torch_signature(t) -> tuple:
    """What a call on a PyTorch tensor depends on beyond its values: address, shape, type, layout."""
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
FAST_FAMILIES = {"torch": (torch_signature, _torch_current_stream),
                  "cupy": (_cupy_signature, _cupy_current_stream)}


class FastCall:
    """The last call on PyTorch tensors or CuPy arrays that ran its recorded run: called again
    with the very same array objects (by position or by name), whose addresses, shapes, types
    and contiguity are unchanged, it runs on the current stream with none of the binding and
    checking a call does otherwise (what those checks found still holds). With `out=` it
    launches the graph captured for those arrays; without, it makes the outputs with the
    library's `empty` (or hands back a set the caller let go of: `OutputSets`) and launches the
    graph kept for that set of addresses, else hands the run their addresses
    (`GpuInPlaceRun.run`)."""

    def __init__(self, args: tuple, named: dict, out, stream, arrays: list[DeviceArray], bound: GpuInPlaceRun,
                 key: tuple, outputs: Outputs, scalars: dict, handle: int, device, dtype,
                 inputs: dict | None = None, shapes: dict | None = None):
        self.args, self.named = args, dict(named)
        # Uniform scalars given as numbers: position in args (or name in named) -> input;
        # compared by value, their bits written (if changed) before the launch.
        self.scalars = scalars
        self.handle, self.device, self.dtype = handle, device, dtype
        self.bits: list = []
        self.out = out_snapshot(out)  # (the same arrays again, in a new list or dict too)
        self.stream = stream
        signature, current_stream = FAST_FAMILIES[arrays[0].family]
        self.signature = signature
        self.arrays = [a.obj for a in arrays]
        self.signatures = [signature(a) for a in self.arrays]
        self.bound, self.key, self.outputs = bound, key, outputs
        self.graph = bound.graphs[key] if key is not None else None
        self.current_stream = current_stream(arrays[0].device)
        # Without out=: the inputs by name (as the run reads them), and how to make the outputs.
        self.inputs = inputs
        self.made = None if shapes is None else OutputSets(arrays[0], shapes, dtype)
        # (the inputs' part of the key of the run's graphs, `GpuInPlaceRun.run`: these addresses)
        self.inputs_key = None if inputs is None else tuple(a.ptr for a in inputs.values())
        # Without out=, contiguous arrays alike the kept ones take their place (`_alike`): a
        # loop that makes a new input at every step replays the run's graph kept for the
        # addresses. `places`, `places_key`: the run's inputs this call, and their addresses.
        self.places, self.places_key = inputs, self.inputs_key
        self.slots = [] if inputs is None else [
            (k if k < len(args) else name, name, a.obj, a.nbytes, signature(a.obj))
            for k, (name, a) in enumerate(inputs.items()) if a.obj is not None and a.family == arrays[0].family]
        self.alike = self.made is not None and all(sig[-1] is True and device_of(kept) is not None
                                                   for _, _, kept, _, sig in self.slots)

    def matches(self, args: tuple, named: dict, out, stream) -> bool:
        # (C-level loops where they can be: this runs at every call of a time-stepping code)
        if stream is not self.stream or self.current_stream is None or not same_out(out, self.out):
            return False
        if self.scalars or named or self.named:
            if not same_arguments(args, named, self.args, self.named, self.scalars, self.dtype, self.bits):
                return self.alike and self._alike(args, named)
        elif len(args) != len(self.args) or not all(map(is_, args, self.args)):  # (positional arrays alone)
            return self.alike and self._alike(args, named)
        if list(map(self.signature, self.arrays)) != self.signatures:
            return False
        self.places, self.places_key = self.inputs, self.inputs_key
        return True

    def _alike(self, args: tuple, named: dict) -> bool:
        """Whether the arguments are the kept call's but for arrays alike the kept ones
        (`alike_address`): the run's inputs then in `places`, the numbers' bits in `bits`."""
        if len(args) != len(self.args) or len(named) != len(self.named):
            return False
        if not numbers_bits(args, named, self.scalars, self.dtype, self.bits):
            return False
        places, signature = dict(self.inputs), self.signature
        for k, name, kept, nbytes, sig in self.slots:
            ptr = alike_address(args[k] if type(k) is int else named.get(k), kept, signature, sig)
            if ptr is None:
                return False
            places[name] = Place(ptr, nbytes)
        self.places, self.places_key = places, tuple(a.ptr for a in places.values())
        return True

    def launch(self) -> Outputs | None:
        """Runs the call; its outputs, or None where it must take the slow path after all."""
        graph = self.graph
        if graph is not None and not graph.alive:  # evicted (and destroyed) since
            return None
        handle = stream_handle(self.stream, None) if self.stream is not None else self.current_stream()
        if handle and stream_capturing(handle):
            return None  # (the call's launches go into the caller's capture: `GpuInPlaceRun.run`)
        if self.scalars:
            if handle != self.handle:  # (another stream's words: the run reads this one's)
                return None
            for name, value in self.bits:
                self.device.scalar(name, value, handle, False)
        if self.made is None:
            graph.launch_on(handle)
            return self.outputs
        made, addresses = self.made.make(handle)
        if not self.bound.launch_kept(self.places_key + addresses, handle):  # (the stream is not capturing)
            self.bound.run(self.places, self.made.places(addresses), handle)
        return made


def call_on_gpu(program, arrays: dict[str, DeviceArray], n: int, out, stream, args: tuple = (),
                named: dict | None = None) -> Outputs:
    """Runs `program` on GPU arrays (uniform scalars may be 0-d host arrays) in place (see the
    module): its outputs, `out=` arrays or new ones in the first GPU array's library."""
    model = first_array(arrays)
    results: dict[str, DeviceArray] = {}
    if out is not None:
        for name, value in bind_outputs(program.outputs, out).items():
            what = f"out= array for '{name}'"
            a = gpu_out_array(what, value)
            program._check_out(what, name, a, n, program.layout)
            check_device_array(what, a, 0, program._alignment(program.layout))
            for k, i in arrays.items():
                if isinstance(i, DeviceArray) and overlaps(a, i):
                    raise UsageError(f"{what} overlaps input '{k}': on the GPU the kernels read inputs while "
                                     "others write outputs, so an output may not share an input's memory")
            results[name] = a
        refuse_overlapping_outputs(results)  # (the CPU backend's check: one message for both)
    for name in program.outputs:
        if name not in results:
            results[name] = empty_like_family(model, program._shape(name, n), program.dtype)
    handle = stream_handle(stream, model)
    scalars = [k for k, a in arrays.items() if not isinstance(a, DeviceArray)]
    key = None
    if n:
        with program.lock:
            if ("gpu", n) not in program._bound and stream_capturing(handle):
                raise NotCapturable(f"{program.name}: the first call on arrays of {n} elements prepares its run "
                                    "(buffers, kernels), which a stream being captured into a CUDA graph cannot "
                                    "do: make one call outside the capture first (a warm-up, as torch.cuda.graph "
                                    "asks for)")
            dev = program.opened_device()
            if scalars:
                arrays = dict(arrays)
                for k in scalars:
                    ptr = dev.scalar(k, arrays[k].tobytes(), handle)
                    arrays[k] = DeviceArray(None, ptr, (), program.dtype, None, "irfuse", None, model.device)
            bound = program.recorded(("gpu", n), lambda: GpuInPlaceRun(program.artifact, dev, n, program.inputs,
                                                                      program.outputs))
            key = bound.run(arrays, results, handle)
    outputs = Outputs(program.outputs, [handed_over(results[name].obj, handle) for name in program.outputs])
    program._fast = None
    every = [a for k, a in arrays.items() if k not in scalars] + list(results.values())
    named = named or {}
    if n and (key is not None or out is None) and names_every_output(program.outputs, out) \
            and len(args) + len(named) == len(program.inputs) \
            and every[0].family in FAST_FAMILIES and all(a.family == every[0].family for a in every):
        positions = {k: name for k, name in enumerate(program.inputs[:len(args)]) if name in scalars}
        positions.update({name: name for name in named if name in scalars})
        if out is None:
            program._fast = FastCall(args, named, out, stream, every[:len(arrays) - len(scalars)], bound, None,
                                     outputs, positions, handle, program.opened_device(), program.dtype,
                                     inputs=arrays, shapes={k: program._shape(k, n) for k in program.outputs})
        else:
            program._fast = FastCall(args, named, out, stream, every, bound, key, outputs, positions, handle,
                                     program.opened_device(), program.dtype)
    return outputs
