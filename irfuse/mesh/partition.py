"""A mesh cut into parts that each own nodes and hold every element around them.

A part owns the nodes whose first element (in the mesh's element order) lies in its range of
elements, the ranges being consecutive and as even as the element count allows: on a mesh
numbered for locality (`irfuse.mesh.reorder`) each range is compact. To finish an owned
node's sums a part needs every element that names it, so it holds those of other parts too
(its ghost elements, computed by both) and every node they name (the nodes it does not own
are its ghost nodes, whose values come from their owners). Its elements keep the mesh's
order, and its ordered scatter adds each owned node's rows in ascending (element, position)
order as one call over the whole mesh does: an owned node's sums are the whole mesh's, bit
for bit, with no partial sums to combine, whatever the number of parts or of workers.

`partition(conn, parts)` gives a `Part` for each part: its elements (global numbers,
ascending), its nodes (global numbers, ascending), its connectivity in its own node numbers,
which of its nodes it owns, and for every other part the nodes it reads from it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from irfuse.diagnostics import UsageError
from irfuse.mesh.order import check_connectivity


@dataclass(frozen=True)
class Part:
    elements: np.ndarray  # global element numbers, ascending: its own range and its ghost elements
    nodes: np.ndarray  # global node numbers, ascending: every node its elements name
    conn: np.ndarray  # (len(elements), K) int32: the elements' node numbers among `nodes`
    owned: np.ndarray  # bool per entry of `nodes`: whether this part owns it
    reads: dict  # other part -> positions in `nodes` of the ghost nodes that part owns

    @property
    def owned_nodes(self) -> np.ndarray:
        """The global numbers of the nodes it owns."""
        return self.nodes[self.owned]


def partition(conn, parts: int, nodes: int | None = None) -> list[Part]:
    """`conn` (E, K) cut into `parts` parts (see the module); `nodes`: the mesh's node count
    (by default one more than its largest node number). A node no element names is owned by
    no part."""
    if isinstance(parts, bool) or not isinstance(parts, (int, np.integer)) or parts < 1:
        raise UsageError(f"partition: parts is a positive whole number, not {parts!r}")
    a = np.asarray(conn)
    if a.ndim != 2 or a.shape[0] == 0:
        raise UsageError(f"partition: a connectivity is shaped (elements, nodes per element) with at least one "
                         f"element, not {a.shape}")
    count = int(a.max()) + 1 if nodes is None else nodes
    a = check_connectivity(a, count)
    elements = a.shape[0]
    if parts > elements:
        raise UsageError(f"partition: {parts} parts of a mesh of {elements} elements; at most one part an element")
    bounds = [elements * p // parts for p in range(parts + 1)]
    part_of_element = np.repeat(np.arange(parts), np.diff(bounds))
    # A node's owner: the part of the first element naming it (-1: named by none).
    first = np.full(count, elements, np.int64)
    np.minimum.at(first, a.ravel(), np.repeat(np.arange(elements), a.shape[1]))
    owner = np.where(first < elements, part_of_element[np.minimum(first, elements - 1)], -1)
    owner_of_slot = owner[a]
    result = []
    for p in range(parts):
        mine = np.zeros(elements, bool)
        mine[bounds[p]:bounds[p + 1]] = True
        mine |= (owner_of_slot == p).any(axis=1)  # the elements around its nodes
        held = np.flatnonzero(mine)
        local_nodes = np.unique(a[held])
        local_conn = np.searchsorted(local_nodes, a[held]).astype(np.int32)
        owned = owner[local_nodes] == p
        reads = {q: np.flatnonzero(owner[local_nodes] == q) for q in range(parts)
                 if q != p and np.any(owner[local_nodes] == q)}
        result.append(Part(held, local_nodes, local_conn, owned, reads))
    return result
