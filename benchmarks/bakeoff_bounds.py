"""What bounds each cell of the bake-off: the measured time against the floors of its kernels.

    python benchmarks/bakeoff_bounds.py RESULT.json [RESULT.json ...] [--ncu CSV ...] [--json OUT]

For each irfuse row of `bakeoff.py` results (a later file's row replaces an earlier one's for
the same order and operator), the plan a call builds is searched again here (the same source,
float64, the h100 profile GPU compiles plan with; no GPU needed) and each of its element
kernels, matched to the row's kernels by position and block, is priced by the cost model with
the H200 profile at the run's element count and with ptxas's registers and spilled bytes as
the row recorded them. The table holds, beside the measured time and the byte floor at the
copy rate measured in that run:

- flops: the kernels' arithmetic at the GPU's peak float64 rate (`cost.call_flops`);
- shared: their shared-memory wavefronts (bank conflicts counted) at one a cycle an SM;
- spills: ptxas's spill stores and loads moved at the copy rate;
- warps: the fewest warps an SM holds of any kernel (registers, shared memory, threads);
- the largest of these floors over the measured time: near 1, that resource binds; far below
  1, none does, and the time is the latency of too few warps (or instructions not counted as
  flops: addressing, shared loads, barriers), which the occupancy shows.

With `--ncu`, Nsight Compute's counters of one call of each cell's program (`bakeoff.py
--profile-once` under `ncu --profile-from-start off --csv --page raw --metrics NCU_METRICS`, the
same cells) stand beside the model's: the element kernels' shared-memory wavefronts as
counted by the GPU (and their floor, priced as above), the model's count over them, the
shared-memory pipe's and the issue slots' use as a share of their peak (weighted by each
kernel's time under the profiler), and the warps active an SM.

The issue's question (issue 75): where 80% of the byte floor is not met, what bounds the cell.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place
from peers import ROOT  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "examples", "highorder"))
import operators  # noqa: E402 -- the bake-off's operators at any order


def rows_of(paths: list[str]) -> dict[tuple[int, str], dict]:
    """(order, operator) -> the irfuse row with its run's copy rate and element count, a later
    file's row replacing an earlier one's."""
    out = {}
    for path in paths:
        with open(path) as f:
            result = json.load(f)
        for order, cells in result["orders"].items():
            for kind in ("bp1", "bp3", "bk1", "bk3"):
                if kind in cells and "irfuse" in cells[kind]:
                    out[(int(order), kind)] = dict(cells[kind]["irfuse"], elements=cells["elements"],
                                                   copy=result["copy GB/s"] * 1e9, source=os.path.basename(path))
    return out


# The counters `--ncu` reads (pass them to ncu's --metrics, comma-separated).
NCU_METRICS = ("gpu__time_duration.sum", "l1tex__data_pipe_lsu_wavefronts_mem_shared.sum",
               "l1tex__data_pipe_lsu_wavefronts_mem_shared.avg.pct_of_peak_sustained_elapsed",
               "smsp__issue_active.avg.pct_of_peak_sustained_elapsed", "sm__warps_active.avg.per_cycle_active",
               "dram__throughput.avg.pct_of_peak_sustained_elapsed")


def ncu_kernels(paths: list[str]) -> list[dict]:
    """The kernels of ncu's raw CSV pages (`--csv --page raw`): name and NCU_METRICS, numbers."""
    import csv

    out = []
    for path in paths:
        with open(path) as f:
            rows = [r for r in csv.reader(line for line in f if not line.startswith("=="))]
        header = rows[0]
        for r in rows[2:]:  # (the second row holds the units)
            if len(r) != len(header):
                continue
            row = dict(zip(header, r))
            out.append({"name": row["Kernel Name"],
                        **{m: float(row[m].replace(",", "")) for m in NCU_METRICS if row.get(m, "") != ""}})
    return out


def measured_shared(kernels: list[dict], kind: str, order: int, model_wavefronts: float) -> dict:
    """The cell's element kernels (named after its program, `<kind>_p<order>_k...`) as ncu
    counted them, in milliseconds and shares of the peaks (see the module)."""
    from irfuse.planner.profiles import load_profile

    p = load_profile("h200")
    mine = [k for k in kernels if k["name"].startswith(f"{kind}_p{order}_k")]
    if not mine:
        return {}
    time = sum(k["gpu__time_duration.sum"] for k in mine)
    wavefronts = sum(k["l1tex__data_pipe_lsu_wavefronts_mem_shared.sum"] for k in mine)

    def weighted(metric: str) -> float:
        return sum(k[metric] * k["gpu__time_duration.sum"] for k in mine) / time

    return {"ncu kernels": len(mine), "ncu shared ms": wavefronts / (p.sms * p.shared_wavefront_rate) * 1e3,
            "model / ncu wavefronts": model_wavefronts / wavefronts if wavefronts else None,
            "ncu shared pipe %": weighted(NCU_METRICS[2]), "ncu issue slots %": weighted(NCU_METRICS[3]),
            "ncu warps an SM": weighted(NCU_METRICS[4]), "ncu dram %": weighted(NCU_METRICS[5])}


