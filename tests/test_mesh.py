"""irfuse.mesh: the box of tetrahedra the mesh tests and benchmarks use, and renumbering for
locality (reverse Cuthill-McKee, a Morton curve)."""

import os

import numpy as np
import pytest
from conftest import ROOT

import irfuse.mesh as mesh
from irfuse.diagnostics import UsageError


def _volumes(X, conn):
    v = X[conn]
    return np.einsum("ei,ei->e", np.cross(v[:, 1] - v[:, 0], v[:, 2] - v[:, 0]), v[:, 3] - v[:, 0]) / 6


def _faces(conn):
    """Each element's four faces as sorted node triples, and how many elements hold each."""
    tri = np.concatenate([np.delete(conn, k, axis=1) for k in range(4)])
    _, counts = np.unique(np.sort(tri, axis=1), axis=0, return_counts=True)
    return counts


def _as_point_sets(X, conn):
    """The mesh whatever its numbering: each element as its sorted corner coordinates."""
    corners = np.round(X[conn], 12)
    keys = sorted(tuple(map(tuple, sorted(map(tuple, e)))) for e in corners)
    return keys


@pytest.mark.parametrize("shape", [(1, 1, 1), (3, 2, 4)])
def test_the_box_is_a_conforming_mesh_of_positive_tetrahedra_filling_the_cube(shape):
    nx, ny, nz = shape
    X, conn = mesh.box_tetrahedra(nx, ny, nz)
    assert X.shape == ((nx + 1) * (ny + 1) * (nz + 1), 3) and conn.shape == (6 * nx * ny * nz, 4)
    assert conn.dtype == np.int32 and set(np.unique(conn)) == set(range(len(X)))
    vol = _volumes(X, conn)
    assert (vol > 0).all() and np.isclose(vol.sum(), 1.0)
    counts = _faces(conn)
    # Every face inside the cube is shared by two elements, every face on its boundary (two
    # triangles per boundary square) by one; no face by three.
    boundary = 2 * 2 * (nx * ny + ny * nz + nx * nz)
    assert (counts == 1).sum() == boundary and set(counts) <= {1, 2}
    assert (counts == 2).sum() == (4 * len(conn) - boundary) // 2


def test_a_random_numbering_is_the_same_mesh_with_other_numbers():
    X, conn = mesh.box_tetrahedra(2, 3, 2)
    Xr, connr = mesh.box_tetrahedra(2, 3, 2, numbering="random", seed=7)
    assert not np.array_equal(conn, connr)
    assert _as_point_sets(X, conn) == _as_point_sets(Xr, connr)
    assert (_volumes(Xr, connr) > 0).all()
    again = mesh.box_tetrahedra(2, 3, 2, numbering="random", seed=7)
    assert np.array_equal(again[1], connr) and np.array_equal(again[0], Xr)
    assert mesh.box_tetrahedra(1, index_dtype=np.int64)[1].dtype == np.int64


@pytest.mark.parametrize("method", ["rcm", "morton"])
def test_reordering_gives_permutations_the_same_mesh_and_locality(method):
    X, conn = mesh.box_tetrahedra(8, numbering="random", seed=3)
    node_order, element_order = mesh.reorder(conn, X if method == "morton" else None, method=method)
    assert np.array_equal(np.sort(node_order), np.arange(len(X)))
    assert np.array_equal(np.sort(element_order), np.arange(len(conn)))
    new_conn, new_X = mesh.renumber(conn, node_order, element_order, X)
    assert _as_point_sets(new_X, new_conn) == _as_point_sets(X, conn)
    assert (_volumes(new_X, new_conn) > 0).all()  # (an element keeps its nodes' order)

    def span(c):  # how far apart in memory an element's nodes lie, on average
        return np.mean(c.max(axis=1) - c.min(axis=1))
    structured = mesh.box_tetrahedra(8)[1]  # (an element's nodes a layer of 81 apart at most)
    assert span(new_conn) < span(conn) / 4 and span(new_conn) < 1.25 * span(structured)
    # Consecutive elements share nodes: their gathers read the same rows.
    shared = [len(set(new_conn[e]) & set(new_conn[e + 1])) for e in range(len(new_conn) - 1)]
    assert np.mean(shared) >= 2
    # The same connectivity, the same permutations.
    again = mesh.reorder(conn, X if method == "morton" else None, method=method)
    assert np.array_equal(again[0], node_order) and np.array_equal(again[1], element_order)


