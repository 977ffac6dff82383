"""SyncTest's default kernel with more resident blocks asked of ptxas: does more in flight pay?

    python benchmarks/occupancy.py [--n 4194304] [--program examples/synctest.kas] [--blocks 8,12,16]
                                   [--json occupancy.json]

irfuse asks ptxas for 1024 resident threads per SM (`__launch_bounds__(threads, 1024 /
threads)`, at most 64 registers a thread). A memory-bound kernel whose block moves a few
kilobytes keeps only resident blocks x bytes per block in flight; this compiles the
program's default kernels (both layouts) with the minimum raised and times each, 20 runs
back to back between CUDA events, beside a device-to-device copy of the same bytes, as
fractions of the 1 GiB copy bandwidth measured in the same run. One-kernel programs without
uniform inputs only: the kernel is given one uninitialized per-element buffer per input, in
the program's input order (a uniform table read through such a buffer faults).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys

import numpy as np
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--program", default=os.path.join(ROOT, "examples", "synctest.kas"))
    ap.add_argument("--blocks", default="8,12,16")
    ap.add_argument("--json", default=meta.result_path("planner"))
    args = ap.parse_args(argv)

    from irfuse.backend.nvrtc import compile_cubin
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
    from irfuse.verification.reference import effective_bytes

    rows = []
    for layout in ("aos", "soa"):
        plan, _ = compile_program(args.program, None, "f32", layout=layout)
        assert len(plan.kernels) == 1, "one-kernel programs only"
        k = plan.kernels[0]
        dev = CudaDevice(plan)
        drv = dev.drv
        dev.context.push()
        try:
            bw = measure_copy_bandwidth(drv)
            prog = plan.reference_program
            nbytes = effective_bytes(prog, args.n, 4)
            ins = [drv.mem_alloc(args.n * t.size * 4) for t in prog.input_types()]
            outs = [drv.mem_alloc(args.n * t.size * 4) for t in prog.output_types()]
            half = nbytes // 2
            src, dst = drv.mem_alloc(half), drv.mem_alloc(half)

            def timed(fn, reps=20, samples=15):
                fn()
                times = []
                for _ in range(samples):
                    a, b = drv.Event(), drv.Event()
                    a.record()
                    for _ in range(reps):
                        fn()
                    b.record()
                    b.synchronize()
                    times.append(b.time_since(a) / 1e3 / reps)
                return float(np.median(times))

            row = {"layout": layout, "kernel": k.name, "threads": k.threads,
                   "copy_same_bytes": nbytes / timed(lambda: drv.memcpy_dtod(dst, src, half)) / bw}
            grid = (-(-args.n // k.by), 1)
            for mb in [int(b) for b in args.blocks.split(",")]:
                src_cu = re.sub(r"__launch_bounds__\((\d+), \d+\)", rf"__launch_bounds__(\1, {mb})", plan.source)
                res = compile_cubin(src_cu, None)
                fn = drv.module_from_buffer(res.cubin).get_function(k.name)
                r = res.resources[k.name]
                t = timed(lambda: fn(*ins, *outs, np.int64(args.n), block=k.block_dims, grid=grid))
                row[f"min_blocks_{mb}"] = {"of_copy": nbytes / t / bw, "registers": r.registers,
                                           "spills": r.spill_stores + r.spill_loads}
                print(layout, mb, row[f"min_blocks_{mb}"], flush=True)
            rows.append(row)
            for b in (*ins, *outs, src, dst):
                b.free()
        finally:
            drv.Context.pop()
            dev.close()
        print(json.dumps(row), flush=True)
    with open(args.json, "w") as f:
        meta.dump({"gpu": dev.gpu_name, "n": args.n, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
