"""The CPU as a device: the generated kernels' host library (`host_library`), NumPy arrays
for buffers, and every launch replayed in order."""

from __future__ import annotations

import time

import numpy as np

from irfuse.artifact.artifact import Artifact
from irfuse.runtime.device import Slot, in_order
from irfuse.runtime.host_library import HostLibrary


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

    name = "cpu"

    def __init__(self, plan: Artifact, reverse_threads: bool = False):
        self.dtype = plan.element.numpy
        self.reverse_threads = reverse_threads
        self.module = HostLibrary(plan.host_library, plan.kernels)

    def upload(self, a):
        return np.ascontiguousarray(a, dtype=self.dtype).copy()

    def upload_integers(self, a):
        return np.ascontiguousarray(a).copy()

    def download(self, buf, shape):
        return buf.reshape(shape).copy()

    def alloc(self, shape):
        # NaN-filled so an element a kernel fails to write is visible.
        return np.full(shape, np.nan, dtype=self.dtype)

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

    def synchronize(self):
        pass

    def close(self):
        pass

    def timer(self):
        return WallTimer()
