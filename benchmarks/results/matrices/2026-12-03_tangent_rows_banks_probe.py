"""Probe (kept for its record): the P1 tangent's assembly (`irfuse.tangent_matrix`, float32,
`out=`) called three times on the Morton box of `tangents.py`, for Nsight Compute to count the
second call's owner-computes kernel (its shared-memory wavefronts and bank conflicts):

    ncu -k regex:irf_tangent_rows --launch-skip 1 --launch-count 1 --metrics ... \
        python PROBE.py CUBES       (from the repository's root, on a GPU)"""
import os
import sys
import tempfile

os.environ.setdefault("IRFUSE_CACHE_DIR", tempfile.mkdtemp())
import torch  # noqa: E402

import irfuse  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tangents import LAMBDA, MU, ROOT, mesh  # noqa: E402

t, prepared, conn = mesh(torch, int(sys.argv[1]))
prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cuda")
args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
M = irfuse.tangent_matrix(prog, *args, wrt="u")
for _ in range(2):
    irfuse.tangent_matrix(prog, *args, wrt="u", out=M)
torch.cuda.synchronize()
print(irfuse.__file__, f"{len(conn):,} tets, {M.values().numel():,} values")
