"""Probe (kept for its record, 2026-12-05_tangent_folded_sweeps_ab_h200.txt): the owner-computes
assembly of the P1 elasticity and Neo-Hookean tangents (`irfuse.tangent_matrix(..., out=M)`,
float32, PyTorch CUDA tensors) on the Morton box of `tangents.py`, with whichever irfuse is on
the path (a head's package by PYTHONPATH, or the tree): the medians of seven timings of 20 calls,
the rounds kernel's registers and spills (NVRTC's report), and the values' SHA-256.

    python PROBE.py CUBES      (from the repository's root, on a GPU)"""
import hashlib, os, sys, tempfile
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np
import torch
import irfuse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tangents import LAMBDA, MU, ROOT, mesh, rows_kernel_reports  # noqa: E402

cubes = int(sys.argv[1])
seen = rows_kernel_reports()  # ("rows": NVRTC's report of the rows kernel compiled last)
t, prepared, conn = mesh(torch, cubes)
print(f"irfuse from {os.path.dirname(irfuse.__file__)}; {len(conn):,} tets", flush=True)
for name in ("p1_residual", "neo_hookean_residual"):
    seen.clear()
    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", f"{name}.kas"), backend="cuda")
    args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
    M = irfuse.tangent_matrix(prog, *args, wrt="u")
    first = M.values().cpu().numpy().tobytes()
    times = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            irfuse.tangent_matrix(prog, *args, wrt="u", out=M)
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 20)
    again = M.values().cpu().numpy().tobytes()
    r = seen.get("rows")
    print(f"{name:22s} {np.median(times):.4f} ms a call ({min(times):.4f}-{max(times):.4f}); registers "
          f"{r.registers if r else '?'}, spills {r.spill_stores if r else '?'}; same bits again: {first == again}; "
          f"sha256 {hashlib.sha256(again).hexdigest()[:16]}", flush=True)
