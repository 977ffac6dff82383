"""Calls on NumPy arrays run in one piece (no chunks): on the CPU backend the kernels read and
write the caller's arrays in place where they can (`HostInPlaceRun`: C-contiguous and aligned,
or views a variant was compiled for, and no output sharing memory with another array); else
the arrays are copied into a run's own buffers and the outputs copied out (`CopiedRun`, the
path of an output written over its input). A call made again with the same arrays takes
`HostFastCall`."""

from __future__ import annotations

import numpy as np

from irfuse.api.arguments import numbers_bits, out_snapshot, same_arguments, same_objects, same_out
from irfuse.api.device_arrays import ALIGNMENT, DeviceArray, overlaps
from irfuse.artifact.arrays import OUTPUT_PREFIX
from irfuse.artifact.artifact import Artifact
from irfuse.diagnostics import ExecutionError, UsageError
from irfuse.runtime.cpu_device import page_aligned
from irfuse.runtime.device import Slot
from irfuse.runtime.executor import Executor, Recorded


class CopiedRun:
    """A run recorded for one batch size, with its input buffers."""

    def __init__(self, compiled: Artifact, device, arrays: dict[str, np.ndarray], n: int):
        self.inputs = {name: device.upload(a) for name, a in arrays.items()}
        self.recorded: Recorded = Executor(compiled, device).prepare({}, n, uploaded=self.inputs)


