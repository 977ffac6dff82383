"""Probe (kept for its record, 2026-12-05_rows_gather_lines_2cores.txt): what the rounds kernel's
gathers ask of the L1, counted on the host. The P1 tangent's rows kernel (`rows_emit._rounds_kernel`:
a block of 3 x 32 threads takes 32 consecutive nodes, thread (x, y) runs slot 3 r + x of node y in
round r) gathers each slot's element's four nodes' coordinates, three 4-byte loads a node. For
each warp's load in each round, on the Morton-ordered box of `benchmarks/tangents.py`: the
distinct 128-byte lines and 32-byte sectors its lanes touch; and the lines a 16-byte load a node
would touch were a node's coordinates padded to four words. No GPU.

    python3 benchmarks/results/matrices/2026-12-05_rows_gather_lines_probe.py CUBES ...
"""
import sys

import numpy as np

from irfuse.mesh import box_tetrahedra, renumber, reorder

NODES, D, K = 32, 3, 4


def counted(cubes: int) -> tuple[int, int, int, int]:
    """(loads, lines, sectors, lines of a padded 16-byte load a node) over every warp's round."""
    X, conn = box_tetrahedra(cubes)
    conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
    conn = np.asarray(conn)
    n = len(X)
    order = np.argsort(conn.reshape(-1), kind="stable")  # (each node's slots, elements ascending)
    counts = np.bincount(conn.reshape(-1), minlength=n)
    starts = np.concatenate([[0], np.cumsum(counts)])
    loads = lines = sectors = padded = 0
    for first in range(0, n, NODES):
        ys = np.arange(first, min(first + NODES, n))
        for r0 in range(0, counts[ys].max(), D):
            for w in range(D):  # (the block's warps: thread tid = 3 y + x)
                tid = np.arange(32 * w, 32 * w + 32)
                y, x = tid // D, tid % D
                y, x = y[y < len(ys)], x[y < len(ys)]
                s = starts[ys[y]] + r0 + x
                live = s < starts[ys[y] + 1]
                if not live.any():
                    continue
                element = order[s[live]] // K
                for b in range(K):
                    node = conn[element, b].astype(np.int64)
                    for j in range(D):
                        at = (node * D + j) * 4
                        loads += 1
                        lines += len(np.unique(at // 128))
                        sectors += len(np.unique(at // 32))
                    padded += len(np.unique(node * 16 // 128))
    return loads, lines, sectors, padded


if __name__ == "__main__":
    for cubes in map(int, sys.argv[1:]):
        loads, lines, sectors, padded = counted(cubes)
        rounds = loads / (K * D)
        print(f"{cubes} cubes ({6 * cubes ** 3:,} tets): a warp's round {K * D} loads, {lines / rounds:.1f} lines, "
              f"{sectors / rounds:.1f} sectors ({lines / loads:.2f} lines a load); a node padded to 16 bytes: "
              f"{K} loads, {padded / rounds:.1f} lines", flush=True)
