"""Structure-of-arrays kernels next to the access pattern's own floor, in one run.

    python benchmarks/layouts.py [--n 4194304] [--repeat 30] [--json layouts.json]

For each seed workload at N elements, float32, device time of 10 runs back to back (CUDA
events), as a fraction of the 1 GiB device-to-device copy measured in the same run:

- irfuse, arrays of structures (the default plan, one CUDA graph per run);
- irfuse, structures of arrays (the plan for `--layout soa`);
- "SoA touch, 1/thread": a hand-written kernel with the workload's SoA traffic and no
  arithmetic to speak of (every input word read, their sum written to every output word),
  one element per thread, 4-byte accesses: what SoA access of these arrays costs;
- "SoA touch, 4/thread": the same with 16-byte accesses, four elements per thread.

Effective bandwidth counts every input read once and every output written once. Every
irfuse row is checked against the float64 NumPy reference on a sample.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import ROOT, WORKLOADS  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place


def touch_source(ins: list[int], outs: list[int], per_thread: int) -> str:
    """A kernel reading every word of the SoA inputs and writing every word of the outputs."""
    params = [f"const float* __restrict__ i{k}" for k in range(len(ins))]
    params += [f"float* __restrict__ o{k}" for k in range(len(outs))]
    t = "float4" if per_thread == 4 else "float"
    zero = "make_float4(0.f, 0.f, 0.f, 0.f)" if per_thread == 4 else "0.f"
    body = [f"  {t} acc = {zero};"]
    add = ("acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;" if per_thread == 4 else "acc += v;")
    for k, size in enumerate(ins):
        for w in range(size):
            body.append(f"  {{ const {t} v = reinterpret_cast<const {t}*>(i{k} + {w}LL * n)[e]; {add} }}")
    for k, size in enumerate(outs):
        for w in range(size):
            body.append(f"  reinterpret_cast<{t}*>(o{k} + {w}LL * n)[e] = acc;")
    return ("extern \"C\" __global__ void __launch_bounds__(128) touch(" + ", ".join(params + ["long long n"])
            + ") {\n" + "  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;\n"
            + f"  if (e >= n / {per_thread}) return;\n" + "\n".join(body) + "\n}\n")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", default=meta.result_path("layouts"))
    args = ap.parse_args(argv)
    if args.n % 4:
        ap.error("--n must be a multiple of 4 (the 16-byte touch kernel)")

    from rich.console import Console
    from rich.table import Table

    from irfuse.backend.nvrtc import compile_cubin
    from irfuse.dialects.layouts import from_aos, to_aos
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import effective_bytes, random_inputs, run_references
    from irfuse.verification.verify import check_outputs, subset

    console = Console(width=200)
    rows, copy_bw, gpu = [], None, None
    for wl, file in WORKLOADS.items():
        path = os.path.join(ROOT, "examples", file)
        row: dict = {"workload": wl}
        timers = {}
        devices = []
        for layout in ("aos", "soa"):
            plan, _ = compile_program(path, None, "f32", layout=layout, planning=None)
            dev = CudaDevice(plan)
            devices.append(dev)
            gpu = dev.gpu_name
            if copy_bw is None:
                copy_bw = measure_copy_bandwidth(dev.drv)
            ref = plan.reference_program
            host = random_inputs(ref, args.n, 1, np.float32)
            rec = Executor(plan, dev).prepare({k: from_aos(v, layout) for k, v in host.items()}, args.n)
            rec.replay()
            got = {k: to_aos(v, layout) for k, v in rec.outputs().items()}
            index = np.arange(0, args.n, max(1, args.n // 100_000))
            row[f"{layout}_verified"] = all(c.ok for c in check_outputs(
                subset(got, index), run_references(ref, subset(host, index), "f32"), "f32"))
            row[f"{layout}_kernels"] = [f"{k.name} ({k.bx}x{k.by}, {plan.resources(k.name).registers} regs, "
                                        f"{k.shared_words} shared words)" for k in plan.kernels]
            timers[f"irfuse {layout}"] = lambda rec=rec: rec.time_once(10)
        drv = devices[0].drv
        ins = [t.size for t in ref.input_types()]
        outs = [t.size for t in ref.output_types()]
        bufs = [drv.mem_alloc(args.n * 4 * s) for s in ins + outs]
        for per in (1, 4):
            cubin = compile_cubin(touch_source(ins, outs, per), None)
            fn = drv.module_from_buffer(cubin.cubin).get_function("touch")
            grid = (-(-args.n // per) + 127) // 128

            def touch(fn=fn, grid=grid):
                start, stop = drv.Event(), drv.Event()
                start.record()
                for _ in range(10):
                    fn(*bufs, np.int64(args.n), block=(128, 1, 1), grid=(grid, 1))
                stop.record()
                stop.synchronize()
                return stop.time_since(start) / 1e3 / 10
            timers[f"SoA touch, {per}/thread"] = touch
        for t in timers.values():
            t()
        times: dict[str, list[float]] = {k: [] for k in timers}
        for r in range(args.repeat):  # in turns, every other round reversed
            for name in (list(timers) if r % 2 else list(reversed(timers))):
                times[name].append(timers[name]())
        nbytes = effective_bytes(ref, args.n, 4)
        row["bytes"] = nbytes
        row["seconds"] = {k: float(np.median(v)) for k, v in times.items()}
        row["of_copy"] = {k: nbytes / s / copy_bw for k, s in row["seconds"].items()}
        rows.append(row)
        for b in bufs:
            b.free()
        for dev in devices:
            dev.close()

    names = list(rows[0]["of_copy"])
    t = Table(title=f"{gpu}: n = {args.n}, float32, 10 runs back to back, median of {args.repeat}; "
                    f"fraction of the copy bandwidth ({copy_bw / 1e9:.0f} GB/s)")
    for col in ["workload", *names, "verified (aos, soa)"]:
        t.add_column(col)
    for r in rows:
        t.add_row(r["workload"], *(f"{r['of_copy'][k]:.1%}" for k in names),
                  f"{r['aos_verified']}, {r['soa_verified']}")
    console.print(t)
    for r in rows:
        console.print(f"{r['workload']}: aos {'; '.join(r['aos_kernels'])} | soa {'; '.join(r['soa_kernels'])}")
    with open(args.json, "w") as f:
        meta.dump({"gpu": gpu, "n": args.n, "copy_bandwidth_Bps": copy_bw, "rows": rows}, f, indent=1)
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
