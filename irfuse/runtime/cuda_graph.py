"""Device work captured once into a CUDA graph and submitted with one launch.

Each kernel launch costs the host several microseconds, and from an idle GPU that time
falls inside a timing; a plan of several kernels, or of a loop unrolled into launches and
copies, submitted as one graph pays it once instead of once per step, and its kernels
follow each other on the device without waiting for the host (measured with
`benchmarks/launch_paths.py`; figures in `benchmarks/NOTES.md`, "Cost model: what its terms
were fitted on").

PyCUDA has no graph API, so capture and launch go through `cuda-bindings` (already there
for NVRTC) on PyCUDA's current context. The work is recorded by running it on a capture
stream that PyCUDA created; the graph is then launched on the default stream, where
PyCUDA's events, copies and synchronizations see it in order.
"""

from __future__ import annotations

from collections.abc import Callable

from irfuse.diagnostics import ExecutionError


STREAMS_KEPT = 16  # callers' streams a launch object keeps made handles for
_STREAMS: dict[int, object] = {}  # CUstream objects of the handles `stream_capturing` was asked about


_DRIVER = None


def cuda_driver():
    """cuda-bindings' driver API (imported when a GPU is used; kept after, since the call
    paths ask for it at every call and an import statement costs a lookup each time)."""
    global _DRIVER
    if _DRIVER is None:
        from cuda.bindings import driver

        _DRIVER = driver
    return _DRIVER


def checked(result, what: str):
    """The value of a cuda-bindings call, or `ExecutionError` naming the call."""
    cu = cuda_driver()
    err, *rest = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise ExecutionError(f"{what} failed: {err.name}")
    return rest[0] if len(rest) == 1 else rest


def stream_capturing(handle: int) -> bool:
    """Whether work issued on the CUDA stream `handle` is being captured into a graph (a
    caller's `torch.cuda.graph`, or `irfuse.time_loop`'s own capture) rather than run: such
    work may not wait for the GPU, copy from the host or capture a graph of its own."""
    if not handle:
        return False  # (the legacy default stream is never captured)
    cu = cuda_driver()
    stream = _STREAMS.get(handle)
    if stream is None:
        if len(_STREAMS) >= STREAMS_KEPT:
            _STREAMS.clear()
        stream = _STREAMS[handle] = cu.CUstream(handle)
    err, status = cu.cuStreamIsCapturing(stream)
    if err != cu.CUresult.CUDA_SUCCESS:
        raise ExecutionError(f"cuStreamIsCapturing failed: {err.name}")
    return status != cu.CUstreamCaptureStatus.CU_STREAM_CAPTURE_STATUS_NONE


