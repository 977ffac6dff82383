"""The float64 references of the bake-off operators (tests/highorder_reference.py) against
scikit-fem's assembled Q1 and Q2 mass and Laplace matrices, and for higher orders against the
same operators assembled densely from full basis tables, on randomly numbered meshes."""

import numpy as np
import pytest

import highorder_reference as ref
from irfuse.mesh import box_hexahedra


def _skfem_matrices(X, cells, order):
    """scikit-fem's mass and Laplace matrices of the box, in the numbering of X."""
    skfem = pytest.importorskip("skfem")
    from skfem.models.poisson import laplace, mass

    mesh = skfem.MeshHex.init_tensor(*(np.linspace(0, 1, n + 1) for n in cells))
    basis = skfem.Basis(mesh, skfem.ElementHex1() if order == 1 else skfem.ElementHex2(), intorder=2 * order + 2)
    theirs = {tuple(np.round(x, 12)): i for i, x in enumerate(basis.doflocs.T)}
    to_theirs = np.array([theirs[tuple(np.round(x, 12))] for x in X])
    M = mass.assemble(basis).toarray()[np.ix_(to_theirs, to_theirs)]
    K = laplace.assemble(basis).toarray()[np.ix_(to_theirs, to_theirs)]
    return M, K


@pytest.mark.parametrize("order", [1, 2])
def test_bp1_and_bp3_are_scikit_fems_q1_and_q2_operators(order):
    cells = (3, 2, 2)
    X, conn = box_hexahedra(*cells, order=order, numbering="random", seed=order)
    M, K = _skfem_matrices(X, cells, order)
    q = order + 2
    wdet, factors = ref.geometric_factors(X, conn, order, q)
    u = np.random.default_rng(0).standard_normal(len(X))
    np.testing.assert_allclose(ref.bp1(u, conn, order, wdet), M @ u, rtol=0, atol=1e-13 * np.abs(M @ u).max())
    np.testing.assert_allclose(ref.bp3(u, conn, order, factors), K @ u, rtol=0, atol=1e-12 * np.abs(K @ u).max())


@pytest.mark.parametrize("order", [3, 4, 6])
def test_sum_factorization_gives_the_densely_assembled_operators(order):
    X, conn = box_hexahedra(2, 1, 2, order=order, numbering="random", seed=5)
    q = order + 2
    wdet, factors = ref.geometric_factors(X, conn, order, q)
    u = np.random.default_rng(1).standard_normal(len(X))
    for kind, apply in (("mass", lambda v: ref.bp1(v, conn, order, wdet)),
                        ("poisson", lambda v: ref.bp3(v, conn, order, factors))):
        A = ref.dense_operator(X, conn, order, q, kind)
        want = A @ u
        np.testing.assert_allclose(apply(u), want, rtol=0, atol=1e-11 * np.abs(want).max(), err_msg=kind)


@pytest.mark.parametrize("order", [1, 3, 5, 8])
def test_the_operators_know_volume_constants_and_symmetry(order):
    """1^T M 1 is the volume, K 1 = 0, and both are symmetric, at every order."""
    X, conn = box_hexahedra(2, 2, 1, order=order)
    wdet, factors = ref.geometric_factors(X, conn, order, order + 2)
    ones = np.ones(len(X))
    assert abs(ones @ ref.bp1(ones, conn, order, wdet) - 1.0) < 1e-12
    assert np.abs(ref.bp3(ones, conn, order, factors)).max() < 1e-10
    rng = np.random.default_rng(order)
    u, v = rng.standard_normal((2, len(X)))
    for apply in (lambda a: ref.bp1(a, conn, order, wdet), lambda a: ref.bp3(a, conn, order, factors)):
        assert abs(v @ apply(u) - u @ apply(v)) < 1e-10 * abs(v @ apply(u)) + 1e-12
