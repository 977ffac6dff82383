"""A host library of generated kernels, loaded and run on the CPU (ctypes).

The library (built by `irfuse.backend.host_compile`, named by the artifact) holds one entry
per kernel, `irf_launch_<kernel>(args, n, grid, workers, reverse)`, which spreads a launch's
blocks over `workers` threads; `reverse` runs each region's threads last to first.
"""

from __future__ import annotations

import ctypes
import os

from irfuse.artifact.kernel_info import KernelInfo
from irfuse.diagnostics import ExecutionError, UsageError


def cpu_threads() -> int:
    """Worker threads per launch: `IRFUSE_CPU_THREADS`, else every core this process may use."""
    text = os.environ.get("IRFUSE_CPU_THREADS", "").strip()
    if not text:
        return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"IRFUSE_CPU_THREADS must be a positive whole number of threads, not '{text}'")
    return int(text)


class HostLibrary:
    """A loaded host library of kernels with one `launch` entry per kernel."""

    def __init__(self, path: str, kernels: list[KernelInfo]):
        self.kernels = {k.name: k for k in kernels}
        self.workers = cpu_threads()
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as e:
            raise ExecutionError(f"the host library {path} does not load: {e}") from None
        self.entries = {}
        for name in self.kernels:
            try:
                fn = getattr(self.lib, f"irf_launch_{name}")
            except AttributeError:
                raise ExecutionError(f"the host library {path} has no kernel {name}") from None
            fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_longlong, ctypes.c_longlong,
                           ctypes.c_int, ctypes.c_int]
            fn.restype = ctypes.c_int
            self.entries[name] = fn

    def launcher(self, name: str, arrays: list, n: int, reverse: bool = False):
        """A call that runs kernel `name` on numpy arrays (inputs then outputs) of `n`
        elements; `reverse` runs each region's threads last to first. An entry that is not a
        NumPy array is a place whose address `int()` gives when the call runs (the
        runtime's `Slot`, pointed at a caller's array before each run)."""
        k = self.kernels[name]
        grid = k.blocks(n)
        ptrs = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data if hasattr(a, "ctypes") else 0 for a in arrays])
        late = [(i, a) for i, a in enumerate(arrays) if not hasattr(a, "ctypes")]
        entry, workers = self.entries[name], self.workers

        def launch() -> None:
            for i, place in late:
                ptrs[i] = int(place)
            if entry(ptrs, n, grid, workers, int(reverse)) != 0:
                raise ExecutionError(f"kernel {name} failed on the CPU: its scratch memory could not be allocated")
        launch.keep = arrays  # type: ignore[attr-defined]  # the pointers stay valid as long as the call
        return launch

    def launch(self, name: str, arrays: list, n: int, reverse: bool = False) -> None:
        """Runs kernel `name` once (see `launcher`)."""
        self.launcher(name, arrays, n, reverse)()
