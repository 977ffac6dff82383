"""`irfuse.linear_operator`: a program's forward derivative at fixed inputs as a SciPy
`LinearOperator` (the matrix never formed), with Dirichlet conditions, against scikit-fem's
assembled stiffness of the same P1 elasticity, and CG on it against a direct solve."""

import numpy as np
import pytest

import irfuse
from conftest import ROOT
from irfuse.mesh import Connectivity, box_tetrahedra

skfem = pytest.importorskip("skfem")
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
LAM, MU = 1.5, 0.75


def _cube(cubes: int, **numbering):
    """The P1 residual (float64, CPU), its mesh, and scikit-fem's stiffness and basis of it."""
    from skfem.models.elasticity import linear_elasticity

    X, conn = box_tetrahedra(cubes, **numbering)
    prog = irfuse.compile(f"{ROOT}/examples/mesh/p1_residual.kas", backend="cpu", dtype="f64")
    basis = skfem.Basis(skfem.MeshTet(X.T.copy(), conn.T.copy()), skfem.ElementVector(skfem.ElementTetP1()))
    return prog, X, conn, skfem.asm(linear_elasticity(LAM, MU), basis), basis


def _nodal(basis, w):
    return w[basis.nodal_dofs].T  # (scikit-fem's vector numbering to (nodes, 3))


def _flat(basis, v, size):
    w = np.zeros(size)
    w[basis.nodal_dofs] = v.T
    return w


def test_the_operator_is_the_assembled_stiffness_and_fixed_components_are_identity():
    prog, X, conn, K, basis = _cube(3, numbering="random", seed=4)
    A = irfuse.linear_operator(prog, X, np.zeros_like(X), Connectivity(conn, len(X)), DN, LAM, MU, wrt="u")
    assert A.shape == (X.size, X.size) and A.dtype == np.float64
    v = np.random.default_rng(0).standard_normal(X.shape)
    got = A.matvec(v.reshape(-1)).reshape(X.shape)
    np.testing.assert_allclose(got, _nodal(basis, K @ _flat(basis, v, K.shape[0])), rtol=1e-12, atol=1e-12)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    B = irfuse.linear_operator(prog, X, np.zeros_like(X), conn, DN, LAM, MU, wrt="u", fixed=fixed)
    w = np.random.default_rng(1).standard_normal(X.shape)
    bv, bw = B.matvec(v.reshape(-1)).reshape(X.shape), B.matvec(w.reshape(-1)).reshape(X.shape)
    assert np.array_equal(bv[fixed], v[fixed])  # (identity on the fixed components)
    np.testing.assert_allclose(np.sum(bv * w), np.sum(bw * v), rtol=1e-12)  # (symmetric)
    free = np.where(fixed, 0.0, v)
    np.testing.assert_allclose(bv[~fixed], A.matvec(free.reshape(-1)).reshape(X.shape)[~fixed], rtol=1e-12)


def test_a_mask_of_fixed_components_is_taken_from_either_library_and_leaves_the_direction_alone():
    """The fixed components given as a NumPy mask, a PyTorch tensor or flat indices make the
    same operator, bit for bit, on NumPy arrays and on PyTorch CPU tensors (which run on the
    host as NumPy's; CUDA tensors: tests/test_gpu.py); a product zeroes the fixed components
    in the operator's own copy of the direction, never in the caller's."""
    torch = pytest.importorskip("torch")
    prog, X, conn, K, basis = _cube(2, numbering="random", seed=3)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 0] == 0] = True
    want = irfuse.linear_operator(prog, X, np.zeros_like(X), conn, DN, LAM, MU, wrt="u", fixed=fixed)
    v = np.random.default_rng(2).standard_normal(X.size)
    expected = want.matvec(v)
    tX, tu, tDN = (torch.from_numpy(np.ascontiguousarray(a)) for a in (X, np.zeros_like(X), DN))
    for arrays in ((X, np.zeros_like(X), DN), (tX, tu, tDN)):
        for mask in (fixed, torch.from_numpy(fixed), np.flatnonzero(fixed)):
            op = irfuse.linear_operator(prog, arrays[0], arrays[1], conn, arrays[2], LAM, MU, wrt="u", fixed=mask)
            given = v.copy()
            for _ in range(2):  # (the second product replays the first's kept run)
                assert np.array_equal(np.asarray(op.matvec(given)), expected)
            assert np.array_equal(given, v)


