"""A tangent's sparse pattern and each node's slots made by PyTorch where the connectivity
lives (a GPU), range of nodes by range of nodes, so that what is made beside the arrays kept
stays small.

The arrays are `irfuse.mesh.assembly`'s, entry for entry and type for type (the host makes
them node by node in compiled code, `native.cpp`). Made at once, by sorting every element's
K x K node pairs, they took 4.7x the matrix and its inputs at the first call's peak (12.2 GB
for the P1 tangent of 12.6 M tets on an H200: `benchmarks/NOTES.md`, issue 73). Here:

- `node_slots`: the slots are counted by node (`bincount`, a prefix sum); then for each range
  of nodes holding at most SLOTS_A_RANGE slots, the slots naming one of them are picked in
  ascending order and stably sorted by node into their place: each node's slots in ascending
  element order, as the host's counting sort lays them.
- `sparse_pattern`: for each range of at most BLOCKS_A_RANGE slots, the node pairs of its
  nodes' slots (and each node's own) are made unique and sorted: the range's blocks, node
  row after node row, counted by node. Once every node's count is known (so where its row
  begins), each range's blocks are laid out into the CSR indices in place.

What a range makes is a few times its slots in words, whatever the mesh; the blocks' column
nodes (one word a block) are kept between the two sweeps. Every step is a whole-array
operation of the library (stable sorts, unique, counts), so the arrays do not depend on how
it schedules them, and a range's arrays do not depend on where the ranges are cut.
"""

from __future__ import annotations

SLOTS_A_RANGE = 1 << 22  # node_slots: its ranges also read the whole connectivity once each
BLOCKS_A_RANGE = 1 << 19  # sparse_pattern: a range makes K + 1 int64 keys a slot, sorted


def node_slots(conn, nodes: int) -> tuple:
    """`irfuse.mesh.assembly.node_slots` of a checked PyTorch connectivity (E, K), made where
    it lives: (`starts`, int64, N + 1; `slots`, int32, E * K)."""
    import torch

    flat = conn.reshape(-1)
    starts = torch.zeros(nodes + 1, dtype=torch.int64, device=conn.device)
    if flat.numel():
        starts[1:] = torch.cumsum(torch.bincount(flat, minlength=nodes), 0)
    slots = torch.empty(flat.numel(), dtype=torch.int32, device=conn.device)
    for n0, n1, s0, s1 in _ranges(starts, nodes, SLOTS_A_RANGE):
        if s1 == s0:
            continue
        at = torch.nonzero((flat >= n0) & (flat < n1)).reshape(-1)  # (ascending: element order)
        slots[s0:s1] = at[torch.sort(flat[at], stable=True).indices].to(torch.int32)
    return starts, slots


def sparse_pattern(conn, nodes: int, d: int, lists: tuple, wide) -> tuple:
    """(indptr, indices, diagonal) of `irfuse.mesh.assembly.sparse_pattern` for a checked
    PyTorch connectivity (E, K) and its `node_slots` `lists`, made where it lives; `wide(total,
    nodes, d)`: whether a pattern of `total` entries takes int64 indices (the caller's rule)."""
    import torch

    device, k = conn.device, conn.shape[1]
    starts, slots = lists
    flat = conn.reshape(-1)
    counts = torch.zeros(nodes, dtype=torch.int64, device=device)  # blocks a node row
    own = torch.zeros(nodes, dtype=torch.int64, device=device)  # each node's own block, over all
    column = torch.int32 if nodes < 2**31 else torch.int64
    pieces, made = [], 0
    for n0, n1, s0, s1 in _ranges(starts, nodes, BLOCKS_A_RANGE):
        ids = torch.arange(n0, n1, dtype=torch.int64, device=device)
        mine = (ids - n0) * nodes + ids
        at = slots[s0:s1].to(torch.int64)
        near = conn[at // k].to(torch.int64)  # (slots, K): each slot's element's nodes
        keys = (flat[at].to(torch.int64) - n0)[:, None] * nodes + near
        blocks = torch.unique(torch.cat([keys.reshape(-1), mine]), sorted=True)  # (node - n0, column node)
        counts[n0:n1] = torch.bincount(blocks // nodes, minlength=n1 - n0)
        own[n0:n1] = torch.searchsorted(blocks, mine) + made
        pieces.append((n0, n1, made, (blocks % nodes).to(column)))
        made += len(blocks)
    begin = torch.zeros(nodes + 1, dtype=torch.int64, device=device)  # each node row's first block
    begin[1:] = torch.cumsum(counts, 0)
    total = made * d * d
    index = torch.int64 if wide(total, nodes, d) else torch.int32
    i = torch.arange(d, dtype=torch.int64, device=device)
    indices = torch.empty(total, dtype=index, device=device)
    for n0, n1, b0, cols in pieces:
        # Block p of node row n, row i, column j: entry begin[n] d d + i L d + (p - begin[n]) d + j.
        node = torch.repeat_interleave(torch.arange(n0, n1, device=device), counts[n0:n1])
        p = torch.arange(b0, b0 + len(cols), dtype=torch.int64, device=device)
        first, length = begin[node], counts[node]
        at = (first * d * d + (p - first) * d - b0 * d * d)[:, None, None] + \
            (i[None, :, None] * length[:, None, None] * d) + i[None, None, :]
        piece = indices[b0 * d * d:(b0 + len(cols)) * d * d]
        piece[at.reshape(-1)] = (cols.to(torch.int64)[:, None, None] * d + i[None, None, :]).expand(
            -1, d, -1).reshape(-1).to(index)
    first, length = begin[:-1, None], counts[:, None]
    indptr = torch.empty(nodes * d + 1, dtype=index, device=device)
    indptr[:-1] = (first * d * d + i[None, :] * length * d).reshape(-1).to(index)
    indptr[-1] = total
    diagonal = ((first * d + i[None, :] * length + (own[:, None] - first)) * d + i[None, :]).reshape(-1).to(index)
    return indptr, indices, diagonal


def _ranges(starts, nodes: int, limit: int) -> list[tuple[int, int, int, int]]:
    """Ranges of nodes (n0, n1, their first slot, the slot after their last), in order,
    covering every node, each of at most `limit` nodes and under `limit` slots besides its
    first node's."""
    import torch

    total = int(starts[-1])
    cuts = []
    if total > limit:  # (the node each multiple of `limit` slots falls in)
        marks = torch.arange(limit, total, limit, dtype=torch.int64, device=starts.device)
        cuts = (torch.searchsorted(starts, marks, right=True) - 1).tolist()
    bounds = sorted({0, nodes, *range(limit, nodes, limit), *cuts})
    at = starts[torch.tensor(bounds, device=starts.device)].tolist() if bounds else []
    return [(a, b, sa, sb) for a, b, sa, sb in zip(bounds, bounds[1:], at, at[1:]) if b > a]