def test_rcm_is_cuthill_mckee_node_by_node_reversed():
    """The level-at-a-time search gives the order of the textbook algorithm: from the node of
    least degree, each node in turn appends its unvisited neighbours by increasing degree."""
    X, conn = mesh.box_tetrahedra(3, 2, 2, numbering="random", seed=1)
    nodes = len(X)
    adj = [set() for _ in range(nodes)]
    for e in conn:
        for a in e:
            adj[a] |= set(int(b) for b in e if b != a)
    degree = [len(s) for s in adj]
    start = min(range(nodes), key=lambda v: (degree[v], v))
    order, seen = [start], {start}
    for v in order:
        for w in sorted(adj[v] - seen, key=lambda w: (degree[w], w)):
            seen.add(w)
            order.append(w)
    node_order, _ = mesh.reorder(conn)
    assert node_order.tolist() == order[::-1]


def test_nodes_no_element_names_come_last_and_components_each_start_anew():
    # Two separate tetrahedra, node 4 unused, nodes 5..8 the second element's.
    conn = np.array([[0, 1, 2, 3], [5, 6, 7, 8]])
    node_order, element_order = mesh.reorder(conn)
    assert node_order[-1] == 4 and sorted(node_order.tolist()) == list(range(9))
    assert set(node_order[:4].tolist()) == {5, 6, 7, 8} or set(node_order[:4].tolist()) == {0, 1, 2, 3}
    new_conn, = mesh.renumber(conn, node_order, element_order)
    assert sorted(new_conn.ravel().tolist()) == list(range(8))
    one, = mesh.renumber(np.array([[0, 0, 0, 0]]), *mesh.reorder(np.array([[0, 0, 0, 0]])))
    assert one.tolist() == [[0, 0, 0, 0]]  # one node, repeated in its element


def _drawn_connectivity(k: int, elements: int, nodes: int | None, seed: int, cubes: int):
    """(conn, nodes): a randomly numbered box of `cubes` a side where `nodes` is None, else
    `elements` rows of `k` nodes drawn from `nodes` (repeats and unused nodes included)."""
    if nodes is None:
        X, conn = mesh.box_tetrahedra(cubes, numbering="random", seed=seed)
        return conn, len(X)
    return np.random.default_rng(seed).integers(0, nodes, (elements, k)).astype(np.int32), nodes


@pytest.mark.parametrize("k, elements, nodes, seed", [
    (4, 6 * 5**3, None, 0), (4, 1000, 50, 1), (3, 777, 400, 2), (8, 513, 900, 3), (10, 300, 2000, 4),
    (5, 1, 3, 5), (27, 40, 5000, 6), (1, 700, 20, 7), (4, 0, 9, 8), (48, 37, 300, 9), (2, 5000, 1, 10)])
def test_the_compiled_scatter_order_is_the_sorting_ones_entry_for_entry(k, elements, nodes, seed):
    """`irfuse.mesh.native` numbers the partials in one pass (first sight of a node in its
    group): the same arrays as the NumPy sorts, with nodes repeated within an element and a
    group, nodes no element names, no elements, and groups of up to 256 slots."""
    from irfuse.mesh.native import scatter_order
    from irfuse.mesh.scatter import ScatterInverse, _group_of, _inverse

    conn, nodes = _drawn_connectivity(k, elements, nodes, seed, cubes=5)
    got = scatter_order(conn, nodes, _group_of(k) * k)
    assert got is not None, "the host C++ compiler builds the helper"
    for name, w, g in zip(ScatterInverse._fields, _inverse(conn, nodes), got):
        assert g.dtype == w.dtype and np.array_equal(g, w), name


@pytest.mark.parametrize("k, elements, nodes, d, seed", [
    (4, 6 * 4**3, None, 3, 0), (4, 300, 50, 3, 1), (3, 200, 400, 1, 2), (8, 60, 90, 3, 3), (1, 70, 20, 2, 4),
    (4, 0, 9, 3, 5), (2, 500, 1, 1, 6), (10, 30, 200, 2, 7)])