def test_a_vector_flat_or_as_a_column_gives_one_product():
    """A product takes the vector flat (returned flat) or as a column (returned as a column;
    SciPy's operator takes no other shape), the same values either way, with and without fixed
    components; the caller's vector is left as it was, and no product's vector stays for the
    next."""
    prog, X, conn, _, _ = _cube(2, numbering="random", seed=5)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 1] == 0] = True
    v = np.random.default_rng(4).standard_normal(X.shape)
    for mask in (None, fixed):
        op = irfuse.linear_operator(prog, X, np.zeros_like(X), Connectivity(conn, len(X)), DN, LAM, MU, wrt="u",
                                    fixed=mask)
        flat = op.matvec(v.reshape(-1))
        assert flat.shape == (X.size,) and np.any(flat != 0)
        column = op.matvec(v.reshape(-1, 1).copy())
        assert column.shape == (X.size, 1) and np.array_equal(column[:, 0], flat)
        given = v.reshape(-1).copy()
        assert np.array_equal(op.matvec(given), flat) and np.array_equal(given, v.reshape(-1))
        assert np.array_equal(op.matvec(2 * given), 2 * flat)


def test_a_compiled_programs_derivative_is_made_once_and_operators_at_new_points_reuse_it():
    """`irfuse.jvp` of a compiled program keeps what it compiled (a Newton solve asks for the
    same operator at every step): the same `Program` again for the same question, another for
    another; the operators at two points use it and each is the derivative at its own point."""
    prog, X, conn, K, basis = _cube(2)
    first = irfuse.jvp(prog, wrt="u", with_outputs=False)
    assert irfuse.jvp(prog, wrt=["u"], with_outputs=False) is first
    assert irfuse.jvp(prog, wrt="u") is not first and irfuse.jvp(prog, wrt="X", with_outputs=False) is not first
    prepared = Connectivity(conn, len(X))
    v = np.random.default_rng(2).standard_normal(X.size)
    want = _nodal(basis, K @ _flat(basis, v.reshape(X.shape), K.shape[0])).reshape(-1)
    for scale in (0.0, 1e-3):  # (linear elasticity: the same operator at every u)
        u = scale * np.random.default_rng(3).standard_normal(X.shape)
        A = irfuse.linear_operator(prog, X, u, prepared, DN, LAM, MU, wrt="u")
        np.testing.assert_allclose(A.matvec(v), want, rtol=1e-12, atol=1e-12)
    assert irfuse.jvp(prog, wrt="u", with_outputs=False) is first
    stretched = irfuse.linear_operator(prog, 1.5 * X, np.zeros_like(X), prepared, DN, LAM, MU, wrt="u")
    assert not np.allclose(stretched.matvec(v), want)  # (another point: another operator)


def test_cg_on_the_operator_solves_the_cube_under_its_weight_as_a_direct_solve():
    """The unit cube fixed at z = 0 under a body force of -1 along z: scipy's CG on the
    matrix-free operator against a sparse direct solve of scikit-fem's assembled system."""
    from scipy.sparse.linalg import cg, spsolve
    from skfem import LinearForm

    prog, X, conn, K, basis = _cube(4)

    @LinearForm
    def weight(v, w):
        return -1.0 * v[2]

    f = skfem.asm(weight, basis)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    dofs = _flat(basis, fixed.astype(float), K.shape[0]) > 0
    want = np.zeros(K.shape[0])
    want[~dofs] = spsolve(K[~dofs][:, ~dofs].tocsc(), f[~dofs])
    A = irfuse.linear_operator(prog, X, np.zeros_like(X), Connectivity(conn, len(X)), DN, LAM, MU, wrt="u",
                               fixed=fixed)
    rhs = np.where(fixed, 0.0, _nodal(basis, f)).reshape(-1)
    got, info = cg(A, rhs, rtol=1e-12, maxiter=2000)
    assert info == 0
    np.testing.assert_allclose(got.reshape(X.shape), _nodal(basis, want), rtol=1e-8, atol=1e-10)
    assert np.all(got.reshape(X.shape)[fixed] == 0)


