"""Example programs' CPU plans as emitted and with their hoisted calls back to the
implementations' own functions (`render_uniform_vectors`), timed in turns (median of 11), with
whether both give the same bits. usage: examples_hoist_ab.py FILE.kas ...; N, DT: size, f32/f64."""
import os
import re
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from peers import interleaved_medians  # noqa: E402
from irfuse.driver.compile import PlanningOptions, compile_program  # noqa: E402
from irfuse.verification.reference import random_inputs  # noqa: E402

sys.path.insert(0, os.path.join(ROOT, "benchmarks", "results", "thirty_ninth_session"))
from flags_ab import built_sampler  # noqa: E402  (a plan's library from a given source, timed)


def main() -> None:
    n, dtype = int(os.environ.get("N", 1048576)), os.environ.get("DT", "f32")
    for path in sys.argv[1:]:
        plan, _ = compile_program(path, None, dtype, compile_gpu=False, planning=PlanningOptions(n=n, profile="cpu"))
        inputs = random_inputs(plan.reference_program, n, 1, np.float32 if dtype == "f32" else np.float64)
        samplers, outs = {}, {}
        for name, src in (("hoisted", plan.source), ("not", re.sub(r"(\w+)_hoisted\(irf_h\d+, ", r"\1(", plan.source))):
            samplers[name], outs[name] = built_sampler(plan, src, inputs, n)
        t = interleaved_medians(samplers, 11, 3, settle=2)
        print(os.path.basename(path), dtype, {k: f"{v * 1e3:.3f}" for k, v in t.items()},
              f"{t['not'] / t['hoisted']:.2f}x", "same bits:", outs["hoisted"] == outs["not"],
              "hoisted calls:", plan.source.count("_hoisted(irf_h"), flush=True)


if __name__ == "__main__":
    main()