class CudaGraph:
    """The device work that `record(stream)` issues on `stream` (a PyCUDA stream), captured
    once; calling the object submits all of it with one `cuGraphLaunch`."""

    def __init__(self, drv, record: Callable[[object], None]):
        cu = cuda_driver()
        # Non-blocking: the capture stream must not synchronize with the default stream,
        # which other work of this context may use while the graph is recorded.
        stream = drv.Stream(flags=1)
        handle = cu.CUstream(stream.handle)
        checked(cu.cuStreamBeginCapture(handle, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
               "cuStreamBeginCapture")
        try:
            record(stream)
        finally:
            graph = checked(cu.cuStreamEndCapture(handle), "cuStreamEndCapture")
        self._executable(graph)
        _, self.nodes = checked(cu.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")  # launches and copies

    def _executable(self, graph) -> None:
        """Keeps the captured `graph` and instantiates it, ready to launch."""
        cu = cuda_driver()
        self._graph = graph
        self._exec = checked(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        self._launch = cu.cuGraphLaunch
        self._default_stream = cu.CUstream(0)
        self._streams: dict[int, object] = {}  # the CUstream objects of callers' handles, made once
        self._success = cu.CUresult.CUDA_SUCCESS

    def __call__(self) -> None:
        (err,) = self._launch(self._exec, self._default_stream)
        if err != self._success:
            raise ExecutionError(f"cuGraphLaunch failed: {err.name}")

    def launch_on(self, handle: int) -> None:
        """Submits the graph on the CUDA stream `handle` (a caller's stream)."""
        stream = self._streams.get(handle)
        if stream is None:
            if len(self._streams) >= STREAMS_KEPT:  # a caller making streams without end: keep a few
                self._streams.clear()
            stream = self._streams[handle] = cuda_driver().CUstream(handle)
        (err,) = self._launch(self._exec, stream)
        if err != self._success:
            raise ExecutionError(f"cuGraphLaunch failed: {err.name}")

    @property
    def alive(self) -> bool:
        """False once destroyed."""
        return self._exec is not None

    def destroy(self) -> None:
        cu = cuda_driver()
        if self._exec is not None:
            cu.cuGraphExecDestroy(self._exec)
            cu.cuGraphDestroy(self._graph)
            self._exec = None

    def destroy_after(self, handle: int) -> None:
        """Destroys the graph once the work queued on stream `handle` so far is done, without
        waiting for it here (an executable graph still running may not be destroyed): an
        event recorded there, queried by later calls (`destroy_finished`)."""
        cu = cuda_driver()
        event = checked(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        checked(cu.cuEventRecord(event, cu.CUstream(handle)), "cuEventRecord")
        _pending.append((self, event))
        destroy_finished()


class CapturedWork(CudaGraph):
    """What `record(handle)` issues on the CUDA stream `handle` (a stream of irfuse's own,
    `OwnStream`: a caller's calls, ordered on it by `stream=`) captured into a graph, launched
    on a stream (`launch_on`) as any `CudaGraph`. The capture is this thread's alone, so other
    threads' work is not caught in it."""

    def __init__(self, record: Callable[[int], None], handle: int):  # (captured on a handle, not a PyCUDA stream)
        cu = cuda_driver()
        stream = cu.CUstream(handle)
        graph = None
        try:
            checked(cu.cuStreamBeginCapture(stream, cu.CUstreamCaptureMode.CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
                    "cuStreamBeginCapture")
            try:
                record(int(stream))
            finally:
                err, graph = cu.cuStreamEndCapture(stream)
            if err != cu.CUresult.CUDA_SUCCESS:
                raise ExecutionError(f"cuStreamEndCapture failed: {err.name}")
            self._executable(graph)
        except BaseException:
            if graph is not None:
                cu.cuGraphDestroy(graph)
            raise

_pending: list = []  # (captured work, event after its last launch) not destroyed yet


def destroy_finished(wait: bool = False) -> None:
    """Destroys the captured work whose streams have run it (`CapturedWork.destroy_after`);
    `wait`: all of it, waiting for the events."""
    cu = cuda_driver()
    for item in list(_pending):
        work, event = item
        if wait:
            cu.cuEventSynchronize(event)
        elif cu.cuEventQuery(event)[0] != cu.CUresult.CUDA_SUCCESS:
            continue  # (not ready yet)
        _pending.remove(item)
        work.destroy()
        cu.cuEventDestroy(event)


class OwnStream:
    """A non-blocking CUDA stream of irfuse's own (`handle`), kept by a device for its time
    loops, and the two events that order it after a caller's stream and the caller's stream
    after it (`after`, `before`)."""

    def __init__(self):
        cu = cuda_driver()
        self._stream = checked(cu.cuStreamCreate(cu.CUstream_flags.CU_STREAM_NON_BLOCKING), "cuStreamCreate")
        self.handle = int(self._stream)
        flags = cu.CUevent_flags.CU_EVENT_DISABLE_TIMING
        self._events = [checked(cu.cuEventCreate(flags), "cuEventCreate") for _ in range(2)]

    def after(self, handle: int) -> None:
        """Work issued on this stream from now on runs after what stream `handle` holds now."""
        cu = cuda_driver()
        checked(cu.cuEventRecord(self._events[0], cu.CUstream(handle)), "cuEventRecord")
        checked(cu.cuStreamWaitEvent(self._stream, self._events[0], 0), "cuStreamWaitEvent")

    def before(self, handle: int) -> None:
        """Work issued on stream `handle` from now on runs after what this stream holds now."""
        cu = cuda_driver()
        checked(cu.cuEventRecord(self._events[1], self._stream), "cuEventRecord")
        checked(cu.cuStreamWaitEvent(cu.CUstream(handle), self._events[1], 0), "cuStreamWaitEvent")

    def copy(self, dst: int, src: int, nbytes: int) -> None:
        """`nbytes` from device address `src` to `dst`, in this stream's order."""
        checked(cuda_driver().cuMemcpyDtoDAsync(dst, src, nbytes, self._stream), "cuMemcpyDtoDAsync")

    def destroy(self) -> None:
        cu = cuda_driver()
        for event in self._events:
            cu.cuEventDestroy(event)
        cu.cuStreamDestroy(self._stream)
