"""`irfuse tune`: compile the N best plans, run each, verify and time it, keep the fastest.

Every plan is compiled first; then all of them are timed in rounds, each round
running every plan once more (in alternating order), so that a slow drift of
the GPU's clocks or temperature over the tuning spreads over all plans instead
of favouring the ones measured first. A plan's time is the median of all its
timings; its spread (interquartile range over median) says how far apart two
plans must be before their order means anything. The first round checks every
plan's outputs against the NumPy reference, each later round that they are bit
for bit the first round's: a plan is verified only if every round passed. The
inputs are uploaded once for all plans.

Writes a JSON of every plan's predicted and measured time, a PNG of measured
against predicted throughput (when matplotlib is there), the Spearman
correlation between prediction and measurement, and optionally the fastest
plan as a plan directory (`irfuse run --plan DIR`).
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass, field

import numpy as np
from rich.markup import escape
from rich.progress import Progress
from rich.table import Table

from irfuse.diagnostics import Diagnostic, ExecutionError, UsageError
from irfuse.dialects.element_types import element_type
from irfuse.dialects.layouts import arrays_from_aos, arrays_to_aos
from irfuse.driver.artifact import CompiledProgram
from irfuse.driver.compile import PlanningOptions, compile_program
from irfuse.driver.tuned import kernel_blocks, kernel_groups
from irfuse.passes.fuse_partition import NoSuchPlan
from irfuse.passes.registry import partition_pipeline
from irfuse.planner.profiles import backend_profile
from irfuse.runtime.cuda_device import GpuUnavailable, import_pycuda
from irfuse.runtime.executor import Executor, open_device
from irfuse.verification.reference import effective_bytes, random_inputs, run_references, uniform_names
from irfuse.verification.verify import check_outputs, subset, verified_elements
from irfuse.tools.report import million_elements_per_second


def ranks(x) -> np.ndarray:
    """Ranks from 0, ties sharing their mean rank."""
    x = np.asarray(x, dtype=float)
    order = np.argsort(x, kind="stable")
    r = np.empty(len(x))
    r[order] = np.arange(len(x))
    for v in np.unique(x):
        m = x == v
        r[m] = r[m].mean()
    return r


def pearson(a, b) -> float:
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if len(a) < 2:
        return float("nan")
    a, b = a - a.mean(), b - b.mean()
    den = np.sqrt((a * a).sum() * (b * b).sum())
    return float((a * b).sum() / den) if den else float("nan")


def spearman(a, b) -> float:
    """Spearman's rank correlation (average ranks for ties)."""
    return pearson(ranks(a), ranks(b)) if len(a) >= 2 else float("nan")


def alternating_rounds(items: list, rounds: int):
    """(round, item) for every item in every round, every other round in reverse order, so
    that a slow drift of the machine over the measurement weighs on all items alike."""
    for r in range(rounds):
        for item in (items if r % 2 == 0 else reversed(items)):
            yield r, item


def gpu_profile_name() -> str:
    try:
        name = import_pycuda().Device(0).name()
    except ExecutionError:
        return "h100"
    return "h200" if "H200" in name else "h100"


@dataclass
class Candidate:
    """One of the N best plans, compiled, with what its rounds measured."""
    index: int
    pipeline: str
    plan: CompiledProgram
    predicted_s: float
    groups: list[str]
    times_s: list[float] = field(default_factory=list)
    verified: bool = True
    mismatch: str = ""

    @property
    def median_s(self) -> float:
        return float(np.median(self.times_s))

    @property
    def spread(self) -> float:
        q1, q3 = np.percentile(self.times_s, [25, 75])
        return float((q3 - q1) / self.median_s)

    def to_json(self) -> dict:
        return {"plan": self.index, "pipeline": self.pipeline, "predicted_s": self.predicted_s,
                "measured_s": self.median_s, "spread": self.spread, "times_s": self.times_s,
                "verified": self.verified, "mismatch": self.mismatch,
                "kernels": [k.name for k in self.plan.kernels], "groups": self.groups,
                "blocks": kernel_blocks(self.plan)}


def _layout(args) -> str:
    return getattr(args, "layout", None) or "aos"


def compile_candidates(args, profile: str, on_compiled=lambda: None) -> list[Candidate]:
    """Plans 0..top-1 of the search, compiled; fewer when fewer distinct plans exist."""

    out = []
    for k in range(args.top):
        pipeline = partition_pipeline(args.top, k, args.max_size, args.n, profile)
        try:
            plan, _ = compile_program(args.file, pipeline, args.dtype, args.backend == "cuda", args.arch,
                                      planning=PlanningOptions(registers=args.registers), layout=_layout(args))
        except NoSuchPlan:
            if k > 0:
                break
            raise
        kernels = [op for op in plan.module.ops if op.name == "fuse.kernel"]
        predicted = sum(int(op.attributes["predicted_ns"].data) for op in kernels) * 1e-9
        out.append(Candidate(k, pipeline, plan, predicted, kernel_groups(plan)))
        on_compiled()
    return out


