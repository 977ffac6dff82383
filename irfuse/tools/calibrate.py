"""`irfuse calibrate`: measure the GPU present and save a device profile for the cost model.

Measures the device-to-device copy bandwidth (bytes read + written), the cost of each
kernel of a plan (launches in one CUDA graph, as the runtime submits a plan), and the cost
of a barrier per wave of blocks; reads the multiprocessor
count and shared-memory limits from the driver; keeps the rest of the built-in profile
closest to the device. Later runs use the saved profile when asked for this GPU or for
the built-in name it replaces (`fuse-partition{profile=h200}`).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from irfuse.backend.nvrtc import compile_cubin
from irfuse.planner.cost import BUILTIN, save_profile
from irfuse.runtime.cuda_device import _EventTimer, import_pycuda, measure_copy_bandwidth
from irfuse.runtime.cuda_graph import CudaGraph

PROBES = r"""
extern "C" __global__ void irf_empty() {}
extern "C" __global__ void irf_barriers(float* out, int rounds) {
  __shared__ float s[256];
  float acc = threadIdx.x;
  for (int r = 0; r < rounds; ++r) { s[threadIdx.x] = acc; __syncthreads(); acc += s[(threadIdx.x + 1) & 255]; }
  if (acc == -1.0f) out[0] = acc;
}
"""


def calibrate(console, save: bool = True):
    drv = import_pycuda()
    dev = drv.Device(0)
    ctx = dev.retain_primary_context()
    ctx.push()
    try:
        name = dev.name()
        cc = dev.compute_capability()
        mod = drv.module_from_buffer(compile_cubin(PROBES, f"sm_{cc[0]}{cc[1]}").cubin)
        empty, barriers = mod.get_function("irf_empty"), mod.get_function("irf_barriers")
        a = drv.device_attribute
        sms = dev.get_attribute(a.MULTIPROCESSOR_COUNT)
        bandwidth = measure_copy_bandwidth(drv)

        def timed(fn, reps=200, *args, **kw):
            for _ in range(5):
                fn(*args, **kw)
            start, stop = drv.Event(), drv.Event()
            start.record()
            for _ in range(reps):
                fn(*args, **kw)
            stop.record()
            stop.synchronize()
            return stop.time_since(start) / 1e3 / reps

        launch = _launch_cost(drv, empty)
        out = drv.mem_alloc(4)
        grid = (sms * 8, 1, 1)
        t0 = timed(barriers, 50, out, np.int32(0), block=(256, 1, 1), grid=grid)
        t1 = timed(barriers, 50, out, np.int32(256), block=(256, 1, 1), grid=grid)
        out.free()
        # 8 blocks of 256 threads fill an SM: one wave; per barrier and wave.
        barrier = max((t1 - t0) / 256, 1e-9)
        base = BUILTIN["h200"] if "H200" in name else BUILTIN["h100"]
        profile = dataclasses.replace(
            base, name=name, sms=sms, bandwidth=bandwidth, launch_overhead=launch, barrier_cost=barrier,
            shared_per_sm=dev.get_attribute(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            shared_per_block=dev.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
    finally:
        ctx.pop()
    console.print(f"{name}: {sms} SMs, copy bandwidth {bandwidth / 1e9:.0f} GB/s, launch {launch * 1e6:.2f} us, "
                  f"barrier {barrier * 1e9:.1f} ns per wave, shared {profile.shared_per_block} B per block")
    if save:
        console.print(f"profile saved to {save_profile(profile)}")
    return profile


def _launch_cost(drv, empty, kernels: int = 100, repeat: int = 30) -> float:
    """What each further kernel of a plan adds to a run: a graph of `kernels` + 1 empty
    kernels against a graph of one, each timed from an idle GPU (the graph's submission,
    paid once per run whatever the plan, cancels out)."""
    empty.prepare("")

    def graph(k: int):
        return CudaGraph(drv, lambda s: [empty.prepared_async_call((1, 1), (32, 1, 1), s) for _ in range(k)])

    def median_once(g) -> float:
        for _ in range(3):
            g()
        times = []
        for _ in range(repeat):
            with _EventTimer(drv) as t:
                g()
            times.append(t.seconds)
        return float(np.median(times))

    one, many = graph(1), graph(kernels + 1)
    try:
        return max((median_once(many) - median_once(one)) / kernels, 1e-7)
    finally:
        one.destroy()
        many.destroy()
