"""A/B probe (kept for its record): a host connectivity's scatter order made by the compiled
helper and by the array versions (PyTorch's CPU ops, `IRFUSE_MESH_NATIVE=0`), best of two, on
12.6 M tets in both numberings; two packages compared by `PYTHONPATH`:

    python PROBE.py        (from the repository's root)"""
import os
import time
import torch  # noqa: F401 (the arrays path uses PyTorch's CPU ops where imported, as simulations.py does)
import irfuse
from irfuse.mesh import Connectivity, box_tetrahedra, native
print(irfuse.__file__)
for numbering in ("structured", "random"):
    X, conn = box_tetrahedra(128, numbering=numbering)
    for way, switch in (("compiled", "1"), ("arrays", "0")):
        os.environ[native.SWITCH] = switch
        s = []
        for _ in range(2):
            t = time.perf_counter(); Connectivity(conn, len(X)); s.append(time.perf_counter() - t)
        print(numbering, way, f"{min(s):.3f} s")
