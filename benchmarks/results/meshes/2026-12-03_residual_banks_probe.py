"""Probe (kept for its record): the P1 residual (`examples/mesh/p1_residual.kas`, float32) called
three times on a Morton box of tetrahedra (PyTorch tensors, a `Connectivity` on the GPU), for
Nsight Compute to count the second call's element kernel (its shared-memory wavefronts, bank
conflicts, issue and pipes):

    ncu -k regex:p1_residual_k0 --launch-skip 1 --launch-count 1 --metrics ... \
        python PROBE.py CUBES       (from the repository's root, on a GPU)"""
import os
import sys
import tempfile

os.environ.setdefault("IRFUSE_CACHE_DIR", tempfile.mkdtemp())
import numpy as np  # noqa: E402
import torch  # noqa: E402

import irfuse  # noqa: E402
from irfuse.mesh import Connectivity, box_tetrahedra, renumber, reorder  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
X, conn = box_tetrahedra(int(sys.argv[1]))
conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
Xt = torch.from_numpy(X.astype(np.float32)).cuda()
ut = torch.from_numpy((1e-3 * np.random.default_rng(0).standard_normal(X.shape)).astype(np.float32)).cuda()
prepared = Connectivity(torch.from_numpy(conn).cuda(), len(X))
prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cuda")
for _ in range(3):
    r = prog(Xt, ut, prepared, torch.from_numpy(dN).cuda(), np.float32(1.0), np.float32(0.5))
torch.cuda.synchronize()
print(f"{len(conn):,} tets, r {tuple(r.shape)}")
