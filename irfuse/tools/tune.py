"""`irfuse tune`: compile the N best plans, run each on the GPU, verify and time it, keep the fastest.

Writes a JSON of every plan's predicted and measured time, a PNG of measured
against predicted throughput (when matplotlib is there), the Spearman
correlation between prediction and measurement, and optionally the fastest
plan as a plan directory (`irfuse run --plan DIR`).
"""

from __future__ import annotations

import json
import os

import numpy as np
from rich.progress import Progress
from rich.table import Table

from irfuse.diagnostics import CompileError


def spearman(a: list[float], b: list[float]) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    def ranks(x):
        x = np.asarray(x, dtype=float)
        order = np.argsort(x, kind="stable")
        r = np.empty(len(x))
        r[order] = np.arange(len(x))
        for v in np.unique(x):  # ties share their mean rank
            m = x == v
            r[m] = r[m].mean()
        return r
    if len(a) < 2:
        return float("nan")
    ra, rb = ranks(a), ranks(b)
    ra, rb = ra - ra.mean(), rb - rb.mean()
    den = np.sqrt((ra * ra).sum() * (rb * rb).sum())
    return float((ra * rb).sum() / den) if den else float("nan")


def partition_pipeline(top: int, plan: int, max_size: int, n: int, profile: str, dtype: str) -> str:
    from irfuse.passes.registry import DEFAULT_PIPELINE

    part = f"fuse-partition{{max-size={max_size} top={top} plan={plan} n={n} profile={profile} dtype={dtype}}}"
    return DEFAULT_PIPELINE.replace("fuse-partition", part, 1)


def gpu_profile_name() -> str:
    try:
        from irfuse.runtime.cuda_device import _import_pycuda

        name = _import_pycuda().Device(0).name()
    except CompileError:
        return "h100"
    return "h200" if "H200" in name else "h100"


def tune(args, console) -> int:
    from irfuse.frontend.irgen import compile_file
    from irfuse.pipeline import build_plan, lower
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.runtime.reference import DTYPES, random_inputs, run_reference
    from irfuse.runtime.verify import check_outputs

    profile = args.profile or gpu_profile_name()
    results = []
    inputs = reference = None
    device_name = None
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"tuning {os.path.basename(args.file)}", total=args.top)
        for k in range(args.top):
            pipeline = partition_pipeline(args.top, k, args.max_size, args.n, profile, args.dtype)
            front = compile_file(args.file)
            reference_module = front.module.clone()
            try:
                module = lower(front.module, pipeline, args.dtype)
            except CompileError as e:
                if "distinct plans exist" in str(e):
                    break
                raise
            plan = build_plan(module, args.dtype, compile_gpu=True, arch=args.arch)
            plan.reference_module = reference_module
            predicted = sum(int(kr.attributes["predicted_ns"].data) for kr in module.ops
                            if kr.name == "fuse.kernel") * 1e-9
            if inputs is None:
                inputs = random_inputs(plan.reference_program, args.n, 0, DTYPES[args.dtype])
                reference = run_reference(plan.reference_program, inputs)
            dev = CudaDevice(plan)
            try:
                device_name = dev.gpu_name
                res = Executor(plan, dev).run(inputs, args.n, repeat=args.repeat, warmup=3)
            finally:
                dev.close()
            ok = all(c.ok for c in check_outputs(res.outputs, reference, args.dtype))
            results.append({"plan": k, "pipeline": pipeline, "predicted_s": predicted, "measured_s": res.median_s,
                            "verified": ok, "kernels": [kk.name for kk in plan.kernels],
                            "groups": [kr.attributes["group"].data for kr in module.ops if kr.name == "fuse.kernel"]})
            progress.update(task, advance=1)
    if not results:
        raise CompileError("no plan could be tuned")
    good = [r for r in results if r["verified"]]
    if not good:
        raise CompileError("no plan verified against the reference")
    best = min(good, key=lambda r: r["measured_s"])
    rho = spearman([r["predicted_s"] for r in results], [r["measured_s"] for r in results])
    predicted_best = min(results, key=lambda r: r["predicted_s"])
    t = Table(title=f"{args.file} on {device_name}: {len(results)} plans, n = {args.n}, {args.dtype}; "
                    f"Spearman(predicted, measured) = {rho:.2f}")
    for col in ("plan", "kernels", "predicted ms", "measured ms", "M elem/s", "verified"):
        t.add_column(col)
    for r in sorted(results, key=lambda r: r["measured_s"]):
        t.add_row(str(r["plan"]), "\n".join(r["groups"]), f"{r['predicted_s'] * 1e3:.3f}",
                  f"{r['measured_s'] * 1e3:.3f}", f"{args.n / r['measured_s'] / 1e6:.0f}",
                  "yes" if r["verified"] else "NO")
    console.print(t, markup=False)
    gap = predicted_best["measured_s"] / best["measured_s"] - 1
    console.print(f"fastest: plan {best['plan']}; the predicted best (plan {predicted_best['plan']}) is "
                  f"{gap:.1%} slower than it")
    out = {"program": os.path.abspath(args.file), "device": device_name, "dtype": args.dtype, "n": args.n,
           "profile": profile, "spearman": rho, "predicted_best_gap": gap, "best": best, "plans": results}
    path = args.json or os.path.splitext(os.path.basename(args.file))[0] + ".tuning.json"
    with open(path, "w") as f:
        json.dump(out, f, indent=2)
    console.print(f"results in {path}")
    if args.plot:
        _plot(results, args.n, args.plot, f"{os.path.basename(args.file)} on {device_name}, rho = {rho:.2f}")
        console.print(f"plot in {args.plot}")
    if args.save_best:
        from irfuse.pipeline import compile_program

        plan, _ = compile_program(args.file, best["pipeline"], args.dtype, True, args.arch)
        plan.save(args.save_best)
        console.print(f"fastest plan written to {args.save_best} (irfuse run --plan {args.save_best})")
    return 0 if all(r["verified"] for r in results) else 1


def _plot(results, n, path, title) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    pred = [n / r["predicted_s"] / 1e6 for r in results]
    meas = [n / r["measured_s"] / 1e6 for r in results]
    fig, ax = plt.subplots(figsize=(5, 4))
    ax.scatter(pred, meas)
    for r, x, y in zip(results, pred, meas):
        ax.annotate(str(r["plan"]), (x, y), fontsize=7)
    ax.set_xlabel("predicted M elements/s")
    ax.set_ylabel("measured M elements/s")
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
