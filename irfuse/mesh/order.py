"""Renumbering a mesh for locality: a gather reads the rows of node arrays its elements
name, so elements that follow one another should name nodes that lie close in memory.

`reorder` gives the permutations, `renumber` applies them. The node order is reverse
Cuthill-McKee on the graph of nodes that share an element (no coordinates needed), or a
Morton curve through the node coordinates (given `coords`); elements then follow their
lowest-numbered node, so consecutive elements share nodes. Both are deterministic: the same
connectivity gives the same permutations.
"""

from __future__ import annotations

import numpy as np

from irfuse.diagnostics import UsageError, is_whole, refuse_grad
from irfuse.mesh.on_gpu import checked_on_gpu, element_order_on_gpu, gpu_tensor, morton_on_host, morton_order_on_gpu

METHODS = ("rcm", "morton")


def node_numbers(what: str, conn) -> np.ndarray:
    """A connectivity's node numbers as an array of int32 or int64, not copied: an array of
    either type as it is; nested Python lists or tuples of whole numbers (which have no
    element type of their own) converted; anything else refused by name (an array of
    another integer type too: irfuse converts no caller's array behind their back)."""
    if isinstance(conn, (list, tuple)):
        try:
            a = np.asarray(conn)
        except ValueError as e:
            raise UsageError(f"{what} is a {type(conn).__name__} that is not a rectangular nest of node numbers: "
                             f"{e}") from None
        if a.size == 0:
            a = a.astype(np.int32)
        if a.dtype.kind == "f" and np.all(np.isfinite(a)) and np.all(a == np.round(a)):
            a = a.astype(np.int64)
        if a.dtype.kind not in "iu" or a.dtype == np.bool_:
            raise UsageError(f"{what} is a {type(conn).__name__} of {a.dtype} values; a connectivity holds whole "
                             "node numbers")
        return a.astype(np.int64) if a.dtype != np.int64 else a
    refuse_grad(what, conn)
    a = conn if isinstance(conn, np.ndarray) else np.asarray(conn)
    if a.dtype not in (np.int32, np.int64):
        how = "conn.astype(np.int32)" if a.dtype.kind in "iu" and a.dtype != np.bool_ else "whole node numbers"
        raise UsageError(f"{what} is a connectivity of {a.dtype} values; it takes int32 or int64 node numbers "
                         f"(pass {how})")
    return a


def check_node_count(who: str, nodes, least: int = 1, bounded: bool = True) -> int:
    """A mesh's number of nodes given to `who`: a whole number, at least `least`, and where
    `bounded` below 2^31 (node numbers are 32-bit in the kernels and the scatter order; the
    host's orders and partitions take larger meshes), else refused by name."""
    if not is_whole(nodes) or nodes < least:
        kind = "a positive whole number" if least == 1 else f"a whole number, at least {least}"
        raise UsageError(f"{who}: nodes is the mesh's number of nodes, {kind}, not {nodes!r}")
    if bounded and nodes >= 2**31:
        raise UsageError(f"{who}: {nodes} nodes; node numbers are 32-bit, so a mesh has fewer than 2^31")
    return int(nodes)


def check_connectivity(conn, nodes: int | None = None, what: str = "conn", first: int = 0) -> np.ndarray:
    """`conn` as an (E, K) array of int32 or int64 (`node_numbers`) whose every entry is a
    node number in [0, nodes) (nodes: one more than the largest entry when None); a
    `UsageError` naming the element (counted from `first`: the chunk's first element in the
    whole mesh) and the position of the first entry outside otherwise."""
    if nodes is not None and (not is_whole(nodes) or nodes < 0):
        raise UsageError(f"{what}: the number of nodes is a whole number, at least 0, not {nodes!r}")
    a = node_numbers(what, conn)
    if a.ndim != 2 or a.shape[1] < 1:
        raise UsageError(f"{what} must be an array of shape (elements, nodes per element), not {a.shape}")
    if nodes is None:
        nodes = int(a.max()) + 1 if a.size else 0
    bad = (a < 0) | (a >= nodes)
    if bad.any():
        e, k = (int(v) for v in np.argwhere(bad)[0])
        raise UsageError(f"{what}: element {first + e}, position {k} names node {int(a[e, k])}, outside "
                         f"[0, {nodes})")
    return a


