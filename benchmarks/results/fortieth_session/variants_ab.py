"""A workload's CPU plan built from its emitted source and from text-rewritten variants of it
(a Python module's VARIANTS: name -> function of the source), all timed in turns with numba in
one process, with whether each gives the emitted source's bits. The session's experiments on
the loop rendering were run this way before any was built (`hoist_variants.py`: the
`hoist_variants_16cores.txt` run). usage: variants_ab.py WORKLOAD VARIANTS.py; N, R: size,
timings."""
import importlib.util
import os
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from peers import interleaved_medians, numba_fns  # noqa: E402
from irfuse.api.host_calls import aligned_copy  # noqa: E402
import cpu as cpub  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "benchmarks", "results", "thirty_ninth_session"))
from flags_ab import built_sampler, workload_plan  # noqa: E402  (a plan's library from a source, timed)


def main() -> None:
    n = int(os.environ.get("N", 1048576))
    wl = sys.argv[1]
    spec = importlib.util.spec_from_file_location("variants", sys.argv[2])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    plan, inputs = workload_plan(wl, n)
    prog = plan.reference_program
    samplers, outs = {}, {}
    for name, src in {"base": plan.source, **{k: f(plan.source) for k, f in module.VARIANTS.items()}}.items():
        samplers[name], outs[name] = built_sampler(plan, src, inputs, n)
    samplers["numba"] = cpub.wall_sampler(numba_fns()[wl], [aligned_copy(inputs[k]) for k in prog.inputs])
    t = interleaved_medians(samplers, int(os.environ.get("R", 15)), 3, settle=2)
    print(wl, {k: f"{x * 1e3:.3f}" for k, x in t.items()},
          {k: f"{t['numba'] / x:.2f}x" for k, x in t.items() if k != "numba"},
          "same bits:", {k: outs[k] == outs["base"] for k in outs}, flush=True)


if __name__ == "__main__":
    main()
