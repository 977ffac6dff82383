"""Sparse assembly over a mesh (`irfuse.mesh.assembly`, `irfuse.tangent_matrix`): the pattern
made once and kept on the `Connectivity`, entries added in a fixed order (the owner-computes
kernel's bits are the NumPy reference's; the scatter of per-slot blocks it falls back to
gives the same sums to rounding), a scalar problem against a dense sum of its blocks, the
caller's family (SciPy, PyTorch), `out=` rewriting values in place, and refusals by name."""

import importlib.util
import os

import numpy as np
import pytest

import irfuse
from conftest import LONG, ROOT, copy_past_a_boundary
from irfuse.mesh import Connectivity, box_tetrahedra
from irfuse.mesh.assembly import assemble, sparse_pattern

pytest.importorskip("scipy")
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)

# A nonlinear scalar problem on triangles: fe = Ke ue + ue^3 (elementwise), so each element's
# block is Ke + diag(3 ue^2).
CUBIC = """
nodal scalar u, r;
index3 conn;
uniform matrix3x3 Ke;
vector3 ue, fe, c;
input u, conn, Ke;
ue = gather(u, conn);
fe = mvmul(Ke, ue);
c = emul(ue, ue);
c = emul(c, ue);
fe = add(fe, c);
r = scatter(fe, conn);
return r;
"""


def _dense(blocks: np.ndarray, conn: np.ndarray, nodes: int) -> np.ndarray:
    """Element blocks (E, K, D, K, D) added into a dense matrix, one at a time (float64; a
    node twice in an element adds twice)."""
    e, k, d = blocks.shape[:3]
    out = np.zeros((nodes * d, nodes * d))
    dofs = (conn[:, :, None] * d + np.arange(d)).reshape(e, k * d)
    for b, row in zip(blocks.reshape(e, k * d, k * d), dofs):
        np.add.at(out, (row[:, None], row[None, :]), b)
    return out


@pytest.mark.parametrize("k,d", [(3, 1), (4, 3), (8, 2)])
def test_the_pattern_holds_every_element_pair_and_each_diagonal_in_valid_csr(k, d):
    """Random connectivities (repeated nodes, unused nodes): the CSR arrays are SciPy's
    canonical form, the entries are exactly the dofs of node pairs sharing an element plus the
    diagonal, each element slot (a, i, b) names the run of row (conn[a], i) in the columns of
    node conn[b], `diagonal` points at each row's diagonal entry; and `assemble` equals adding
    each element's block into a dense matrix."""
    from scipy import sparse

    rng = np.random.default_rng(k * 10 + d)
    nodes = 40
    conn = rng.integers(0, nodes - 5, size=(60, k)).astype(np.int32)  # the last nodes unused
    p = sparse_pattern(conn, nodes, d)
    m = sparse.csr_matrix((np.arange(p.nnz) + 1.0, p.indices, p.indptr), shape=p.shape)
    assert m.has_canonical_format
    want = np.zeros((nodes, nodes), bool)
    for row in conn:
        want[np.ix_(row, row)] = True
    want |= np.eye(nodes, dtype=bool)
    assert np.array_equal(m.toarray() != 0, np.kron(want, np.ones((d, d), bool)))
    assert p.indices.dtype == np.int32 and p.pairs.shape == (60, k * d * k)
    slot = p.pairs.reshape(60, k, d, k)
    a, i, b = np.meshgrid(np.arange(k), np.arange(d), np.arange(k), indexing="ij")
    for e in range(60):
        runs = slot[e] * d
        assert np.array_equal(p.rows()[runs], conn[e][a] * d + i)
        assert np.array_equal(p.indices[runs + d - 1], conn[e][b] * d + d - 1)
    assert np.array_equal(p.indices[p.diagonal], np.arange(nodes * d))
    assert np.array_equal(p.rows()[p.diagonal], np.arange(nodes * d))
    torch = pytest.importorskip("torch")  # (the same pattern made with PyTorch, as on a GPU)
    same = sparse_pattern(torch.from_numpy(conn), nodes, d)
    for name in ("pairs", "indptr", "indices", "diagonal"):
        want = getattr(p, name)
        got = getattr(same, name).numpy()
        assert got.dtype == want.dtype and np.array_equal(got, want), name
    blocks = rng.standard_normal((60, k, d, k, d))
    got = assemble(blocks, conn, nodes)
    np.testing.assert_allclose(got.toarray(), _dense(blocks, conn, nodes), rtol=1e-13, atol=1e-13)


def test_a_scalar_tangent_is_its_blocks_summed_and_kept_with_its_connectivity():
    """The cubic problem (D = 1) on random triangles: the matrix is the dense sum of Ke +
    diag(3 ue^2) over the elements; the compiled scatter gives the NumPy reference's bits;
    the pattern is made once per `Connectivity`; `irfuse.diagonal` is its diagonal."""
    rng = np.random.default_rng(3)
    nodes, conn = 50, rng.integers(0, 50, size=(120, 3)).astype(np.int32)
    u = rng.standard_normal(nodes)
    Ke = rng.standard_normal((3, 3))
    prog = irfuse.compile(CUBIC, backend="cpu", dtype="f64")
    prepared = Connectivity(conn, nodes)
    M = irfuse.tangent_matrix(prog, u, prepared, Ke, wrt="u")
    ue = u[conn]
    blocks = np.broadcast_to(Ke, (len(conn), 3, 3)) + 3 * ue[:, :, None] ** 2 * np.eye(3)
    blocks = blocks.reshape(len(conn), 3, 1, 3, 1)
    np.testing.assert_allclose(M.toarray(), _dense(blocks, conn, nodes), rtol=1e-12, atol=1e-12)
    assert M.data.tobytes() == assemble(blocks, conn, nodes).data.tobytes()
    assert prepared.sparse_pattern(1) is prepared.sparse_pattern(1)
    # (these random triangles name nodes twice: the diagonal is taken from the blocks, with
    # the entries (a, b) of two slots naming one node)
    np.testing.assert_allclose(irfuse.diagonal(prog, u, prepared, Ke, wrt="u"), M.diagonal(), rtol=1e-13)
    assert prepared.kept["names a node twice"]


def test_the_diagonal_where_no_element_names_a_node_twice_is_one_program_without_blocks():
    """On a tetrahedral mesh (no element names a node twice) `irfuse.diagonal` runs the
    program of the diagonal over the mesh (its gathers, each block's diagonal entries, the
    scatter) and never makes the element blocks: the matrix's diagonal to rounding, the same
    bits at every call and from PyTorch tensors; a program of two outputs gives each one's."""
    torch = pytest.importorskip("torch")
    from irfuse.api.tangents import _jacobian_of

    prog, X, u, conn = _p1(3)
    M = irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u")
    fresh = irfuse.compile(f"{ROOT}/examples/mesh/p1_residual.kas", backend="cpu", dtype="f64", constants={"lam": 1.5})
    d = irfuse.diagonal(fresh, X, u, conn, DN, 0.75, wrt="u")
    jac = _jacobian_of(fresh, "r", "u", "diagonal")
    assert jac._diagonal is not None and jac._program is None and not conn.kept["names a node twice"]
    np.testing.assert_allclose(d.reshape(-1), M.diagonal(), rtol=1e-14, atol=1e-14 * abs(M.diagonal()).max())
    assert irfuse.diagonal(fresh, X, u, conn, DN, 0.75, wrt="u").tobytes() == d.tobytes()
    tensors = irfuse.diagonal(fresh, *(torch.from_numpy(a) for a in (X, u)), conn, torch.from_numpy(DN), 0.75,
                              wrt="u")
    assert isinstance(tensors, torch.Tensor) and tensors.numpy().tobytes() == d.tobytes()
    two = irfuse.compile("nodal vector3 X, u, r, s;\nindex4 conn;\nmatrix4x3 Xe, ue, fe, ge;\n"
                         "input X, u, conn;\nXe = gather(X, conn);\nue = gather(u, conn);\n"
                         "fe = emul(ue, ue);\nfe = emul(fe, Xe);\nge = emul(ue, Xe);\n"
                         "r = scatter(fe, conn);\ns = scatter(ge, conn);\nreturn r, s;\n",
                         backend="cpu", dtype="f64")
    for of, want in (("r", 2 * u * X), ("s", X)):
        counts = np.bincount(conn.conn.reshape(-1), minlength=len(X))[:, None]
        got = irfuse.diagonal(two, X, u, conn, wrt="u", of=of)
        np.testing.assert_allclose(got, counts * want, rtol=1e-14, atol=1e-14)


