"""A mesh cut into parts that each own nodes and hold every element around them.

A part owns the nodes whose first element (in the mesh's element order) lies in its range of
elements, the ranges being consecutive and as even as the element count allows: on a mesh
numbered for locality (`irfuse.mesh.reorder`) each range is compact. To finish an owned
node's sums a part needs every element that names it, so it holds those of other parts too
(its ghost elements, computed by both) and every node they name (the nodes it does not own
are its ghost nodes, whose values come from their owners). It holds whole groups of the
scatter order (`irfuse.mesh.scatter`: its ghost elements are the groups around its nodes,
64 elements of four nodes), and its elements keep the mesh's order, so its ordered scatter
adds each owned node's rows in the groups and the order of one call over the whole mesh: an
owned node's sums are the whole mesh's, bit for bit, with no partial sums to combine,
whatever the number of parts or of workers.

`partition(conn, parts)` gives a `Part` for each part: its elements (global numbers,
ascending), its own range of them, its nodes (global numbers, ascending), its connectivity in
its own node numbers, which of its nodes it owns, for every other part the nodes it reads
from it, and what it sends: the owned nodes other parts read, in one packed list (ascending),
which each reader picks its ghost nodes' rows from (`picks`). `parts` is a number of parts
(ranges as even as the element count allows) or the lengths of the ranges, in order.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from irfuse.artifact.records import record
from irfuse.artifact.scatter_groups import group_elements
from irfuse.diagnostics import UsageError, refuse_grad
from irfuse.mesh.order import check_connectivity, check_node_count


@record(frozen=True)
class Part:
    elements: np.ndarray  # global element numbers, ascending: its own range and its ghost elements
    nodes: np.ndarray  # global node numbers, ascending: every node its elements name
    conn: np.ndarray  # (len(elements), K) int32: the elements' node numbers among `nodes`
    owned: np.ndarray  # bool per entry of `nodes`: whether this part owns it
    reads: dict  # other part -> positions in `nodes` of the ghost nodes that part owns
    span: tuple[int, int]  # its own range of elements, [first, stop) in global numbers
    sends: np.ndarray  # positions in `nodes` of the owned nodes other parts read, ascending
    picks: dict  # other part q -> for each of reads[q], its position in q's `sends`

    @property
    def owned_nodes(self) -> np.ndarray:
        """The global numbers of the nodes it owns."""
        return self.nodes[self.owned]

    @property
    def own_elements(self) -> np.ndarray:
        """bool per entry of `elements`: whether it lies in its own range (not a ghost)."""
        return (self.elements >= self.span[0]) & (self.elements < self.span[1])


def partition(conn, parts, nodes: int | None = None) -> list[Part]:
    """`conn` (E, K) cut into `parts` parts (see the module): a number of parts, or the
    lengths of their ranges of elements in order (positive, summing to E); `nodes`: the
    mesh's node count (by default one more than its largest node number). A node no element
    names is owned by no part."""
    refuse_grad("partition: conn", conn)
    if nodes is not None:
        check_node_count("partition", nodes, bounded=False)
    a = np.asarray(conn)
    if a.ndim != 2 or a.shape[0] == 0:
        raise UsageError(f"partition: a connectivity is shaped (elements, nodes per element) with at least one "
                         f"element, not {a.shape}")
    count = int(a.max()) + 1 if nodes is None else nodes
    a = check_connectivity(a, count)
    elements = a.shape[0]
    bounds = _bounds(parts, elements)
    parts = len(bounds) - 1
    part_of_element = np.repeat(np.arange(parts), np.diff(bounds))
    # A node's owner: the part of the first element naming it (-1: named by none).
    try:
        first = np.full(count, elements, np.int64)
    except (ValueError, MemoryError):  # (ValueError: more than an array can index)
        raise UsageError(f"partition: a table of {count} nodes does not fit this machine's memory") from None
    np.minimum.at(first, a.ravel(), np.repeat(np.arange(elements), a.shape[1]))
    owner = np.where(first < elements, part_of_element[np.minimum(first, elements - 1)], -1)
    owner_of_slot = owner[a]
    # Parts hold whole groups of the scatter order (`irfuse.mesh.scatter`): a part's groups are
    # then the mesh's, and its owned nodes' partials and sums the one call's.
    group = group_elements(a.shape[1]) or 1
    result = []
    for p in range(parts):
        mine = np.zeros(elements, bool)
        mine[bounds[p]:bounds[p + 1]] = True
        mine |= (owner_of_slot == p).any(axis=1)  # the elements around its nodes
        whole = np.zeros(-(-elements // group), bool)
        whole[np.flatnonzero(mine) // group] = True
        mine = np.repeat(whole, group)[:elements]
        held = np.flatnonzero(mine)
        rows = a[held]
        named = np.zeros(count, bool)
        named[rows.ravel()] = True
        local_nodes = np.flatnonzero(named)
        local_number = np.zeros(count, np.int32)  # (a lookup table: no sort of the part's entries)
        local_number[local_nodes] = np.arange(len(local_nodes), dtype=np.int32)
        local_conn = local_number[rows]
        owned = owner[local_nodes] == p
        reads = {q: np.flatnonzero(owner[local_nodes] == q) for q in range(parts)
                 if q != p and np.any(owner[local_nodes] == q)}
        result.append(Part(held, local_nodes, local_conn, owned, reads, (bounds[p], bounds[p + 1]),
                           np.zeros(0, np.int64), {}))
    return _with_sends(result)


def _bounds(parts, elements: int) -> list[int]:
    """The parts' ranges of elements as their bounds [0, ..., elements]."""
    if isinstance(parts, (int, np.integer)) and not isinstance(parts, bool):
        if parts < 1:
            raise UsageError(f"partition: parts is a positive whole number or a list of range lengths, not {parts!r}")
        if parts > elements:
            raise UsageError(f"partition: {parts} parts of a mesh of {elements} elements; at most one part an "
                             "element")
        return [elements * p // parts for p in range(parts + 1)]
    try:
        lengths = [int(n) if isinstance(n, (int, np.integer)) and not isinstance(n, bool) else None for n in parts]
    except TypeError:
        lengths = [None]
    if not lengths or None in lengths or min(lengths) < 1 or sum(lengths) != elements:
        raise UsageError(f"partition: parts is a positive whole number or the lengths of the parts' ranges of "
                         f"elements (positive whole numbers summing to the {elements} elements), not {parts!r}")
    return [0, *np.cumsum(lengths).tolist()]


def _with_sends(parts: list[Part]) -> list[Part]:
    """Each part's packed list of the owned nodes other parts read, and every reader's picks
    into it."""
    read_globals: list[list[np.ndarray]] = [[] for _ in parts]
    for part in parts:
        for q, where in part.reads.items():
            read_globals[q].append(part.nodes[where])
    done = []
    for q, part in enumerate(parts):
        wanted = np.unique(np.concatenate(read_globals[q])) if read_globals[q] else np.zeros(0, np.int64)
        done.append(replace(part, sends=np.searchsorted(part.nodes, wanted)))
    return [replace(part, picks={q: np.searchsorted(done[q].nodes[done[q].sends], part.nodes[where])
                                 for q, where in part.reads.items()}) for part in done]
