"""What an assembly computing each element's matrix once would move beyond the byte floor: blocks of
E consecutive elements (Morton-ordered and renumbered boxes of tetrahedra, as benchmarks/tangents.py
makes them) each summing its elements' 12 x 12 blocks in a fixed order; a node all of whose
elements lie in one block gets its rows summed there and written once, any other node gets a
partial 3 x 3 block per column node from each block holding some of its elements, written to
global memory and read back by a pass summing them in block order. Counted: the partials'
entries against the matrix's nonzeros, and their bytes (float32, written and read once each)
against the byte floor of `tangents.py` at 12.6 M tets (1.397 GB: the values written once and
what the element kernel reads). No GPU.

    python3 benchmarks/results/matrices/2026-12-05_element_blocks_probe.py CUBES E [E ...]
"""
import sys

import numpy as np

from irfuse.mesh import box_tetrahedra, renumber, reorder

FLOOR_BYTES_128 = 1.397e9  # (0.477 ms at 2,929 GB/s: benchmarks/results/matrices/2026-12-05_tangents_h100.json)

cubes = int(sys.argv[1])
X, conn = box_tetrahedra(cubes)
conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
conn = np.asarray(conn, dtype=np.int64)
n, tets = len(X), len(conn)
# the matrix's nonzero 3 x 3 blocks: distinct (row node, column node) pairs of a common element
pairs = np.unique((conn[:, :, None] * n + conn[:, None, :]).reshape(-1))
nnz = 9 * len(pairs)
for E in (int(e) for e in sys.argv[2:]):
    block = np.arange(tets) // E
    # (block, row node, column node) triples: the 3 x 3 blocks each element block adds to
    triples = np.unique(((block[:, None, None] * n + conn[:, :, None]) * n + conn[:, None, :]).reshape(-1))
    row_of = (triples // n) % n
    blocks_of_node = np.bincount(np.unique((np.arange(tets) // E)[:, None] * n + conn).reshape(-1) % n, minlength=n)
    shared = blocks_of_node[row_of] > 1  # (partials of nodes whose elements span blocks)
    partial = 9 * int(shared.sum())
    extra = 2 * 4 * partial * (12_582_912 / tets)  # (written and read once, scaled to 12.6 M tets)
    print(f"{cubes} cubes ({tets:,} tets, {n:,} nodes), E = {E}: nodes in one block alone "
          f"{(blocks_of_node == 1).mean():.3f}; partial entries {partial:,} = {partial / nnz:.2f} of the "
          f"{nnz:,} nonzeros; at 12.6 M tets {extra / 1e9:.2f} GB more, {extra / FLOOR_BYTES_128:.2f}x the byte floor")