def aligned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy at a fresh allocation (16-byte aligned at least; page-aligned where
    large, see `cpu_device.page_aligned`)."""
    out = page_aligned(a.shape, a.dtype)
    out[...] = a
    return out


def may_overlap(a, b) -> bool:
    """Whether two arrays may share memory (conservatively, where an exact answer is costly)."""
    if isinstance(a, DeviceArray) or isinstance(b, DeviceArray):
        return overlaps(a, b)
    try:
        return bool(np.shares_memory(a, b, max_work=10_000))
    except np.exceptions.TooHardError:
        return True


def refuse_overlapping_outputs(targets: dict) -> None:
    """Refuses `out=` arrays (name -> array) that share memory with one another: both outputs
    cannot be held in one place, and which one's words stay would hang on the order of the
    copies out (the GPU's kernels write them at once)."""
    names = list(targets)
    for i, name in enumerate(names):
        for other in names[:i]:
            if may_overlap(targets[name], targets[other]):
                raise UsageError(f"out= array for '{name}' overlaps the out= array for '{other}': each output "
                                 "needs memory of its own")


def in_place_on_the_host(arrays: dict[str, np.ndarray], results: dict[str, np.ndarray],
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
    return not any(may_overlap(o, b) for k, o in enumerate(outs) for b in [*arrays.values(), *outs[k + 1:]])


class HostInPlaceRun:
    """On the CPU backend, a run recorded for one batch size whose kernels read and write the
    caller's NumPy arrays through `Slot`s: no copy in or out."""

    def __init__(self, compiled: Artifact, device, n: int, inputs: tuple[str, ...], outputs: tuple[str, ...]):
        self.inputs = {name: Slot() for name in inputs}
        self.outputs = {name: Slot() for name in outputs}
        self.recorded: Recorded = Executor(compiled, device).prepare({}, n, uploaded=self.inputs,
                                                                     outputs=self.outputs, as_graph=False)

    def run(self, arrays: dict[str, np.ndarray], results: dict[str, np.ndarray]) -> None:
        replay_at(self.recorded, [(slot, given[name].ctypes.data, given[name].nbytes, given[name])
                                  for slots, given in ((self.inputs, arrays), (self.outputs, results))
                                  for name, slot in slots.items()])


FAST_CALLS_KEPT = 2  # host calls a program keeps for its fast path (a time loop alternates two sets)


class HostFastCall:
    """A call on NumPy arrays that ran in place on the CPU backend (`bound`: what ran it, its
    `inputs` and `outputs` slots and `recorded` run): called again with the very
    same array objects (by position or by name, `out=` the same object), whose shapes, types
    and strides are unchanged, it replays the recorded run on them with none of the binding
    and checking a call does otherwise (what those checks found still holds: the arrays are
    the same memory). Uniform scalars given as numbers are compared by value and written into
    the run's own 0-d arrays; without `out=` the outputs are made at every call, and arrays
    alike the kept ones may take their place (`_alike`)."""

    def __init__(self, args: tuple, named: dict, out, arrays: dict, results: dict, bound,
                 scalars: dict, dtype, names: tuple[str, ...], shapes: dict | None, mesh: tuple | None = None,
                 inputs: tuple[str, ...] = ()):
        self.scatter, self.nodes = mesh or (None, None)  # (a call over a mesh: its scatter= and nodes=)
        self.args, self.named = args, dict(named)
        self.out = out_snapshot(out)  # (the same arrays again, in a new list or dict too)
        self.scalars = scalars  # position in args (or name in named) -> input
        self.dtype = dtype
        self.arrays, self.bound, self.names = arrays, bound, names
        self.results = results if shapes is None else None
        self.shapes = shapes  # without out=: each output's shape
        # (slot, address, bytes, array) of each input and out= array: their addresses read once
        self.places = [(bound.inputs[name], a.ctypes.data, a.nbytes, a) for name, a in arrays.items()]
        if shapes is None:
            self.places += [(bound.outputs[name], a.ctypes.data, a.nbytes, a) for name, a in results.items()]
        given = [a for k, a in arrays.items() if k not in scalars.values()]
        given += list(results.values()) if shapes is None else []
        # (an array's writability too: an out= array made read-only since is refused by the
        # whole call's checks, not written)
        self.held = [(a, a.shape, a.strides, a.dtype, a.flags.writeable) for a in given]
        self.bits: list = []
        # Without out=, C-contiguous NumPy arrays alike the kept ones (the same shape and type,
        # 16-byte aligned) take their place (`_alike`): a loop that makes a new input at every
        # step (`u = u + h * r`) replays the run on it. `now`: the places of this call's inputs.
        # (place index, position or name in the call, input) of each array given as it ran
        at = {name: j for j, name in enumerate(arrays)}
        given_as = {name: (k if k < len(args) else name) for k, name in enumerate(inputs)}
        self.slots = [(at[name], key, name) for name, key in given_as.items() if name not in scalars.values()
                      and arrays[name] is (args[key] if type(key) is int else named.get(key))]
        keys = {key for _, key, _ in self.slots} | set(scalars)
        self.others = [(key, args[key] if type(key) is int else named.get(key)) for key in given_as.values()
                       if key not in keys]
        self.alike = shapes is not None and bool(inputs) and all(
            type(arrays[name]) is np.ndarray and arrays[name].flags.c_contiguous for _, _, name in self.slots)
        self.now = self.places

    def matches(self, args: tuple, named: dict, out) -> bool:
        if not same_out(out, self.out):
            return False
        if not same_arguments(args, named, self.args, self.named, self.scalars, self.dtype, self.bits):
            return self.alike and self._alike(args, named)
        for a, shape, strides, dtype, writable in self.held:
            if a.shape != shape or a.strides != strides or a.dtype != dtype or a.flags.writeable != writable:
                return False
        self.now = self.places
        return True

    def _alike(self, args: tuple, named: dict) -> bool:
        """Whether the arguments are the kept call's but for NumPy arrays alike the kept ones
        (`alike_host_address`; connectivities the same): their places then in `now`, the
        numbers' bits in `bits`."""
        if len(args) != len(self.args) or len(named) != len(self.named):
            return False
        if not numbers_bits(args, named, self.scalars, self.dtype, self.bits):
            return False
        if not same_objects(args, named, self.others):  # (connectivities)
            return False
        now = list(self.places)
        for j, key, name in self.slots:
            a = args[key] if type(key) is int else named.get(key)
            kept = self.arrays[name]
            if a is kept:
                continue
            ptr = alike_host_address(a, kept)
            if ptr is None:
                return False
            now[j] = (now[j][0], ptr, a.nbytes, a)
        self.now = now
        return True

    def launch(self):
        from irfuse.api.outputs import Outputs

        for name, value in self.bits:
            self.arrays[name][()] = np.frombuffer(value, self.dtype)[0]
        places, results, bound = self.now, self.results, self.bound
        if results is None:
            results = {name: page_aligned(shape, self.dtype) for name, shape in self.shapes.items()}
            places = places + [(bound.outputs[name], a.ctypes.data, a.nbytes, a) for name, a in results.items()]
        replay_at(bound.recorded, places)
        self.now = self.places  # (holding none of this call's arrays)
        return Outputs(self.names, [results[name] for name in self.names])


def alike_host_address(a, kept: np.ndarray) -> int | None:
    """The address of NumPy array `a` where it is alike `kept` (a C-contiguous array of a
    call made again on the CPU backend): the same shape and type, C-contiguous, starting at a
    multiple of `ALIGNMENT` bytes (as the kernels' 16-byte copies read it in place); else
    None. What the CPU's fast calls take in a kept array's place (`HostFastCall`, a staged
    program's call)."""
    if type(a) is not np.ndarray or a.shape != kept.shape or a.dtype != kept.dtype or not a.flags.c_contiguous:
        return None
    ptr = a.__array_interface__["data"][0]
    return None if ptr % ALIGNMENT else ptr


def replay_at(recorded, places: list) -> None:
    """Replays `recorded` with its slots pointed at `places` ((slot, address, bytes, array)
    each), holding no caller's array after it."""
    for slot, ptr, nbytes, a in places:
        slot.ptr, slot.nbytes, slot.array = ptr, nbytes, a
    try:
        recorded.replay()
    finally:
        for slot, _, _, _ in places:
            slot.array = None


def run_on_host(program, arrays: dict[str, np.ndarray], n: int, results: dict[str, np.ndarray]
                ) -> HostInPlaceRun | None:
    """Runs `program` on host arrays in one piece (see the module), results into `results`;
    the in-place run it replayed, if it ran in place."""
    dev = program.opened_device()
    if program.backend == "cpu" and in_place_on_the_host(arrays, results, program.strides,
                                                          program._alignment(program.layout)):
        run = program.recorded(("host", n), lambda: HostInPlaceRun(program.artifact, dev, n, program.inputs,
                                                                    program.outputs))
        run.run(arrays, results)
        return run
    if program.strides:  # `_view_strides` chose this variant only where the arrays can be used in place
        raise ExecutionError(f"{program.name}: kernels compiled for strided views were about to read copies")
    fresh = n not in program._bound
    bound = program.recorded(n, lambda: CopiedRun(program.artifact, dev, arrays, n))  # made with the inputs
    if not fresh:
        for name, a in arrays.items():
            dev.write(bound.inputs[name], a)
    bound.recorded.replay()
    dev.synchronize()
    for name, (buf, _) in bound.recorded.results.items():
        dev.read_into(results[name], buf)
    return None


def keep_fast_call(program, args: tuple, named: dict, out, arrays: dict, results: dict, bound,
                   shapes: dict | None, mesh: tuple | None = None) -> None:
    """Keeps a call that ran in place on the CPU backend for the fast path (`HostFastCall`,
    the last FAST_CALLS_KEPT of them): where every input was given by position or name and
    ran as given, a uniform scalar given as a number as a 0-d array of the call's own, a
    `Connectivity` as its node numbers (`shapes`: each output's, where the call made them;
    `mesh`: a call over a mesh's scatter= and nodes=)."""
    if len(args) + len(named) != len(program.inputs):
        return
    given = {**dict(zip(program.inputs, args)), **named}
    scalars = {}
    for k, name in enumerate(program.inputs):
        value, a = given[name], arrays[name]
        if name in program.index_inputs:
            # Only a `Connectivity`, whose node numbers are its own and checked once: a plain
            # array's may change before the next call, which the kept path would not check (an
            # atomic scatter's kept call read and wrote past the nodes: a crash).
            if getattr(value, "conn", None) is a:
                continue
            return
        if a is value:
            continue
        if not (name in program.uniform and a.ndim == 0 and not isinstance(value, np.ndarray)):
            return  # (converted or copied: the next call's array would be another)
        scalars[k if k < len(args) else name] = name
    fast = HostFastCall(args, named, out, dict(arrays), results, bound, scalars, program.dtype, program.outputs,
                        shapes, mesh, program.inputs)
    program._host_fast = [fast, *program._host_fast[:FAST_CALLS_KEPT - 1]]
