"""Calls back to back: a one-kernel run submitted as a programmatic dependent launch.

Launched normally, a kernel's blocks are scheduled only once the work before it on its stream
has completed, so two calls issued back to back leave the GPU with a gap between the last
block of one and the first loads of the next. Launched with programmatic stream serialization
(`cuLaunchKernelEx`, sm_90 and newer), the kernel's blocks may be scheduled while the previous
kernel's last blocks run. Every irfuse kernel starts with `irf_after_previous_grid()`
(`griddepcontrol.wait`, see `backend.cuda_emit`), so it touches no global memory before the
previous kernel, whatever it is, has completed and its writes are visible: the results are
those of a normal launch, bit for bit.

From an idle GPU the same launch is slower than the run's CUDA graph (the graph's work is
already on the device), so `InPlaceRun` submits the dependent launch only when the stream is
busy with the run it submitted before, and the graph otherwise. Busy: the previous run was
issued less than the time it takes at least before, plus that of the runs queued behind it; at
least, its bytes at the GPU's peak memory bandwidth (`CudaDevice.peak_memory_bytes_per_s`, a
bound for data in device memory; data in L2 may be faster, and the dependent launch then
starts from an idle GPU, a little slower than the graph, with the same results). This costs a
clock read, where asking the driver (`cuStreamQuery`) costs a microsecond a call. Measured in
`benchmarks/NOTES.md` (Calls from Python: host time, launches, graphs, 2026-11-24).
"""

from __future__ import annotations

import ctypes
import time

from irfuse.artifact.records import record
from irfuse.diagnostics import ExecutionError
from irfuse.runtime.cuda_graph import STREAMS_KEPT, CudaGraph, cuda_driver


@record(frozen=True)
class LaunchRecord:
    """One kernel launch as captured: what a launch outside the graph needs."""
    kernel: str
    grid: int
    block: tuple[int, int, int]
    shared_bytes: int
    pointers: tuple[int, ...]
    n: int


class DependentLaunch:
    """`record`'s launch of `function` (a cuda-bindings CUfunction) with programmatic stream
    serialization (`programmatic`; else a plain launch), on any stream; the arguments are
    fixed once."""

    def __init__(self, function, record: LaunchRecord, programmatic: bool = True):
        cu = cuda_driver()
        self._programmatic = programmatic
        self._cu = cu
        self._function = function
        self._record = record
        self._values = [ctypes.c_void_p(p) for p in record.pointers] + [ctypes.c_longlong(record.n)]
        self._params = (ctypes.c_void_p * len(self._values))(*[ctypes.addressof(v) for v in self._values])
        self._address = ctypes.addressof(self._params)
        self._configs: dict[int, object] = {}
        self._launch = cu.cuLaunchKernelEx
        self._success = cu.CUresult.CUDA_SUCCESS

    def _config(self, handle: int):
        cu, r = self._cu, self._record
        cfg = cu.CUlaunchConfig()
        cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = r.grid, 1, 1
        cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = r.block
        cfg.sharedMemBytes = r.shared_bytes
        cfg.hStream = cu.CUstream(handle)
        if self._programmatic:
            attr = cu.CUlaunchAttribute()
            attr.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
            attr.value.programmaticStreamSerializationAllowed = 1
            cfg.attrs = [attr]
            cfg.numAttrs = 1
        if len(self._configs) >= STREAMS_KEPT:  # a caller making streams without end: keep a few
            self._configs.clear()
        self._configs[handle] = cfg
        return cfg

    def launch_on(self, handle: int) -> None:
        cfg = self._configs.get(handle) or self._config(handle)
        (err,) = self._launch(cfg, self._function, self._address, 0)
        if err != self._success:
            raise ExecutionError(f"cuLaunchKernelEx of {self._record.kernel} failed: {err.name}")


class StreamClock:
    """When the runs a bound program submitted last are done at the earliest, and on which
    stream (shared by the runs of one bound program, whatever their arrays)."""

    __slots__ = ("stream", "busy_until")

    def __init__(self):
        self.stream: int | None = None
        self.busy_until = 0.0


class InPlaceRun:
    """A recorded run on a set of the caller's arrays: its CUDA graph, and where the run is one
    kernel that waits for the previous grid, the same launch as a dependent launch, taken
    when the stream is certainly still running this program's previous run. With
    `dependent_launches` False (a benchmark's comparison), always the graph."""

    dependent_launches = True

    def __init__(self, graph: CudaGraph, dependent: DependentLaunch | None, clock: StreamClock,
                 least_seconds: float):
        self.graph = graph
        self.dependent = dependent
        self.clock = clock
        self.least_seconds = least_seconds  # the run's device time at least

    @property
    def alive(self) -> bool:
        return self.graph.alive

    def launch_on(self, handle: int) -> bool:
        """Submits the run on stream `handle`; True if as a dependent launch. (Not on a stream
        being captured: a graph cannot be launched into another's capture, `GpuInPlaceRun`.)"""
        clock, now = self.clock, time.perf_counter()
        # On every call of a time-stepping code: the test that fails most often first.
        if now < clock.busy_until and clock.stream == handle and self.dependent is not None \
                and self.dependent_launches:
            self.dependent.launch_on(handle)
            clock.busy_until += self.least_seconds
            return True
        self.graph.launch_on(handle)
        clock.stream, clock.busy_until = handle, now + self.least_seconds
        return False

    def destroy(self) -> None:
        self.graph.destroy()
        self.dependent = None
