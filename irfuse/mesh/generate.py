"""Meshes for tests and benchmarks: a cube of hexahedra, each split into six tetrahedra."""

from __future__ import annotations

import numpy as np

from irfuse.diagnostics import UsageError, check_whole, is_whole
from irfuse.mesh.order import renumber

# The six tetrahedra of a unit cube around its diagonal from corner 0 to corner 7 (corner
# c at x = c & 1, y = c >> 1 & 1, z = c >> 2 & 1): the split is the same in every cube, so
# two neighbouring cubes cut their shared face along the same diagonal (a conforming mesh),
# and each tetrahedron is listed with a positive volume.
_CUBE_TETS = np.array([[0, 1, 3, 7], [0, 3, 2, 7], [0, 2, 6, 7], [0, 6, 4, 7], [0, 4, 5, 7], [0, 5, 1, 7]])


def numbering_options(who: str, numbering, seed, index_dtype) -> np.dtype:
    """A box generator's `numbering` ("structured" or "random"), `seed` (a whole number, at
    least 0: NumPy's generators take those) and `index_dtype` (int32 or int64) checked, the
    last as a NumPy type; a UsageError naming `who` otherwise."""
    if not isinstance(numbering, str) or numbering not in ("structured", "random"):
        raise UsageError(f"{who}: numbering must be 'structured' or 'random', not {numbering!r}")
    check_whole(f"{who}: seed", seed, 0)
    try:
        dtype = np.dtype(index_dtype)
    except (TypeError, ValueError):  # (ValueError: an object NumPy cannot read a type from, a tensor)
        raise UsageError(f"{who}: index_dtype must be int32 or int64, not {index_dtype!r}") from None
    if dtype not in (np.dtype(np.int32), np.dtype(np.int64)):
        raise UsageError(f"{who}: index_dtype must be int32 or int64, not {dtype}")
    return dtype


def box_tetrahedra(nx: int, ny: int | None = None, nz: int | None = None, numbering: str = "structured",
                   seed: int = 0, index_dtype=np.int32) -> tuple[np.ndarray, np.ndarray]:
    """The unit cube cut into nx x ny x nz hexahedra, each split into six tetrahedra:
    (X, conn), X the (nx+1)(ny+1)(nz+1) nodes' coordinates (float64, shape (M, 3)) and conn
    the 6 nx ny nz elements' node numbers (shape (E, 4), positively oriented).

    `numbering`: "structured" (nodes x fastest, then y, then z; elements cube by cube) or
    "random" (nodes and elements each in a random order drawn from `seed`: what a mesh
    generator that knows nothing of locality gives)."""
    ny = nx if ny is None else ny
    nz = nx if nz is None else nz
    for name, v in (("nx", nx), ("ny", ny), ("nz", nz)):
        if not is_whole(v) or v < 1:
            raise UsageError(f"box_tetrahedra: {name} must be a whole number of cubes, at least 1, not {v!r}")
    index_dtype = numbering_options("box_tetrahedra", numbering, seed, index_dtype)
    m = (nx + 1) * (ny + 1) * (nz + 1)
    if 6 * nx * ny * nz > np.iinfo(index_dtype).max or m > np.iinfo(index_dtype).max:
        raise UsageError(f"box_tetrahedra: {6 * nx * ny * nz:,} elements and {m:,} nodes do not fit {index_dtype}")
    x, y, z = np.meshgrid(np.linspace(0.0, 1.0, nx + 1), np.linspace(0.0, 1.0, ny + 1),
                          np.linspace(0.0, 1.0, nz + 1), indexing="ij")
    X = np.stack([x.ravel(order="F"), y.ravel(order="F"), z.ravel(order="F")], axis=1)
    i, j, k = (a.ravel(order="F") for a in np.meshgrid(np.arange(nx), np.arange(ny), np.arange(nz), indexing="ij"))
    base = i + (nx + 1) * (j + (ny + 1) * k)  # each cube's corner 0
    corner = np.array([(c & 1) + (nx + 1) * ((c >> 1 & 1) + (ny + 1) * (c >> 2 & 1)) for c in range(8)])
    conn = (base[:, None, None] + corner[_CUBE_TETS][None]).reshape(-1, 4)
    if numbering == "random":
        rng = np.random.default_rng(seed)
        node_order = rng.permutation(m)  # new node r is old node node_order[r]
        conn, X = renumber(conn, node_order, rng.permutation(len(conn)), X)
    return X, conn.astype(index_dtype)
