"""A host library of generated kernels, loaded and run on the CPU (ctypes).

The library (built by `irfuse.backend.host_compile`, named by the artifact) holds one entry
per kernel, `irf_blocks_<kernel>(args, n, begin, end, reverse)`, which runs the kernel's
blocks `begin` to `end` on the calling thread; `reverse` runs each region's threads last to
first. A launch hands ranges of its blocks to worker threads here (ctypes lets go of the
interpreter's lock for the length of each call, so the ranges run in parallel): threading
kept out of the generated C++ keeps the standard library's thread headers out of every
host build.
"""

from __future__ import annotations

import ctypes
import os
import threading
from concurrent.futures import ThreadPoolExecutor

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


# The worker threads of this process's launches, shared by every host library: (the process
# that made them, how many, the pool). A forked child makes its own (a parent's threads do not
# come with it).
_POOL: tuple[int, int, ThreadPoolExecutor] | None = None
_POOL_LOCK = threading.Lock()


def _worker_pool(size: int) -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None or _POOL[0] != os.getpid() or _POOL[1] < size:
            _POOL = (os.getpid(), size, ThreadPoolExecutor(size, thread_name_prefix="irfuse-cpu"))
        return _POOL[2]


def run_blocks(entry, args, n: int, grid: int, workers: int, reverse: bool) -> bool:
    """Runs a kernel's blocks [0, grid) through its entry on up to `workers` threads (the
    calling thread one of them, alone where that is 1 or there is one block), each taking
    the next range of blocks as it becomes free; whether every range ran. Blocks are
    independent, so which thread runs one does not change its results."""
    nworkers = max(1, min(workers, grid))
    if nworkers == 1:
        return entry(args, n, 0, grid, reverse) == 0
    # Several ranges per thread balance blocks of uneven cost.
    size = max(1, grid // (nworkers * 8))
    starts = iter(range(0, grid, size))
    taking = threading.Lock()

    def work() -> bool:
        ok = True
        while True:
            with taking:
                begin = next(starts, None)
            if begin is None:
                return ok
            ok = entry(args, n, begin, min(begin + size, grid), reverse) == 0 and ok

    helpers = [_worker_pool(nworkers - 1).submit(work) for _ in range(nworkers - 1)]
    ok = work()
    return all([f.result() for f in helpers]) and ok


class HostLibrary:
    """A loaded host library of kernels with one entry per kernel."""

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
                fn = getattr(self.lib, f"irf_blocks_{name}")
            except AttributeError:
                raise ExecutionError(f"the host library {path} has no kernel {name}") from None
            fn.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_longlong, ctypes.c_longlong,
                           ctypes.c_longlong, ctypes.c_int]
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
            if not run_blocks(entry, ptrs, n, grid, workers, int(reverse)):
                raise ExecutionError(f"kernel {name} failed on the CPU: its scratch memory could not be allocated")
        launch.keep = arrays  # type: ignore[attr-defined]  # the pointers stay valid as long as the call
        return launch

    def launch(self, name: str, arrays: list, n: int, reverse: bool = False) -> None:
        """Runs kernel `name` once (see `launcher`)."""
        self.launcher(name, arrays, n, reverse)()