def plan_kernels(kind: str, order: int) -> list:
    """The configs (kernel models) of the plan a call builds, in kernel order."""
    from irfuse.driver.options import compile_options
    from irfuse.driver.planning import search
    from irfuse.driver.sources import read_source

    with tempfile.NamedTemporaryFile("w", suffix=".kas", delete=False) as f:
        f.write(getattr(operators, f"{kind}_source")(order, order + 2))
    try:
        stages, _ = search(read_source(f.name), compile_options("f64", "cuda", profile="h100"), 1, 8, None)
    finally:
        os.unlink(f.name)
    return [c for stage in stages for c in sorted(stage.plans[0].configs, key=lambda c: (c.dag, c.group))]


def bounds(row: dict, configs: list) -> dict:
    """The floors of one cell (see the module), in milliseconds."""
    from irfuse.analysis.bank_conflicts import kernel_wavefronts
    from irfuse.planner.cost import call_flops, resident_blocks
    from irfuse.planner.profiles import load_profile

    p, n = load_profile("h200"), row["elements"]
    kernels = row["kernels"]
    if len(kernels) != len(configs) or any((k["bx"], k["by"]) != (c.model.bx, c.model.by)
                                           for k, c in zip(kernels, configs)):
        return {"error": "the plan searched here is not the one timed"}
    flops = shared = spills = wavefronts = 0.0
    warps = math.inf
    for k, c in zip(kernels, configs):
        m = c.model
        blocks = -(-n // m.by)
        flops += call_flops(m, n, p) / p.fp64_flops
        wavefronts += kernel_wavefronts(m) * blocks
        shared += kernel_wavefronts(m) * blocks / (p.sms * p.shared_wavefront_rate)
        spills += blocks * m.threads * k["spilled_bytes"] / row["copy"]
        resident = resident_blocks(p, m.threads, k["shared_bytes"], k["registers"])
        warps = min(warps, resident * -(-m.threads // 32))
    measured = row["ms"] * 1e-3
    floor = measured * row["of the byte floor"]
    largest = max(("bytes", floor), ("flops", flops), ("shared", shared), ("spills", spills), key=lambda t: t[1])
    return {"ms": row["ms"], "bytes ms": floor * 1e3, "flops ms": flops * 1e3, "shared ms": shared * 1e3,
            "spills ms": spills * 1e3, "warps an SM": warps, "kernels": len(kernels),
            "largest floor": largest[0], "largest floor / measured": largest[1] / measured, "from": row["source"],
            "wavefronts": wavefronts}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("results", nargs="+", help="bakeoff.py JSON results, later ones replacing earlier rows")
    ap.add_argument("--ncu", nargs="*", default=[], help="ncu raw CSV pages of the same cells (see the module)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    counted = ncu_kernels(a.ncu)
    from rich.console import Console
    from rich.table import Table

    cells = {}
    for (order, kind), row in sorted(rows_of(a.results).items()):
        cells[f"{kind} p={order}"] = bounds(row, plan_kernels(kind, order))
        if counted and "wavefronts" in cells[f"{kind} p={order}"]:
            cells[f"{kind} p={order}"].update(measured_shared(counted, kind, order,
                                                              cells[f"{kind} p={order}"]["wavefronts"]))
        print(f"{kind} p={order}: {json.dumps(cells[f'{kind} p={order}'])}", flush=True)
    t = Table(title="What bounds each bake-off cell (H200 profile's peaks; ptxas's registers and spills)")
    ncu = ("shared, ncu", "model / ncu", "shared pipe %", "issue %", "warps/SM, ncu") if counted else ()
    for col in ("cell", "measured ms", "bytes", "flops", "shared", "spills", "warps/SM", "kernels",
                "largest floor / measured", *ncu):
        t.add_column(col, justify="right")
    for name, b in cells.items():
        if "error" in b:
            t.add_row(name, "", "", "", "", "", "", "", b["error"], *("" for _ in ncu))
            continue
        counts = () if not ncu else ("", "", "", "", "") if "ncu shared ms" not in b else (
            f"{b['ncu shared ms']:.3f}", f"{b['model / ncu wavefronts']:.2f}", f"{b['ncu shared pipe %']:.0f}",
            f"{b['ncu issue slots %']:.0f}", f"{b['ncu warps an SM']:.1f}")
        t.add_row(name, f"{b['ms']:.3f}", f"{b['bytes ms']:.3f}", f"{b['flops ms']:.3f}", f"{b['shared ms']:.3f}",
                  f"{b['spills ms']:.3f}", str(b["warps an SM"]), str(b["kernels"]),
                  f"{b['largest floor / measured']:.2f} ({b['largest floor']})", *counts)
    Console(width=200).print(t)
    if a.json:
        with open(a.json, "w") as f:
            meta.dump({"sources": a.results, "cells": cells}, f, indent=1)
        print(f"wrote {a.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
