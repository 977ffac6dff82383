"""The CPU as a device: the generated kernels' host library (`host_library`), NumPy arrays
for buffers, and every launch replayed in order."""

from __future__ import annotations

import math
import time

import numpy as np

from irfuse.artifact.artifact import Artifact
from irfuse.runtime.device import Slot, in_order
from irfuse.runtime.host_library import HostLibrary


PAGE = 4096
ALIGNED_FROM = 64 * 1024  # bytes: smaller buffers are allocated as NumPy does


def page_aligned(shape, dtype) -> np.ndarray:
    """An uninitialized array whose data starts on a page boundary (buffers of ALIGNED_FROM
    bytes or more; smaller ones as NumPy allocates them). On 16 cores of the GPU machine's
    Xeon, CflStep's step kernel ran 0.12-0.16 ms on page-aligned buffers and 0.56-0.77 ms on
    NumPy's own allocations of the same sizes, in every one of four processes (its reducing
    kernel alike either way; benchmarks/NOTES.md, The CPU backend, 2026-11-26); buffers at other
    offsets within a page, made the same way, ran as fast as page-aligned ones, so the offset
    is not the cause, and what is was not found. Neutral on the 2-core AMD machine."""
    dtype = np.dtype(dtype)
    nbytes = math.prod(shape) * dtype.itemsize  # (not np.prod: a call's outputs are made with it)
    if nbytes < ALIGNED_FROM:
        return np.empty(shape, dtype)
    raw = np.empty(nbytes + PAGE, np.uint8)
    start = -raw.ctypes.data % PAGE
    return raw[start:start + nbytes].view(dtype).reshape(shape)


class WallTimer:
    def __enter__(self):
        self.t0 = time.perf_counter()
        return self

    def __exit__(self, *exc):
        self.seconds = time.perf_counter() - self.t0


class CpuDevice:
    """Runs the artifact's host library (the generated CUDA C built for the host, see
    `irfuse.backend.host_compile`). With `reverse_threads`, every region of every block runs
    its threads last to first: a missing barrier shows in one of the two orders."""

    finishes_in_kernel = False  # the twins leave reductions' partials to the combine kernels
    atomics_in_kernel = False  # ... and rows to the atomic scatter kernel (which adds in order)

    name = "cpu"

    def __init__(self, plan: Artifact, reverse_threads: bool = False):
        self.dtype = plan.element.numpy
        self.reverse_threads = reverse_threads
        self.module = HostLibrary(plan.host_library, plan.kernels)

    def upload(self, a):
        out = page_aligned(np.shape(a), self.dtype)
        np.copyto(out, a, casting="unsafe")
        return out

    def upload_integers(self, a):
        a = np.asarray(a)
        out = page_aligned(a.shape, a.dtype)
        np.copyto(out, a)
        return out

    def download(self, buf, shape):
        return buf.reshape(shape).copy()

    def alloc(self, shape):
        # NaN-filled so an element a kernel fails to write is visible.
        out = page_aligned(shape, self.dtype)
        out.fill(np.nan)
        return out

    def copy(self, dst, src):
        dst = dst.array if isinstance(dst, Slot) else dst
        src = src.array if isinstance(src, Slot) else src
        np.copyto(dst, src.reshape(dst.shape))

    def write(self, buf, a):
        np.copyto(buf, a.reshape(buf.shape), casting="no")

    def read_into(self, out, buf):
        np.copyto(out, buf.reshape(out.shape), casting="no")

    def launcher(self, kernel, buffers, n):
        return self.module.launcher(kernel, buffers, n, self.reverse_threads)

    def batch(self, steps):
        return in_order(steps)

    def free_memory(self) -> None:
        """None: the CPU's buffers are host memory, which a call takes in one piece unless told
        a budget."""
        return None

    def synchronize(self):
        pass

    def close(self):
        pass

    def timer(self):
        return WallTimer()
