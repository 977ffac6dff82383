"""Probe (not a benchmark): the batch examples that call inv (hex8, neo_hookean, p1_elastic),
float32, n = 4,194,304, default plans, each whole run timed (median of 40) with its outputs'
checksum. Run once with each version of `irfuse/library/families.py` to compare."""
import os

import numpy as np

import irfuse
from irfuse.runtime.executor import Executor
from irfuse.verification.reference import random_inputs

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
n = 4_194_304
for name in ("hex8", "neo_hookean", "p1_elastic"):
    prog = irfuse.compile(os.path.join(ROOT, "examples", f"{name}.kas"), backend="cuda")
    art = prog._with_binary()
    inputs = random_inputs(prog.compiled.reference_program, n, 1, np.float32)
    run = Executor(art, prog.opened_device()).prepare(inputs, n)
    run.replay()
    ts = sorted(run.time_once() for _ in range(40))
    sums = {k: float(np.asarray(v, np.float64).sum()) for k, v in run.outputs().items()}
    print(f"{name:12s} {1e3 * ts[len(ts) // 2]:.4f} ms  kernels {len(art.kernels)}  sums {sums}", flush=True)
