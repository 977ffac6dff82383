"""Probe (kept for its record): a connectivity's scatter order made on the GPU
(`irfuse.mesh.Connectivity` of a CUDA tensor: `mesh.on_gpu.inverse_on_gpu`), the median of
seven makings after two, on a Morton box of tetrahedra; so that two packages (one by
`PYTHONPATH`) can be compared:

    python PROBE.py CUBES        (from the repository's root, on a GPU)"""
import sys
import time

import numpy as np
import torch

import irfuse
from irfuse.mesh import Connectivity, box_tetrahedra, renumber, reorder

cubes = int(sys.argv[1])
X, conn = box_tetrahedra(cubes)
conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
on_gpu = torch.from_numpy(conn).cuda()
times = []
for i in range(9):
    torch.cuda.synchronize()
    start = time.perf_counter()
    Connectivity(on_gpu, len(X))
    torch.cuda.synchronize()
    if i >= 2:
        times.append(time.perf_counter() - start)
print(f"{irfuse.__file__}: {len(conn):,} tets, the order made on the GPU in {1e3 * np.median(times):.1f} ms "
      f"(min {1e3 * min(times):.1f})")
