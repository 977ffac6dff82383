"""The cost model against a tuning's measurements, priced by its estimate and by ptxas's figures.

    python benchmarks/tuning_repriced.py TUNE.json [TUNE.json ...] [--program FILE] [--json OUT]

Each plan of an `irfuse tune --json` run (its pipeline, batch size, element type and profile)
is compiled again here with NVRTC, and each of its kernels priced twice by the cost model: as
the search priced it (the register estimate, no spills: the plan's `predicted_ns`) and with
ptxas's registers and spilled bytes of that kernel (what a register table, or
`registers="ptxas"`, gives the search). The table lists both beside the time measured on the
GPU, with Spearman's rank correlation of each against the measurements: how well each price
orders the plans. No GPU is needed (the measurements are the tuning's). `--program` names the
source where the tuning's path is not here; a bake-off operator's (`bk3_p4.kas`) is written
again by `examples/highorder/operators.py`.
"""

from __future__ import annotations

import argparse
import json
import os
import sys


sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place
from irfuse.tools.tune import spearman  # noqa: E402 -- ties at their average rank, as `irfuse tune` reports


def repriced(tuning: dict, program: str) -> list[dict]:
    """Each plan of the tuning: measured, predicted as searched, predicted with ptxas's figures
    (`irfuse.driver.ptxas_rounds.priced_with_figures`, as `registers="ptxas"` prices the plans
    it compiled)."""
    from irfuse.dialects.fuse import KernelOp
    from irfuse.driver.compile import PlanningOptions, compile_program
    from irfuse.driver.options import compile_options
    from irfuse.driver.ptxas_rounds import priced_with_figures

    n, dtype = tuning["n"], tuning["dtype"]
    options = compile_options(dtype, "cuda", n=n, profile=tuning["profile"], arch="sm_90")
    rows = []
    for plan in tuning["plans"]:
        prog, _ = compile_program(program, plan["pipeline"], dtype, compile_gpu=True, arch="sm_90",
                                  planning=PlanningOptions(n=n, profile=tuning["profile"]))
        kernels = [k for k in prog.module.ops if isinstance(k, KernelOp)]
        searched = sum(int(k.attributes["predicted_ns"].data) for k in kernels) * 1e-9
        facts = [((k.bx.data, k.by.data), prog.resources(k.sym_name.data)) for k in kernels]
        rows.append({"plan": plan["plan"], "measured_us": plan["measured_s"] * 1e6, "predicted_us": searched * 1e6,
                     "with_ptxas_figures_us": priced_with_figures(prog, options) * 1e6,
                     "kernels": [{"bx": b[0], "by": b[1], "registers": r.registers,
                                  "spilled_bytes": r.spill_stores + r.spill_loads} for b, r in facts]})
    return rows


def source_of(recorded: str) -> str:
    """The tuning's program: its recorded path where it is here, else, for a bake-off operator
    (`bk3_p4.kas`), the operator written again by `examples/highorder/operators.py`."""
    import re
    import tempfile

    m = re.fullmatch(r"(bp1|bp3|bk1|bk3)_p(\d+)\.kas", os.path.basename(recorded))
    if os.path.exists(recorded) or m is None:
        return recorded
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "highorder"))
    import operators

    p = int(m.group(2))
    path = os.path.join(tempfile.mkdtemp(prefix="irfuse-reprice-"), os.path.basename(recorded))
    with open(path, "w") as f:
        f.write(getattr(operators, f"{m.group(1)}_source")(p, p + 2))
    return path


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("tunings", nargs="+", help="JSON files written by 'irfuse tune --json'")
    ap.add_argument("--program", action="append", default=None,
                    help="the source of each tuning, in order, where its recorded path is not here")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    if a.program and len(a.program) != len(a.tunings):
        ap.error(f"--program: one a tuning ({len(a.tunings)}), not {len(a.program)}")
    result: dict = {"tunings": []}
    for k, path in enumerate(a.tunings):
        with open(path) as f:
            tuning = json.load(f)
        program = a.program[k] if a.program else source_of(tuning["program"])
        rows = repriced(tuning, program)
        measured = [r["measured_us"] for r in rows]
        rho = (spearman([r["predicted_us"] for r in rows], measured),
               spearman([r["with_ptxas_figures_us"] for r in rows], measured))
        print(f"\n{os.path.basename(path)} ({os.path.basename(program)}, n = {tuning['n']}, {tuning['dtype']}, "
              f"{tuning['profile']} profile, measured on {tuning['device']})")
        print(f"{'plan':>4} {'measured us':>12} {'predicted':>10} {'w/ ptxas':>10}  kernels (bx, by, registers, "
              "spilled bytes)")
        for r in rows:
            ks = ", ".join(f"({x['bx']},{x['by']}) {x['registers']} {x['spilled_bytes']}" for x in r["kernels"])
            print(f"{r['plan']:>4} {r['measured_us']:>12.0f} {r['predicted_us']:>10.0f} "
                  f"{r['with_ptxas_figures_us']:>10.0f}  {ks}")
        print(f"Spearman against the measured times: predicted {rho[0]:.2f}, with ptxas's figures {rho[1]:.2f}")
        result["tunings"].append({"tuning": os.path.basename(path), "program": os.path.basename(program),
                                  "n": tuning["n"], "device": tuning["device"], "plans": rows,
                                  "spearman_predicted": rho[0], "spearman_with_ptxas_figures": rho[1]})
    out = a.json or meta.result_path("planner")
    with open(out, "w") as f:
        meta.dump(result, f, indent=1)
    print(f"written {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
