"""Batches in host memory through one GPU in chunks (`irfuse.runtime.streaming`), against
the host-device copies they need, in one run.

    python benchmarks/scale.py [--n 16777216] [--repeat 5] [--json scale.json]

For each seed workload (default plan, float32, arrays of structures): the program called on
arrays in host memory with `out=` arrays (new outputs would add the first touch of their
pages), end to end on the host clock, with the default device-memory budget (at most 256 MB
a lane) and with a budget of a quarter of the batch's device bytes (at least four chunks);
once on ordinary (pageable) NumPy arrays, staged through page-locked buffers, once on arrays
in page-locked memory (`irfuse.pinned_empty`), copied straight, and once on the pageable arrays
inside `with irfuse.page_locked(...)` (their pages locked for the block of calls; the locking
is timed apart). The floor is the transfer of the same bytes between
page-locked host memory and the GPU, host-to-device and device-to-host at once on two streams
(as the chunks overlap them), timed in the same run; the table gives elements per second and
the fraction of that floor (medians of the calls after the first; the first call, which
also locks the arrays' pages, is printed apart). Outputs are checked against the float64
NumPy reference on a sample.

`--workloads` also takes the programs that reduce over the batch (StrainEnergy, CflStep), run
in passes over their chunks (`analysis.batch_passes`: a pass per level of reductions, each
reading again the inputs it needs); their floor is the same once-only transfer, so a second
pass over inputs shows as a lower fraction. Their results are checked bit for bit against
one call on the whole batch resident on the GPU (a sample's reference would reduce the
sample only).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import ROOT, WORKLOADS  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

REDUCING = {"StrainEnergy": "strain_energy.kas", "CflStep": "cfl_step.kas"}


def transfer_floor(drv, in_bytes: int, out_bytes: int, repeat: int) -> float:
    """Seconds to move `in_bytes` to the GPU and `out_bytes` back at once, page-locked."""
    h_in, h_out = drv.pagelocked_empty(max(in_bytes, 1), np.uint8), drv.pagelocked_empty(max(out_bytes, 1), np.uint8)
    d_in, d_out = drv.mem_alloc(max(in_bytes, 1)), drv.mem_alloc(max(out_bytes, 1))
    s1, s2 = drv.Stream(), drv.Stream()
    times = []
    for _ in range(repeat + 1):
        drv.Context.synchronize()
        t0 = time.perf_counter()
        drv.memcpy_htod_async(d_in, h_in, s1)
        drv.memcpy_dtoh_async(h_out, d_out, s2)
        s1.synchronize()
        s2.synchronize()
        times.append(time.perf_counter() - t0)
    d_in.free()
    d_out.free()
    return float(np.median(times[1:]))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=16_777_216)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=[*WORKLOADS, *REDUCING])
    ap.add_argument("--json", default=meta.result_path("big-batches"))
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    import irfuse
    from irfuse.analysis.batch_passes import batch_passes
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import random_inputs, run_references
    from irfuse.runtime.streaming import LANES, bytes_per_element, reduction_bytes
    from irfuse.verification.verify import check_outputs, subset

    console = Console(width=200)
    rows, gpu = [], None
    for wl in args.workloads:
        prog = irfuse.compile(os.path.join(ROOT, "examples", {**WORKLOADS, **REDUCING}[wl]), backend="cuda")
        ref = prog.compiled.reference_program
        host = random_inputs(ref, args.n, 1, np.float32)
        outs = {k: np.empty(prog.shapes[k] if k in prog.uniform else (args.n, *prog.shapes[k]), np.float32)
                for k in prog.outputs}
        for o in outs.values():
            o.fill(0)  # pages touched before timing
        in_bytes = sum(a.nbytes for a in host.values())
        out_bytes = sum(a.nbytes for a in outs.values())
        dev = prog.opened_device()
        gpu = dev.gpu_name
        one_call = None
        if wl in REDUCING:  # the whole batch resident, one call: what every chunked run must give
            one_call = Executor(prog.compiled, dev).run(host, args.n).outputs  # (freed with the device)
        floor = transfer_floor(dev.drv, in_bytes, out_bytes, args.repeat)
        row = {"workload": wl, "n": args.n, "in_bytes": in_bytes, "out_bytes": out_bytes, "floor_s": floor,
               "contenders": {}}
        batch_bytes = bytes_per_element(prog.compiled) * LANES * args.n
        passes = len(batch_passes(prog.compiled.program).passes)
        quarter = batch_bytes // 4 + reduction_bytes(prog.compiled, args.n)  # (the reductions keep a few words)
        pinned = {k: irfuse.pinned_empty(a.shape, a.dtype) for k, a in host.items()}
        pinned_outs = {k: irfuse.pinned_empty(a.shape, a.dtype) for k, a in outs.items()}
        for k, a in host.items():
            pinned[k][...] = a
        for label, budget, ins, outs, lock in (
                ("pageable, default budget", None, host, outs, False),
                ("pageable, a quarter", quarter, host, outs, False),
                ("pageable in irfuse.page_locked", None, host, outs, True),
                ("page-locked, default budget", None, pinned, pinned_outs, False),
                ("page-locked, a quarter", quarter, pinned, pinned_outs, False)):
            times, chunks, lock_s = [], 0, 0.0
            with contextlib.ExitStack() as block:
                if lock:  # the caller's own arrays locked for the block of calls (timed apart)
                    t0 = time.perf_counter()
                    block.enter_context(irfuse.page_locked(*[a for k, a in [*ins.items(), *outs.items()]
                                                             if k not in prog.uniform]))
                    lock_s = time.perf_counter() - t0
                for _ in range(args.repeat + 1):
                    t0 = time.perf_counter()
                    prog(**ins, out=outs, memory_budget=budget)
                    times.append(time.perf_counter() - t0)
                    chunks = prog.last_chunks
            if one_call is not None:
                verified = all(np.array_equal(outs[k], one_call[k]) for k in prog.outputs)
            else:
                index = np.arange(0, args.n, max(1, args.n // 20_000))
                checks = check_outputs(subset(outs, index), run_references(ref, subset(host, index), "f32"), "f32")
                verified = all(c.ok for c in checks)
            s = float(np.median(times[1:]))
            row["contenders"][label] = {"seconds": s, "chunks": chunks, "elements_per_s": args.n / s,
                                        "of_floor": floor / s, "verified": verified, "first_call_s": times[0],
                                        "passes": passes if chunks > 1 else 1, "lock_s": lock_s}
            console.print(f"{wl} {label}: {s * 1e3:.1f} ms, {chunks} chunks, {row['contenders'][label]['passes']} "
                          f"pass(es), {floor / s:.1%} of the transfer floor "
                          f"(first call {times[0] * 1e3:.1f} ms{f'; locking {lock_s * 1e3:.1f} ms' if lock else ''})",
                          highlight=False)
        prog.close()
        rows.append(row)
        with open(args.json, "w") as f:
            meta.dump({"gpu": gpu, "rows": rows}, f, indent=1)
    t = Table(title=f"{gpu}: host batches through the GPU, n = {args.n}, float32, median of {args.repeat}")
    for col in ("workload", "budget", "chunks", "passes", "time", "M elem/s", "transfer floor", "of floor", "verified"):
        t.add_column(col)
    for r in rows:
        for label, c in r["contenders"].items():
            t.add_row(r["workload"], label, str(c["chunks"]), str(c["passes"]), f"{c['seconds'] * 1e3:.1f} ms",
                      f"{c['elements_per_s'] / 1e6:.0f}", f"{r['floor_s'] * 1e3:.1f} ms", f"{c['of_floor']:.1%}",
                      str(c["verified"]))
    console.print(t)
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
