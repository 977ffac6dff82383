"""The CPU backend's plan of each workload built two ways in one process and timed in turns
with numba: as emitted and without one of this session's changes to the loop rendering:
`prefetch` (the element loop's prefetch of wide rows, compiled away: IRF_PREFETCH defined
empty; the prefetch_ab_*.txt runs) or `hoist` (calls with a uniform operand back to the
implementation's own function: `render_uniform_vectors`). usage: emitted_ab.py W1,W2,...
[prefetch|hoist] (names of benchmarks/cpu.py); N, R: size, timings."""
import os
import re
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from peers import interleaved_medians, numba_fns  # noqa: E402
from irfuse.api.host_calls import aligned_copy  # noqa: E402
import cpu as cpub  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "benchmarks", "results", "thirty_ninth_session"))
from flags_ab import built_sampler, workload_plan  # noqa: E402  (a plan's library from a source, timed)

WITHOUT = {
    "prefetch": lambda src: "#undef IRF_PREFETCH\n#define IRF_PREFETCH(p) ((void)0)\n" + src,
    "hoist": lambda src: re.sub(r"(\w+)_hoisted\(irf_h\d+, ", r"\1(", src),
}
COUNTED = {"prefetch": "IRF_PREFETCH((", "hoist": "_hoisted(irf_h"}


def main() -> None:
    n = int(os.environ.get("N", 1048576))
    change = sys.argv[2] if len(sys.argv) > 2 else "prefetch"
    nb = numba_fns()
    for wl in sys.argv[1].split(","):
        plan, inputs = workload_plan(wl, n)
        prog = plan.reference_program
        samplers, outs = {}, {}
        for name, src in (("emitted", plan.source), ("without", WITHOUT[change](plan.source))):
            samplers[name], outs[name] = built_sampler(plan, src, inputs, n)
        samplers["numba"] = cpub.wall_sampler(nb[wl], [aligned_copy(inputs[k]) for k in prog.inputs])
        t = interleaved_medians(samplers, int(os.environ.get("R", 15)), 3, settle=2)
        print(wl, {k: f"{v * 1e3:.3f}" for k, v in t.items()},
              f"emitted/numba {t['numba'] / t['emitted']:.2f}x,",
              f"without {change}/numba {t['numba'] / t['without']:.2f}x",
              "same bits:", outs["emitted"] == outs["without"], f"{change} sites:", plan.source.count(COUNTED[change]),
              flush=True)


if __name__ == "__main__":
    main()