def reorder(conn, coords=None, method: str | None = None, nodes: int | None = None
            ) -> tuple[np.ndarray, np.ndarray]:
    """(node_order, element_order): new node r is old node node_order[r], new element e is
    old element element_order[e] (apply them with `renumber`).

    `method`: "rcm" (reverse Cuthill-McKee on the node graph) or "morton" (a Morton curve
    through `coords`, shape (M, D)); the default is "morton" given coordinates, else "rcm".
    `nodes`: how many nodes there are (default: one more than the largest entry of `conn`,
    or len(coords)); nodes no element names come last."""
    if nodes is not None:
        check_node_count("reorder", nodes, bounded=False)
    if method is not None and not isinstance(method, str):
        raise UsageError(f"reorder: method must be one of {', '.join(METHODS)}, not {method!r}")
    method = method or ("morton" if coords is not None else "rcm")
    if method not in METHODS:
        raise UsageError(f"reorder: method must be one of {', '.join(METHODS)}, not {method!r}")
    on_gpu = [a for a in (gpu_tensor(conn, "reorder: conn"), gpu_tensor(coords, "reorder: coords")) if a is not None]
    if on_gpu:
        return _reorder_on_gpu(conn, coords, method, nodes)
    if coords is not None:
        refuse_grad("reorder: coords", coords)
        if np.iscomplexobj(coords):  # (NumPy's cast would drop the imaginary parts with a warning)
            raise UsageError("reorder: coords must be real numbers (nodes, dimensions), not complex ones")
        try:
            coords = np.asarray(coords, dtype=np.float64)
        except (TypeError, ValueError):
            raise UsageError(f"reorder: coords must be an array of numbers (nodes, dimensions), not a "
                             f"{type(coords).__name__}") from None
        if coords.ndim != 2:
            raise UsageError(f"reorder: coords must have shape (nodes, dimensions), not {coords.shape}")
        if nodes is not None and nodes != len(coords):
            raise UsageError(f"reorder: nodes={nodes} but coords has {len(coords)} rows")
        nodes = len(coords)
    conn = check_connectivity(conn, nodes)
    nodes = int(conn.max()) + 1 if nodes is None else nodes
    if method == "morton":
        if coords is None:
            raise UsageError("reorder: method 'morton' needs the node coordinates (coords=)")
        made = _morton_compiled(conn, coords, nodes)
        if made is None:
            made = morton_on_host(conn, coords)  # (with PyTorch on the CPU, where it is at hand)
        if made is not None:
            return made
        node_order = _morton_order(coords)
    else:
        node_order = _reverse_cuthill_mckee(conn, nodes)
    renamed = np.sort(inverse_permutation(node_order)[conn], axis=1)
    # Elements by their lowest new node, then the next ones: a total order, so no tie is left
    # to the sort's algorithm.
    element_order = np.lexsort(renamed.T[::-1])
    return node_order, element_order


def _reorder_on_gpu(conn, coords, method: str, nodes: int | None) -> tuple:
    """`reorder` of a mesh on the GPU (`irfuse.mesh.on_gpu`): PyTorch tensors of the same
    permutations as the host's."""
    t, c = gpu_tensor(conn, "reorder: conn"), gpu_tensor(coords, "reorder: coords")
    if method != "morton":
        raise UsageError(f"reorder: on the GPU the order is a Morton curve (method='morton'), not {method!r}")
    if t is None or c is None or t.device != c.device:
        raise UsageError("reorder: on the GPU, conn and coords are arrays on the same GPU")
    if c.ndim != 2:
        raise UsageError(f"reorder: coords must have shape (nodes, dimensions), not {tuple(c.shape)}")
    if nodes is not None and nodes != len(c):
        raise UsageError(f"reorder: nodes={nodes} but coords has {len(c)} rows")
    checked = checked_on_gpu(t, len(c))
    node_order = morton_order_on_gpu(c)
    return node_order, element_order_on_gpu(checked, node_order)