def test_the_compiled_sparse_pattern_is_the_arrays_entry_for_entry(k, elements, nodes, d, seed, monkeypatch):
    """`irfuse.mesh.native.pattern_blocks` finds each node's blocks node by node: the same
    pairs, indptr, indices and diagonal as the array version's sorts, in the same types, with
    nodes repeated within an element, nodes no element names, no elements, one node."""
    from irfuse.mesh.assembly import sparse_pattern
    from irfuse.mesh.native import pattern_blocks

    conn, nodes = _drawn_connectivity(k, elements, nodes, seed, cubes=4)
    assert pattern_blocks(conn, nodes) is not None, "the host C++ compiler builds the helper"
    compiled = sparse_pattern(conn, nodes, d, with_pairs=True)
    got = (compiled.pairs, compiled.indptr, compiled.indices, compiled.diagonal)
    monkeypatch.setenv("IRFUSE_MESH_NATIVE", "0")
    want = sparse_pattern(conn, nodes, d, with_pairs=True)
    for name, g in zip(("pairs", "indptr", "indices", "diagonal"), got):
        w = getattr(want, name)
        assert g.dtype == w.dtype and np.array_equal(g, w), name


@pytest.mark.parametrize("k, elements, nodes, d, seed", [
    (4, 6 * 4**3, None, 3, 0), (4, 300, 50, 3, 1), (3, 200, 400, 1, 2), (8, 60, 90, 3, 3), (1, 70, 20, 2, 4),
    (4, 0, 9, 3, 5), (2, 500, 1, 1, 6), (10, 30, 200, 2, 7)])
@pytest.mark.parametrize("limit", [1, 5, 64, None])
def test_the_pattern_made_range_by_range_is_the_hosts_wherever_the_ranges_are_cut(k, elements, nodes, d, seed, limit,
                                                                                   monkeypatch):
    """`irfuse.mesh.pattern_ranges` (PyTorch, as on a GPU): each node's slots and the pattern's
    indptr, indices and diagonal are the compiled host helper's, entry for entry and type for
    type, with ranges of 1, 5 or 64 slots or nodes and the default, in 32 and 64 bits."""
    torch = pytest.importorskip("torch")
    from irfuse.mesh import assembly, pattern_ranges

    conn, nodes = _drawn_connectivity(k, elements, nodes, seed, cubes=4)
    if limit is not None:
        monkeypatch.setattr(pattern_ranges, "SLOTS_A_RANGE", limit)
        monkeypatch.setattr(pattern_ranges, "BLOCKS_A_RANGE", limit)
    for wide in (False, True):
        if wide:
            monkeypatch.setattr(assembly, "_wide", lambda total, nodes, d: True)
        want = assembly.sparse_pattern(conn, nodes, d)
        lists = assembly.node_slots(torch.from_numpy(conn), nodes)
        for got, w in zip(lists, assembly.node_slots(conn, nodes)):
            assert got.numpy().dtype == w.dtype and np.array_equal(got.numpy(), w)
        made = assembly.sparse_pattern(torch.from_numpy(conn), nodes, d, lists=lists)
        assert made._pairs is None
        for name in ("indptr", "indices", "diagonal"):
            w, got = getattr(want, name), getattr(made, name).numpy()
            assert got.dtype == w.dtype == (np.int64 if wide else np.int32) and np.array_equal(got, w), name


@pytest.mark.parametrize("seed", range(6))
def test_the_compiled_morton_order_is_numpys(seed):
    """`irfuse.mesh.native`'s Morton keys and radix sort, and its element order (a counting
    sort by the lowest new node, then the rest of the rows): NumPy's `_morton_order` and
    `np.lexsort` exactly, with tied points, flat axes, 1-3 dimensions and repeated nodes."""
    from irfuse.mesh import native
    from irfuse.mesh.order import _morton_order

    rng = np.random.default_rng(seed)
    nodes, dims, k = int(rng.integers(1, 400)), 1 + seed % 3, int(rng.integers(1, 9))
    coords = rng.normal(size=(nodes, dims)) * 10.0 ** int(rng.integers(-3, 4))
    coords[::5] = coords[0]  # (ties: node order)
    if seed % 2:
        coords[:, 0] = 1.5  # (a flat axis)
    node_order = native.morton_order(coords)
    assert node_order is not None and np.array_equal(node_order, _morton_order(coords))
    conn = rng.integers(0, nodes, (int(rng.integers(0, 600)), k)).astype(np.int32)
    renamed = np.sort(np.argsort(node_order)[conn], axis=1)
    want = np.lexsort(renamed.T[::-1]) if len(conn) else np.zeros(0, np.int64)
    assert np.array_equal(native.element_order(conn, node_order, nodes), want)
    inverse = np.argsort(node_order).astype(np.int32)
    assert np.array_equal(native.renumbered(conn, node_order, want), inverse[conn[want]])
    if len(conn) > 1:  # (orders that are not permutations: left to the caller, which names them)
        repeated = want.copy()
        repeated[-1] = repeated[0]
        assert native.renumbered(conn, node_order, repeated) is None
        with pytest.raises(UsageError, match="element_order must be a permutation"):
            mesh.renumber(conn, node_order, repeated)
    outside = node_order.copy()
    outside[-1] = nodes
    assert native.renumbered(conn, outside, want) is None
    with pytest.raises(UsageError, match="node_order must be a permutation"):
        mesh.renumber(conn, outside, want)


