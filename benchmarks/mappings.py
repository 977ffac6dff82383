"""Every single-kernel configuration of a small program on the GPU: thread mapping and
block shape against predicted and measured time.

    python benchmarks/mappings.py [FILE.kas] [--dtype f64 f32] [--top 90] [--json out.json]

The search is asked for its `--top` plans keeping up to 24 configurations per group,
and every plan that is one kernel is compiled, verified and timed (CUDA events,
median of 30 after warm-up). The table gives, per configuration, registers, resident
blocks, the bytes of loads an SM has in flight, the predicted and measured time and
the fraction of the copy bandwidth measured in the same run: what the cost model's
transfer term (`turnaround`) was fitted on. The default program is the tensor part
of StVenant (`benchmarks/programs/ttmul.kas`).
"""

from __future__ import annotations

import argparse
import os
import sys

from rich.console import Console
from rich.table import Table
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file", nargs="?", default=os.path.join(ROOT, "benchmarks", "programs", "ttmul.kas"))
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--dtype", nargs="+", default=["f64", "f32"])
    ap.add_argument("--top", type=int, default=90)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", default=meta.result_path("planner"))
    args = ap.parse_args(argv)

    from irfuse.frontend.irgen import compile_file
    from irfuse.passes.kas_dce import eliminate_dead_code
    from irfuse.driver.compile import compile_program
    from irfuse.planner.cost import load_profile
    from irfuse.planner.search import plan_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import DTYPES, effective_bytes, find_program, random_inputs, run_references
    from irfuse.verification.verify import check_outputs
    from irfuse.passes.registry import partition_pipeline

    console = Console(width=200)
    profile = load_profile("h100")
    rows, copy_bw, gpu = [], None, None
    for dtype in args.dtype:
        itemsize = 8 if dtype == "f64" else 4
        program = find_program(compile_file(args.file).module)
        eliminate_dead_code(program)
        _, plans = plan_program(program, args.n, profile, itemsize, 8, args.top, keep=24)
        inputs = None
        for k in [k for k, p in enumerate(plans) if len(p.configs) == 1]:
            cost = plans[k].configs[0].cost
            pipeline = partition_pipeline(args.top, k, 8, args.n, "h100", keep=24)
            plan, _ = compile_program(args.file, pipeline, dtype)
            kernel = plan.kernels[0]
            op = next(o for o in plan.module.walk() if o.name == "fuse.kernel")
            dev = CudaDevice(plan)
            try:
                gpu = dev.gpu_name
                prog = plan.reference_program
                if inputs is None:
                    inputs = random_inputs(prog, args.n, 1, DTYPES[dtype])
                if copy_bw is None:
                    copy_bw = dev.copy_bandwidth()
                res = Executor(plan, dev).run(inputs, args.n, repeat=args.repeat, warmup=5)
            finally:
                dev.close()
            ok = all(c.ok for c in check_outputs(res.outputs, run_references(prog, inputs, dtype), dtype))
            rows.append({
                "dtype": dtype, "plan": k, "group": op.attributes["group"].data, "block": [kernel.bx, kernel.by],
                "registers": plan.resources(kernel.name).registers, "resident_blocks": cost.resident_blocks,
                "in_flight_bytes": cost.in_flight, "predicted_s": op.attributes["predicted_ns"].data * 1e-9,
                "measured_s": res.median_s, "verified": ok,
                "fraction_of_copy": effective_bytes(prog, args.n, itemsize) / res.median_s / copy_bw})
    table = Table(title=f"{gpu}: single-kernel configurations of {os.path.basename(args.file)}, n = {args.n}; "
                        f"copy bandwidth {copy_bw / 1e9:.0f} GB/s")
    for col in ("dtype", "plan", "kernel", "block", "regs", "resident", "in flight", "predicted", "measured",
                "of copy", "verified"):
        table.add_column(col)
    for r in rows:
        table.add_row(r["dtype"], str(r["plan"]), r["group"], f"({r['block'][0]},{r['block'][1]})",
                      str(r["registers"]), str(r["resident_blocks"]), f"{r['in_flight_bytes'] / 1024:.1f} KB",
                      f"{r['predicted_s'] * 1e3:.3f} ms", f"{r['measured_s'] * 1e3:.3f} ms",
                      f"{r['fraction_of_copy']:.1%}", "yes" if r["verified"] else "NO")
    console.print(table)
    with open(args.json, "w") as f:
        meta.dump({"gpu": gpu, "copy_bandwidth_Bps": copy_bw, "program": args.file, "rows": rows}, f, indent=2)
    return 0 if all(r["verified"] for r in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
