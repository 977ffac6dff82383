"""Probe (kept for its records, 2026-12-05_rows_{prologue,read_ahead}_ab_h100.txt): the P1 and
Neo-Hookean tangents' assembly (`irfuse.tangent_matrix(..., out=M)`, float32, PyTorch CUDA
tensors) on the Morton box of `tangents.py` with whichever irfuse the path finds first (a tree
on PYTHONPATH, or the installed one): medians of seven timings of 20 calls back to back, the
rows kernel's registers (NVRTC's report) and the values' SHA-256. Run once a tree, alternating,
by `2026-12-05_rows_patch_ab.sh`.

    python PROBE.py CUBES LABEL      (from the repository's root, on a GPU)"""
import hashlib, os, sys, tempfile
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np
import torch
import irfuse

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tangents import LAMBDA, MU, ROOT, back_to_back_ms, mesh, rows_kernel_reports  # noqa: E402

seen = rows_kernel_reports()  # ("rows": NVRTC's report of the rows kernel compiled last)
t, prepared, conn = mesh(torch, int(sys.argv[1]))
for name in ("p1_residual", "neo_hookean_residual"):
    seen.clear()
    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", f"{name}.kas"), backend="cuda")
    args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
    M = irfuse.tangent_matrix(prog, *args, wrt="u")
    times = back_to_back_ms(lambda M=M, prog=prog, args=args: irfuse.tangent_matrix(prog, *args, wrt="u", out=M))
    sha = hashlib.sha256(M.values().cpu().numpy().tobytes()).hexdigest()[:16]
    r = seen.get("rows")
    print(f"{sys.argv[2]:6s} {name:22s} {np.median(times):.4f} ms ({min(times):.4f}-{max(times):.4f}); "
          f"registers {r.registers if r else '?'}; sha256 {sha}; {os.path.dirname(irfuse.__file__)}", flush=True)
    del M
