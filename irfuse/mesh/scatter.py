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

from irfuse.artifact.scatter_groups import ELEMENT_SLOTS, group_elements, partial_order_key, slot_dtype
from irfuse.diagnostics import UsageError, refuse_grad
from irfuse.mesh.order import check_connectivity, check_node_count


class ScatterInverse(NamedTuple):
    """A connectivity's scatter order (see the module and `irfuse.artifact.scatter_groups`):
    node n's partials are partials[starts[n]:starts[n + 1]], ascending; group g's partials
    are bases[g] to bases[g + 1] - 1, partial p's slots members[g * S + firsts[p]:...] (S the
    slots of a group, group-local numbers) up to the next partial's first."""

    starts: np.ndarray  # int64, nodes + 1
    partials: np.ndarray  # int32, one per partial
    members: np.ndarray  # uint8 (uint16 past 256 slots a group: `slot_dtype`), one per slot
    firsts: np.ndarray  # the same, one per partial
    bases: np.ndarray  # int32, groups + 1


def inverse_connectivity(conn, nodes: int) -> ScatterInverse:
    """The scatter order of a connectivity `conn` (E, K) of a mesh of `nodes` nodes."""
    check_node_count("inverse_connectivity", nodes, least=0)
    return scatter_order(check_connectivity(conn, nodes), nodes)


def scatter_order(conn: np.ndarray, nodes: int) -> ScatterInverse:
    """The scatter order of a checked host connectivity, made by the fastest way at hand, each
    giving the same arrays: compiled (`irfuse.mesh.native`, one pass), PyTorch's operations on
    the CPU where PyTorch is imported or the mesh is large (`on_gpu.inverse_on_host`), NumPy."""
    from irfuse.mesh.native import scatter_order as compiled
    from irfuse.mesh.on_gpu import inverse_on_host

    made = None
    if nodes < 2**31 and conn.size < 2**31:
        made = compiled(conn, nodes, _group_of(conn.shape[1]) * conn.shape[1])
    if made is None:
        made = inverse_on_host(np.ascontiguousarray(conn, dtype=np.int32), nodes) if nodes < 2**31 else None
    return ScatterInverse(*made) if made is not None else _inverse(conn, nodes)


def _group_of(k: int) -> int:
    g = group_elements(k)
    if not g:
        raise UsageError(f"a scatter adds rows of elements of at most {ELEMENT_SLOTS} nodes, not {k}")
    return g


def _partials(conn: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(the slots partial by partial (each partial's ascending), where each partial's slots
    start in that list, node of each partial, partials of each group): partials numbered group
    by group, within a group longest first (equal lengths in the order of their first slots:
    `irfuse.artifact.scatter_groups`). One sort of each group's few slots (a sort of the whole
    connectivity took longer), one of the partials' keys, the rest in linear passes."""
    n = conn.size
    per_group = _group_of(conn.shape[1]) * conn.shape[1]
    groups = -(-n // per_group)
    padded = np.empty(groups * per_group, dtype=np.int32)  # (the last group's tail sorts last)
    padded[:n] = conn.ravel()
    padded[n:] = np.iinfo(np.int32).max
    local = np.argsort(padded.reshape(groups, per_group), axis=1, kind="stable").astype(np.int32)  # (a run's
    local += np.arange(0, groups * per_group, per_group, dtype=np.int32)[:, None]       # slots ascend)
    order = local.ravel()[:n]  # the slots by (group, node, slot)
    by_node = padded[order]
    new_run = np.empty(n, dtype=bool)
    new_run[:1] = True
    np.not_equal(by_node[1:], by_node[:-1], out=new_run[1:])
    new_run[np.arange(per_group, n, per_group)] = True  # (a group's first slot starts a run)
    run_starts = np.flatnonzero(new_run).astype(np.int32)
    heads = order[run_starts]  # each run's first slot
    lengths = np.diff(np.append(run_starts, np.int32(n))).astype(np.int32)
    group = heads // per_group
    by_partial = np.argsort(partial_order_key(heads.astype(np.int64), lengths, per_group)).astype(np.int32)
    run_partial = np.empty_like(by_partial)
    run_partial[by_partial] = np.arange(len(by_partial), dtype=np.int32)
    begins = np.zeros(len(heads) + 1, dtype=np.int64)  # where each partial's slots start
    np.cumsum(lengths[by_partial], out=begins[1:])
    place = np.repeat(begins[:-1][run_partial] - run_starts, lengths)  # run start -> partial start
    place += np.arange(n)
    slots = np.empty(n, dtype=np.int32)
    slots[place] = order
    per_groups = np.bincount(group, minlength=groups)
    return slots, begins, by_node[run_starts][by_partial], per_groups


def _inverse(conn: np.ndarray, nodes: int) -> ScatterInverse:
    per_group = _group_of(conn.shape[1]) * conn.shape[1]
    slots, begins, node_of, per_groups = _partials(conn)
    bases = np.zeros(len(per_groups) + 1, dtype=np.int64)
    np.cumsum(per_groups, out=bases[1:])
    firsts = begins[:-1] % per_group  # (a group's partials' slots lie in its own stretch of the list)
    partials = np.argsort(node_of, kind="stable")  # each node's partials, ascending
    starts = np.zeros(nodes + 1, dtype=np.int64)
    np.cumsum(np.bincount(node_of, minlength=nodes), out=starts[1:])
    slot = slot_dtype(conn.shape[1])
    return ScatterInverse(starts, partials.astype(np.int32), (slots % per_group).astype(slot),
                          firsts.astype(slot), bases.astype(np.int32))


def scatter_add(values, conn, nodes: int, inverse: ScatterInverse | None = None) -> np.ndarray:
    """The nodal sum of per-element values: `values` shaped (E, K, *shape), the result
    (nodes, *shape) with row n the sum of values[e, a] over every conn[e, a] == n, added in
    the scatter order of the module (0 where no entry names n). `inverse`: the connectivity's
    `inverse_connectivity`, when it is at hand."""
    check_node_count("scatter_add", nodes, least=0)
    conn = check_connectivity(conn, nodes)
    refuse_grad("scatter_add: values", values)
    values = np.asarray(values)
    if values.shape[:2] != conn.shape:
        raise UsageError(f"scatter_add: values of shape {values.shape} do not match the connectivity's "
                         f"{conn.shape} (elements, nodes per element)")
    inverse = inverse if inverse is not None else _inverse(conn, nodes)  # (conn checked above)
    rows = values.reshape(conn.size, *values.shape[2:])
    out = np.zeros((nodes, *values.shape[2:]), dtype=values.dtype)
    if not len(rows):
        return out
    # Each partial's rows in slot order, read from the scatter order as the element kernel
    # reads it: group g's stretch of `members`, partial p's run from its first.
    per_group = _group_of(conn.shape[1]) * conn.shape[1]
    slots = np.arange(conn.size) // per_group * per_group + inverse.members
    group_of = np.repeat(np.arange(len(inverse.bases) - 1), np.diff(inverse.bases))
    run_starts = group_of * per_group + inverse.firsts
    ends = np.append(run_starts[1:], conn.size)
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
