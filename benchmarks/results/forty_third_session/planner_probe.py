"""Probe (forty-third session, after the change): a taped derivative as the planner's price
splits it (`loops="tape"`) against its histories kept whole (a judge preferring the fewest
loops), timed in one run on the GPU.

    python planner_probe.py time_loop16 [--json out.json]"""

from __future__ import annotations

import argparse
import json
import os
import sys


ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from checkpoint_probe import compiled_sampler  # noqa: E402
from loop_derivatives import programs  # noqa: E402
from peers import interleaved_medians  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("programs", nargs="+")
    ap.add_argument("--n", type=int, default=1_048_576)
    ap.add_argument("--json", default="planner_probe.json")
    args = ap.parse_args()
    import torch

    import irfuse
    import irfuse.planner.loop_forms as loop_forms
    from irfuse.dialects.kas import LoopOp
    from irfuse.transforms.reverse_mode import LoopJudge

    planner = loop_forms.LOOP_JUDGE
    whole = LoopJudge(loop_forms.unrolled_fits,
                      lambda p: (True, float(sum(isinstance(o, LoopOp) for o in p.walk()))))
    rows = []
    for name in args.programs:
        source, mode, wrt = programs()[name]
        samplers, row = {}, {"program": name, "variants": {}}
        for label, judge in (("planner", planner), ("whole", whole)):
            loop_forms.LOOP_JUDGE = judge
            module = (irfuse.grad(source, of="E", wrt=wrt, loops="tape") if mode == "grad"
                      else irfuse.vjp(source, wrt=wrt, loops="tape"))
            samplers[label], row["variants"][label] = compiled_sampler(module, f"{name}_{label}", args.n)
        loop_forms.LOOP_JUDGE = planner
        for k, t in interleaved_medians(samplers, 20, 4).items():
            row["variants"][k]["ms"] = t * 1e3
        rows.append(row)
        print(name, {k: (round(v["ms"], 4), v["kernels"], v["check"], v["trips"]) for k, v in row["variants"].items()},
              flush=True)
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "n": args.n, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
