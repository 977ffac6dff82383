"""What each in-kernel pass removes, per example (no GPU needed).

    python benchmarks/passes.py [--json passes.json]

For every kernel of the default plan: values in registers, shared bytes (float32) and
barriers after fuse-partition (the baseline: every value in shared memory, a barrier after
the loads and after every call) and after each in-kernel pass of the default pipeline;
values padded against bank conflicts and shared-memory wavefronts per block.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys

from irfuse.transforms.in_kernel import IN_KERNEL_STEPS  # the order the default pipeline runs them in
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STAGES = ["fuse-partition", *(step.pass_name for step in IN_KERNEL_STEPS)]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", default=meta.result_path("planner"))
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    from irfuse.analysis.bank_conflicts import kernel_wavefronts
    from irfuse.kernel.bridge import model_from_kernel
    from irfuse.dialects import fuse
    from irfuse.frontend.irgen import compile_file
    from irfuse.driver.compile import lower

    rows = []
    for path in sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas"))):
        per_stage = []
        for k in range(len(STAGES)):
            module = lower(compile_file(path).module, "kas-dce," + ",".join(STAGES[: k + 1]))
            kernels = [op for op in module.ops if isinstance(op, fuse.KernelOp)]
            stats = []
            for kr in kernels:
                m, _ = model_from_kernel(kr)
                stats.append({"kernel": kr.sym_name.data, "values": len(m.values),
                              "in_registers": sum(1 for v in m.values.values() if not v.shared),
                              "shared_bytes": m.shared_bytes(), "barriers": m.barrier_count(),
                              "padded": sum(1 for v in m.values.values() if v.shared and v.pitch),
                              "wavefronts": kernel_wavefronts(m)})
            per_stage.append(stats)
        for i, kname in enumerate(s["kernel"] for s in per_stage[0]):
            rows.append({"example": os.path.basename(path), "kernel": kname,
                         "stages": {STAGES[k]: per_stage[k][i] for k in range(len(STAGES))}})
    table = Table(title="in-kernel passes: registers-placed values / shared bytes (f32) / barriers / "
                        "padded values and shared wavefronts per block")
    table.add_column("kernel")
    for s in STAGES:
        table.add_column("baseline (" + s + ")" if s == "fuse-partition" else "after " + s)
    for r in rows:
        table.add_row(r["kernel"], *(f"{r['stages'][s]['in_registers']}/{r['stages'][s]['values']} reg, "
                                      f"{r['stages'][s]['shared_bytes']} B, {r['stages'][s]['barriers']} bar, "
                                      f"{r['stages'][s]['padded']} pad, {r['stages'][s]['wavefronts']} wf"
                                      for s in STAGES))
    Console(width=250).print(table)
    with open(args.json, "w") as f:
        meta.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