@pytest.mark.parametrize("how, said", [
    (dict(wrt="v"), "wrt is one input"),
    (dict(wrt="u", of="q"), "'q' is not an output"),
    (dict(wrt="u", fixed=np.zeros((3, 3), bool)), "fixed= is shaped"),
    (dict(wrt="u", fixed=[10**6]), "whole numbers in"),
])
def test_a_bad_operator_is_refused_by_name(how, said):
    prog, X, conn, _, _ = _cube(1)
    with pytest.raises(irfuse.UsageError, match=said):
        irfuse.linear_operator(prog, X, np.zeros_like(X), conn, DN, LAM, MU, **how)
    with pytest.raises(irfuse.UsageError, match="takes a compiled program"):
        irfuse.linear_operator(f"{ROOT}/examples/mesh/p1_residual.kas", X, wrt="u")


def test_the_matrix_free_cube_example_settles_as_the_assembled_system():
    """examples/solve/elastic_cube_cg.py (matrix-free CG; the assembled matrix's direct solve;
    Jacobi-CG) against a direct solve of scikit-fem's stiffness with the same lumped weight."""
    import importlib.util

    from scipy.sparse.linalg import spsolve

    spec = importlib.util.spec_from_file_location("elastic_cube_cg", f"{ROOT}/examples/solve/elastic_cube_cg.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    X, conn, u, steps, fixed = example.solve(3)
    _, _, _, K, basis = _cube(3)
    volumes = np.abs(np.einsum("eij,eij->e", np.cross(X[conn[:, 1]] - X[conn[:, 0]], X[conn[:, 2]] - X[conn[:, 0]])[:, None],
                               (X[conn[:, 3]] - X[conn[:, 0]])[:, None])) / 6
    mass = np.zeros(len(X))
    np.add.at(mass, conn.reshape(-1), np.repeat(volumes / 4, 4))
    load = np.zeros(X.shape)
    load[:, 2] = -mass
    f = _flat(basis, load, K.shape[0])
    dofs = _flat(basis, fixed.astype(float), K.shape[0]) > 0
    want = np.zeros(K.shape[0])
    want[~dofs] = spsolve(K[~dofs][:, ~dofs].tocsc(), f[~dofs])
    assert 0 < steps < 10 * X.size
    np.testing.assert_allclose(u, _nodal(basis, want), rtol=1e-7, atol=1e-9)
    direct, jacobi, jacobi_steps = example.solve_assembled(3)  # (the assembled matrix; Jacobi-CG)
    np.testing.assert_allclose(direct, _nodal(basis, want), rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(jacobi, _nodal(basis, want), rtol=1e-7, atol=1e-9)
    assert 0 < jacobi_steps < 10 * X.size


def test_the_tangent_matrix_is_the_assembled_stiffness_in_csr_with_the_same_bits_every_call():
    """`irfuse.tangent_matrix` of the P1 residual: scikit-fem's stiffness (its numbering
    permuted to node by node) to rounding, the operator's products, the same bits on a second
    call, int32 indices; with `fixed`, identity rows and columns there, and a direct solve of
    the cube gives CG's settlement."""
    from scipy.sparse.linalg import spsolve

    prog, X, conn, K, basis = _cube(3, numbering="random", seed=6)
    args = (X, np.zeros_like(X), Connectivity(conn, len(X)), DN, LAM, MU)
    M = irfuse.tangent_matrix(prog, *args, wrt="u")
    perm = basis.nodal_dofs.T.reshape(-1)  # (row n * 3 + i is scikit-fem's dof nodal_dofs[i, n])
    assert M.shape == K.shape and M.indices.dtype == np.int32
    assert abs(M - K[perm][:, perm]).max() < 1e-12 * abs(K).max()
    again = irfuse.tangent_matrix(prog, *args, wrt="u")
    assert again.data.tobytes() == M.data.tobytes() and np.array_equal(again.indices, M.indices)
    v = np.random.default_rng(4).standard_normal(X.size)
    np.testing.assert_allclose(M @ v, irfuse.linear_operator(prog, *args, wrt="u").matvec(v), rtol=1e-12, atol=1e-12)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    F = irfuse.tangent_matrix(prog, *args, wrt="u", fixed=fixed)
    dense = F.toarray()
    flat = fixed.reshape(-1)
    assert np.array_equal(dense[flat][:, flat], np.eye(flat.sum())) and not dense[flat][:, ~flat].any()
    assert not dense[~flat][:, flat].any()
    load = np.where(fixed, 0.0, -1.0).reshape(-1)
    direct = spsolve(F.tocsc(), load)
    op = irfuse.linear_operator(prog, *args, wrt="u", fixed=fixed)
    np.testing.assert_allclose(op.matvec(direct), load, rtol=1e-9, atol=1e-9)


def test_a_tangent_matrix_that_cannot_be_taken_is_refused_by_name():
    from scipy import sparse
    prog, X, conn, _, _ = _cube(1)
    args = (X, np.zeros_like(X), conn, DN, LAM, MU)
    with pytest.raises(irfuse.UsageError, match="wrt is a nodal input"):
        irfuse.tangent_matrix(prog, *args, wrt="dN")
    with pytest.raises(irfuse.UsageError, match="fixed= is shaped"):
        irfuse.tangent_matrix(prog, *args, wrt="u", fixed=np.zeros(3, bool))
    for bad, said in ((np.zeros(X.shape), "not an array of float64"), ([X.size], f"in \\[0, {X.size}\\); entry 0 is"),
                      ([0, -1], "entry 1 is -1"), ("u", "not a str"), ([[0], [1, 2]], "ragged"),
                      # a mask given as whole numbers, and a mask's (node, component) pairs, read as
                      # flat indices fixed other components (components 0 and 1, or the pairs' numbers)
                      ((X[:, 2:3] == 0) * np.ones((1, 3), np.int64), "shaped \\(8, 3\\); indices are the flat"),
                      ((X[:, 2] == 0).repeat(3).astype(np.int8), "24 int8 values, each 0 or 1"),
                      (np.argwhere(np.zeros(X.shape, bool) | (X[:, 2:3] == 0)), "indices are the flat indices"),
                      (sparse.csr_matrix(np.ones(X.shape, bool)), "not a SciPy csr_matrix"),
                      (np.array([2**63 + 5], np.uint64), "entry 0 is 9223372036854775813")):
        for who in (irfuse.tangent_matrix, irfuse.diagonal, irfuse.linear_operator):
            with pytest.raises(irfuse.UsageError, match=said):
                who(prog, *args, wrt="u", fixed=bad)


def test_nodal_arguments_the_tangents_cannot_read_are_refused_by_name_not_cast():
    """A nodal input of another element type, shape or kind: the matrix and the diagonal name
    it as the operator (the program's call) does, never the programs made from it (the
    Jacobian's own inputs) and never cast (an int or float32 displacement was read as float64
    before; a misshaped one was named by the assembly's inputs, or ended in a NumPy error)."""
    prog, X, conn, _, _ = _cube(1)
    u = np.zeros_like(X)
    cases = ((X, u.astype(np.float32), "input 'u' holds float32; the program was compiled for float64"),
             (X, u.astype(np.int64), "input 'u' holds int64"),
             (X.astype(np.float32), u, "input 'X' holds float32"),
             (X, u[:, :2].copy(), r"input 'u' has shape \(8, 2\)"),
             (X[:, :2].copy(), u, r"input 'X' has shape \(8, 2\)"),
             (X, u.reshape(-1), r"input 'u' has shape \(24,\)"),
             (X, 0.0, "input 'u' is a float, not an array"))
    for x, v, said in cases:
        for who in (irfuse.tangent_matrix, irfuse.diagonal, irfuse.linear_operator):
            with pytest.raises(irfuse.UsageError, match=said):
                made = who(prog, x, v, conn, DN, LAM, MU, wrt="u")
                made.matvec(np.zeros(X.size))  # (the operator reads its arrays when applied)
    with pytest.raises(irfuse.UsageError, match=r"'u' has shape \(3, 8\); a nodal input of the tangents is shaped "
                       r"\(N, 3\), a row a node"):
        irfuse.tangent_matrix(prog, X, u.T.copy(), conn, DN, LAM, MU, wrt="u")
    listed = irfuse.tangent_matrix(prog, X, u.tolist(), conn, DN, LAM, MU, wrt="u")  # (a list: the type's values)
    assert listed.data.tobytes() == irfuse.tangent_matrix(prog, X, u, conn, DN, LAM, MU, wrt="u").data.tobytes()


def test_fixed_components_are_read_alike_by_the_matrix_the_diagonal_and_the_operator():
    """`fixed=` as a mask shaped as `u`, a flat mask, flat indices (a NumPy array, a list, a
    PyTorch tensor of either) gives the same matrix, diagonal and operator, bit for bit;
    indices listed twice or none at all are what they say."""
    torch = pytest.importorskip("torch")
    prog, X, conn, _, _ = _cube(2, numbering="random", seed=9)
    args = (X, np.zeros_like(X), Connectivity(conn, len(X)), DN, LAM, MU)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 1] == 0] = True
    dofs = np.flatnonzero(fixed)
    want = irfuse.tangent_matrix(prog, *args, wrt="u", fixed=fixed)
    diag = irfuse.diagonal(prog, *args, wrt="u", fixed=fixed)
    v = np.random.default_rng(5).standard_normal(X.size)
    product = irfuse.linear_operator(prog, *args, wrt="u", fixed=fixed).matvec(v)
    for form in (fixed.reshape(-1), dofs, list(dofs), tuple(int(i) for i in dofs), torch.from_numpy(dofs),
                 torch.from_numpy(fixed), np.concatenate([dofs, dofs[:3]]),
                 torch.nonzero(torch.from_numpy(fixed.reshape(-1)))):  # (a column of indices)
        got = irfuse.tangent_matrix(prog, *args, wrt="u", fixed=form)
        assert got.data.tobytes() == want.data.tobytes() and np.array_equal(got.indices, want.indices)
        assert irfuse.diagonal(prog, *args, wrt="u", fixed=form).tobytes() == diag.tobytes()
        assert irfuse.linear_operator(prog, *args, wrt="u", fixed=form).matvec(v).tobytes() == product.tobytes()
    free = irfuse.tangent_matrix(prog, *args, wrt="u")
    for none in ([], np.zeros(0, np.int64), np.zeros(X.shape, bool)):
        assert irfuse.tangent_matrix(prog, *args, wrt="u", fixed=none).data.tobytes() == free.data.tobytes()
    step = irfuse.compile(f"{ROOT}/examples/mesh/explicit_step.kas", backend="cpu", dtype="f64")
    for made in (irfuse.tangent_matrix, irfuse.diagonal):  # (a program of passes: refused by what it is)
        with pytest.raises(irfuse.UsageError, match="explicit_step runs in passes over the elements and the nodes"):
            made(step, X, np.zeros_like(X), np.zeros_like(X), np.ones(len(X)), conn, DN, LAM, MU, 1e-3, wrt="u",
                 of="v1")


