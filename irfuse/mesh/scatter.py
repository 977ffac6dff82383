"""The adjoint of a gather, added in a fixed order: what a connectivity needs for a
deterministic scatter-add, and the scatter itself in NumPy (the reference's).

The order, wherever the scatter runs (a kernel, a chunk of elements, NumPy): the elements
are cut into groups of consecutive elements (`irfuse.artifact.scatter_groups`: 64 of four
nodes, 32 of eight, at most 256 slots a group); within a group, the rows of the slots naming
one node are added in ascending (element, position) order into a partial; each node adds
its partials in ascending group order onto 0. So the element kernel, which sums its block's
groups on chip, writes about 0.6 partials an element on a Morton-ordered tetrahedral mesh
instead of four rows, and each node adds about 3.5 partials instead of 24 rows; the bits are
the same on every run and every backend, and a run in chunks of whole groups gives the bits
of one call.

Measured on an H200 (the mesh energy's gradient on 12.6 M tetrahedra, `benchmarks/NOTES.md`):
adding every row in element order took 0.77 ms; groups of 64, 128 and 256 slots 0.69, 0.64
and 0.63 ms (larger groups write fewer partials; a group's slots are numbered in one byte).

`inverse_connectivity` prepares a connectivity for it once (a sort of its entries): each
group's partials and the slots that make each (the element kernel's), and each node's
partials in ascending order (the scatter kernel's)."""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from irfuse.artifact.scatter_groups import GROUP_SLOTS, group_elements
from irfuse.diagnostics import UsageError
from irfuse.mesh.order import check_connectivity


class ScatterInverse(NamedTuple):
    """A connectivity's scatter order (see the module and `irfuse.artifact.scatter_groups`):
    node n's partials are partials[starts[n]:starts[n + 1]], ascending; group g's partials
    are bases[g] to bases[g + 1] - 1, partial p's slots members[g * S + firsts[p]:...] (S the
    slots of a group, group-local numbers) up to the next partial's first."""

    starts: np.ndarray  # int64, nodes + 1
    partials: np.ndarray  # int32, one per partial
    members: np.ndarray  # uint8, one per slot
    firsts: np.ndarray  # uint8, one per partial
    bases: np.ndarray  # int32, groups + 1


def inverse_connectivity(conn, nodes: int) -> ScatterInverse:
    """The scatter order of a connectivity `conn` (E, K) of a mesh of `nodes` nodes."""
    return _inverse(check_connectivity(conn, nodes), nodes)


def _group_of(k: int) -> int:
    g = group_elements(k)
    if not g:
        raise UsageError(f"a scatter adds rows of elements of at most {GROUP_SLOTS} nodes, not {k}")
    return g


def _partial_of_slots(conn: np.ndarray, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """(partial of each slot, node of each partial): partials numbered group by group, in the
    order of their first slots."""
    flat = conn.ravel().astype(np.int64)
    group = np.arange(flat.size, dtype=np.int64) // (_group_of(conn.shape[1]) * conn.shape[1])
    key = group * max(nodes, 1) + flat
    order = np.argsort(key, kind="stable")  # (stable: a run's slots ascend)
    new_run = np.ones(flat.size, dtype=bool)
    new_run[1:] = key[order][1:] != key[order][:-1]
    heads = order[new_run]  # each (group, node)'s first slot
    head = np.zeros(flat.size, dtype=bool)
    head[heads] = True
    number = np.cumsum(head) - 1  # at a head slot: its partial
    partial = np.empty(flat.size, dtype=np.int64)
    partial[order] = np.repeat(number[heads], np.diff(np.append(np.flatnonzero(new_run), flat.size)))
    return partial, flat[np.flatnonzero(head)]


def _inverse(conn: np.ndarray, nodes: int) -> ScatterInverse:
    per_group = _group_of(conn.shape[1]) * conn.shape[1]
    partial, node_of = _partial_of_slots(conn, nodes)
    slots = np.argsort(partial, kind="stable")  # partial by partial, each partial's slots ascending
    groups = -(-conn.size // per_group)
    bases = np.zeros(groups + 1, dtype=np.int64)
    if conn.size:
        group_of = np.arange(0, conn.size, per_group) // per_group
        bases[:-1] = partial[group_of * per_group]  # a group's first slot starts its first partial
        bases[-1] = len(node_of)
    firsts = np.zeros(len(node_of), dtype=np.int64)
    where = np.flatnonzero(np.diff(np.append(-1, partial[slots])))  # each partial's first member
    firsts[partial[slots[where]]] = where % per_group
    partials = np.argsort(node_of, kind="stable")  # each node's partials, ascending
    starts = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node_of, minlength=nodes), out=starts[1:])
    return ScatterInverse(starts, partials.astype(np.int32), (slots % per_group).astype(np.uint8),
                          firsts.astype(np.uint8), bases.astype(np.int32))


def scatter_add(values, conn, nodes: int, inverse: ScatterInverse | None = None) -> np.ndarray:
    """The nodal sum of per-element values: `values` shaped (E, K, *shape), the result
    (nodes, *shape) with row n the sum of values[e, a] over every conn[e, a] == n, added in
    the scatter order of the module (0 where no entry names n). `inverse`: the connectivity's
    `inverse_connectivity`, when it is at hand."""
    conn = check_connectivity(conn, nodes)
    values = np.asarray(values)
    if values.shape[:2] != conn.shape:
        raise UsageError(f"scatter_add: values of shape {values.shape} do not match the connectivity's "
                         f"{conn.shape} (elements, nodes per element)")
    inverse = inverse if inverse is not None else _inverse(conn, nodes)  # (conn checked above)
    rows = values.reshape(conn.size, *values.shape[2:])
    out = np.zeros((nodes, *values.shape[2:]), dtype=values.dtype)
    if not len(rows):
        return out
    partial, _ = _partial_of_slots(conn, nodes)
    # Each partial's rows in slot order: the first, then each later one added.
    slots = np.argsort(partial, kind="stable")
    run_starts = np.flatnonzero(np.diff(np.append(-1, partial[slots])))
    ends = np.append(run_starts[1:], len(slots))
    sums = rows[slots[run_starts]].copy()
    for j in range(1, int((ends - run_starts).max())):
        has = ends - run_starts > j
        sums[has] += rows[slots[run_starts[has] + j]]
    # Each node's partials in order, onto 0.
    starts, partials = inverse.starts, inverse.partials
    count = np.diff(starts)
    for j in range(int(count.max())):
        has = count > j
        out[has] += sums[partials[starts[:-1][has] + j]]
    return out
