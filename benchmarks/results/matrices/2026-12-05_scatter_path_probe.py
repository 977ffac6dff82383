"""Probe (kept for its record, 2026-12-05_staging_ab_h200.txt): the tangent's scatter path
(`IRFUSE_TANGENT_ROWS=0`: per-slot element blocks scattered into the matrix) of the P1
elasticity tangent, `irfuse.tangent_matrix(..., out=M)`, float32, PyTorch CUDA tensors, on the
Morton box of `tangents.py`, with whichever irfuse is on the path (a patched package by
PYTHONPATH, or the tree): the median of seven timings of 20 calls and the values' SHA-256.

    python PROBE.py CUBES      (from the repository's root, on a GPU)"""
import hashlib, os, sys, tempfile
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
os.environ["IRFUSE_TANGENT_ROWS"] = "0"
import numpy as np
import torch
import irfuse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tangents import LAMBDA, MU, ROOT, back_to_back_ms, mesh  # noqa: E402

cubes = int(sys.argv[1])
t, prepared, conn = mesh(torch, cubes)
print(f"irfuse from {os.path.dirname(irfuse.__file__)}; {len(conn):,} tets", flush=True)
prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cuda")
args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
M = irfuse.tangent_matrix(prog, *args, wrt="u")
first = M.values().cpu().numpy().tobytes()
times = back_to_back_ms(lambda: irfuse.tangent_matrix(prog, *args, wrt="u", out=M))
again = M.values().cpu().numpy().tobytes()
print(f"p1 scatter path {np.median(times):.4f} ms a call ({min(times):.4f}-{max(times):.4f}); "
      f"same bits again: {first == again}; sha256 {hashlib.sha256(again).hexdigest()[:16]}", flush=True)
