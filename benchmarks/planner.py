"""Planner speed: the top 10 plans of every example, of random programs of 20, 40 and 80 calls,
of dense random programs of 200 statements, and of derivative programs (`irfuse.vjp`,
`irfuse.grad`; with `--long`, the power iteration's reverse derivative: its loop unrolled, 1,198
statements).

    python benchmarks/planner.py [--top 10] [--max-size 8] [--long] [--json planner.json]

Reports, per program: calls (live, after kas-dce), candidate groups, plans found, search time
(candidates, their analysis and the CP-SAT cover), the predicted time of the best and the 10th
plan, and whether the search's budget cut it short. Dense programs (every statement reads recent
values, many reassignments; most calls dead) are the shape that once took minutes.
Targets: BigFusion under 2 s, a 40-call program under 30 s, any program of up to 200
statements under 10 s, on a 2-core machine.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--max-size", type=int, default=8)
    ap.add_argument("--sizes", type=int, nargs="+", default=[20, 40, 80])
    ap.add_argument("--seeds", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--dense-seeds", type=int, nargs="+", default=[6, 17, 31, 38])
    ap.add_argument("--long", action="store_true", help="the power iteration's reverse derivative too")
    ap.add_argument("--json", default=meta.result_path("planner"))
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    from irfuse.frontend.irgen import compile_file, compile_source
    from irfuse.passes.kas_dce import eliminate_dead_code
    from irfuse.planner.cost import H100
    from irfuse.planner.dag import convex_groups, program_dags
    from irfuse.planner.search import plan_program
    from irfuse.verification.reference import find_program
    from irfuse.testing.random_programs import random_program

    programs = [(os.path.basename(p), compile_file(p).module) for p in sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas")))]
    for n in args.sizes:
        for seed in args.seeds:
            programs.append((f"random {n} calls (seed {seed})", compile_source(random_program(seed * 1000 + n, n), "r.kas").module))
    for seed in args.dense_seeds:
        src = random_program(seed, 200, loops=False, dense=True)
        programs.append((f"dense 200 statements (seed {seed})", compile_source(src, "d.kas").module))
    import irfuse

    mesh = os.path.join(ROOT, "examples", "mesh")
    programs.append(("lumped_mass vjp (every input)",
                     irfuse.vjp(os.path.join(mesh, "lumped_mass.kas"), wrt=("X", "dN", "quarter", "rho"))))
    # (the file declares `derivative grad of E wrt u`: it compiles to the gradient program)
    programs.append(("neo_hookean_energy grad", compile_file(os.path.join(mesh, "neo_hookean_energy.kas")).module))
    programs.append(("neo_hookean vjp (F)", irfuse.vjp(os.path.join(ROOT, "examples", "neo_hookean.kas"), wrt=("F",))))
    if args.long:
        programs.append(("power_iteration vjp (A, x)",
                         irfuse.vjp(os.path.join(ROOT, "examples", "power_iteration.kas"), wrt=("A", "x"),
                                    loops="unroll")))
    rows = []
    for name, module in programs:
        prog = find_program(module)
        eliminate_dead_code(prog)
        dags = program_dags(prog)
        calls = sum(len(d.calls) for d in dags)
        groups = sum(len(convex_groups(d, args.max_size)) for d in dags)
        t0 = time.perf_counter()
        _, plans = plan_program(prog, 1 << 22, H100, 4, args.max_size, args.top)
        dt = time.perf_counter() - t0
        rows.append({"program": name, "calls": calls, "groups": groups, "plans": len(plans), "seconds": dt,
                     "best_ms": plans[0].predicted_time * 1e3, "last_ms": plans[-1].predicted_time * 1e3,
                     "budget_reached": bool(plans[0].notes)})
    t = Table(title=f"planner: top {args.top}, max-size {args.max_size}, {os.cpu_count()} cores")
    for col in ("program", "calls", "groups", "plans", "search s", "best ms", f"plan {args.top} ms", "budget reached"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["program"], str(r["calls"]), str(r["groups"]), str(r["plans"]), f"{r['seconds']:.2f}",
                  f"{r['best_ms']:.3f}", f"{r['last_ms']:.3f}", "yes" if r["budget_reached"] else "no")
    Console(width=160).print(t)
    with open(args.json, "w") as f:
        meta.dump(rows, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
