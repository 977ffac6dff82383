"""A/B probe (kept for its record): the mesh examples whose element kernel sums its rows in
groups (`cuda_emit.emit_scatter_rows`), called back to back with the same arrays on a Morton box
of tetrahedra (PyTorch tensors, a `Connectivity` on the GPU, float32): the P1 residual, the
Neo-Hookean residual written by hand, the Neo-Hookean energy with its derived gradient. Prints
each one's median time a call (CUDA events around 20 calls, 7 times) and the SHA-256 of its
outputs' bytes, so that two packages (one by `PYTHONPATH`) can be compared call for call and bit
for bit:

    python PROBE.py CUBES        (from the repository's root, on a GPU)"""
import hashlib
import os
import sys
import tempfile

os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import irfuse  # noqa: E402
from irfuse.mesh import Connectivity, box_tetrahedra, renumber, reorder  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
cubes = int(sys.argv[1])
X, conn = box_tetrahedra(cubes)
conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
dN = torch.tensor([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=torch.float32).cuda()
Xt = torch.from_numpy(X.astype(np.float32)).cuda()
ut = torch.from_numpy((0.05 / cubes * np.random.default_rng(0).standard_normal(X.shape)).astype(np.float32)).cuda()
prepared = Connectivity(torch.from_numpy(conn).cuda(), len(X))
print(f"{irfuse.__file__}: {len(conn):,} tets")
for name in ("p1_residual", "neo_hookean_residual", "neo_hookean_energy"):
    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", f"{name}.kas"), backend="cuda")
    call = lambda: prog(Xt, ut, prepared, dN, np.float32(1.0), np.float32(0.5))  # noqa: E731
    out = call()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    digest = hashlib.sha256(b"".join(o.detach().cpu().numpy().tobytes() for o in outs)).hexdigest()[:16]
    for _ in range(5):
        call()
    times = []
    for _ in range(7):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(20):
            call()
        end.record()
        torch.cuda.synchronize()
        times.append(start.elapsed_time(end) / 20)
    print(f"{name:24s} {np.median(times):.4f} ms (min {min(times):.4f})  outputs {digest}")
