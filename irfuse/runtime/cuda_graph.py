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


def cuda_driver():
    """cuda-bindings' driver API (imported when a GPU is used)."""
    from cuda.bindings import driver

    return driver


def checked(result, what: str):
    """The value of a cuda-bindings call, or `ExecutionError` naming the call."""
    cu = cuda_driver()
    err, *rest = result
    if err != cu.CUresult.CUDA_SUCCESS:
        raise ExecutionError(f"{what} failed: {err.name}")
    return rest[0] if len(rest) == 1 else rest


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
        self._graph = graph
        self._exec = checked(cu.cuGraphInstantiate(graph, 0), "cuGraphInstantiate")
        self._launch = cu.cuGraphLaunch
        self._default_stream = cu.CUstream(0)
        self._streams: dict[int, object] = {}  # the CUstream objects of callers' handles, made once
        self._success = cu.CUresult.CUDA_SUCCESS
        _, self.nodes = checked(cu.cuGraphGetNodes(graph, 0), "cuGraphGetNodes")  # launches and copies

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
