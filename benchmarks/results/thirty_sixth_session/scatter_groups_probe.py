"""Probe (not a benchmark): on the 128^3-cube Morton mesh, how many (group of elements, node)
partial sums a scatter would write if each group of g consecutive elements first summed its
elements' rows at the nodes they share, against the 4 rows an element writes today."""
import time

import numpy as np

import irfuse.mesh as mesh
t0 = time.time()
X0, conn0 = mesh.box_tetrahedra(128, numbering="random", seed=0)
order = mesh.reorder(conn0, X0, method="morton")
conn, X = mesh.renumber(conn0, *order, X0)
n, nodes = conn.shape[0], X.shape[0]
print(n, nodes, f"{time.time()-t0:.1f}s")
for g in (64, 128, 256, 512):
    groups = np.arange(n) // g
    pairs = np.unique(np.stack([np.repeat(groups, 4), conn.reshape(-1)], 1), axis=0)
    per_node = np.bincount(pairs[:, 1], minlength=nodes)
    print(f"group {g}: (group, node) partials {len(pairs):,} = {len(pairs)/n:.2f} a element (rows today 4.00); "
          f"partials a node mean {per_node.mean():.2f} max {per_node.max()} (slots a node {4*n/nodes:.1f})")