def test_the_diagonal_without_the_matrix_preconditions_cg():
    """`irfuse.diagonal`: the tangent matrix's diagonal (to rounding: its own order of sums),
    1 at fixed components; CG with it as a Jacobi preconditioner reaches the same solution."""
    from scipy.sparse.linalg import LinearOperator, cg

    prog, X, conn, _, _ = _cube(3, numbering="random", seed=8)
    args = (X, np.zeros_like(X), Connectivity(conn, len(X)), DN, LAM, MU)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    d = irfuse.diagonal(prog, *args, wrt="u", fixed=fixed)
    M = irfuse.tangent_matrix(prog, *args, wrt="u", fixed=fixed)
    assert d.shape == X.shape
    np.testing.assert_allclose(d.reshape(-1), M.diagonal(), rtol=1e-13)
    assert np.all(d[fixed] == 1.0)
    A = irfuse.linear_operator(prog, *args, wrt="u", fixed=fixed)
    load = np.where(fixed, 0.0, -1.0).reshape(-1)
    jacobi = LinearOperator(A.shape, matvec=lambda r: r / d.reshape(-1))
    plain, info = cg(A, load, rtol=1e-10)
    pre, info_pre = cg(A, load, rtol=1e-10, M=jacobi)
    assert info == info_pre == 0
    np.testing.assert_allclose(pre, plain, rtol=1e-7, atol=1e-9)


