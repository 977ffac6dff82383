"""A/B probe (kept for its record): the mesh examples whose element kernel sums its rows in
groups (`cuda_emit.emit_scatter_rows`), called back to back with the same arrays on a Morton box
of tetrahedra (PyTorch tensors, a `Connectivity` on the GPU, float32): the P1 residual, the
Neo-Hookean residual written by hand, the Neo-Hookean energy with its derived gradient. Prints
each one's median time a call (CUDA events around 20 calls, 7 times) and the SHA-256 of its
outputs' bytes, so that two packages (one by `PYTHONPATH`) can be compared call for call and bit
for bit:

    python PROBE.py CUBES        (from the repository's root, on a GPU)"""
import os
import sys
import tempfile

os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import irfuse  # noqa: E402
from mesh_probe import mesh_examples, morton_box  # noqa: E402 -- this folder's shared mesh and timing

box = morton_box(int(sys.argv[1]))
print(f"{irfuse.__file__}: {box[2].shape[0]:,} tets")
for name, median, least, digest in mesh_examples(box):
    print(f"{name:24s} {median:.4f} ms (min {least:.4f})  outputs {digest}")
