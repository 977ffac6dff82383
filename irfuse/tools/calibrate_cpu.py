"""`irfuse calibrate --backend cpu`: measure this machine's CPU and save the CPU profile the
cost model plans the CPU backend's kernels with (`planner.cost.cpu_kernel_cost`).

Read from the system: the worker threads a launch uses (`IRFUSE_CPU_THREADS`, else every core
this process may use), the caches (Linux's sysfs) and the widest vector registers (the CPU's
flags). Measured by running small probe programs through the CPU backend itself, so the
figures are in the units the cost model counts (bytes of global arrays, flops as the op
library counts them, launches as the runtime makes them):

- the copy rate: `smmul33` over a batch several times the last-level cache (reads 36 bytes
  and writes 36 an element, one multiply a word);
- the multiply-add rate: 64 `mvmul33` in a loop inside the kernel per element on each of
  `CHAINS` vectors (identity matrices, so every value stays normal), in float32 and float64;
- what a division costs in those flops: 64 `sdiv` in a loop on each of `CHAINS` values (a
  value and its reciprocal alternate), against the multiply-add rate;
- a launch: the copy probe over one block per worker, back to back;
- `twin_factor`: the copy and multiply-add probes run as their CPU twins against as loops
  (geometric mean).

The arithmetic probes step independent chains, as an element code's operations are: one chain
measured a dependent multiply-add's latency, and the cost model then predicted the examples'
calls up to 3x too long (benchmarks/NOTES.md, "The cost model against the clock", 2026-11-29).

The profile is saved under the name "cpu" (`--profile cpu`; the CPU backend plans with it by
default), replacing the built-in one, which holds the CI machine kind's figures.
"""

from __future__ import annotations

import dataclasses
import glob
import math
import os

import numpy as np

from irfuse.planner.cost import op_flops
from irfuse.planner.profiles import CPU, DeviceProfile, save_profile

COPY = "matrix3x3 A, B; input A; B = smmul33(A, 2.0); return B;"
CHAINS = ("x", "y", "z", "w")  # independent values each probe's loop steps
FMA = (f"matrix3x3 A; vector3 {', '.join(CHAINS)}; input A, {', '.join(CHAINS)}; loop 64 {{ "
       + " ".join(f"{c} = mvmul33(A, {c});" for c in CHAINS) + f" }} return {', '.join(CHAINS)};")
DIVIDE = (f"scalar t, {', '.join(CHAINS)}; input t, {', '.join(CHAINS)}; loop 64 {{ "
          + " ".join(f"{c} = sdiv(t, {c});" for c in CHAINS) + f" }} return {', '.join(CHAINS)};")
TRIPS = 64 * len(CHAINS)  # calls an element


