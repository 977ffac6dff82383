"""Every example on the GPU: verify, time, and compare with the device's copy bandwidth.

    python benchmarks/examples.py [--n 4194304] [--dtype f32 f64] [--pipeline P ...] [--examples NAME ...]
                                  [--json out.json]

For each example and each pipeline variant: kernels, median time (CUDA
events, after warm-up), elements/s, effective bandwidth (inputs read once +
outputs written once) and its ratio to the device-to-device copy bandwidth
measured in the same run.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

from rich.console import Console
from rich.table import Table
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--dtype", nargs="+", default=["f32", "f64"])
    ap.add_argument("--pipeline", nargs="+", default=[None])
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--examples", nargs="+", default=None, metavar="NAME",
                    help="only these examples (file names without .kas; default: every one)")
    ap.add_argument("--json", default=meta.result_path("seeds"))
    args = ap.parse_args(argv)

    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import DTYPES, effective_bytes, random_inputs, run_references
    from irfuse.verification.verify import check_outputs

    console = Console(width=200)
    rows = []
    copy_bw = None
    gpu = None
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas")))
    if args.examples:
        unknown = set(args.examples) - {os.path.basename(p)[:-4] for p in paths}
        if unknown:
            ap.error(f"no example named {', '.join(sorted(unknown))} in examples/")
        paths = [p for p in paths if os.path.basename(p)[:-4] in args.examples]
    for path in paths:
        for dtype in args.dtype:
            for pipeline in args.pipeline:
                plan, _ = compile_program(path, pipeline, dtype)
                console.print(f"{os.path.basename(path)} {dtype} {plan.meta['pipeline']}: "
                              + ", ".join(f"{k.name} ({k.bx},{k.by}) {k.total_shared_bytes(plan.itemsize)} B" for k in plan.kernels))
                dev = CudaDevice(plan)
                try:
                    gpu = dev.gpu_name
                    if copy_bw is None:
                        copy_bw = dev.copy_bandwidth()
                    prog = plan.reference_program
                    inputs = random_inputs(prog, args.n, 1, DTYPES[dtype])
                    res = Executor(plan, dev).run(inputs, args.n, repeat=args.repeat, warmup=5)
                finally:
                    dev.close()
                ok = all(c.ok for c in check_outputs(res.outputs, run_references(prog, inputs, dtype), dtype))
                nbytes = effective_bytes(prog, args.n, plan.itemsize)
                t = res.median_s
                rows.append({
                    "example": os.path.basename(path), "dtype": dtype, "pipeline": plan.meta["pipeline"],
                    "kernels": len(plan.kernels), "n": args.n, "verified": ok, "median_ms": t * 1e3,
                    "elements_per_s": args.n / t, "effective_GBps": nbytes / t / 1e9,
                    "fraction_of_copy": nbytes / t / copy_bw,
                    "registers": {k.name: plan.resources(k.name).registers for k in plan.kernels},
                })
    table = Table(title=f"{gpu}: examples, n = {args.n}; copy bandwidth {copy_bw / 1e9:.0f} GB/s (read + write)")
    for col in ("example", "dtype", "pipeline", "kernels", "verified", "ms", "M elem/s", "GB/s", "of copy"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["example"], r["dtype"], r["pipeline"], str(r["kernels"]), "yes" if r["verified"] else "NO",
                      f"{r['median_ms']:.3f}", f"{r['elements_per_s'] / 1e6:.0f}", f"{r['effective_GBps']:.0f}",
                      f"{r['fraction_of_copy']:.1%}")
    console.print(table)
    with open(args.json, "w") as f:
        meta.dump({"gpu": gpu, "copy_bandwidth_Bps": copy_bw, "rows": rows}, f, indent=2)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
