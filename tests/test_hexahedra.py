"""Boxes of hexahedra of order p and the 1-D rules (`irfuse/mesh/hexahedra.py`): checked
against closed forms, polynomial exactness and, for orders 1 and 2 (whose Gauss-Lobatto
points are equispaced), scikit-fem's hexahedral meshes and Q2 degrees of freedom."""

import numpy as np
import pytest

from irfuse.diagnostics import UsageError
from irfuse.mesh import box_hexahedra, gauss_legendre, gauss_lobatto


def test_gauss_lobatto_points_and_weights_of_low_orders_are_the_closed_forms():
    x, w = gauss_lobatto(1)
    np.testing.assert_array_equal(x, [-1.0, 1.0])
    np.testing.assert_allclose(w, [1.0, 1.0], rtol=1e-15)
    x, w = gauss_lobatto(2)
    np.testing.assert_allclose(x, [-1.0, 0.0, 1.0], atol=1e-15)
    np.testing.assert_allclose(w, [1 / 3, 4 / 3, 1 / 3], rtol=1e-14)
    x, w = gauss_lobatto(3)
    np.testing.assert_allclose(x, [-1.0, -1 / 5**0.5, 1 / 5**0.5, 1.0], rtol=1e-14)
    np.testing.assert_allclose(w, [1 / 6, 5 / 6, 5 / 6, 1 / 6], rtol=1e-14)


@pytest.mark.parametrize("p", range(1, 11))
def test_the_rules_integrate_the_polynomials_they_should_exactly(p):
    """Gauss-Lobatto with p + 1 points: degree 2p - 1 exactly, not 2p; Gauss-Legendre with q
    points: degree 2q - 1. Points ascending and symmetric, both ends in Lobatto's."""
    x, w = gauss_lobatto(p)
    assert len(x) == p + 1 and x[0] == -1.0 and x[-1] == 1.0 and np.all(np.diff(x) > 0)
    np.testing.assert_array_equal(x, -x[::-1])
    for degree in range(2 * p):
        assert abs(w @ x**degree - (1 - (-1) ** (degree + 1)) / (degree + 1)) < 1e-13, degree
    assert abs(w @ x ** (2 * p) - 2 / (2 * p + 1)) > 1e-6  # (its first inexact degree)
    x, w = gauss_legendre(p)
    assert len(x) == p and np.all(np.diff(x) > 0)
    for degree in range(2 * p):
        assert abs(w @ x**degree - (1 - (-1) ** (degree + 1)) / (degree + 1)) < 1e-13, degree


@pytest.mark.parametrize("order, cells", [(1, (2, 3, 1)), (2, (2, 1, 3)), (3, (1, 2, 2)), (5, (2, 2, 1)), (8, (1, 1, 2))])
def test_each_element_is_the_tensor_grid_of_gauss_lobatto_points_of_its_cell_shared_with_its_neighbours(order, cells):
    nx, ny, nz = cells
    X, conn = box_hexahedra(nx, ny, nz, order=order)
    p = order
    assert X.shape == ((p * nx + 1) * (p * ny + 1) * (p * nz + 1), 3) and conn.shape == (nx * ny * nz, (p + 1) ** 3)
    assert conn.dtype == np.int32 and np.array_equal(np.unique(conn), np.arange(len(X)))
    assert len(np.unique(X, axis=0)) == len(X)  # (a node on a shared face is one node)
    g = (gauss_lobatto(p)[0] + 1) / 2
    for e in range(len(conn)):
        i, j, k = e % nx, e // nx % ny, e // (nx * ny)
        grid = np.stack(np.meshgrid((i + g) / nx, (j + g) / ny, (k + g) / nz, indexing="ij"), axis=-1)
        want = grid.transpose(2, 1, 0, 3).reshape(-1, 3)  # (x fastest)
        np.testing.assert_allclose(X[conn[e]], want, rtol=0, atol=1e-15)
    # the volume and a polynomial of degree p in each axis, integrated element by element with
    # the nodes as the quadrature points (exact: degree p <= 2p - 1)
    _, w = gauss_lobatto(p)
    weights = (w[None, None, :] * w[None, :, None] * w[:, None, None]).reshape(-1) / 8 / (nx * ny * nz)
    f = (X[:, 0] ** p) * (X[:, 1] ** p) * (1 + X[:, 2])
    np.testing.assert_allclose(sum(weights @ f[c] for c in conn), 1.5 / (p + 1) ** 2, rtol=1e-13)


@pytest.mark.parametrize("order", [1, 2])
def test_orders_one_and_two_are_scikit_fems_hexahedra_and_q2_nodes(order):
    skfem = pytest.importorskip("skfem")
    nx, ny, nz = 3, 2, 2
    X, conn = box_hexahedra(nx, ny, nz, order=order, numbering="random", seed=3)
    mesh = skfem.MeshHex.init_tensor(*(np.linspace(0, 1, n + 1) for n in (nx, ny, nz)))
    basis = skfem.Basis(mesh, skfem.ElementHex1() if order == 1 else skfem.ElementHex2())
    theirs = basis.doflocs.T
    assert len(theirs) == len(X)

    def key(points):
        return [tuple(np.round(q, 12)) for q in points]

    assert sorted(key(theirs)) == sorted(key(X))
    mine = sorted(tuple(sorted(key(X[c]))) for c in conn)
    want = sorted(tuple(sorted(key(theirs[d]))) for d in basis.element_dofs.T)
    assert mine == want


def test_a_random_numbering_is_the_structured_mesh_renumbered():
    X, conn = box_hexahedra(3, 2, 2, order=3)
    Y, other = box_hexahedra(3, 2, 2, order=3, numbering="random", seed=7)
    assert not np.array_equal(other, conn)

    def elements(points, c):
        return sorted(tuple(map(tuple, np.round(points[row], 12))) for row in c)

    assert elements(X, conn) == elements(Y, other)  # (each element's nodes in the same tensor order)


@pytest.mark.parametrize("call, said", [
    (lambda: box_hexahedra(0), "box_hexahedra: nx must be a whole number, at least 1, not 0"),
    (lambda: box_hexahedra(2, order=0), "box_hexahedra: order must be a whole number, at least 1, not 0"),
    (lambda: box_hexahedra(2, order=2.0), "box_hexahedra: order must be a whole number, at least 1, not 2.0"),
    (lambda: box_hexahedra(2, numbering="morton"), "numbering must be 'structured' or 'random', not 'morton'"),
    (lambda: box_hexahedra(2, index_dtype=np.int16), "index_dtype must be int32 or int64, not int16"),
    (lambda: gauss_lobatto(0), "gauss_lobatto: p must be a whole number, from 1 to 1023, not 0"),
    (lambda: gauss_lobatto(10**12), "gauss_lobatto: p must be a whole number, from 1 to 1023, not 1000000000000"),
    (lambda: gauss_legendre(True), "gauss_legendre: q must be a whole number, from 1 to 1024, not True"),
    (lambda: gauss_legendre(1025), "gauss_legendre: q must be a whole number, from 1 to 1024, not 1025"),
])
def test_bad_arguments_are_refused_by_name(call, said):
    with pytest.raises(UsageError, match=said.replace("(", r"\(").replace(")", r"\)")):
        call()