def _neo_hookean_forces(X, u, conn, lam, mu):
    """The compressible Neo-Hookean nodal forces in NumPy float64, written apart from irfuse:
    F = I + grad u, P = mu (F - F^-T) + lam log(det F) F^-T, each element's P G[a] added into
    its nodes."""
    Jr = np.einsum("eai,aj->eij", X[conn], DN)
    G = np.einsum("aj,ejk->eak", DN, np.linalg.inv(Jr))
    F = np.eye(3) + np.einsum("eai,eaj->eij", u[conn], G)
    FinvT = np.linalg.inv(F).transpose(0, 2, 1)
    P = mu * (F - FinvT) + lam * np.log(np.linalg.det(F))[:, None, None] * FinvT
    fe = np.linalg.det(Jr)[:, None, None] / 6 * np.einsum("eij,eaj->eai", P, G)
    r = np.zeros_like(X)
    np.add.at(r, conn, fe)
    return r


def test_the_neo_hookean_newton_example_converges_to_an_independent_solve():
    """examples/solve/neo_hookean_newton.py (Newton with matrix-free CG and the tangent's
    diagonal, four load steps): each load step converges in a few Newton steps (quadratic),
    and the last state is the root of a float64 NumPy residual written apart, found by
    scipy's `root` (MINPACK, its own finite-difference Jacobian) over the same load steps."""
    import importlib.util

    from scipy.optimize import root

    spec = importlib.util.spec_from_file_location("neo_hookean_newton",
                                                  f"{ROOT}/examples/solve/neo_hookean_newton.py")
    example = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(example)
    X, conn, u, fixed, counts = example.solve(cubes=3, steps=4, stretch=0.3)
    assert all(1 <= n <= 6 for n, _ in counts), counts
    top = np.isclose(X[:, 2], 1.0)
    want = np.zeros_like(X)
    for step in range(1, 5):
        want[top, 2] = 0.3 * step / 4

        def free_residual(w):
            v = want.copy()
            v[~fixed] = w
            return _neo_hookean_forces(X, v, conn, 1.0, 0.5)[~fixed]

        found = root(free_residual, want[~fixed], method="hybr", tol=1e-13)
        assert np.abs(free_residual(found.x)).max() < 1e-11, found.message
        want[~fixed] = found.x
    assert np.abs(_neo_hookean_forces(X, u, conn, 1.0, 0.5)[~fixed]).max() < 1e-9
    np.testing.assert_allclose(u, want, rtol=0, atol=1e-10)


