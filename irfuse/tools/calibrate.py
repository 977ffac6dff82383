"""`irfuse calibrate`: measure the GPU present and save a device profile for the cost model.

Measures the device-to-device copy bandwidth (bytes read + written), the cost of each
kernel of a plan (launches in one CUDA graph, as the runtime submits a plan), the cost
of a barrier per wave of blocks, the multiply-add throughput in float32 and float64 (a
multiply-add counts two flops, as the cost model counts a product and a sum), and what
one IEEE division, reciprocal or square root costs in multiply-add flops (the mean of the
three, compiled with NVRTC's defaults as irfuse's kernels are); reads the multiprocessor
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

# Arithmetic probes: eight independent chains per thread (enough to hide the latency of
# dependent operations at full occupancy), eight steps per round unrolled, operands from
# the kernel's arguments so that nothing folds; a result is stored only if it is
# impossible, so no memory traffic is timed. Timing `rounds` against `2 * rounds` cancels
# the launch.
ARITHMETIC = r"""
#define CHAINS(T, STEP) \
  T a0 = (T)threadIdx.x * b, a1 = a0 + c, a2 = a1 + c, a3 = a2 + c, \
    a4 = a3 + c, a5 = a4 + c, a6 = a5 + c, a7 = a6 + c; \
  for (int r = 0; r < rounds; ++r) { \
    _Pragma("unroll") for (int u = 0; u < 8; ++u) { \
      a0 = STEP(a0); a1 = STEP(a1); a2 = STEP(a2); a3 = STEP(a3); \
      a4 = STEP(a4); a5 = STEP(a5); a6 = STEP(a6); a7 = STEP(a7); } } \
  if (a0 + a1 + a2 + a3 + a4 + a5 + a6 + a7 == (T)-1) out[0] = a0;
#define FMA(x) ((x) * b + c)
#define DIV(x) (b / (x))
#define RCP(x) ((T)1 / (x))
#define SQRT(x) (sqrt(x))
template <typename T> __device__ void fma_(T* out, int rounds, T b, T c) { CHAINS(T, FMA) }
template <typename T> __device__ void div_(T* out, int rounds, T b, T c) { CHAINS(T, DIV) }
template <typename T> __device__ void rcp_(T* out, int rounds, T b, T c) { CHAINS(T, RCP) }
template <typename T> __device__ void sqrt_(T* out, int rounds, T b, T c) { CHAINS(T, SQRT) }
#define PROBE(NAME, T) \
  extern "C" __global__ void irf_##NAME##_##T(T* out, int rounds, T b, T c) { NAME##_<T>(out, rounds, b, c); }
PROBE(fma, float) PROBE(div, float) PROBE(rcp, float) PROBE(sqrt, float)
PROBE(fma, double) PROBE(div, double) PROBE(rcp, double) PROBE(sqrt, double)
"""
OPS_PER_THREAD_ROUND = 64  # 8 chains x 8 unrolled steps
SLOW = ("div", "rcp", "sqrt")


def calibrate(console, save: bool = True):
    drv = import_pycuda()
    dev = drv.Device(0)
    ctx = dev.retain_primary_context()
    ctx.push()
    try:
        name = dev.name()
        cc = dev.compute_capability()
        arch = f"sm_{cc[0]}{cc[1]}"
        mod = drv.module_from_buffer(compile_cubin(PROBES, arch).cubin)
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
        # 8 blocks of 256 threads fill an SM: one wave; per barrier and wave.
        barrier = max((t1 - t0) / 256, 1e-9)
        arithmetic = drv.module_from_buffer(compile_cubin(ARITHMETIC, arch).cubin)
        compute = {}
        for ctype, t in (("float", np.float32), ("double", np.float64)):
            rates = {}
            for op in ("fma", *SLOW):
                fn = arithmetic.get_function(f"irf_{op}_{ctype}")
                # Every chain stays finite and normal (no slow path of the IEEE sequences):
                # a * b + c grows by a factor below 1.001, b / a and 1 / a alternate between
                # two values near 1, sqrt(a) tends to 1.
                b, c = (t(1.0000001), t(1e-7)) if op == "fma" else (t(1.5), t(0.25))
                rounds = 256 if op == "fma" else 32
                ta = timed(fn, 10, out, np.int32(rounds), b, c, block=(256, 1, 1), grid=grid)
                tb = timed(fn, 10, out, np.int32(2 * rounds), b, c, block=(256, 1, 1), grid=grid)
                rates[op] = OPS_PER_THREAD_ROUND * rounds * grid[0] * 256 / max(tb - ta, 1e-9)  # ops per s
            flops = 2 * rates["fma"]
            compute[ctype] = (flops, float(np.mean([flops / rates[op] for op in SLOW])))
        out.free()
        base = BUILTIN["h200"] if "H200" in name else BUILTIN["h100"]
        profile = dataclasses.replace(
            base, name=name, sms=sms, bandwidth=bandwidth, launch_overhead=launch, barrier_cost=barrier,
            fp32_flops=compute["float"][0], fp64_flops=compute["double"][0],
            slow_op_flops=compute["float"][1], slow_op_flops_f64=compute["double"][1],
            shared_per_sm=dev.get_attribute(a.MAX_SHARED_MEMORY_PER_MULTIPROCESSOR),
            shared_per_block=dev.get_attribute(a.MAX_SHARED_MEMORY_PER_BLOCK_OPTIN))
    finally:
        ctx.pop()
    console.print(f"{name}: {sms} SMs, copy bandwidth {bandwidth / 1e9:.0f} GB/s, launch {launch * 1e6:.2f} us, "
                  f"barrier {barrier * 1e9:.1f} ns per wave, shared {profile.shared_per_block} B per block; "
                  f"float32 {profile.fp32_flops / 1e12:.1f} Tflop/s, a division, reciprocal or square root "
                  f"{profile.slow_op_flops:.1f} flops; float64 {profile.fp64_flops / 1e12:.1f} Tflop/s, "
                  f"{profile.slow_op_flops_f64:.1f} flops", highlight=False)
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
