"""How many of a rows-kernel block's slots share an element: for the tangent's rows kernel (a block
of 32 consecutive nodes, each slot a node and one of its elements), the slots a block runs and the
distinct elements among them, on Morton-ordered and renumbered box meshes of tetrahedra (as
benchmarks/tangents.py makes them). Each element's geometry computed once a block instead of once
a slot would run it (distinct elements / slots) as often. No GPU.

    python3 benchmarks/results/matrices/2026-12-05_block_elements_probe.py [CUBES ...]
"""
import sys

import numpy as np

from irfuse.mesh import box_tetrahedra, renumber, reorder

NODES_A_BLOCK = 32

for cubes in [int(c) for c in sys.argv[1:]] or [32, 64]:
    X, conn = box_tetrahedra(cubes)
    conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
    conn = np.asarray(conn)
    blocks = -(-len(X) // NODES_A_BLOCK)
    block = conn.reshape(-1) // NODES_A_BLOCK
    element = np.repeat(np.arange(len(conn), dtype=np.int64), conn.shape[1])
    slots = np.bincount(block, minlength=blocks)
    distinct = np.bincount(np.unique(block.astype(np.int64) * len(conn) + element) // len(conn), minlength=blocks)
    print(f"{cubes} cubes: {len(conn):,} tets, {len(X):,} nodes, {blocks:,} blocks; slots {slots.sum():,}, "
          f"distinct (block, element) {distinct.sum():,}: {distinct.sum() / slots.sum():.3f} of the slots; "
          f"a block's median {int(np.median(slots))} slots, {int(np.median(distinct))} elements")