def test_the_operator_of_a_program_of_passes_is_its_central_difference():
    """`irfuse.linear_operator` of the explicit step (a `StagedProgram`: nodal statements, three
    passes), d v1 / d u at fixed inputs: its products are the step's central differences."""
    X, conn = box_tetrahedra(3)
    step = irfuse.compile(f"{ROOT}/examples/mesh/explicit_step.kas", backend="cpu", dtype="f64")
    rng = np.random.default_rng(0)
    u, v = 1e-3 * rng.standard_normal(X.shape), 1e-2 * rng.standard_normal(X.shape)
    m, prepared = rng.uniform(0.5, 1.5, len(X)), Connectivity(conn, len(X))
    args = (X, u, v, m, prepared, DN, LAM, MU, 1e-3)
    op = irfuse.linear_operator(step, *args, wrt="u", of="v1")
    w = rng.standard_normal(X.size)
    h = 1e-6
    up = step(X, u + h * w.reshape(X.shape), *args[2:]).v1
    down = step(X, u - h * w.reshape(X.shape), *args[2:]).v1
    np.testing.assert_allclose(op.matvec(w), ((up - down) / (2 * h)).reshape(-1), rtol=0, atol=1e-9)
    with pytest.raises(irfuse.UsageError, match="nodal statements|compiled program over a mesh"):
        irfuse.tangent_matrix(step, *args, wrt="u", of="v1")


