"""A/B probe (kept for its record): the explicit step (`examples/mesh/explicit_step.kas`: a node
pass, the elements, then the node kernel that adds the scatter's partials itself) on a Morton
box of tetrahedra, called back to back with the same arrays (PyTorch tensors, a `Connectivity`
on the GPU, float32); prints its median time a call (CUDA events around 20 calls, 7 times) and
the SHA-256 of its outputs' bytes, so two packages (one by `PYTHONPATH`) compare call for call
and bit for bit:

    python PROBE.py CUBES        (from the repository's root, on a GPU)"""
import hashlib
import os
import sys
import tempfile

os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np  # noqa: E402
import torch  # noqa: E402

import irfuse  # noqa: E402
from mesh_probe import EXAMPLES, median_ms, morton_box  # noqa: E402 -- this folder's shared mesh and timing

Xt, ut, prepared, dN = morton_box(int(sys.argv[1]))
v = torch.full_like(ut, 0.01)
m = torch.ones(Xt.shape[0], dtype=torch.float32, device="cuda")
prog = irfuse.compile(os.path.join(EXAMPLES, "explicit_step.kas"), backend="cuda")
call = lambda: prog(Xt, ut, v, m, prepared, dN, np.float32(1.0), np.float32(0.5), np.float32(1e-3))  # noqa: E731
out = call()
outs = [out[k] for k in prog.outputs] if isinstance(out, dict) else (tuple(out) if isinstance(out, (tuple, list)) else (out,))
digest = hashlib.sha256(b"".join(o.detach().cpu().numpy().tobytes() for o in outs)).hexdigest()[:16]
median, least = median_ms(call)
print(f"{irfuse.__file__}: explicit step {median:.4f} ms (min {least:.4f})  outputs {digest}")
