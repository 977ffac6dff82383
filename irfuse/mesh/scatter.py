"""The adjoint of a gather, added in a fixed order: what a connectivity needs for a
deterministic scatter-add, and the scatter itself in NumPy (the reference's).

`inverse_connectivity` lists, for each node, the (element, position) slots that name it, in
ascending element then position order: a scatter that sums each node's slots in that order
gives the same bits on every run, whatever runs it (a kernel, a chunk of elements, NumPy).
It is computed once per connectivity (a sort of its entries)."""

from __future__ import annotations

import numpy as np

from irfuse.diagnostics import UsageError
from irfuse.mesh.order import check_connectivity


def inverse_connectivity(conn, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(starts, slots): node n's slots are slots[starts[n]:starts[n + 1]], each slot the
    flat position e * K + a of an entry conn[e, a] == n, ascending."""
    return _inverse(check_connectivity(conn, nodes), nodes)


def _inverse(conn: np.ndarray, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    flat = conn.ravel()
    slots = np.argsort(flat, kind="stable")  # (stable: a node's slots stay ascending)
    starts = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(flat, minlength=nodes), out=starts[1:])
    return starts, slots.astype(np.int64)


def scatter_add(values, conn, nodes: int, inverse: tuple[np.ndarray, np.ndarray] | None = None) -> np.ndarray:
    """The nodal sum of per-element values: `values` shaped (E, K, *shape), the result
    (nodes, *shape) with row n the sum of values[e, a] over every conn[e, a] == n, added in
    ascending (e, a) order (0 where no entry names n). `inverse`: the connectivity's
    `inverse_connectivity`, when it is at hand."""
    conn = check_connectivity(conn, nodes)
    values = np.asarray(values)
    if values.shape[:2] != conn.shape:
        raise UsageError(f"scatter_add: values of shape {values.shape} do not match the connectivity's "
                         f"{conn.shape} (elements, nodes per element)")
    starts, slots = inverse if inverse is not None else _inverse(conn, nodes)  # (conn checked above)
    flat = values.reshape(conn.size, *values.shape[2:])[slots]
    out = np.zeros((nodes, *values.shape[2:]), dtype=values.dtype)
    count = np.diff(starts)
    if not len(flat):
        return out
    # Each node's slots in order, one after another: the running sum restarts at each node.
    longest = int(count.max())
    for k in range(longest):
        has = count > k
        out[has] += flat[starts[:-1][has] + k]
    return out
