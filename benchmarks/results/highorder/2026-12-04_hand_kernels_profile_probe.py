"""One call of each hand-written BK kernel and of irfuse's BK program with its tables fixed,
between cudaProfilerStart and Stop, for Nsight Compute's `--profile-from-start off`:

    ncu --profile-from-start off --csv --page raw --section ... python3 \
        benchmarks/results/highorder/2026-12-04_hand_kernels_profile_probe.py ORDER KIND [CELLS]

(from the project root, on the GPU; KIND bk1 or bk3; float64, CELLS^3 elements, 32 by default)."""

import os
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import bakeoff  # noqa: E402

p, kind = int(sys.argv[1]), sys.argv[2]
cells = int(sys.argv[3]) if len(sys.argv) > 3 else 32
q = p + 2
X, conn, B, D, wdet, G = bakeoff.problem(cells, p, q)
n, elements = p + 1, len(conn)
dev = "cuda"
u = torch.from_numpy(np.random.default_rng(0).standard_normal(len(X))).to(dev)
tc = torch.from_numpy(conn).to(dev)
ue = u[tc.long()].reshape(elements, n, n, n).contiguous()
tB, tD = torch.from_numpy(B).to(dev), torch.from_numpy(D).to(dev)
if kind == "bk1":
    qd = torch.from_numpy(np.ascontiguousarray(wdet)).to(dev)
else:
    qd = tuple(torch.from_numpy(np.ascontiguousarray(G[..., i, j])).to(dev) for i, j in bakeoff.SYMMETRIC)
hand = bakeoff.hand_written(torch, kind, p, q, ue, tc, tB, tD, qd, len(X))


class Args:
    device, dtype, plans, registers = "cuda", "f64", 1, None


prog = bakeoff.irfuse_programs(kind, p, q, Args, {"B": B} if kind == "bk1" else {"B": B, "D": D})["irfuse"]
args = (ue, qd) if kind == "bk1" else (ue, *qd)
out = prog(*args)[prog.outputs[0]]
for fn in hand.values():
    fn()
torch.cuda.synchronize()
torch.cuda.profiler.start()
prog(*args, out=out)
for fn in hand.values():
    fn()
torch.cuda.synchronize()
torch.cuda.profiler.stop()
print("profiled:", ["irfuse", *hand])
