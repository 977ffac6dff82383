"""Where the matrix-free tangent apply's time goes beside the residual's on 1.57 M tets (the
operator's host path, its copy of the vector, the derivative's call): each synchronized and back
to back, then the host's profile of the product. Run from the repository's root on a GPU:
    python3 benchmarks/results/matrices/2026-12-06_apply_host_probe.py [CUBES]"""
import cProfile
import os
import pstats
import sys
import time

import torch

sys.path.insert(0, "benchmarks")
import tangents as tg  # noqa: E402

import irfuse  # noqa: E402

cubes = int(sys.argv[1]) if len(sys.argv) > 1 else 64
t, conn, _ = tg.mesh(torch, cubes)
prog = irfuse.compile(os.path.join("examples", "mesh", "p1_residual.kas"), backend="cuda")
args = (t["X"], t["u"], conn, t["dN"], tg.LAMBDA, tg.MU)
op = irfuse.linear_operator(prog, *args, wrt="u")
v = torch.randn(t["u"].numel(), device="cuda")
held = torch.zeros_like(t["u"])
derivative = irfuse.jvp(prog, wrt="u", with_outputs=False)
sync = torch.cuda.synchronize


def synced(fn, n=200):
    return 1e6 * tg.timed(fn, n, sync)  # (tangents.py's: the median of synchronized calls)


def back_to_back(fn, n=200):
    fn(); sync()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    host = time.perf_counter() - t0
    sync()
    return 1e6 * (time.perf_counter() - t0) / n, 1e6 * host / n


rows = {
    "residual prog(*args)": lambda: prog(*args),
    "op.matvec(v)": lambda: op.matvec(v),
    "derivative(X, u, conn, dN, lam, mu, du=held)": lambda: derivative(*args, du=held),
    "held.copy_(v.reshape(held.shape))": lambda: held.copy_(v.reshape(held.shape)),
}
for rnd in range(2):
    for name, fn in rows.items():
        b, h = back_to_back(fn)
        print(f"round {rnd}: {name:48s} synchronized {synced(fn):7.1f} us; back to back {b:7.1f} us a call, host {h:6.1f} us")
pr = cProfile.Profile()
pr.enable()
for _ in range(500):
    op.matvec(v)
sync()
pr.disable()
pstats.Stats(pr).sort_stats("tottime").print_stats(25)
