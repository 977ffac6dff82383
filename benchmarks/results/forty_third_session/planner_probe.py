"""Probe (forty-third session, after the change): a taped derivative as the planner's price
splits it (`loops="tape"`) against its histories kept whole (a judge preferring the fewest
loops), timed in one run on the GPU.

    python planner_probe.py time_loop16 [--json out.json]"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from loop_derivatives import inputs, programs  # noqa: E402
from peers import interleaved_medians, torch_sampler  # noqa: E402


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("programs", nargs="+")
    ap.add_argument("--n", type=int, default=1_048_576)
    ap.add_argument("--json", default="planner_probe.json")
    args = ap.parse_args()
    import torch

    import irfuse
    import irfuse.planner.loop_forms as loop_forms
    from irfuse.dialects.kas import LoopOp, program_of
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
            trips = sorted(op.trip_count.data for op in program_of(module).walk() if isinstance(op, LoopOp))
            prog = irfuse.compile(module, backend="cuda", n=args.n, filename=f"{name}_{label}.kas")
            host = inputs(prog, args.n, np.random.default_rng(1))
            tensors = [torch.from_numpy(host[k]).cuda() for k in prog.inputs]
            first = prog(*tensors)
            outs = [torch.empty_like(first[k]) for k in prog.outputs]
            sample = {k: v if v.ndim == 0 else v[:20_000] for k, v in host.items()}
            ok = prog.check(**sample).ok

            def call(*a, prog=prog, outs=outs):
                prog(*a, out=outs)
            samplers[label] = torch_sampler(call, tensors)
            row["variants"][label] = {"trips": trips, "kernels": len(prog.kernels), "check": "ok" if ok else "MISMATCH"}
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