def test_without_the_compiled_helper_the_scatter_order_is_made_by_arrays(monkeypatch):
    """`IRFUSE_MESH_NATIVE=0`, or a `CXX` that is no compiler, leaves the compiled helper out
    (no error): `Connectivity`, `inverse_connectivity` and `reorder` make the same orders with
    arrays."""
    from irfuse.mesh import native
    from irfuse.mesh.scatter import _inverse

    X, conn = mesh.box_tetrahedra(3, numbering="random", seed=2)
    want, orders = _inverse(conn, len(X)), mesh.reorder(conn, X, method="morton")
    renumbered = mesh.renumber(conn, *orders)[0]  # (by the compiled helper)
    for variable, value in (("IRFUSE_MESH_NATIVE", "0"), ("CXX", "/nonexistent/c++")):
        monkeypatch.setattr(native, "_LIBRARY", [])
        monkeypatch.setenv(variable, value)
        if variable == "CXX":
            monkeypatch.setenv("IRFUSE_CACHE_DIR", "/nonexistent-cache")
        assert native.scatter_order(conn.astype(np.int32), len(X), 64 * 4) is None
        for got in (mesh.Connectivity(conn, len(X)).inverse, mesh.inverse_connectivity(conn, len(X))):
            assert all(np.array_equal(a, b) for a, b in zip(got, want))
        assert np.array_equal(mesh.reorder(conn, X, method="morton")[1], orders[1])
        assert np.array_equal(mesh.renumber(conn, *orders)[0], renumbered)
        monkeypatch.delenv(variable)
    monkeypatch.setattr(native, "_LIBRARY", [])