def time_candidates(cands: list[Candidate], args, inputs, reference, on_timed=lambda: None,
                    index: np.ndarray | None = None, copy_bandwidth: list | None = None) -> str:
    """Times every candidate in `args.rounds` interleaved rounds of `args.repeat // rounds`
    runs each. The first round checks each plan's outputs against the reference, later
    rounds check that they are bit for bit those of the first (the kernels are
    deterministic: a difference is a race). Returns the device's name; on a GPU,
    `copy_bandwidth[0]` gets its copy bandwidth (bytes/s)."""
    copy_bandwidth = copy_bandwidth if copy_bandwidth is not None else [None]

    per_round = max(1, args.repeat // args.rounds)
    # The inputs go to the device once, for all plans; each plan gets its other buffers
    # only while it is timed: N plans' intermediates at once may not fit.
    holder = open_device(args.backend, cands[0].plan)
    first: dict[int, dict[str, str]] = {}  # plan -> output -> digest of the first round's bytes
    try:
        name = getattr(holder, "gpu_name", "CPU (host execution of the generated code)")
        if hasattr(holder, "drv"):  # the ceiling the plot draws, measured on this GPU
            from irfuse.runtime.cuda_device import measure_copy_bandwidth

            copy_bandwidth[0] = measure_copy_bandwidth(holder.drv)
        whole = uniform_names(cands[0].plan.reference_program)  # no batch axis
        laid_out = arrays_from_aos(inputs, _layout(args), whole)  # the plans' layout
        uploaded = {k: holder.upload(v) for k, v in laid_out.items()}
        for r, c in alternating_rounds(cands, args.rounds):
            dev = open_device(args.backend, c.plan)
            try:
                res = Executor(c.plan, dev).run(laid_out, args.n, repeat=per_round, warmup=3,
                                                back_to_back=args.back_to_back, uploaded=uploaded)
            finally:
                dev.close()
            c.times_s += res.times_s
            digests = {k: hashlib.blake2b(np.ascontiguousarray(v)).hexdigest() for k, v in res.outputs.items()}
            if c.index not in first:
                first[c.index] = digests
                outputs = arrays_to_aos(res.outputs, _layout(args), whole)
                got = outputs if index is None else subset(outputs, index, whole)
                bad = [chk.describe() for chk in check_outputs(got, reference, args.dtype) if not chk.ok]
            else:
                bad = [f"{k} differs from the first round's" for k in digests if digests[k] != first[c.index][k]]
            if bad and c.verified:
                c.verified, c.mismatch = False, f"round {r}: " + "; ".join(bad)
            on_timed()
    finally:
        holder.close()
    return name


def _writable_file(flag: str, path: str) -> None:
    """Refuses an output file whose directory is missing or not writable, before any work."""
    if os.path.isdir(path):
        raise UsageError(f"{flag} {path} names a directory; give a file name")
    parent = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(parent):
        raise UsageError(f"{flag} {path}: the directory {parent} does not exist")
    if not os.access(parent, os.W_OK):
        raise UsageError(f"{flag} {path}: the directory {parent} is not writable")


def correlation_text(name: str, value: float) -> str:
    """`Spearman = 0.83`, or why there is none (fewer than two plans, or every prediction or
    every measurement equal: a correlation is then undefined)."""
    return f"{name} = {value:.3f}" if value == value else f"{name} undefined (fewer than two distinct values)"


def results_path(args) -> str | None:
    """Where the tuning's JSON goes: `--json FILE`, else `tuning.json` in `--save-best DIR`
    (the saved plan names it), else nowhere (nothing is written unasked)."""
    if args.json:
        return args.json
    return os.path.join(args.save_best, "tuning.json") if args.save_best else None


def tune(args, console) -> int:
    if args.rounds < 1 or args.repeat < 1 or args.back_to_back < 1:
        raise UsageError("--rounds, --repeat and --back-to-back must be at least 1")
    for flag, path in (("--json", args.json), ("--plot", args.plot)):
        if path:
            _writable_file(flag, path)
    if args.save_best and os.path.exists(args.save_best) and not os.path.isdir(args.save_best):
        raise UsageError(f"--save-best {args.save_best} is a file; it names the directory the fastest plan goes to")
    if args.n < 1:
        raise UsageError(f"--n must be at least 1, got {args.n}")
    if args.backend == "cuda":
        try:
            import_pycuda()  # no GPU: say so before compiling N plans
        except GpuUnavailable as e:
            raise ExecutionError(Diagnostic(f"{e.diagnostics[0].message}; 'irfuse tune --backend cpu' runs and "
                                          "verifies the plans on the CPU", args.file)) from None
    profile = args.profile or (backend_profile(args.backend) if args.backend == "cpu" else gpu_profile_name())
    with Progress(console=console, transient=True) as progress:
        task = progress.add_task(f"compiling the {args.top} best plans of {os.path.basename(args.file)}",
                                 total=args.top)
        cands = compile_candidates(args, profile, lambda: progress.update(task, advance=1))
        program = cands[0].plan.reference_program
        inputs = random_inputs(program, args.n, 0, element_type(args.dtype).numpy)
        # The first round is checked on a seeded sample of a large batch (every element up to
        # 100,000); later rounds are compared with the first bit for bit, every element.
        index = verified_elements(program, args.n)
        reference = run_references(program, subset(inputs, index, uniform_names(program)), args.dtype, len(index),
                                   cands[0].plan.sum_by)
        task = progress.add_task(f"timing {len(cands)} plans in {args.rounds} rounds", total=len(cands) * args.rounds)
        copy_bandwidth: list = [None]
        device_name = time_candidates(cands, args, inputs, reference, lambda: progress.update(task, advance=1),
                                      index, copy_bandwidth)
    good = [c for c in cands if c.verified]
    if not good:
        raise ExecutionError("no plan verified against the reference: " + cands[0].mismatch)
    best = min(good, key=lambda c: c.median_s)
    predicted_best = min(cands, key=lambda c: c.predicted_s)
    rho = spearman([c.predicted_s for c in cands], [c.median_s for c in cands])
    r_lin = pearson([c.predicted_s for c in cands], [c.median_s for c in cands])
    timing = "one run per timing" if args.back_to_back == 1 else f"{args.back_to_back} runs back to back per timing"
    t = Table(title=f"{args.file} on {device_name}: {len(cands)} plans, n = {args.n}, {args.dtype}, {timing}, "
                    f"median of {len(cands[0].times_s)} in {args.rounds} rounds; "
                    f"{correlation_text('Spearman(predicted, measured)', rho)}, {correlation_text('Pearson', r_lin)}")
    for col in ("plan", "kernels", "predicted ms", "measured ms", "spread", "M elem/s", "verified"):
        t.add_column(col, overflow="fold")  # kernel names wrap on a narrow terminal, never cut
    for c in sorted(cands, key=lambda c: c.median_s):
        t.add_row(str(c.index), "\n".join(c.groups), f"{c.predicted_s * 1e3:.3f}", f"{c.median_s * 1e3:.3f}",
                  f"{c.spread:.1%}", million_elements_per_second(args.n, c.median_s), "yes" if c.verified else "NO")
    console.print(t, markup=False)
    for c in cands:
        if not c.verified:
            console.print(f"plan {c.index} does not match the reference: {c.mismatch}", markup=False)
    gap = predicted_best.median_s / best.median_s - 1
    console.print(f"fastest: plan {best.index}; the predicted best (plan {predicted_best.index}) is "
                  f"{gap:.1%} slower than it")
    out = {"program": os.path.abspath(args.file), "device": device_name, "backend": args.backend,
           "dtype": args.dtype, "layout": _layout(args), "n": args.n, "profile": profile, "rounds": args.rounds, "repeat": args.repeat,
           "back_to_back": args.back_to_back, "spearman": rho if rho == rho else None,
           "pearson": r_lin if r_lin == r_lin else None, "predicted_best_gap": gap,
           "best": best.to_json(), "plans": [c.to_json() for c in cands],
           "copy_bandwidth_Bps": copy_bandwidth[0]}
    path = results_path(args)
    if path is not None:
        if args.save_best:
            os.makedirs(args.save_best, exist_ok=True)
        with open(path, "w") as f:
            json.dump(out, f, indent=2)
        console.print(f"results in {path}")
    else:
        console.print("results not written (--json FILE writes them, for 'irfuse compile --from-tuning')")
    if args.plot:
        ceiling = None
        if copy_bandwidth[0]:
            ceiling = copy_bandwidth[0] / effective_bytes(program, 1, element_type(args.dtype).itemsize) / 1e6
        title = (f"{os.path.basename(args.file)} on {device_name}: {len(cands)} plans, n = {args.n:,}, {args.dtype}, "
                 + correlation_text("Spearman rank correlation", rho))
        if _plot(out["plans"], args.n, args.plot, title, ceiling, on_gpu=args.backend == "cuda"):
            console.print(f"plot in {args.plot}")
        else:
            console.print(escape("no plot: matplotlib is not installed (pip install 'irfuse[plot]')"))
    if args.save_best:
        if best.plan.cubin is None:  # timed on the CPU: the saved plan still carries its cubin
            best.plan, _ = compile_program(args.file, best.pipeline, args.dtype, True, args.arch,
                                           planning=PlanningOptions(registers=args.registers), layout=_layout(args))
        best.plan.meta["tuning"] = os.path.abspath(path)  # (written above: --save-best implies a path)
        best.plan.save(args.save_best)
        console.print(f"fastest plan written to {args.save_best} (irfuse run --plan {args.save_best})")
    return 0 if all(c.verified for c in cands) else 1


def _plot(results, n, path, title, ceiling: float | None = None, on_gpu: bool = True) -> bool:
    """Writes `throughput_figure` to `path`; False when matplotlib is not installed."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    fig = throughput_figure(results, n, title, ceiling, on_gpu)
    fig.savefig(path, dpi=150)
    plt.close(fig)
    return True


def throughput_figure(results, n, title, ceiling: float | None = None, on_gpu: bool = True):
    """Measured against predicted throughput, one point per plan: the median with its
    interquartile range, the line where the two agree, the copy bandwidth's ceiling (when
    measured, in elements/s), the fastest plan and the predicted best marked, plan numbers
    beside their points (plans at one spot share a label). Timed on the CPU (`on_gpu`
    False), the GPU's prediction only ranks the plans: each axis gets its own scale and no
    line of agreement is drawn."""
    import textwrap

    import matplotlib.pyplot as plt

    pred = np.array([n / r["predicted_s"] / 1e6 for r in results])
    meas = np.array([n / r["measured_s"] / 1e6 for r in results])
    slow, fast = (np.array([n / np.percentile(r["times_s"], q) / 1e6 for r in results]) for q in (75, 25))
    fig, ax = plt.subplots(figsize=(7.5, 5.5))
    ax.errorbar(pred, meas, yerr=[meas - slow, fast - meas], fmt="o", color="tab:blue", ecolor="tab:blue",
                capsize=3, label="plan: median, interquartile range")
    def limits(values) -> tuple[float, float]:
        lo, hi = min(values), max(values)
        pad = 0.08 * (hi - lo or hi or 1.0)
        return max(lo - pad, 0.0), hi + pad

    if on_gpu:
        xlims = ylims = limits([*pred, *meas, *fast] + ([ceiling] if ceiling else []))
        ax.plot(xlims, ylims, ls="--", color="0.5", lw=1, label="measured = predicted")
    else:
        xlims, ylims = limits(list(pred)), limits([*slow, *fast])
    if ceiling:
        ax.axhline(ceiling, color="tab:red", ls=":", lw=1.5,
                   label=f"copy bandwidth: {ceiling:,.0f} M elements/s")
    best = int(np.argmax(meas))
    ax.scatter([pred[best]], [meas[best]], marker="*", s=260, color="gold", edgecolor="black", zorder=5,
               label=f"fastest: plan {results[best]['plan']}")
    guess = int(np.argmax(pred))
    ax.scatter([pred[guess]], [meas[guess]], s=170, facecolors="none", edgecolors="tab:green", linewidths=2,
               zorder=4, label=f"predicted best: plan {results[guess]['plan']}")
    # Plans closer than 2% of the frame share one label (their numbers would print over each other).
    spots: list[tuple[float, float, list[str]]] = []
    width, height = xlims[1] - xlims[0] or 1.0, ylims[1] - ylims[0] or 1.0
    for r, x, y in sorted(zip(results, pred, meas), key=lambda t: t[0]["plan"]):
        near = next((spot for spot in spots if abs(spot[0] - x) < 0.02 * width and abs(spot[1] - y) < 0.02 * height),
                    None)
        if near is None:
            spots.append((float(x), float(y), [str(r["plan"])]))
        else:
            near[2].append(str(r["plan"]))
    for x, y, plans in spots:
        ax.annotate(",".join(plans), (x, y), xytext=(7, 5), textcoords="offset points", fontsize=8)
    ax.set_xlim(xlims)
    ax.set_ylim(ylims)
    ax.set_xlabel("predicted throughput on the GPU (M elements/s)")
    ax.set_ylabel(f"measured throughput{'' if on_gpu else ' on the CPU'} (M elements/s)")
    ax.set_title(textwrap.fill(title, 80), fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    return fig