def renumber(conn, node_order: np.ndarray, element_order: np.ndarray, *nodal, per_element=()):
    """The mesh in its new numbering: (conn, *nodal, *per_element), `conn` with new numbers
    in the new element order, each nodal array's rows in the new node order, each
    per-element array's rows in the new element order. On the GPU (a GPU `conn`): PyTorch
    tensors, every array taken there."""
    t = gpu_tensor(conn, "renumber: conn")
    if t is not None:
        return _renumber_on_gpu(t, node_order, element_order, nodal, per_element)
    from irfuse.mesh.native import renumbered

    for name, order in (("node_order", node_order), ("element_order", element_order)):
        if np.ndim(order) != 1 or np.asarray(order).dtype.kind not in "iu":
            raise UsageError(f"renumber: {name} must be a permutation (a 1-D array of whole numbers), not "
                             f"{type(order).__name__} {np.shape(order) if hasattr(order, 'shape') else ''}".rstrip())
    conn = check_connectivity(conn, len(node_order))
    node_order = np.asarray(node_order)
    element_order = np.asarray(element_order)
    for kind, arrays, size in (("nodal", nodal, len(node_order)), ("per-element", per_element, len(element_order))):
        for k, a in enumerate(arrays):
            if np.ndim(a) < 1 or len(a) != size:
                raise UsageError(f"renumber: {kind} array {k + 1} must have a row for each of the {size} "
                                 f"{'nodes' if kind == 'nodal' else 'elements'}, not shape {np.shape(a)}")
    made = None if conn.dtype != np.int32 or len(node_order) >= 2**31 else renumbered(conn, node_order, element_order)
    if made is None:  # (no compiled helper, or an order that is not a permutation: said below)
        for name, order, size in (("node_order", node_order, len(node_order)),
                                  ("element_order", element_order, len(conn))):
            if order.ndim != 1 or len(order) != size or not np.array_equal(np.sort(order), np.arange(size)):
                raise UsageError(f"renumber: {name} must be a permutation of 0..{size - 1}")
        made = inverse_permutation(node_order).astype(conn.dtype)[conn[element_order]]
    out = [made]
    out += [np.asarray(a)[node_order] for a in nodal]
    out += [np.asarray(a)[element_order] for a in per_element]
    return tuple(out)


def _renumber_on_gpu(t, node_order, element_order, nodal, per_element) -> tuple:
    import torch

    orders = []
    for name, order, size in (("node_order", node_order, None), ("element_order", element_order, len(t))):
        o = gpu_tensor(order, f"renumber: {name}")
        if o is None or o.device != t.device:
            raise UsageError(f"renumber: {name} must be on the GPU the connectivity is on")
        size = len(o) if size is None else size
        if o.ndim != 1 or len(o) != size or not torch.equal(torch.sort(o).values, torch.arange(size, device=o.device)):
            raise UsageError(f"renumber: {name} must be a permutation of 0..{size - 1}")
        orders.append(o.to(torch.int64))
    node_order, element_order = orders
    checked = checked_on_gpu(t, len(node_order), "renumber: conn")
    new_number = torch.empty_like(node_order)
    new_number[node_order] = torch.arange(len(node_order), device=node_order.device)
    out = [new_number.to(t.dtype)[checked.to(torch.int64)[element_order]]]
    for what, arrays, order in (("nodal", nodal, node_order), ("per-element", per_element, element_order)):
        for a in arrays:
            g = gpu_tensor(a, f"renumber: a {what} array")
            if g is None or g.device != t.device:
                raise UsageError(f"renumber: a {what} array must be on the GPU the connectivity is on")
            out.append(g[order])
    return tuple(out)


def inverse_permutation(order: np.ndarray) -> np.ndarray:
    """new_number with new_number[order[r]] = r: where each old item went."""
    new_number = np.empty(len(order), dtype=np.int64)
    new_number[order] = np.arange(len(order))
    return new_number


