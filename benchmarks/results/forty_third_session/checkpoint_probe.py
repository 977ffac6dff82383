"""Probe (forty-third session): taped loop derivatives with their histories kept whole, split at
the fixed budget (64 words an element) and split as deep as the splitting goes (segments of
2-3 iterations), timed in one run on the GPU against the planner's predicted time of each.

    python checkpoint_probe.py --json out.json time_loop16 time_loop scalar_loop40 ...

The split is chosen by patching `reverse_mode.TAPE_WORDS` (the budget at the time)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from loop_derivatives import inputs, programs  # noqa: E402
from peers import interleaved_medians, torch_sampler  # noqa: E402

VARIANTS = {"whole": 10**9, "budget64": 64, "deepest": 1}


def compiled_sampler(module, name: str, n: int):
    """`module` (a derivative) compiled for the GPU and called on random inputs: a timing
    sampler of its calls and what it is (its loops' trips, kernels, the reference check)."""
    import torch

    import irfuse
    from irfuse.dialects.kas import LoopOp, program_of

    trips = sorted(op.trip_count.data for op in program_of(module).walk() if isinstance(op, LoopOp))
    prog = irfuse.compile(module, backend="cuda", n=n, filename=f"{name}.kas")
    host = inputs(prog, n, np.random.default_rng(1))
    tensors = [torch.from_numpy(host[k]).cuda() for k in prog.inputs]
    first = prog(*tensors)
    outs = [torch.empty_like(first[k]) for k in prog.outputs]
    sample = {k: v if v.ndim == 0 else v[:20_000] for k, v in host.items()}
    ok = prog.check(**sample).ok

    def call(*a):
        prog(*a, out=outs)
    return (torch_sampler(call, tensors),
            {"trips": trips, "kernels": len(prog.kernels), "check": "ok" if ok else "MISMATCH"})


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("programs", nargs="+")
    ap.add_argument("--n", type=int, default=1_048_576)
    ap.add_argument("--variants", nargs="+", default=list(VARIANTS))
    ap.add_argument("--json", default="checkpoint_probe.json")
    args = ap.parse_args()
    import torch

    import irfuse
    import irfuse.transforms.reverse_mode as rm
    from irfuse.dialects.context import module_text

    if not hasattr(rm, "TAPE_WORDS"):
        raise SystemExit("checkpoint_probe.py patches reverse_mode.TAPE_WORDS: run it on the tree before the "
                         "forty-third session's change (e1610b2); planner_probe.py measures the tree after it")
    rows = []
    for name in args.programs:
        source, mode, wrt = programs()[name]
        samplers, row, texts = {}, {"program": name, "variants": {}}, {}
        for label in args.variants:
            rm.TAPE_WORDS = VARIANTS[label]
            t0 = time.perf_counter()
            module = (irfuse.grad(source, of="E", wrt=wrt, loops="tape") if mode == "grad"
                      else irfuse.vjp(source, wrt=wrt, loops="tape"))
            text = module_text(module)
            if text in texts.values():
                row["variants"][label] = {"same_as": next(k for k, v in texts.items() if v == text)}
                continue
            texts[label] = text
            samplers[label], info = compiled_sampler(module, f"{name}_{label}", args.n)
            row["variants"][label] = {**info, "compile_s": time.perf_counter() - t0}
        times = interleaved_medians(samplers, 20, 4)
        for k, t in times.items():
            row["variants"][k]["ms"] = t * 1e3
        rows.append(row)
        print(name, {k: (round(v["ms"], 4), v["kernels"], v["check"]) if "ms" in v else v
                     for k, v in row["variants"].items()}, flush=True)
        with open(args.json, "w") as f:
            json.dump({"gpu": torch.cuda.get_device_name(), "n": args.n, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
