"""Calls on NumPy arrays run in one piece (no chunks): on the CPU backend the kernels read and
write the caller's arrays in place where they can (`HostInPlaceRun`: C-contiguous and aligned,
or views a variant was compiled for, and no output sharing memory with another array); else
the arrays are copied into a run's own buffers and the outputs copied out (`CopiedRun`, the
path of an output written over its input)."""

from __future__ import annotations

import numpy as np

from irfuse.api.device_arrays import ALIGNMENT, DeviceArray, overlaps
from irfuse.artifact.arrays import OUTPUT_PREFIX
from irfuse.artifact.artifact import Artifact
from irfuse.diagnostics import ExecutionError
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


def run_on_host(program, arrays: dict[str, np.ndarray], n: int, results: dict[str, np.ndarray]) -> None:
    """Runs `program` on host arrays in one piece (see the module), results into `results`."""
    dev = program.opened_device()
    if program.backend == "cpu" and in_place_on_the_host(arrays, results, program.strides,
                                                          program._alignment(program.layout)):
        program.recorded(("host", n), lambda: HostInPlaceRun(program.artifact, dev, n, program.inputs,
                                                              program.outputs)).run(arrays, results)
        return
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
