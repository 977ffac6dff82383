"""The CEED bake-off operators in float64 NumPy, as references for high-order kernels: BP1
(the mass matrix applied, y = M u) and BP3 (the Poisson operator applied, y = K u) on meshes
of `irfuse.mesh.box_hexahedra`, by sum factorization (one axis contracted at a time), with the
geometric factors stored per quadrature point as BP3 stores them.

Element values are (p+1, p+1, p+1) arrays indexed [c, b, a] (z, y, x: the meshes' tensor
order, x fastest); quadrature on q Gauss-Legendre points per axis (the bake-off's q = p + 2).
`dense_operator` builds the same operators element by element from full basis tables, a
second route to the same numbers (tests/test_highorder_reference.py).
"""

from __future__ import annotations

import numpy as np

from irfuse.mesh import gauss_legendre, gauss_lobatto


def lagrange_tables(p: int, q: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(B, D, w): B[i, a] the Lagrange basis of the p + 1 Gauss-Lobatto nodes at Gauss-Legendre
    point i, D[i, a] its derivative there (on [-1, 1]), w the q weights. Barycentric form."""
    nodes, _ = gauss_lobatto(p)
    points, w = gauss_legendre(q)
    diff = nodes[:, None] - nodes[None, :]
    np.fill_diagonal(diff, 1.0)
    lam = 1.0 / diff.prod(axis=1)  # barycentric weights
    B = np.empty((q, p + 1))
    D = np.empty((q, p + 1))
    for i, x in enumerate(points):
        d = x - nodes
        ell = lam / d
        B[i] = ell / ell.sum()
        # derivative of l_a(x) = lam_a prod_{b != a} (x - x_b): l_a(x) * sum_{b != a} 1 / (x - x_b)
        s = (1.0 / d).sum() - 1.0 / d
        D[i] = B[i] * s
    return B, D, w


def _apply(t: np.ndarray, m: np.ndarray, axis: int) -> np.ndarray:
    """Contracts axis `axis` (of the three trailing ones) of `t` (E, n, n, n) with m (q, n)."""
    moved = np.moveaxis(t, axis + 1, -1)
    return np.moveaxis(moved @ m.T, -1, axis + 1)


def geometric_factors(X: np.ndarray, conn: np.ndarray, p: int, q: int) -> tuple[np.ndarray, np.ndarray]:
    """(w detJ, w detJ J^-1 J^-T) at every quadrature point of every element: (E, q, q, q) and
    (E, q, q, q, 3, 3), from the elements' nodal coordinates (isoparametric)."""
    B, D, w = lagrange_tables(p, q)
    xe = X[conn].reshape(len(conn), p + 1, p + 1, p + 1, 3)  # [e, c, b, a, dim]
    J = np.empty((len(conn), q, q, q, 3, 3))
    for d in range(3):
        for r, axis in enumerate((2, 1, 0)):  # d x_d / d xi_r, xi_0 along a (x), xi_2 along c (z)
            t = xe[..., d]
            for s in range(3):
                t = _apply(t, D if s == axis else B, s)
            J[..., d, r] = t
    weight = w[:, None, None] * w[None, :, None] * w[None, None, :]
    det = np.abs(np.linalg.det(J))  # (an element listed with the other orientation is the same element)
    inv = np.linalg.inv(J)
    wdet = weight * det
    return wdet, wdet[..., None, None] * inv @ np.swapaxes(inv, -1, -2)


def bp1(u: np.ndarray, conn: np.ndarray, p: int, wdet: np.ndarray) -> np.ndarray:
    """y = M u: interpolate to the quadrature points, scale by w detJ, integrate back, add."""
    q = wdet.shape[1]
    B, _, _ = lagrange_tables(p, q)
    t = u[conn].reshape(len(conn), p + 1, p + 1, p + 1)
    for s in range(3):
        t = _apply(t, B, s)
    t = t * wdet
    for s in range(3):
        t = _apply(t, B.T, s)
    y = np.zeros_like(u)
    np.add.at(y, conn.reshape(-1), t.reshape(-1))
    return y


def bp3(u: np.ndarray, conn: np.ndarray, p: int, factors: np.ndarray) -> np.ndarray:
    """y = K u of -div grad: reference gradients at the quadrature points, times the stored
    factors w detJ J^-1 J^-T, integrated back against the basis gradients, added."""
    q = factors.shape[1]
    B, D, _ = lagrange_tables(p, q)
    t = u[conn].reshape(len(conn), p + 1, p + 1, p + 1)
    grads = []
    for axis in (2, 1, 0):  # xi_0 (x), xi_1 (y), xi_2 (z)
        g = t
        for s in range(3):
            g = _apply(g, D if s == axis else B, s)
        grads.append(g)
    g = np.stack(grads, axis=-1)  # (E, q, q, q, 3)
    v = (factors @ g[..., None])[..., 0]
    y_e = 0
    for r, axis in enumerate((2, 1, 0)):
        h = v[..., r]
        for s in range(3):
            h = _apply(h, (D if s == axis else B).T, s)
        y_e = y_e + h
    y = np.zeros_like(u)
    np.add.at(y, conn.reshape(-1), np.asarray(y_e).reshape(-1))
    return y


def dense_operator(X: np.ndarray, conn: np.ndarray, p: int, q: int, kind: str) -> np.ndarray:
    """The assembled matrix (M, M) of BP1 ("mass") or BP3 ("poisson") from full 3-D tables:
    each basis function and its gradient at each quadrature point as an outer product of 1-D
    Lagrange polynomials fitted afresh (numpy's polynomial fit through the nodes), the
    Jacobian from the element's corner nodes (the meshes' cells are boxes)."""
    nodes, _ = gauss_lobatto(p)
    points, w = gauss_legendre(q)
    polys = [np.polynomial.Polynomial.fit(nodes, np.eye(p + 1)[a], p, domain=[-1, 1], window=[-1, 1])
             for a in range(p + 1)]
    B = np.array([[poly(x) for poly in polys] for x in points])
    D = np.array([[poly.deriv()(x) for poly in polys] for x in points])
    n = p + 1
    # phi[(k, j, i), (c, b, a)] = B[k, c] B[j, b] B[i, a]; gradients with one factor D
    phi = np.kron(np.kron(B, B), B)
    dphi = [np.kron(np.kron(B, B), D), np.kron(np.kron(B, D), B), np.kron(np.kron(D, B), B)]  # d/dxi_0,1,2
    weight = np.kron(np.kron(w, w), w)
    A = np.zeros((len(X), len(X)))
    for c in conn:
        xe = X[c].reshape(n, n, n, 3)
        h = (xe[-1, -1, -1] - xe[0, 0, 0]) / 2  # (half the cell's sides: the map is diagonal)
        det = h.prod()
        if kind == "mass":
            ke = (phi * (weight * det)[:, None]).T @ phi
        else:
            ke = sum((dphi[r] * (weight * det / h[r] ** 2)[:, None]).T @ dphi[r] for r in range(3))
        A[np.ix_(c, c)] += ke
    return A