def test_the_transposed_product_is_the_reverse_derivative_and_passes_the_dot_product_test():
    """`rmatvec` (and `.T`) of the operator, by the program's reverse derivative: for d r / d X
    of the P1 residual (not symmetric) the transpose of the forward products' matrix, column by
    column, with and without Dirichlet conditions (A^T = P J^T P + I - P); of the explicit step's
    d v1 / d u (a program of passes, two outputs: u1's cotangent 0) w . (A v) = (A^T w) . v; a
    complex vector is taken by its real and imaginary parts; a vector of another size is refused
    by name."""
    prog, X, conn, _, _ = _cube(2, numbering="random", seed=11)
    rng = np.random.default_rng(1)
    args = (X, 1e-2 * rng.standard_normal(X.shape), Connectivity(conn, len(X)), DN, LAM, MU)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    for held in (None, fixed):
        op = irfuse.linear_operator(prog, *args, wrt="X", fixed=held)
        dense = np.stack([op.matvec(e) for e in np.eye(X.size)], axis=1)
        assert not np.allclose(dense, dense.T, rtol=1e-6)  # (a test of the transpose, not of symmetry)
        transposed = np.stack([op.rmatvec(e) for e in np.eye(X.size)], axis=1)
        np.testing.assert_allclose(transposed, dense.T, rtol=1e-12, atol=1e-12 * abs(dense).max())
        w = rng.standard_normal(X.size)
        np.testing.assert_allclose(op.T @ w, dense.T @ w, rtol=1e-12, atol=1e-12 * abs(dense).max())
    z = rng.standard_normal(X.size) + 1j * rng.standard_normal(X.size)
    np.testing.assert_allclose(op.matvec(z), dense @ z, rtol=1e-12, atol=1e-12 * abs(dense).max())
    step = irfuse.compile(f"{ROOT}/examples/mesh/explicit_step.kas", backend="cpu", dtype="f64")
    u, v = 1e-3 * rng.standard_normal(X.shape), 1e-2 * rng.standard_normal(X.shape)
    A = irfuse.linear_operator(step, X, u, v, rng.uniform(0.5, 1.5, len(X)), Connectivity(conn, len(X)), DN, LAM,
                               MU, 1e-3, wrt="u", of="v1")
    a, b = rng.standard_normal(X.size), rng.standard_normal(X.size)
    assert abs(b @ A.matvec(a) - A.rmatvec(b) @ a) < 1e-12 * abs(b @ A.matvec(a)) + 1e-14
    with pytest.raises(ValueError, match="dimension mismatch"):  # (SciPy's own check, before irfuse's)
        A.rmatvec(np.ones(5))
    from irfuse.api.operators import _product

    with pytest.raises(irfuse.UsageError, match="a product takes a vector of 81 values, not one shaped"):
        _product("numpy", lambda d: d, np.zeros((27, 3)), 81, None, "a product")(np.ones(5))


def test_the_solve_examples_refuse_bad_arguments_by_name(capsys):
    """The example scripts' command lines: a count that is not a whole number, or too small,
    a stretch that is not a finite number above -1 (NaN ended in "CG did not converge" as a
    traceback, a number of 0 cubes in box_tetrahedra's traceback) are refused by argparse
    naming the option; an error of irfuse's (no GPU for --backend cuda) is printed, exit 1."""
    import importlib.util

    examples = {}
    for name in ("elastic_cube_cg", "neo_hookean_newton"):
        spec = importlib.util.spec_from_file_location(name, f"{ROOT}/examples/solve/{name}.py")
        examples[name] = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(examples[name])
    for name, argv, said in (("elastic_cube_cg", ["--cubes", "0"], "a whole number of cubes, at least 1, not '0'"),
                             ("elastic_cube_cg", ["--cubes", "x"], "at least 1, not 'x'"),
                             ("neo_hookean_newton", ["--cubes", "1"], "a whole number, at least 2, not '1'"),
                             ("neo_hookean_newton", ["--steps", "0"], "a whole number, at least 1, not '0'"),
                             ("neo_hookean_newton", ["--stretch", "nan"], "a finite number above -1, not 'nan'"),
                             ("neo_hookean_newton", ["--stretch", "-5"], "a finite number above -1, not '-5'")):
        with pytest.raises(SystemExit) as ended:
            examples[name].main(argv)
        assert ended.value.code == 2 and said in capsys.readouterr().err
    from irfuse.runtime.cuda_device import gpu_available
    if not gpu_available():
        assert examples["neo_hookean_newton"].main(["--cubes", "2", "--backend", "cuda"]) == 1
        assert capsys.readouterr().err.startswith("neo_hookean_newton.py: error: the CUDA backend")
