"""A sparse matrix over a mesh's nodes from its elements' blocks, added in a fixed order.

`assemble(blocks, conn, nodes)`: `blocks` shaped (E, K, D, K, D) (element e's block: row
(a, i), column (b, j)) added at the node pair (conn[e, a], conn[e, b]) of a matrix of
`nodes` x D rows and columns, numbered node by node (row n * D + i). The pattern is every
node pair that shares an element; each entry is the sum of its contributions in ascending
(element, a, b) order (a stable sort of the pairs, then a sum of each run in order), so the
bits are the same on every run. Returned as a `scipy.sparse.csr_matrix` (int32 indices while
they fit). Dirichlet components (`fixed`: a boolean array shaped (nodes, D)) have their rows
and columns zeroed and 1 on the diagonal.
"""

from __future__ import annotations

import numpy as np

from irfuse.diagnostics import UsageError


def assemble(blocks: np.ndarray, conn: np.ndarray, nodes: int, fixed: np.ndarray | None = None):
    """The CSR matrix of the elements' blocks (see the module)."""
    try:
        import scipy.sparse as sparse
    except ImportError:
        raise UsageError("a sparse matrix is returned as SciPy's: install scipy") from None
    blocks = np.asarray(blocks)
    e, k = conn.shape
    if blocks.ndim != 5 or blocks.shape[:2] != (e, k) or blocks.shape[3] != k or blocks.shape[2] != blocks.shape[4]:
        raise UsageError(f"assemble: blocks shaped {blocks.shape}; a connectivity of {e} elements of {k} nodes "
                         f"takes (E, K, D, K, D) = ({e}, {k}, D, {k}, D)")
    d = blocks.shape[2]
    rows = np.repeat(conn.astype(np.int64), k, axis=1).reshape(-1)  # (e, a, b): node of a
    cols = np.tile(conn.astype(np.int64), (1, k)).reshape(-1)  # node of b
    values = blocks.transpose(0, 1, 3, 2, 4).reshape(e * k * k, d, d)
    key = rows * nodes + cols
    order = np.argsort(key, kind="stable")  # (within a node pair: ascending (e, a, b))
    key = key[order]
    starts = np.flatnonzero(np.r_[True, key[1:] != key[:-1]])
    summed = np.add.reduceat(values[order], starts, axis=0)
    block_rows, block_cols = np.divmod(key[starts], nodes)
    indptr = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(block_rows, minlength=nodes), out=indptr[1:])
    index = np.int32 if nodes * d < 2**31 and len(summed) * d * d < 2**31 else np.int64
    matrix = sparse.bsr_matrix((summed, block_cols.astype(index), indptr.astype(index)),
                               shape=(nodes * d, nodes * d)).tocsr()
    if fixed is not None:
        mask = np.asarray(fixed, bool).reshape(-1)
        if mask.size != nodes * d:
            raise UsageError(f"assemble: fixed= has {mask.size} entries; the matrix has {nodes * d} rows")
        coo_rows = np.repeat(np.arange(nodes * d), np.diff(matrix.indptr))
        matrix.data[mask[coo_rows] | mask[matrix.indices]] = 0.0
        matrix.setdiag(np.where(mask, 1.0, matrix.diagonal()))
    return matrix