def _morton_compiled(conn: np.ndarray, coords: np.ndarray, nodes: int) -> tuple | None:
    """`reorder`'s Morton (node order, element order) by the compiled helper
    (`irfuse.mesh.native`), or None where it cannot be had."""
    from irfuse.mesh.native import element_order, morton_order

    if coords.shape[1] > 3 or not np.isfinite(coords).all() or nodes >= 2**31:
        return None  # (refused by name below)
    node_order = morton_order(coords)
    return None if node_order is None else (node_order, element_order(conn, node_order, nodes))


def _morton_order(coords: np.ndarray) -> np.ndarray:
    """Nodes along a Morton (Z-order) curve: coordinates scaled to 21-bit integers per axis
    (at most three axes), their bits interleaved; ties in node order."""
    if coords.shape[1] > 3:
        raise UsageError(f"reorder: a Morton curve takes at most 3 coordinates, not {coords.shape[1]}")
    if not np.isfinite(coords).all():
        raise UsageError("reorder: coords must be finite")
    lo, hi = coords.min(axis=0), coords.max(axis=0)
    span = np.where(hi > lo, hi - lo, 1.0)
    q = np.minimum(((coords - lo) / span * (1 << 21)).astype(np.uint64), np.uint64((1 << 21) - 1))
    key = np.zeros(len(coords), dtype=np.uint64)
    dims = coords.shape[1]
    for bit in range(21):
        for d in range(dims):
            key |= ((q[:, d] >> np.uint64(bit)) & np.uint64(1)) << np.uint64(bit * dims + d)
    return np.argsort(key, kind="stable")


def _node_graph(conn: np.ndarray, nodes: int) -> tuple[np.ndarray, np.ndarray]:
    """The nodes that share an element with each node, as CSR (starts, neighbours)."""
    k = conn.shape[1]
    a = np.repeat(conn, k, axis=1).ravel()
    b = np.tile(conn, (1, k)).ravel()
    keep = a != b
    key = np.sort(a[keep].astype(np.int64) * nodes + b[keep])  # (one number a pair: a 1-D sort)
    key = key[np.r_[True, key[1:] != key[:-1]]] if len(key) else key
    first, second = np.divmod(key, nodes)
    starts = np.concatenate([[0], np.cumsum(np.bincount(first, minlength=nodes))])
    return starts, second


def _reverse_cuthill_mckee(conn: np.ndarray, nodes: int) -> np.ndarray:
    """Cuthill-McKee, a level of the breadth-first search at a time, reversed. Each component
    starts at its node of least degree (lowest number among equals); a level's nodes, in
    order, each claim their unvisited neighbours by increasing degree (then number), as the
    node-at-a-time algorithm does. Nodes no element names come last."""
    starts, neighbours = _node_graph(conn, nodes)
    degree = np.diff(starts)
    visited = np.zeros(nodes, dtype=bool)
    order: list[np.ndarray] = []
    by_degree = np.lexsort((np.arange(nodes), degree))  # candidates for each component's start
    used = np.zeros(nodes, dtype=bool)
    used[conn.ravel()] = True
    cursor = 0
    while True:
        while cursor < nodes and (visited[by_degree[cursor]] or not used[by_degree[cursor]]):
            cursor += 1
        if cursor == nodes:
            break
        level = by_degree[cursor:cursor + 1]
        visited[level] = True
        while len(level):
            order.append(level)
            counts = degree[level]
            parent = np.repeat(np.arange(len(level)), counts)
            begin = np.repeat(starts[level], counts)
            offset = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
            reached = neighbours[begin + offset]
            fresh = ~visited[reached]
            parent, reached = parent[fresh], reached[fresh]
            claim = np.lexsort((reached, degree[reached], parent))
            reached = reached[claim]
            _, first = np.unique(reached, return_index=True)
            level = reached[np.sort(first)]
            visited[level] = True
    visited_order = np.concatenate(order) if order else np.zeros(0, dtype=np.int64)
    return np.concatenate([visited_order[::-1], np.flatnonzero(~used)]).astype(np.int64)