@pytest.mark.heavy
def test_each_node_row_is_summed_by_its_owner_with_nothing_kept_per_slot():
    """The P1 and Neo-Hookean tangents on a randomly numbered mesh (float64): the owner-computes
    kernel's values (its CPU twin keeping fewer element blocks than the mesh has) are the
    NumPy reference's bits (the element blocks added in ascending
    element order, then local nodes), the same bits on a second call; the connectivity keeps
    each node's slot lists and no per-slot map; the scatter of per-slot blocks (the path of a
    program the kernel cannot run, forced) gives the same matrix to rounding, and its map is
    made when first asked for."""
    import irfuse.api.tangents as tangents
    from irfuse.api.tangents import _element_blocks
    from irfuse.mesh.assembly import node_slots

    # (1,296 elements: more than the 1,024 float64 blocks a CPU worker keeps, so blocks are
    # let go of and computed again, `rows_emit.cached_blocks`)
    X, conn = box_tetrahedra(6, numbering="random", seed=4)
    u = 1e-2 * np.random.default_rng(5).standard_normal(X.shape)
    for name in ("p1_residual", "neo_hookean_residual"):
        prog = irfuse.compile(f"{ROOT}/examples/mesh/{name}.kas", backend="cpu", dtype="f64")
        prepared = Connectivity(conn, len(X))
        args = (X, u, prepared, DN, 1.5, 0.75)
        M = irfuse.tangent_matrix(prog, *args, wrt="u")
        blocks = _element_blocks(prog, args, {}, "u", None, None, "test")[0]
        want = assemble(blocks, conn, len(X))
        assert M.data.tobytes() == want.data.tobytes(), name
        assert irfuse.tangent_matrix(prog, *args, wrt="u").data.tobytes() == want.data.tobytes()
        pattern = prepared.sparse_pattern(3)
        assert pattern._pairs is None  # (no per-slot map made)
        starts, slots = prepared.kept[("node slots", "host")]
        assert np.array_equal(np.sort(conn.reshape(-1)[slots]), conn.reshape(-1)[slots])  # grouped by node
        assert np.array_equal(starts, np.concatenate([[0], np.cumsum(np.bincount(conn.reshape(-1),
                                                                                 minlength=len(X)))]))
        for n in (0, len(X) // 2, len(X) - 1):
            assert np.all(np.diff(slots[starts[n]:starts[n + 1]]) > 0)  # ascending slots, so elements
        assert [a.tolist() for a in node_slots(conn, len(X))] == [starts.tolist(), slots.tolist()]
        if importlib.util.find_spec("torch") is not None:  # (the lists made by PyTorch, as on a GPU: the same)
            import torch

            assert [a.tolist() for a in node_slots(torch.from_numpy(conn), len(X))] == [starts.tolist(),
                                                                                      slots.tolist()]
        with pytest.MonkeyPatch.context() as switch:
            switch.setenv(tangents.ROWS_SWITCH, "0")
            S = irfuse.tangent_matrix(prog, X, u, Connectivity(conn, len(X)), DN, 1.5, 0.75, wrt="u")
        assert abs(S - M).max() < 1e-13 * abs(M).max()
        assert pattern.pairs.shape == (len(conn), 4 * 3 * 4)


def test_the_places_the_gpu_kernel_reads_are_where_each_slots_nodes_lie_in_its_row():
    """The GPU's rounds kernel reads each slot's nodes' places in its node's row (a byte each)
    found once per connectivity by `PLACES_KERNEL`; its CPU twin, run on a randomly numbered
    mesh whose elements name a node twice, gives for every node, slot and local node b the
    index of the element's node b among the row's column blocks, and the rounds module's own
    CPU kernel, taking the places it does not read, the NumPy reference's bits."""
    from irfuse.api.tangents import _element_blocks
    from irfuse.backend.rows_emit import KERNEL, PLACES_KERNEL
    from irfuse.driver.front import element_jacobian, element_rows
    from irfuse.driver.rows_assembly import rows_artifact
    from irfuse.mesh.assembly import node_slots
    from irfuse.runtime.cpu_device import CpuDevice

    X, conn = box_tetrahedra(3, numbering="random", seed=2)
    conn = conn.copy()
    conn[::7, 3] = conn[::7, 1]  # (an element naming a node twice: the same place twice)
    nodes = len(X)
    pattern = sparse_pattern(conn, nodes, 3)
    ends = pattern.indptr[::3]
    widest = int((ends[1:] - ends[:-1]).max()) // 9
    source = f"{ROOT}/examples/mesh/p1_residual.kas"
    module, gathered, _, out = element_jacobian(source, "r", "u", "test")
    rows = element_rows(source, "r", "u", "test")
    artifact = rows_artifact(module, tuple(gathered), out, "f64", "cpu", None, 4, 3, False, widest, rows)
    assert [k.name for k in artifact.kernels] == [KERNEL, PLACES_KERNEL] and "places" in artifact.kernels[0].inputs
    starts, slots = node_slots(conn, nodes)
    lists = [np.ascontiguousarray(conn, np.int32), starts, slots, pattern.indptr, pattern.indices]
    places = np.full(conn.size * 4, 255, np.uint8)
    device = CpuDevice(artifact)
    device.launcher(PLACES_KERNEL, [*lists, places], nodes)()
    for n in range(nodes):
        row = pattern.indices[pattern.indptr[n * 3]:pattern.indptr[n * 3 + 1]:3] // 3  # the row's column blocks
        for s in range(starts[n], starts[n + 1]):
            want = np.searchsorted(row, conn[slots[s] // 4])
            assert places[s * 4:s * 4 + 4].tolist() == want.tolist()
            assert row[want].tolist() == conn[slots[s] // 4].tolist()
    u = 1e-2 * np.random.default_rng(3).standard_normal(X.shape)
    values = np.zeros(len(pattern.indices))
    device.launcher(KERNEL, [DN, np.array([1.5]), np.array([0.75]), X, u, *lists, places, values], nodes)()
    prog = irfuse.compile(source, backend="cpu", dtype="f64")
    blocks = _element_blocks(prog, (X, u, Connectivity(conn, nodes), DN, 1.5, 0.75), {}, "u", None, None, "test")[0]
    assert values.tobytes() == assemble(blocks, conn, nodes).data.tobytes()


def test_arguments_the_owner_computes_kernel_cannot_take_as_they_are_are_refused_by_name():
    """The kernel reads its arguments as arrays of structures of the program's type: an
    input of another width, element type or node count, or a uniform value of another
    shape, is refused by name as the program's own call refuses it (no read past an array);
    a uniform scalar as a number of another type is converted, as a call converts it."""
    X, conn = box_tetrahedra(2)
    X, u, dN = X.astype(np.float32), np.zeros(X.shape, np.float32), DN.astype(np.float32)
    prog = irfuse.compile(f"{ROOT}/examples/mesh/p1_residual.kas", backend="cpu")
    prepared = Connectivity(conn, len(X))
    want = irfuse.tangent_matrix(prog, X, u, prepared, dN, 1.5, 0.75, wrt="u")
    got = irfuse.tangent_matrix(prog, X, u, prepared, dN, np.float64(1.5), np.array(0.75), wrt="u")
    assert got.data.tobytes() == want.data.tobytes()
    for args, match in [((X[:, :2].copy(), u, prepared, dN, 1.5, 0.75), r"input 'X' has shape \(27, 2\)"),
                        ((X.astype(float), u, prepared, dN, 1.5, 0.75), "holds float64"),
                        ((X[:-1], u, prepared, dN, 1.5, 0.75), "input 'X' holds 26 nodes and 'u' 27"),
                        ((X, u, prepared, dN[:2], 1.5, 0.75), r"'dN' has shape \(2, 3\)"),
                        ((X, u, prepared, dN, np.ones(3, np.float32), 0.75), r"'lam' has shape \(3,\)"),
                        ((X, u, prepared, dN, True, 0.75), "'lam' is a bool")]:
        with pytest.raises(irfuse.UsageError, match=match):
            irfuse.tangent_matrix(prog, *args, wrt="u")


def _p1(cubes: int = 2):
    X, conn = box_tetrahedra(cubes, numbering="random", seed=2)
    prog = irfuse.compile(f"{ROOT}/examples/mesh/p1_residual.kas", backend="cpu", dtype="f64")
    u = 1e-2 * np.random.default_rng(1).standard_normal(X.shape)
    return prog, X, u, Connectivity(conn, len(X))


def test_out_rewrites_the_values_of_an_earlier_matrix_in_place():
    """`out=` a matrix of the same pattern: its values become the new call's bits and it is
    returned; one of another pattern, of another dtype, or no CSR matrix is refused."""
    from scipy import sparse

    prog, X, u, conn = _p1()
    first = irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u")
    want = irfuse.tangent_matrix(prog, X, u, conn, DN, 2.5, 0.5, wrt="u")
    again = irfuse.tangent_matrix(prog, X, u, conn, DN, 2.5, 0.5, wrt="u", out=first)
    assert again is first and first.data.tobytes() == want.data.tobytes()
    other = sparse.csr_matrix(first.shape)
    with pytest.raises(irfuse.UsageError, match="another pattern"):
        irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u", out=other)
    with pytest.raises(irfuse.UsageError, match="out= takes a scipy.sparse CSR matrix"):
        irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u", out=first.toarray())
    single = sparse.csr_matrix((first.data.astype(np.float32), first.indices, first.indptr), shape=first.shape)
    with pytest.raises(irfuse.UsageError, match="float32 values"):
        irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u", out=single)
    with pytest.raises(irfuse.UsageError, match="fixed= is a boolean array"):
        irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u", fixed=np.zeros(X.shape))


def test_out_whose_values_were_replaced_is_refused_unless_they_can_be_written_whole():
    """A matrix an earlier call returned is written through its `data`, which the caller may
    have replaced: a shorter array was written past its end (the process then crashed at
    exit), a strided view as if contiguous (a wrong matrix), a read-only one all the same."""
    prog, X, u, conn = _p1()
    args = (prog, X, u, conn, DN, 1.5, 0.75)
    want = irfuse.tangent_matrix(*args, wrt="u")
    short = irfuse.tangent_matrix(*args, wrt="u")
    short.data = short.data[:5].copy()
    with pytest.raises(irfuse.UsageError, match=f"out= holds 5 values shaped \\(5,\\); its pattern has {want.nnz} "
                                                "entries"):
        irfuse.tangent_matrix(*args, wrt="u", out=short)
    strided = irfuse.tangent_matrix(*args, wrt="u")
    strided.data = np.repeat(strided.data, 2)[::2]
    with pytest.raises(irfuse.UsageError, match="strided view"):
        irfuse.tangent_matrix(*args, wrt="u", out=strided)
    frozen = irfuse.tangent_matrix(*args, wrt="u")
    frozen.data = frozen.data.copy()
    frozen.data.flags.writeable = False
    with pytest.raises(irfuse.UsageError, match="read-only"):
        irfuse.tangent_matrix(*args, wrt="u", out=frozen)
    fresh = irfuse.tangent_matrix(*args, wrt="u")
    fresh.data = np.zeros_like(fresh.data)  # (replaced by an array that fits: written)
    assert irfuse.tangent_matrix(*args, wrt="u", out=fresh).data.tobytes() == want.data.tobytes()


def test_out_whose_indices_changed_or_of_another_family_is_refused():
    """A SciPy matrix holds copies of the pattern's indices, which the caller may replace or
    write in place: the values were written in the pattern's order all the same (a wrong
    matrix); a matrix of another array library than the call's ended in an AttributeError."""
    torch = pytest.importorskip("torch")
    prog, X, u, conn = _p1()
    args = (prog, X, u, conn, DN, 1.5, 0.75)
    for change in ("replaced", "written"):
        moved = irfuse.tangent_matrix(*args, wrt="u")
        if change == "replaced":
            moved.indices = moved.indices[::-1].copy()
        else:
            moved.indices[:] = moved.indices[::-1].copy()
        with pytest.raises(irfuse.UsageError, match="out= is a matrix of another pattern"):
            irfuse.tangent_matrix(*args, wrt="u", out=moved)
    host = irfuse.tangent_matrix(*args, wrt="u")
    tensors = (prog, *(torch.from_numpy(a) for a in (X, u)), conn, torch.from_numpy(DN), 1.5, 0.75)
    with pytest.raises(irfuse.UsageError, match="out= is a scipy csr_matrix; this call's arrays take a "
                                                "torch.sparse_csr_tensor"):
        irfuse.tangent_matrix(*tensors, wrt="u", out=host)
    with pytest.raises(irfuse.UsageError, match="out= is a torch Tensor; this call's arrays take a scipy.sparse"):
        irfuse.tangent_matrix(*args, wrt="u", out=irfuse.tangent_matrix(*tensors, wrt="u"))


def test_pytorch_tensors_get_a_sparse_csr_tensor_with_the_same_bits():
    """PyTorch tensors in, a `torch.sparse_csr_tensor` out (int32 indices), its values the
    SciPy matrix's bits, Dirichlet rows and columns the same; `out=` rewrites its values; the
    diagonal comes back as a tensor."""
    torch = pytest.importorskip("torch")
    prog, X, u, conn = _p1()
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    want = irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u", fixed=fixed)
    tX, tu, tdn = (torch.from_numpy(a) for a in (X, u, DN))
    got = irfuse.tangent_matrix(prog, tX, tu, conn, tdn, 1.5, 0.75, wrt="u", fixed=torch.from_numpy(fixed))
    assert got.layout == torch.sparse_csr and got.col_indices().dtype == torch.int32
    assert got.values().numpy().tobytes() == want.data.tobytes()
    assert np.array_equal(got.col_indices().numpy(), want.indices)
    assert np.array_equal(got.crow_indices().numpy(), want.indptr)
    plain = irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u")
    assert irfuse.tangent_matrix(prog, tX, tu, conn, tdn, 1.5, 0.75, wrt="u", out=got) is got
    assert got.values().numpy().tobytes() == plain.data.tobytes()
    d = irfuse.diagonal(prog, tX, tu, conn, tdn, 1.5, 0.75, wrt="u", fixed=torch.from_numpy(fixed))
    assert isinstance(d, torch.Tensor) and d.numpy().reshape(-1).tobytes() == want.diagonal().tobytes()


ROW_READ = """
nodal vector3 u, r;
index2 conn;
matrix2x3 ue, fe;
vector3 b;
scalar s;
input u, conn;
ue = gather(u, conn);
b = ue[1];
s = dot(b, b);
fe = scale(ue, s);
r = scatter(fe, conn);
return r;
"""


def test_a_tangent_reading_a_row_of_a_gathered_value_reads_that_row():
    """`ue[1]` reads words 3-5 of the gathered rows: the owner-computes kernel called the op's
    register variant on the whole value and read words 0-2 (the first row for every entry
    read), a wrong matrix on both backends; it is the reference assembly's bits and the
    program's central differences."""
    from irfuse.testing.derivatives import tangent_against_differences

    out = tangent_against_differences(ROW_READ, n=12, seed=1)
    assert out.compared == 1 and not out.mismatches and not out.refused, (out.mismatches, out.refused)


@pytest.mark.heavy
def test_tangent_matrices_of_random_mesh_programs_are_their_central_differences():
    """The differential test of `irfuse.tangent_matrix`: random programs over meshes whose
    tangents can be taken (`mesh_tangents`: gathers once, no nodal statements) and the
    derivative tests' own `mesh` programs, each nodal output by each nodal input on a random
    mesh (repeated nodes, unused nodes, one node for every entry): M v is the central
    difference of the program along v wherever the tangent is taken, and with Dirichlet
    conditions on a random quarter of the components (flat indices to the matrix, a mask to
    the diagonal) the plain matrix and diagonal conditioned, bit for bit; the pairs it refuses
    (not square, staged programs, ...) are refused by name, and enough pairs are compared for
    the test to mean something."""
    from irfuse.testing.derivatives import random_differentiable_programs, tangent_against_differences

    compared, refused = 0, []
    # (sixteen random programs in the long runs, `IRFUSE_FUZZ_LONG=1`; ten here compare 19 pairs)
    seeds = range(16 if LONG else 10)
    for kind, seed in [("mesh_tangents", s) for s in seeds] + [("mesh", s) for s in range(4)]:
        out = tangent_against_differences(random_differentiable_programs(kind, seed), n=12, seed=seed)
        assert not out.mismatches, (seed, out.mismatches)
        compared += out.compared
        refused += out.refused
    assert compared >= 16, refused
    assert all("tangent_matrix" in r for r in refused), refused


def test_jacobian_and_hessian_of_a_mesh_program_are_sparse_tangents():
    """`irfuse.jacobian` of a compiled mesh program by a nodal input is a `Tangent` whose call
    is `tangent_matrix`'s matrix (bits); `irfuse.hessian` of an energy summed over the
    elements by a nodal input is its gradient's tangent: for the P1 elasticity energy
    1/2 u.K u, the stiffness itself; of a program that returns its gradient already (as
    `grad_u`), that gradient's tangent (its own gradient named apart). A source text or a
    per-element output is refused."""
    prog, X, u, conn = _p1()
    J = irfuse.jacobian(prog, of="r", wrt="u")
    want = irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u")
    got = J(X, u, conn, DN, 1.5, 0.75)
    assert got.data.tobytes() == want.data.tobytes() and "dr/du" in repr(J)
    np.testing.assert_allclose(J.diagonal(X, u, conn, DN, 1.5, 0.75).reshape(-1), want.diagonal(), rtol=1e-13)
    source = open(f"{ROOT}/examples/mesh/p1_residual.kas").read()
    head = source[:source.index("r = scatter(fe, conn);")].replace("nodal vector3 X, u, r;", "nodal vector3 X, u;")
    energy = irfuse.compile(head.replace("scalar detJ, vol, tr;", "scalar detJ, vol, tr, w;\nuniform scalar E;") +
                            "w = ddot(fe, ue);\nw = scale(w, 0.5);\nE = sum(w);\nreturn E;\n",
                            backend="cpu", dtype="f64")
    H = irfuse.hessian(energy, of="E", wrt="u")(X, u, conn, DN, 1.5, 0.75)
    assert abs(H - want).max() < 1e-12 * abs(want).max()
    mesh = f"{ROOT}/examples/mesh/neo_hookean_energy.kas"  # (it returns its gradient grad_u already)
    with_gradient = irfuse.compile(mesh, backend="cpu", dtype="f64")
    assert "grad_u" in with_gradient.outputs
    args = (X, u, conn, DN, 1.5, 0.75)
    hessian = irfuse.hessian(with_gradient, of="E", wrt="u")
    assert hessian(*args).data.tobytes() == irfuse.jacobian(with_gradient, of="grad_u", wrt="u")(*args).data.tobytes()
    np.testing.assert_allclose(hessian.diagonal(*args).reshape(-1), hessian(*args).diagonal(), rtol=1e-13)
    with pytest.raises(irfuse.UsageError, match="wrt is a nodal input"):
        irfuse.jacobian(prog, of="r", wrt="lam")
    for of in (["r"], 3):
        with pytest.raises(irfuse.UsageError, match="of takes an output's name"):
            irfuse.tangent_matrix(prog, X, u, conn, DN, 1.5, 0.75, wrt="u", of=of)
    with pytest.raises(irfuse.UsageError, match="irfuse.jacobian of the compiled program"):
        irfuse.jacobian(f"{ROOT}/examples/mesh/p1_residual.kas", of="r", wrt="u")


@pytest.mark.parametrize("name", ["p1_residual", "neo_hookean_residual"])
def test_the_gpu_kernel_computes_a_nodes_block_rows_by_reverse_sweeps_and_compiles_with_nvrtc(name):
    """The GPU's owner-computes kernel takes the element part's vector-Jacobian product (D
    reverse sweeps a slot, the cotangent 1 at the node's rows) where the CPU twin keeps the
    Jacobian's whole block: NVRTC compiles it for sm_90 in float32 and float64, with fewer
    registers or spills than the kernel that runs the Jacobian's K x D forward directions a
    slot, and in float32 without spilling. Where a pattern's rows are too wide for a block's
    rounds of slots (`rounds_nodes`), the kernel of D threads a node adding in the values
    serves, and compiles too."""
    from irfuse.backend.rows_emit import rounds_nodes
    from irfuse.driver.front import element_jacobian, element_rows
    from irfuse.driver.rows_assembly import rows_artifact

    source = f"{ROOT}/examples/mesh/{name}.kas"
    module, gathered, _, out = element_jacobian(source, "r", "u", "test")
    rows = element_rows(source, "r", "u", "test")
    assert rows is not None and rows[1] in rows[0].inputs and rows[2] in rows[0].outputs
    for dtype in ("f32", "f64"):
        made = {}
        for how, given in (("forward", None), ("reverse", rows)):
            artifact = rows_artifact(module, tuple(gathered), out, dtype, "cuda", "sm_90", 4, 3, False, 15, given)
            text = artifact.source
            gpu_part = text[text.index("#ifndef IRFUSE_HOST\n"):text.index("void irf_tangent_node_cached(")]
            assert ("? (real_t)1 : (real_t)0;" in gpu_part) == (given is not None) and "switch (a)" in text
            assert ("irf_part[" in gpu_part) == (given is not None)  # (the rounds of slots)
            assert ("irf_tangent_places(" in gpu_part) == (given is not None)  # (their places, found once)
            made[how] = artifact.cubin.resources["irf_tangent_rows"]
        wide = rows_artifact(module, tuple(gathered), out, dtype, "cuda", "sm_90", 4, 3, False, 64, rows)
        assert rounds_nodes(64, 4, 3, wide.itemsize, 4) == 0 and "irf_part[" not in wide.source
        assert "irf_tangent_node(" in wide.source and wide.cubin.resources["irf_tangent_rows"].registers > 0
        # (a pattern of no nodes, widest 0: NVRTC refuses arrays of no words)
        assert rows_artifact(module, tuple(gathered), out, dtype, "cuda", "sm_90", 4, 3, False, 0, rows).cubin.cubin
        assert made["reverse"].registers <= made["forward"].registers, dtype
        assert made["reverse"].spill_stores < made["forward"].spill_stores or made["reverse"].spill_stores == 0
        if dtype == "f32":  # (fewer registers, or none spilled where the forward directions spill)
            assert made["reverse"].spill_stores == 0
            assert made["reverse"].registers < made["forward"].registers or made["forward"].spill_stores > 0


def test_the_gpu_kernels_of_random_mesh_programs_tangents_compile_with_nvrtc():
    """Every tangent the differential tests' random mesh programs (`mesh_tangents`) allow, by
    every nodal input: its owner-computes kernel, the reverse sweeps a row on the GPU where
    the element part's vector-Jacobian product can be made, compiles with NVRTC for sm_90 in
    float64 (or the program is refused by name for the kernel, `NotRowsForm`: the scatter path
    then serves)."""
    from irfuse.diagnostics import CompileError, UsageError
    from irfuse.dialects.kas import program_of
    from irfuse.driver.front import element_jacobian, element_rows, frontend
    from irfuse.driver.rows_assembly import rows_artifact
    from irfuse.driver.sources import Source
    from irfuse.testing.derivatives import random_differentiable_programs

    built = 0
    for seed in range(16):
        source = random_differentiable_programs("mesh_tangents", seed)
        program = program_of(frontend(Source(source, "<tangent kernels>")).module)
        for y in [n for n in program.outputs if n in program.nodal]:
            for x in [n for n in program.inputs if n in program.nodal]:
                try:
                    module, gathered, _, out = element_jacobian(source, y, x, "test")
                except (UsageError, CompileError):
                    continue
                rows = element_rows(source, y, x, "test")
                shape = tuple(program_of(module).return_op.values[-1].type.shape)
                k, d = shape[0], int(np.prod(shape[1:1 + (len(shape) - 2) // 2]))
                artifact = rows_artifact(module, tuple(gathered), out, "f64", "cuda", "sm_90", k, d, False, 16, rows)
                if artifact is not None:
                    assert artifact.cubin.cubin and "irf_tangent_rows" in artifact.cubin.resources
                    built += rows is not None
    assert built >= 16


@pytest.mark.parametrize("k, d, threads, itemsize", [(4, 3, 96, 4), (4, 3, 48, 8), (4, 1, 32, 4), (8, 3, 96, 4),
                                                     (3, 2, 64, 4), (10, 3, 48, 8)])
def test_the_rounds_kernels_staging_keeps_a_warps_accesses_to_one_word_a_bank(k, d, threads, itemsize):
    """`staging_layout` (S, R): thread t stages word m of its slot's block row i at t S + i R + m.
    No two of a slot's words share a place; threads storing the same word of their slots, and
    thread (x, y) reading word m of row x of node y's q-th slot of a round (slot y D + q), touch
    distinct banks for distinct words among the lanes served together (32 banks of 4 bytes: a
    warp for float32, a half warp for float64)."""
    from irfuse.backend.rows_emit import staging_layout

    s, r = staging_layout(k, d, threads, itemsize)
    places = {t * s + i * r + m for t in range(threads) for i in range(d) for m in range(k * d)}
    assert len(places) == threads * d * k * d and max(i * r + m for i in range(d) for m in range(k * d)) < s
    lanes = 32 // (itemsize // 4)

    def one_word_a_bank(words):
        banks = {}
        return all(banks.setdefault(w % lanes, w) == w for w in words)

    for w0 in range(0, threads, lanes):
        group = range(w0, min(w0 + lanes, threads))
        for m in range(k * d):
            for i in range(d):  # (the stores: every thread word m of its row i)
                assert one_word_a_bank([t * s + i * r + m for t in group])
            for q in range(d):  # (the reads: thread tid = y D + x, word m of row x of slot y D + q)
                assert one_word_a_bank([(tid // d * d + q) * s + tid % d * r + m for tid in group])


def test_the_rounds_kernel_fits_its_shared_memory_for_rows_of_every_width():
    """Where a pattern's rows and a round fit (`rounds_nodes`), the rounds kernel's static shared
    memory stays within a block's 48 KB (the rows, the staging, the rows written out through the
    staging's room a window at a time), in float32 and float64, and NVRTC compiles it; wider
    rows take the kernel of D threads a node."""
    from irfuse.backend.rows_emit import SHARED_LIMIT, rounds_nodes
    from irfuse.driver.front import element_jacobian, element_rows
    from irfuse.driver.rows_assembly import rows_artifact

    source = f"{ROOT}/examples/mesh/p1_residual.kas"
    module, gathered, _, out = element_jacobian(source, "r", "u", "test")
    rows = element_rows(source, "r", "u", "test")
    for dtype, itemsize, widest in (("f32", 4, 20), ("f32", 4, 60), ("f64", 8, 20), ("f64", 8, 28)):
        nodes = rounds_nodes(widest, 4, 3, itemsize, 4)
        artifact = rows_artifact(module, tuple(gathered), out, dtype, "cuda", "sm_90", 4, 3, False, widest, rows)
        used = artifact.cubin.resources["irf_tangent_rows"]
        assert ("irf_part[" in artifact.source) == (nodes > 0)
        assert used.shared_bytes <= SHARED_LIMIT and used.spill_stores == 0, (dtype, widest, used)
        if nodes:
            assert f"__launch_bounds__({3 * nodes})" in artifact.source


def _slot_rows_against_blocks(source: str, of: str, wrt: str, seed: int, inputs: dict | None = None,
                              constants: tuple = ()) -> int:
    """Runs, on the CPU, the GPU rounds kernel's slot code (`rows_emit._element_code` with the
    vector-Jacobian product's cotangent: D reverse sweeps, folded where the cotangent's words are
    0, and every op reading a literal word written out) beside the CPU twin's whole element
    block (the Jacobian's forward directions) for every slot of a random mesh (`float64_inputs`,
    or `inputs`; `constants`: uniform inputs fixed, `options.constant_numbers`), and checks each
    slot's D rows against block rows (a, :) of its element. Returns the slots checked (0 where
    the program takes neither)."""
    from irfuse.artifact.arrays import element_type
    from irfuse.artifact.kernel_info import KernelInfo
    from irfuse.backend.cuda_emit import prelude
    from irfuse.backend.host_compile import build_host_library
    from irfuse.backend.rows_emit import NotRowsForm, _element_code, whole_values_variant
    from irfuse.dialects.kas import program_of
    from irfuse.driver.front import element_jacobian, element_rows, frontend
    from irfuse.driver.sources import read_source
    from irfuse.library.catalogue import default_library
    from irfuse.runtime.host_library import HostLibrary
    from irfuse.testing.derivatives import float64_inputs

    module, gathered, conn_name, out = element_jacobian(source, of, wrt, "test", constants)
    rows = element_rows(source, of, wrt, "test", constants)
    if rows is None:
        return 0
    jac, library, element = program_of(module), default_library(), element_type("f64")
    block = jac.return_op.values[list(jac.outputs).index(out)]
    shape = tuple(block.type.shape)
    k, d = shape[0], int(np.prod(shape[1:1 + (len(shape) - 2) // 2]))
    vjp, seed_name, bar = rows
    try:
        jac_body, used, jac_names = _element_code(jac, tuple(gathered), set(jac.uniform), library, k, d)
        slot_body, more, slot_names = _element_code(vjp, tuple(gathered), set(vjp.uniform), library, k, d, seed_name)
    except NotRowsForm:
        return 0
    assert not any("vjp_" in line for line in slot_body if "(0, 0," in line)  # (the sweeps written out)
    kd = k * d
    slot_rows = [slot_names(vjp.return_op.values[list(vjp.outputs).index(bar)], i) for i in range(d)]
    names = list(jac.inputs)
    params = [f"const real_t* __restrict__ in_{n}" for n in names]
    text = [f"static int slot_rows({', '.join(params)}, const int* __restrict__ conn, real_t* __restrict__ rows, "
            "real_t* __restrict__ blocks, const long long n, const long long block_begin, const long long block_end, "
            "const bool reverse)", "{", "  (void)reverse;",
            "  for (long long s = block_begin * 32; s < block_end * 32 && s < n; ++s) {",
            f"    const int slot = (int)s; const long long e = slot / {k}; const int a = slot % {k};",
            f"    int nodes[{k}]; for (int b = 0; b < {k}; ++b) nodes[b] = conn[e * {k} + b];",
            "    {", *("      " + line for line in jac_body),
            f"      if (a == 0) for (int w = 0; w < {kd * kd}; ++w) blocks[e * {kd * kd} + w] = {jac_names(block)}[w];",
            "    }", "    {", *("      " + line for line in slot_body),
            *(f"      for (int w = 0; w < {kd}; ++w) rows[(s * {d} + {i}) * {kd} + w] = {r}[w];"
              for i, r in enumerate(slot_rows)),
            "    }", "  }", "  return 0;", "}"]
    functions = [impl.device_source(whole_values_variant(impl)).replace("BX", "1")
                 for impl in dict.fromkeys([*used, *more])]
    host = element.c_prelude + "\n\n".join([prelude(), *functions, "\n".join(text)]) + "\n"
    if inputs is None:
        inputs, _ = float64_inputs(program_of(frontend(read_source(source, None, "test")).module), 40, seed)
    conn = np.ascontiguousarray(inputs[conn_name], dtype=np.int32)
    elements = conn.shape[0]
    arrays = []
    for n in names:
        a = inputs[gathered[n][0]] if n in gathered else inputs[n]
        arrays.append(np.ascontiguousarray(np.broadcast_to(np.asarray(a, float), np.shape(a) or (1,))))
    got = np.full((elements * k, d, kd), np.nan)
    want = np.full((elements, kd, kd), np.nan)
    kernel = KernelInfo("slot_rows", 1, 32, 0, [*names, "conn"], ["rows", "blocks"], [1] * (len(names) + 1), [1, 1],
                        input_types=[""] * len(names) + ["int"])
    HostLibrary(build_host_library(host, [kernel]), [kernel]).launch("slot_rows", [*arrays, conn, got, want],
                                                                      elements * k)
    want = want.reshape(elements, k, d, kd)
    expect = want[np.arange(elements * k) // k, np.arange(elements * k) % k]  # block rows (a, :) of each slot
    finite = np.isfinite(expect).all(axis=(1, 2))
    scale = max(np.abs(expect[finite]).max(initial=0.0), 1.0)
    np.testing.assert_allclose(got[finite], expect[finite], rtol=0, atol=1e-12 * scale, err_msg=f"{seed} d{of}/d{wrt}")
    return int(finite.sum())


def test_the_gpu_slots_reverse_sweeps_folded_where_their_cotangent_is_0_give_the_jacobians_block_rows():
    """The GPU rounds kernel's slot code writes each reverse sweep's entries out with the
    cotangent's words of other rows the literal 0 (a product with it 0, a sum with it its other
    term: `rows_emit._folded_entries`), and any op reading a table's words (`constants=`), which
    no test of the CPU backend runs: run here as host code for the examples (dN given, and dN
    fixed) and the random mesh programs whose tangents can be taken, each slot's D rows are its
    element's block rows (a, :) as the CPU twin's forward directions make them."""
    from irfuse.diagnostics import CompileError, UsageError
    from irfuse.dialects.kas import program_of
    from irfuse.driver.front import frontend
    from irfuse.driver.options import constant_numbers
    from irfuse.driver.sources import Source
    from irfuse.testing.derivatives import random_differentiable_programs

    X, conn = box_tetrahedra(2, numbering="random", seed=2)
    u = 1e-2 * np.random.default_rng(1).standard_normal(X.shape)
    box = {"X": X, "u": u, "conn": conn, "dN": DN, "lam": 1.3, "mu": 0.7}
    fixed = constant_numbers({"dN": DN})  # (dN's zeros and ones then fold in the geometry too)
    for name in ("p1_residual", "neo_hookean_residual"):
        assert _slot_rows_against_blocks(f"{ROOT}/examples/mesh/{name}.kas", "r", "u", 0, box) == 4 * len(conn)
        assert _slot_rows_against_blocks(f"{ROOT}/examples/mesh/{name}.kas", "r", "u", 0, box, fixed) == 4 * len(conn)
    programs = 0
    for seed in range(10 if LONG else 5):
        source = random_differentiable_programs("mesh_tangents", seed)
        program = program_of(frontend(Source(source, "<slot rows>")).module)
        for y in [n for n in program.outputs if n in program.nodal]:
            for x in [n for n in program.inputs if n in program.nodal]:
                try:
                    programs += _slot_rows_against_blocks(source, y, x, seed) > 0
                except (UsageError, CompileError):
                    continue
    assert programs >= 4, programs


def test_a_program_compiled_with_constants_gives_the_tangent_diagonal_and_operator_of_one_given_them():
    """`constants=` (uniform inputs fixed when compiling) reaches the element programs the
    tangents are made from (`driver.front.element_jacobian`, `element_rows`,
    `element_assembly`): the owner-computes kernel reads the table as the program's kernels do
    and takes the arrays the program's calls pass (it raised a KeyError for the input fixed);
    the matrix, by either assembly, the diagonal and the operator are those of the program
    given the same numbers at the call, bit for bit, with and without fixed components."""
    import os

    X, conn = box_tetrahedra(2, numbering="random", seed=3)
    u = 1e-2 * np.random.default_rng(0).standard_normal(X.shape)
    mesh = Connectivity(conn, len(X))
    fixed = np.zeros(X.shape, bool)
    fixed[::5] = True
    for name in ("p1_residual", "neo_hookean_residual"):
        path = f"{ROOT}/examples/mesh/{name}.kas"
        given = irfuse.compile(path, backend="cpu", dtype="f64")
        tabled = irfuse.compile(path, backend="cpu", dtype="f64", constants={"dN": DN})
        assert "dN" not in tabled.inputs
        for rows in ("1", "0"):  # (the owner-computes kernel; the scatter of per-slot blocks)
            os.environ["IRFUSE_TANGENT_ROWS"] = rows
            try:
                for mask in (None, fixed):
                    want = irfuse.tangent_matrix(given, X, u, mesh, DN, 1.5, 0.75, wrt="u", fixed=mask)
                    got = irfuse.tangent_matrix(tabled, X, u, mesh, 1.5, 0.75, wrt="u", fixed=mask)
                    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
                    assert got.data.tobytes() == want.data.tobytes(), (name, rows, mask is None)
            finally:
                del os.environ["IRFUSE_TANGENT_ROWS"]
        d = irfuse.diagonal(tabled, X, u, mesh, 1.5, 0.75, wrt="u")
        assert d.tobytes() == irfuse.diagonal(given, X, u, mesh, DN, 1.5, 0.75, wrt="u").tobytes()
        v = np.random.default_rng(1).standard_normal(u.size)
        A = irfuse.linear_operator(tabled, X, u, mesh, 1.5, 0.75, wrt="u")
        B = irfuse.linear_operator(given, X, u, mesh, DN, 1.5, 0.75, wrt="u")
        assert (A @ v).tobytes() == (B @ v).tobytes()


def test_random_mesh_programs_with_a_uniform_input_fixed_give_the_tangents_of_the_input_given():
    """The random mesh programs whose tangents can be taken (the differential tests'
    `mesh_tangents`), their uniform input fixed when compiling to the number the call would
    pass: every tangent the program allows, by both assemblies, is bit for bit the one of the
    program given it at the call."""
    import os

    from irfuse.diagnostics import UsageError
    from irfuse.dialects.kas import program_of
    from irfuse.driver.front import frontend
    from irfuse.driver.sources import Source
    from irfuse.testing.derivatives import float64_inputs, random_differentiable_programs

    compared = 0
    for seed in range(6 if LONG else 3):
        source = random_differentiable_programs("mesh_tangents", seed)
        program = program_of(frontend(Source(source, "<tangents, constants>")).module)
        inputs, _ = float64_inputs(program, 30, seed)
        uniform = [n for n in program.uniform if n in program.inputs]
        given = irfuse.compile(source, backend="cpu", dtype="f64")
        fixed = irfuse.compile(source, backend="cpu", dtype="f64", constants={n: inputs[n] for n in uniform})
        rest = {n: a for n, a in inputs.items() if n not in uniform}
        for y in [n for n in program.outputs if n in program.nodal]:
            for x in [n for n in program.inputs if n in program.nodal]:
                for rows in ("1", "0"):
                    os.environ["IRFUSE_TANGENT_ROWS"] = rows
                    try:
                        try:
                            want = irfuse.tangent_matrix(given, **inputs, wrt=x, of=y)
                        except UsageError:
                            continue
                        got = irfuse.tangent_matrix(fixed, **rest, wrt=x, of=y)
                    finally:
                        del os.environ["IRFUSE_TANGENT_ROWS"]
                    assert got.data.tobytes() == want.data.tobytes(), (seed, x, y, rows)
                    compared += 1
    assert compared >= 6


def _rows_kernel_on_host(path: str, k: int, d: int, numbers: dict, conn, nodes: int, cpu_args: tuple, tmp_path,
                         conn_offset: int = 0, dtype: str = "f32") -> tuple[np.ndarray, np.ndarray]:
    """The GPU's owner-computes kernel of `path`'s tangent d r / d u (in `dtype`, K nodes an element,
    D words a node; `rows_emit.rows_module` as `tangent_matrix` makes it for a CUDA device), its
    source run on the host by `tests/cuda_on_host.h` (a block's threads as threads, its barriers
    as barriers), with the places kernel before the rounds kernel (the kernel of a thread or D
    threads a node where the rows are too wide for rounds), on the element program's inputs `numbers`
    (by name: a gathered one as its nodal array); and the CPU backend's matrix of the call with
    `cpu_args`. The connectivity lies `conn_offset` words past a 64-byte boundary (a view of
    another's array)."""
    import ctypes

    from irfuse.artifact.arrays import element_type
    from irfuse.artifact.host_toolchain import compiler, run_compiler
    from irfuse.backend import rows_emit
    from irfuse.dialects.kas import program_of
    from irfuse.driver.front import element_jacobian, element_rows
    from irfuse.library.catalogue import default_library
    from irfuse.mesh.assembly import node_slots

    pattern = Connectivity(conn, nodes).sparse_pattern(d)
    ends = pattern.indptr[::d]
    widest = int((ends[1:] - ends[:-1]).max()) // (d * d)
    module, gathered, _, out = element_jacobian(path, "r", "u", "test", ())
    emitted = rows_emit.rows_module(program_of(module), tuple(gathered), out, default_library(), element_type(dtype),
                                    k, d, False, widest, element_rows(path, "r", "u", "test", ()))
    kernel, real = emitted.kernels[0], np.float32 if dtype == "f32" else np.float64
    rounds = "places" in kernel.inputs  # (the rounds kernel, its places found first; else a thread (or D) a node)
    assert rounds == ("irf_part[" in emitted.source)
    lists = ["const int*", "const long long*", "const int*", "const int*", "const int*"]
    given = len(kernel.inputs) - len(lists) - rounds  # (the program's inputs; then the lists and any places)
    launch = ", ".join([f"(const real_t*)a[{i}]" for i in range(given)] + [
        f"({t})a[{given + i}]" for i, t in enumerate(lists + ["const unsigned char*"] * rounds)])
    places = f"""irf_launch((unsigned)((n + {rows_emit.PLACES_NODES - 1}) / {rows_emit.PLACES_NODES}), 1, {rows_emit.PLACES_NODES}, [&] {{
    irf_tangent_places((const int*)a[{given}], (const long long*)a[{given + 1}], (const int*)a[{given + 2}],
                       (const int*)a[{given + 3}], (const int*)a[{given + 4}], (unsigned char*)a[{given + 5}], n); }});"""
    harness = f"""
extern "C" void run(void** a, real_t* values, long long n) {{
  {places if rounds else ""}
  irf_launch((unsigned)((n + {kernel.by - 1}) / {kernel.by}), {kernel.bx}, {kernel.by}, [&] {{ irf_tangent_rows({launch}, values, n); }});
}}
"""
    (tmp_path / "rows.cpp").write_text('#include "cuda_on_host.h"\n' + emitted.source + harness)
    cxx = compiler()
    built = run_compiler([*cxx, "-std=c++20", "-O1", "-w", "-shared", "-fPIC", "-pthread",
                          "-I", os.path.dirname(os.path.abspath(__file__)), str(tmp_path / "rows.cpp"),
                          "-o", str(tmp_path / "rows.so")], cxx)
    assert built.returncode == 0, built.stderr[-3000:]
    library = ctypes.CDLL(str(tmp_path / "rows.so"))
    starts, slots = node_slots(conn, nodes)
    arrays = [np.ascontiguousarray(numbers[name], real).reshape(-1) for name in kernel.inputs[:given]]
    arrays += [copy_past_a_boundary(np.asarray(conn, np.int32).reshape(-1), 4 * conn_offset),
               np.ascontiguousarray(starts, np.int64), np.ascontiguousarray(slots, np.int32),
               pattern.indptr.astype(np.int32), pattern.indices.astype(np.int32)]
    arrays += [np.zeros(len(slots) * k, np.uint8)] * rounds
    pointers = (ctypes.c_void_p * len(arrays))(*[a.ctypes.data for a in arrays])
    values = np.full(len(pattern.indices), np.nan, real)
    library.run(pointers, values.ctypes.data_as(ctypes.c_void_p), ctypes.c_longlong(nodes))
    want = irfuse.tangent_matrix(irfuse.compile(path, backend="cpu", dtype=dtype), *cpu_args, wrt="u")
    return values, want.data


def _gpu_rows_kernel_on_host(path: str, X, u, conn, tmp_path, conn_offset: int = 0,
                             dtype: str = "f32") -> tuple[np.ndarray, np.ndarray]:
    """`_rows_kernel_on_host` for a tetrahedral mesh program of the P1 residual's inputs (`X`,
    `u`, the connectivity, `dN`, lambda 1.5, mu 0.75)."""
    numbers = {"dN": DN, "lam": 1.5, "mu": 0.75, "Xe": X, "ue": u}
    real = np.float32 if dtype == "f32" else np.float64
    cpu_args = (X.astype(real), u.astype(real), Connectivity(conn, len(X)), DN.astype(real), 1.5, 0.75)
    return _rows_kernel_on_host(path, 4, 3, numbers, conn, len(X), cpu_args, tmp_path, conn_offset, dtype)


@pytest.mark.parametrize("name", ["p1_residual", "neo_hookean_residual"])
def test_the_gpus_rows_kernel_run_on_the_host_gives_the_cpu_twins_matrix(name, tmp_path):
    """The GPU's owner-computes kernel (the rounds kernel: D threads a node, each slot's rows
    staged in shared memory, barriers between its phases), whose source no CPU test ran: its
    text run on the host, a block's threads as threads (`tests/cuda_on_host.h`), on a randomly
    numbered mesh gives the CPU backend's matrix to float32 rounding (the two compilers may
    contract other products into FMAs), every entry written (none left NaN)."""
    X, conn = box_tetrahedra(4, numbering="random", seed=11)
    u = 1e-2 * np.random.default_rng(4).standard_normal(X.shape)
    got, want = _gpu_rows_kernel_on_host(f"{ROOT}/examples/mesh/{name}.kas", X, u, conn, tmp_path)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * abs(want).max())


def test_the_gpus_rows_kernel_reads_a_connectivity_off_a_16_byte_boundary_word_by_word_with_the_same_bits(tmp_path):
    """The rounds kernel reads each slot's element's four nodes ahead of its round, in one
    16-byte load where the connectivity lies at a 16-byte boundary and word by word where it
    does not (a view of another's array): run on the host with the connectivity one word past
    a boundary, the same bits as at one."""
    X, conn = box_tetrahedra(3, numbering="random", seed=5)
    u = 1e-2 * np.random.default_rng(6).standard_normal(X.shape)
    path = f"{ROOT}/examples/mesh/p1_residual.kas"
    (tmp_path / "at").mkdir()
    (tmp_path / "off").mkdir()
    at, _ = _gpu_rows_kernel_on_host(path, X, u, conn, tmp_path / "at")
    off, _ = _gpu_rows_kernel_on_host(path, X, u, conn, tmp_path / "off", conn_offset=1)
    assert not np.isnan(at).any() and at.tobytes() == off.tobytes()


def test_the_gpus_rows_kernel_of_three_node_elements_and_scalar_nodes_run_on_the_host_gives_the_cpu_twins_matrix(
        tmp_path):
    """The rounds kernel where an element is not a tetrahedron (K = 3, a slot's nodes read in the
    round, its slot read ahead) and a node holds one word (D = 1, a thread a node): its text run
    on the host on random elements over 70 nodes (some naming a node twice) gives the CPU
    backend's matrix to float32 rounding, every entry written."""
    rng = np.random.default_rng(9)
    nodes = 70
    conn = np.concatenate([rng.permutation(nodes)[:69].reshape(23, 3), rng.integers(0, nodes, (90, 3))]).astype(np.int32)
    u = rng.standard_normal(nodes).astype(np.float32)
    Ke = rng.standard_normal((3, 3)).astype(np.float32)
    path = f"{ROOT}/tests/filecheck/tangent-rows/cubic.kas"
    got, want = _rows_kernel_on_host(path, 3, 1, {"ue": u, "Ke": Ke}, conn, nodes, (u, Connectivity(conn, nodes), Ke),
                                     tmp_path)
    assert not np.isnan(got).any() and (conn[:, :, None] == conn[:, None, :]).sum() > 3 * len(conn)
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * abs(want).max())


def test_the_gpus_rows_kernel_in_float64_run_on_the_host_gives_the_cpu_twins_matrix(tmp_path):
    """In float64 a block of the rounds kernel takes 16 nodes (48 threads: the rows of 32 and a
    round's staged slots do not fit its shared memory) and stages 8-byte words in a layout of
    its own (`staging_layout`): its text run on the host on a randomly numbered mesh gives the
    CPU backend's float64 matrix to rounding, every entry written."""
    from irfuse.backend.rows_emit import rounds_nodes

    X, conn = box_tetrahedra(4, numbering="random", seed=13)
    u = 1e-2 * np.random.default_rng(8).standard_normal(X.shape)
    ends = Connectivity(conn, len(X)).sparse_pattern(3).indptr[::3]
    assert int((ends[1:] - ends[:-1]).max()) // 9 == 15 and rounds_nodes(15, 4, 3, 8, 4) == 16  # (the mesh's widest row)
    got, want = _gpu_rows_kernel_on_host(f"{ROOT}/examples/mesh/p1_residual.kas", X, u, conn, tmp_path, dtype="f64")
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * abs(want).max())


def test_the_gpus_rows_kernel_for_rows_too_wide_for_rounds_run_on_the_host_gives_the_cpu_twins_matrix(tmp_path):
    """Where a node's row holds more column blocks than a block of the rounds kernel can keep
    (`rounds_nodes` 0: a node of many elements), the GPU takes the kernel of D threads a node,
    each adding its row straight into the values: its text run on the host on random tetrahedra
    of which one node belongs to 60 gives the CPU backend's matrix to float32 rounding, every
    entry written."""
    from irfuse.backend.rows_emit import rounds_nodes

    rng = np.random.default_rng(21)
    nodes = 200
    X = rng.uniform(0, 1, (nodes, 3))
    hub = np.column_stack([np.zeros(60, int), *(rng.permutation(np.arange(1, nodes))[:60] for _ in range(3))])
    conn = np.concatenate([hub, np.array([rng.permutation(nodes)[:4] for _ in range(160)])]).astype(np.int32)
    conn = conn[(np.abs(np.linalg.det(X[conn[:, 1:]] - X[conn[:, :1]])) > 1e-3)]  # (no near-flat tetrahedron)
    u = 1e-2 * rng.standard_normal(X.shape)
    ends = Connectivity(conn, nodes).sparse_pattern(3).indptr[::3]
    assert rounds_nodes(int((ends[1:] - ends[:-1]).max()) // 9, 4, 3, 4, 4) == 0
    got, want = _gpu_rows_kernel_on_host(f"{ROOT}/examples/mesh/p1_residual.kas", X, u, conn, tmp_path)
    assert not np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=0, atol=2e-6 * abs(want).max())
