"""Boxes of hexahedra of order p, and the 1-D rules their tensor-product operators use.

- `gauss_lobatto(p)`: the p + 1 Gauss-Lobatto-Legendre points on [-1, 1] (both ends among
  them) and their weights: the nodes of an element of order p, and the quadrature that is
  exact for polynomials of degree 2p - 1;
- `gauss_legendre(q)`: the q Gauss-Legendre points and weights on [-1, 1] (exact to degree
  2q - 1);
- `box_hexahedra(nx, ny, nz, order=p)`: the unit cube cut into nx x ny x nz hexahedra of
  order p, their (p + 1)^3 nodes each at the Gauss-Lobatto points of the element's tensor
  grid, shared between neighbours (one number for a node on a face, edge or corner).

An element's nodes are listed in tensor order, x fastest: local node a + (p+1) (b + (p+1) c)
is the point (x_a, y_b, z_c) of its grid, so an element's values read as a (p+1, p+1, p+1)
array indexed [c, b, a] are what a sum-factorized operator contracts one axis at a time.
"""

from __future__ import annotations

import numpy as np

from irfuse.diagnostics import UsageError, check_whole
from irfuse.mesh.generate import numbering_options
from irfuse.mesh.order import renumber


# The most points a 1-D rule is made with: its points are the eigenvalues of a matrix of that
# order (0.3 s at 512 points, minutes and gigabytes far beyond; accurate to an ulp or two at 512).
RULE_POINTS = 1024


def gauss_lobatto(p: int) -> tuple[np.ndarray, np.ndarray]:
    """(points, weights) of the p + 1 point Gauss-Lobatto-Legendre rule on [-1, 1], points
    ascending (float64): -1, the roots of P_p' (P_p the Legendre polynomial of degree p), 1;
    weights 2 / (p (p + 1) P_p(x)^2), summing to 2."""
    check_whole("gauss_lobatto: p", p, 1, RULE_POINTS - 1)
    from numpy.polynomial import legendre  # (3 ms to import: not paid by every `import irfuse.mesh`)

    inner = legendre.Legendre.basis(p).deriv().roots() if p > 1 else np.zeros(0)
    # (the companion matrix's roots, polished by Newton's method on P_p': a few ulps)
    dp, ddp = legendre.Legendre.basis(p).deriv(), legendre.Legendre.basis(p).deriv(2)
    for _ in range(3):
        inner = inner - dp(inner) / ddp(inner)
    points = np.concatenate([[-1.0], np.sort(inner.real), [1.0]])
    points = (points - points[::-1]) / 2  # (exactly symmetric)
    weights = 2.0 / (p * (p + 1) * legendre.Legendre.basis(p)(points) ** 2)
    return points, weights


def gauss_legendre(q: int) -> tuple[np.ndarray, np.ndarray]:
    """(points, weights) of the q point Gauss-Legendre rule on [-1, 1], points ascending."""
    check_whole("gauss_legendre: q", q, 1, RULE_POINTS)
    from numpy.polynomial import legendre

    return legendre.leggauss(q)


def box_hexahedra(nx: int, ny: int | None = None, nz: int | None = None, order: int = 1,
                  numbering: str = "structured", seed: int = 0,
                  index_dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """The unit cube cut into nx x ny x nz hexahedra of order `order` (p): (X, conn), X the
    (p nx + 1)(p ny + 1)(p nz + 1) nodes' coordinates (float64, (M, 3)) and conn the nx ny nz
    elements' (p + 1)^3 node numbers each, in tensor order (see the module).

    The nodes of each element are the tensor grid of `gauss_lobatto(p)`'s points mapped onto
    it. `numbering`: "structured" (nodes x fastest, then y, then z, over the whole box's grid;
    elements x fastest) or "random" (nodes and elements each in a random order drawn from
    `seed`), as for `box_tetrahedra`."""
    ny = nx if ny is None else ny
    nz = nx if nz is None else nz
    for name, v in (("nx", nx), ("ny", ny), ("nz", nz)):
        check_whole(f"box_hexahedra: {name}", v, 1)
    check_whole("box_hexahedra: order", order, 1)
    index_dtype = numbering_options("box_hexahedra", numbering, seed, index_dtype)
    p = order
    counts = (p * nx + 1, p * ny + 1, p * nz + 1)
    m, e = counts[0] * counts[1] * counts[2], nx * ny * nz
    if m > np.iinfo(index_dtype).max or e * (p + 1) ** 3 > np.iinfo(np.int64).max:
        raise UsageError(f"box_hexahedra: {m:,} nodes do not fit {index_dtype}")
    gll = (gauss_lobatto(p)[0] + 1) / 2  # (on [0, 1])
    axes = [(np.arange(n)[:, None] + gll[None, :-1]).reshape(-1) / n for n in (nx, ny, nz)]
    axes = [np.append(a, 1.0) for a in axes]  # each axis's p n + 1 coordinates
    x, y, z = np.meshgrid(*axes, indexing="ij")
    X = np.stack([x.ravel(order="F"), y.ravel(order="F"), z.ravel(order="F")], axis=1)
    i, j, k = (a.ravel(order="F") for a in np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"))
    base = p * i + counts[0] * (p * j + counts[1] * p * k)  # each element's first node
    a, b, c = (t.ravel(order="F") for t in np.meshgrid(*(np.arange(p + 1),) * 3, indexing="ij"))
    local = a + counts[0] * (b + counts[1] * c)  # the element's grid, x fastest
    conn = base[:, None] + local[None, :]
    if numbering == "random":
        rng = np.random.default_rng(seed)
        conn, X = renumber(conn, rng.permutation(m), rng.permutation(e), X)
    return X, conn.astype(index_dtype)