@pytest.mark.parametrize("conn, nodes, said", [
    (np.array([[0, 1, 2, 3], [1, 2, 3, 9]]), 5, "element 1, position 3 names node 9, outside [0, 5)"),
    (np.array([[0, -1, 2, 3]]), None, "element 0, position 1 names node -1"),
    (np.array([0, 1, 2, 3]), None, "shape (elements, nodes per element), not (4,)"),
    (np.array([[0.0, 1.0, 2.0, 3.0]]), None, "a connectivity of float64 values; it takes int32 or int64 node numbers"),
])
def test_bad_connectivity_is_refused_naming_the_element_and_position(conn, nodes, said):
    with pytest.raises(UsageError, match=said.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        mesh.reorder(conn, nodes=nodes)


def test_a_connectivity_keeps_its_own_copy_of_the_node_numbers():
    """The caller's array written after `Connectivity` was made (a buffer used again) changed
    the node numbers the calls read behind the check and the scatter order (a wrong residual,
    NaN from a tensor zeroed), and an int32 array given was made read-only: a copy is kept."""
    import irfuse
    torch = pytest.importorskip("torch")
    X, conn = mesh.box_tetrahedra(2)
    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cpu", dtype="f64")
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    u = np.random.default_rng(0).standard_normal(X.shape)
    want = prog(X, u, mesh.Connectivity(conn, len(X)), dN, 1.5, 0.75).r.copy()
    buffer = np.concatenate([conn, conn]).astype(np.int32)
    tensor = torch.from_numpy(conn.astype(np.int32))
    made = [mesh.Connectivity(buffer[:len(conn)], len(X)), mesh.Connectivity(tensor, len(X))]
    buffer[:] = np.roll(buffer, 1, axis=0)
    tensor.zero_()
    for prepared in made:
        assert prog(X, u, prepared, dN, 1.5, 0.75).r.tobytes() == want.tobytes()
    mine = conn.astype(np.int32)
    mesh.Connectivity(mine, len(X))
    assert mine.flags.writeable
    # (pickled, as to a worker process: NumPy's pickling made its arrays writable again)
    import pickle
    moved = pickle.loads(pickle.dumps(made[0]))
    assert not moved.conn.flags.writeable and not any(a.flags.writeable for a in moved.inverse)
    assert prog(X, u, moved, dN, 1.5, 0.75).r.tobytes() == want.tobytes()


def test_a_connectivitys_buffers_are_asked_for_by_a_runtime_device_alone():
    """`on_device` is the runtime's call (a device of `irfuse.runtime`): a GPU's number, a
    string or None is refused by name, not an `AttributeError` of the upload; a device's
    buffers are uploaded once and kept for its later calls."""
    X, conn = mesh.box_tetrahedra(1)
    prepared = mesh.Connectivity(conn, len(X))
    for device in (0, "cuda:0", None):
        with pytest.raises(UsageError, match=f"on_device takes a runtime device .*not {type(device).__name__}"):
            prepared.on_device(device)

    class Device:
        uploads = 0

        def upload_integers(self, a):
            Device.uploads += 1
            return a.copy()

    device = Device()
    first = prepared.on_device(device)
    assert np.array_equal(first[0], prepared.conn) and prepared.on_device(device)[0] is first[0]
    assert Device.uploads == 1 + len(first[1])


def test_bad_arguments_are_refused():
    X, conn = mesh.box_tetrahedra(1)
    with pytest.raises(UsageError, match="method must be one of rcm, morton"):
        mesh.reorder(conn, method="hilbert")
    with pytest.raises(UsageError, match="'morton' needs the node coordinates"):
        mesh.reorder(conn, method="morton")
    with pytest.raises(UsageError, match="nodes=3 but coords has 8 rows"):
        mesh.reorder(conn, X, nodes=3)
    with pytest.raises(UsageError, match="node_order must be a permutation of 0..7"):
        mesh.renumber(conn, np.zeros(8, dtype=np.int64), np.arange(len(conn)))
    with pytest.raises(UsageError, match="nx must be a whole number of cubes"):
        mesh.box_tetrahedra(0)
    with pytest.raises(UsageError, match="numbering must be 'structured' or 'random'"):
        mesh.box_tetrahedra(1, numbering="shuffled")
    for seed in ("a", -1, 1.5, True):
        with pytest.raises(UsageError, match=f"box_tetrahedra: seed must be a whole number, at least 0, not {seed!r}"):
            mesh.box_tetrahedra(1, numbering="random", seed=seed)
    with pytest.raises(UsageError, match="box_hexahedra: seed must be a whole number, at least 0, not 'a'"):
        mesh.box_hexahedra(1, numbering="random", seed="a")
    with pytest.raises(UsageError, match="nx must be a whole number of cubes, at least 1, not True"):
        mesh.box_tetrahedra(True)
    prepared = mesh.Connectivity(conn, 8)
    with pytest.raises(UsageError, match="conn is a Connectivity already .of 8 nodes.: pass it"):
        mesh.Connectivity(prepared, 8)
    for d in (0, -1, "3", 2.0):
        with pytest.raises(UsageError, match=f"sparse_pattern: d is the size of a block .*, not {d!r}"):
            prepared.sparse_pattern(d)
    for call, said in (
            (lambda: mesh.reorder(conn, X, method=np.zeros(2)), "reorder: method must be one of rcm, morton, not"),
            (lambda: mesh.reorder(conn, X, nodes=np.zeros(2)), "reorder: nodes is the mesh's number of nodes"),
            (lambda: mesh.reorder(conn, "f64"), "reorder: coords must be an array of numbers"),
            (lambda: mesh.reorder(conn, X + 1j), "reorder: coords must be real numbers .*, not complex ones"),
            (lambda: mesh.renumber(conn, 0, np.arange(len(conn))), "renumber: node_order must be a permutation .a 1-D"),
            (lambda: mesh.renumber(conn, np.arange(8), np.arange(len(conn)), X[:3]),
             "renumber: nodal array 1 must have a row for each of the 8 nodes, not shape .3, 3."),
            (lambda: mesh.renumber(conn, np.arange(8), np.arange(len(conn)), per_element=(np.zeros(2),)),
             "renumber: per-element array 1 must have a row for each of the 6 elements"),
            (lambda: mesh.box_tetrahedra(1, index_dtype=1j), "box_tetrahedra: index_dtype must be int32 or int64, not"),
            (lambda: mesh.box_hexahedra(1, numbering=np.zeros(3)), "box_hexahedra: numbering must be 'structured' or"),
            (lambda: mesh.scatter_add(np.ones((len(conn), 4, 3)), conn, None), "scatter_add: nodes is the mesh's"),
            (lambda: mesh.scatter_add(np.ones((len(conn), 4, 3)), conn, 10**30), "8 entries|fewer than 2\\^31")):
        with pytest.raises(UsageError, match=said):
            call()


def _scatter_in_order(values, conn, nodes):
    """The scatter-add's definition, one entry at a time: within each group of consecutive
    elements (64 of four nodes, 32 of eight, ...), a node's rows added in ascending (element,
    position) order, the first row starting the partial; each node's partials added onto 0
    in group order."""
    from irfuse.artifact.scatter_groups import group_elements

    group = group_elements(conn.shape[1])
    out = np.zeros((nodes, *values.shape[2:]), dtype=values.dtype)
    for g0 in range(0, conn.shape[0], group):
        partials: dict = {}
        for e in range(g0, min(g0 + group, conn.shape[0])):
            for a in range(conn.shape[1]):
                n = int(conn[e, a])
                partials[n] = partials[n] + values[e, a] if n in partials else values[e, a].copy()
        for n, p in partials.items():
            out[n] += p
    return out


@pytest.mark.parametrize("k", [1, 3, 4, 8, 10, 27, 343, 729])
def test_the_scatter_order_gives_each_partial_its_groups_slots_of_a_node(k):
    """`inverse_connectivity` as the element kernel and the scatter kernel read it: partial p
    of group g (bases[g] <= p < bases[g + 1]) adds the rows of its members, from firsts[p] to
    the next partial's first (or the group's end), which are the group's slots of one node in
    ascending order; a group's partials are numbered longest first, equal lengths in the order
    of their first slots (so that the element kernel's warps hold partials of like lengths);
    every slot is some partial's once; each node lists its partials in ascending order, and
    adding them gives `scatter_add`'s bits (as both kernels do). An
    element of more than 256 nodes (343, 729: hexahedra of order 6 and 8) is a group of its
    own, its slots numbered in two bytes."""
    from irfuse.artifact.scatter_groups import group_elements

    rng = np.random.default_rng(k)
    elements, nodes = (301, 97) if k <= 256 else (23, 5000)
    conn = rng.integers(0, nodes, (elements, k))
    inverse = mesh.inverse_connectivity(conn, nodes)
    per_group = group_elements(k) * k
    if k <= 256:
        assert per_group <= 256 < 2 * per_group + k and inverse.members.dtype == np.uint8
    else:
        assert per_group == k and inverse.members.dtype == inverse.firsts.dtype == np.uint16
    rows = rng.standard_normal((elements * k, 2)).astype(np.float32)
    partials = np.full((len(inverse.partials), 2), np.nan, np.float32)
    node_of = np.full(len(inverse.partials), -1)
    flat, seen = conn.ravel(), []
    for g in range(len(inverse.bases) - 1):
        first, slots = g * per_group, min(per_group, conn.size - g * per_group)
        ranks = []  # (-length, first slot) of the group's partials in their order
        for p in range(inverse.bases[g], inverse.bases[g + 1]):
            end = int(inverse.firsts[p + 1]) if p + 1 < inverse.bases[g + 1] else slots
            mine = [first + int(m) for m in inverse.members[first + int(inverse.firsts[p]):first + end]]
            ranks.append((-len(mine), mine[0]))
            assert len(mine) and (np.diff(mine) > 0).all() and (flat[mine] == flat[mine[0]]).all()
            assert mine[0] == min(q for q in range(first, first + slots) if flat[q] == flat[mine[0]])
            acc = rows[mine[0]].copy()
            for q in mine[1:]:
                acc += rows[q]
            partials[p], node_of[p] = acc, flat[mine[0]]
            seen += mine
        assert ranks == sorted(ranks)
    assert sorted(seen) == list(range(conn.size)) and inverse.bases[-1] == len(inverse.partials)
    out = np.zeros((nodes, 2), np.float32)
    for n in range(nodes):
        mine = inverse.partials[inverse.starts[n]:inverse.starts[n + 1]]
        assert (node_of[mine] == n).all() and (np.diff(mine) > 0).all()
        for p in mine:
            out[n] += partials[p]
    assert out.tobytes() == mesh.scatter_add(rows.reshape(elements, k, 2), conn, nodes, inverse).tobytes()
    assert out.tobytes() == _scatter_in_order(rows.reshape(elements, k, 2), conn, nodes).tobytes()


def test_a_scatter_refuses_elements_of_more_nodes_than_a_group_holds():
    with pytest.raises(UsageError, match="at most 1024 nodes, not 1025"):
        mesh.inverse_connectivity(np.zeros((2, 1025), np.int32), 3)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_scatter_add_adds_each_groups_entries_of_a_node_in_order_then_the_groups_in_order(dtype):
    X, conn = mesh.box_tetrahedra(3, 2, 2, numbering="random", seed=4)
    nodes = len(X) + 2  # two nodes no element names: zero rows
    values = (np.random.default_rng(0).standard_normal((len(conn), 4, 3)) * 10.0 ** np.arange(-3, 3, 2)).astype(dtype)
    got = mesh.scatter_add(values, conn, nodes)
    want = _scatter_in_order(values, conn, nodes)
    assert got.dtype == dtype and np.array_equal(got, want)  # the same additions in the same order: the same bits
    assert (got[-2:] == 0).all()
    assert np.array_equal(mesh.scatter_add(values, conn, nodes, mesh.inverse_connectivity(conn, nodes)), got)
    # A renumbered mesh sums the same terms (in another order: equal to rounding).
    node_order, element_order = mesh.reorder(conn, nodes=nodes)
    new_conn, = mesh.renumber(conn, node_order, element_order)
    again = mesh.scatter_add(values[element_order], new_conn, nodes)
    np.testing.assert_allclose(again, got[node_order], rtol=1e-5 if dtype == np.float32 else 1e-12, atol=1e-6)


def test_scatter_add_of_a_repeated_node_and_of_scalars():
    conn = np.array([[0, 0, 1, 0]])
    got = mesh.scatter_add(np.array([[1.0, 2.0, 4.0, 8.0]]), conn, 3)
    assert got.tolist() == [11.0, 4.0, 0.0]


def test_scatter_add_refuses_values_that_do_not_match_and_indices_outside():
    conn = np.array([[0, 1, 2, 3]])
    with pytest.raises(UsageError, match=r"values of shape \(1, 3\) do not match the connectivity's \(1, 4\)"):
        mesh.scatter_add(np.zeros((1, 3)), conn, 4)
    with pytest.raises(UsageError, match=r"element 0, position 3 names node 3, outside \[0, 3\)"):
        mesh.scatter_add(np.zeros((1, 4)), conn, 3)


# The preparation on the GPU (`irfuse.mesh.on_gpu`) is whole-array PyTorch operations, which
# run the same on CPU tensors: here they are checked against the host's NumPy steps entry for
# entry; tests/test_gpu.py runs them on a GPU through `Connectivity` and `reorder`.


@pytest.mark.parametrize("k, elements, nodes, seed", [
    (4, 6 * 5**3, None, 0), (4, 1000, 50, 1), (3, 777, 400, 2), (8, 513, 900, 3), (10, 300, 2000, 4),
    (5, 1, 3, 5), (27, 40, 5000, 6), (1, 700, 20, 7), (343, 30, 4000, 8), (729, 7, 300, 9)])
def test_the_scatter_order_made_by_pytorch_is_the_hosts_entry_for_entry(k, elements, nodes, seed):
    torch = pytest.importorskip("torch")
    from irfuse.mesh.on_gpu import checked_on_gpu, inverse_on_gpu
    from irfuse.mesh.scatter import _inverse

    rng = np.random.default_rng(seed)
    if nodes is None:  # (a box of tetrahedra in a random numbering)
        X, conn = mesh.box_tetrahedra(5, numbering="random", seed=seed)
        nodes = len(X)
    else:  # (random entries: nodes repeated within an element and a group, nodes no element names)
        conn = rng.integers(0, nodes, (elements, k)).astype(np.int64)
    want = _inverse(conn, nodes)
    got = inverse_on_gpu(checked_on_gpu(torch.from_numpy(conn), nodes), nodes)
    for name, w, g in zip(want._fields, want, got):
        g = g.numpy()
        assert g.dtype == w.dtype and np.array_equal(g, w), name


@pytest.mark.parametrize("conn, nodes, said", [
    (np.array([[0, 1, 2, 3], [1, 2, 3, 9]]), 5, "element 1, position 3 names node 9, outside [0, 5)"),
    (np.array([[0, -1, 2, 3]], np.int32), 4, "element 0, position 1 names node -1, outside [0, 4)"),
    (np.array([0, 1, 2, 3]), 4, "shape (elements, nodes per element), not (4,)"),
    (np.array([[0.0, 1.0, 2.0, 3.0]]), 4, "float64 values; it takes int32 or int64 node numbers"),
])
def test_a_bad_connectivity_is_refused_by_pytorch_as_by_the_host(conn, nodes, said):
    torch = pytest.importorskip("torch")
    from irfuse.mesh.on_gpu import checked_on_gpu

    pattern = said.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")
    with pytest.raises(UsageError, match=pattern):
        checked_on_gpu(torch.from_numpy(conn), nodes)
    with pytest.raises(UsageError, match=pattern.replace("torch.float64", "float64")):
        mesh.check_connectivity(conn, nodes)


@pytest.mark.parametrize("numbering", ["structured", "random"])
def test_the_morton_order_made_by_pytorch_is_the_hosts(numbering):
    torch = pytest.importorskip("torch")
    from irfuse.mesh.on_gpu import element_order_on_gpu, morton_order_on_gpu

    X, conn = mesh.box_tetrahedra(6, numbering=numbering, seed=4)
    X[::7] = X[0]  # (ties in the curve: kept in node order)
    node_order, element_order = mesh.reorder(conn, X)
    got_nodes = morton_order_on_gpu(torch.from_numpy(X))
    assert np.array_equal(got_nodes.numpy(), node_order)
    assert np.array_equal(element_order_on_gpu(torch.from_numpy(conn), got_nodes).numpy(), element_order)


def test_host_preparation_with_pytorch_is_numpys_entry_for_entry():
    """Where PyTorch is at hand, a host `Connectivity`'s scatter order and a Morton `reorder`
    run its CPU ops (`irfuse.mesh.on_gpu.inverse_on_host`, `morton_on_host`): the same arrays
    as NumPy's, on structured and random numberings and on connectivities with repeated and
    unused nodes."""
    torch = pytest.importorskip("torch")  # (imported: the host path takes it)
    from irfuse.mesh import box_tetrahedra
    from irfuse.mesh.on_gpu import inverse_on_host, morton_on_host
    from irfuse.mesh.order import _morton_order
    from irfuse.mesh.scatter import _inverse

    assert torch is not None
    rng = np.random.default_rng(5)
    meshes = [box_tetrahedra(5), box_tetrahedra(5, numbering="random", seed=3)]
    for X, conn in meshes:
        made = inverse_on_host(conn.astype(np.int32), len(X))
        assert all(a.dtype == b.dtype and np.array_equal(a, b) for a, b in zip(made, _inverse(conn, len(X))))
        node_order, element_order = morton_on_host(conn, X)
        assert np.array_equal(node_order, _morton_order(X))
        renamed = np.sort(np.argsort(node_order)[conn], axis=1)
        assert np.array_equal(element_order, np.lexsort(renamed.T[::-1]))
    odd = rng.integers(0, 40, size=(300, 4)).astype(np.int32)
    odd[::3, 1] = odd[::3, 0]
    made = inverse_on_host(odd, 57)
    assert all(np.array_equal(a, b) for a, b in zip(made, _inverse(odd, 57)))


def test_each_name_irfuse_mesh_exports_is_its_function_or_class_once_every_module_is_imported():
    """`irfuse.mesh` imports its names on first use; a module named as one of them would,
    once imported, hide the name behind the module (the package's attribute)."""
    import importlib
    import pkgutil
    import types

    import irfuse.mesh

    for module in pkgutil.iter_modules(irfuse.mesh.__path__):
        importlib.import_module(f"irfuse.mesh.{module.name}")
    for name in irfuse.mesh.__all__:
        assert not isinstance(getattr(irfuse.mesh, name), types.ModuleType), name
    assert irfuse.mesh.partition.__module__ == "irfuse.mesh.partitions"
