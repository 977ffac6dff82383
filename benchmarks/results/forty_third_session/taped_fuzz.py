"""Probe (forty-third session): random programs whose loops carry values (the derivative tests'
`carried` generator), each declared `derivative vjp ... loops tape` and checked by the
differential harness (its 2 best plans on the CPU renderings against the reference, compiled
for sm_90 by NVRTC): the taped forms the planner's price picks, through the whole pipeline.

    python taped_fuzz.py FIRST_SEED END_SEED"""

import sys
import tempfile
import time

from irfuse.dialects.kas import LoopOp, program_of
from irfuse.frontend.irgen import compile_source
from irfuse.testing.derivatives import differentiable_inputs, random_differentiable_programs
from irfuse.testing.differential import Budget, check_source


def main() -> None:
    bad, ran, t0 = 0, 0, time.time()
    for seed in range(int(sys.argv[1]), int(sys.argv[2])):
        src = random_differentiable_programs("carried", seed)
        prog = program_of(compile_source(src, "r.kas").module)
        if not any(isinstance(o, LoopOp) for o in prog.walk()):
            continue
        full = src + f"\nderivative vjp wrt {', '.join(differentiable_inputs(prog))} loops tape;\n"
        t = time.time()
        budget = Budget(top=2, n=37, seed=seed, nvrtc=True, dtype="f64" if seed % 2 else "f32")
        out = check_source(full, budget, tempfile.mkdtemp())
        ran += 1
        print(seed, out.ok, out.plans, out.failure, f"{time.time() - t:.0f}s", flush=True)
        if not out.ok:
            bad += 1
            print(out.detail[-2000:])
    print("ran", ran, "bad", bad, f"{time.time() - t0:.0f}s")


if __name__ == "__main__":
    main()
