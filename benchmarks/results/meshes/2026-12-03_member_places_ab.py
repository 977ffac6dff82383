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

import irfuse  # noqa: E402
from mesh_probe import median_ms, morton_box  # noqa: E402 -- this folder's shared mesh and timing

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
Xt, ut, prepared, dN = morton_box(int(sys.argv[1]))
print(f"{irfuse.__file__}: {prepared.shape[0]:,} tets")
for name in ("p1_residual", "neo_hookean_residual", "neo_hookean_energy"):
    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", f"{name}.kas"), backend="cuda")
    call = lambda: prog(Xt, ut, prepared, dN, np.float32(1.0), np.float32(0.5))  # noqa: E731
    out = call()
    outs = out if isinstance(out, (tuple, list)) else (out,)
    digest = hashlib.sha256(b"".join(o.detach().cpu().numpy().tobytes() for o in outs)).hexdigest()[:16]
    median, least = median_ms(call)
    print(f"{name:24s} {median:.4f} ms (min {least:.4f})  outputs {digest}")