def cache_sizes() -> tuple[int, int, int]:
    """(L1 data per core, L2 per core, L3) in bytes from sysfs; 0 where not known."""
    sizes = {1: 0, 2: 0, 3: 0}
    for index in glob.glob("/sys/devices/system/cpu/cpu0/cache/index*"):
        try:
            with open(os.path.join(index, "level")) as f:
                level = int(f.read())
            with open(os.path.join(index, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(index, "size")) as f:
                text = f.read().strip()
        except (OSError, ValueError):
            continue
        scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
        try:
            size = int(text.rstrip("KM")) * scale
        except ValueError:
            continue
        if kind in ("Data", "Unified") and level in sizes:
            sizes[level] = max(sizes[level], size)
    return sizes[1], sizes[2], sizes[3]


def vector_bytes() -> int:
    """The widest vector registers of this CPU (x86 flags; 16 for NEON, 0 where unknown)."""
    try:
        with open("/proc/cpuinfo") as f:
            text = f.read()
    except OSError:
        return 0
    flags = set()
    for line in text.splitlines():
        if line.startswith(("flags", "Features")):
            flags = set(line.split(":", 1)[1].split())
            break
    if "avx512f" in flags:
        return 64
    if "avx" in flags:
        return 32
    return 16 if flags & {"sse2", "asimd", "neon"} else 0


class _Probe:
    """A probe program compiled for the CPU backend, recorded on `n` elements in each of
    `renderers`."""

    def __init__(self, text: str, dtype: str, n: int, inputs=None, renderers=("loop",)):
        from irfuse.driver.binaries import with_cpu_rendering
        from irfuse.driver.compile import PlanningOptions, compile_text
        from irfuse.runtime.executor import CpuDevice, Executor
        from irfuse.verification.reference import random_inputs

        plan, _ = compile_text(text, "<calibration probe>", None, dtype, compile_gpu=False,
                               planning=PlanningOptions(n=n, profile="h100"))
        self.program = plan.reference_program
        real = np.float32 if dtype == "f32" else np.float64
        data = inputs(n, real) if inputs else random_inputs(self.program, n, 0, real)
        self.runs = {}
        for renderer in renderers:
            artifact = with_cpu_rendering(plan, renderer)
            self.runs[renderer] = Executor(artifact, CpuDevice(artifact)).prepare(data, n)

    def seconds(self, renderer: str = "loop", back_to_back: int = 1, repeat: int = 7) -> float:
        rec = self.runs[renderer]
        rec.replay()
        return float(np.median([rec.time_once(back_to_back) for _ in range(repeat)]))


def _identity(n, real):
    identity = np.broadcast_to(np.eye(3, dtype=real), (n, 3, 3)).copy()
    return {"A": identity, **{c: np.ones((n, 3), real) for c in CHAINS}}


def _divide(n, real):
    return {"t": np.full(n, 1.5, real), **{c: np.full(n, 1.25, real) for c in CHAINS}}


def calibrate_cpu(console, save: bool = True, n: int | None = None) -> DeviceProfile:
    """Measures this CPU (see the module) and saves the profile; `n`: the copy probe's
    elements (default: four times the last-level cache's bytes, at most 2^24)."""
    from irfuse.library.catalogue import default_library
    from irfuse.runtime.host_library import cpu_threads

    cores = cpu_threads()
    l1, l2, l3 = cache_sizes()
    copy_bytes = (9 + 9) * 4
    n_copy = n or min(1 << 24, max(1 << 20, 4 * max(l3, l2 * cores) // copy_bytes))
    copy = _Probe(COPY, "f32", n_copy, renderers=("loop", "emulate"))
    bandwidth = n_copy * copy_bytes / copy.seconds()
    small = _Probe(COPY, "f32", cores * 128)  # one block per worker (blocks of 128 elements)
    launch = max(small.seconds(back_to_back=100), 1e-7)
    n_compute = max(cores * 4096, (n or (1 << 18)) // 4)
    rates, slow, fma_probe = {}, {}, None
    for dtype in ("f32", "f64"):
        itemsize = 4 if dtype == "f32" else 8
        fma = _Probe(FMA, dtype, n_compute, _identity, ("loop", "emulate") if dtype == "f32" else ("loop",))
        fma_probe = fma_probe or fma
        rates[dtype] = n_compute * TRIPS * op_flops(default_library().ops["mvmul33"], CPU, itemsize) / fma.seconds()
        divide = _Probe(DIVIDE, dtype, n_compute, _divide)
        # a division's time in multiply-add flops (the probe's loads and stores are negligible)
        slow[dtype] = max(1.0, rates[dtype] * divide.seconds() / (n_compute * TRIPS))
    twin = math.sqrt(copy.seconds("emulate") / copy.seconds() * fma_probe.seconds("emulate") / fma_probe.seconds())
    profile = dataclasses.replace(
        CPU, sms=cores, bandwidth=bandwidth, fp32_flops=rates["f32"], fp64_flops=rates["f64"],
        slow_op_flops=slow["f32"], slow_op_flops_f64=slow["f64"], launch_overhead=launch,
        l1_bytes=l1, l2_bytes=l2, l3_bytes=l3, vector_bytes=vector_bytes(), twin_factor=max(1.0, twin))
    console.print(f"CPU, {cores} worker threads: L1d {l1 // 1024} KiB, L2 {l2 // 1024} KiB a core, L3 "
                  f"{l3 // (1024 * 1024)} MiB, {profile.vector_bytes}-byte vectors; copy {bandwidth / 1e9:.1f} GB/s "
                  f"({n_copy:,} elements), launch {launch * 1e6:.1f} us; float32 {rates['f32'] / 1e9:.1f} Gflop/s, a "
                  f"division {slow['f32']:.1f} flops; float64 {rates['f64'] / 1e9:.1f} Gflop/s, {slow['f64']:.1f} "
                  f"flops; twin / loop {profile.twin_factor:.2f}", highlight=False)
    if save:
        console.print(f"profile saved to {save_profile(profile)}")
    return profile
