"""A linear elastic cube under its own weight: matrix-free (scipy's CG on the P1 elasticity
residual's derivative, `irfuse.linear_operator`, plain and with the tangent's diagonal as a
Jacobi preconditioner, `irfuse.diagonal`) and assembled (`irfuse.tangent_matrix` and a sparse
direct solve), the bottom face held.

    python examples/solve/elastic_cube_cg.py [--cubes 8] [--backend cpu|cuda]

The residual r(u) = K u is `examples/mesh/p1_residual.kas`; its forward derivative at any u
is K, applied at each CG step without forming it. The load is the weight of the lumped mass
(`examples/mesh/lumped_mass.kas`, density 1) under gravity -1 along z. Prints the iterations,
the largest settlement and the residual of the solution; `solve` returns them for
`tests/test_operators.py`, which checks the displacement against a direct solve of
scikit-fem's assembled system.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MESH = os.path.join(HERE, "..", "mesh")
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)


def problem(cubes: int, backend: str, lam: float, mu: float):
    """(coordinates, connectivity, the residual program, its arguments at u = 0, the fixed
    components (z = 0), the load: the lumped mass's weight, 0 where fixed)."""
    import irfuse
    from irfuse.mesh import Connectivity, box_tetrahedra

    X, conn = box_tetrahedra(cubes)
    prepared = Connectivity(conn, len(X))
    residual = irfuse.compile(os.path.join(MESH, "p1_residual.kas"), backend=backend, dtype="f64")
    lumped = irfuse.compile(os.path.join(MESH, "lumped_mass.kas"), backend=backend, dtype="f64")
    mass = lumped(X, prepared, DN, np.full(4, 0.25), 1.0).m
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    load = np.zeros(X.shape)
    load[:, 2] = -mass
    load[fixed] = 0.0  # (held: the solution there is 0)
    return X, conn, residual, (X, np.zeros_like(X), prepared, DN, lam, mu), fixed, load


def _cg(K, load, rtol: float, preconditioner=None):
    from scipy.sparse.linalg import cg

    steps = []
    u, info = cg(K, load.reshape(-1), rtol=rtol, maxiter=10 * load.size, M=preconditioner,
                 callback=lambda _: steps.append(1))
    if info != 0:
        raise RuntimeError(f"CG did not converge ({info})")
    return u.reshape(load.shape), len(steps)


def solve(cubes: int = 8, backend: str = "cpu", lam: float = 1.5, mu: float = 0.75, rtol: float = 1e-10):
    """(coordinates, connectivity, displacement, CG iterations, fixed components) of the
    cube of `cubes`^3 hexahedra cut into tetrahedra, fixed at z = 0, by matrix-free CG."""
    import irfuse

    X, conn, residual, args, fixed, load = problem(cubes, backend, lam, mu)
    u, steps = _cg(irfuse.linear_operator(residual, *args, wrt="u", fixed=fixed), load, rtol)
    return X, conn, u, steps, fixed


def solve_assembled(cubes: int = 8, backend: str = "cpu", lam: float = 1.5, mu: float = 0.75,
                    rtol: float = 1e-10):
    """The same cube: (displacement by a sparse direct solve of the assembled matrix
    (`irfuse.tangent_matrix`), displacement by CG preconditioned with the tangent's diagonal
    (`irfuse.diagonal`, Jacobi) on the matrix-free operator, Jacobi-CG's iterations)."""
    from scipy.sparse.linalg import LinearOperator, spsolve

    import irfuse

    X, conn, residual, args, fixed, load = problem(cubes, backend, lam, mu)
    matrix = irfuse.tangent_matrix(residual, *args, wrt="u", fixed=fixed)
    direct = spsolve(matrix.tocsc(), load.reshape(-1)).reshape(X.shape)
    diag = irfuse.diagonal(residual, *args, wrt="u", fixed=fixed).reshape(-1)
    K = irfuse.linear_operator(residual, *args, wrt="u", fixed=fixed)
    u, steps = _cg(K, load, rtol, LinearOperator(K.shape, matvec=lambda r: r / diag))
    return direct, u, steps


def cube_count(text: str) -> int:
    """A command line's number of cubes along each side: a whole number, at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise argparse.ArgumentTypeError(f"a whole number of cubes, at least 1, not {text!r}")
    return int(text)


def main(argv=None) -> int:
    import irfuse

    ap = argparse.ArgumentParser()
    ap.add_argument("--cubes", type=cube_count, default=8)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    args = ap.parse_args(argv)
    try:
        X, conn, u, steps, fixed = solve(args.cubes, args.backend)
        direct, jacobi, jacobi_steps = solve_assembled(args.cubes, args.backend)
    except (irfuse.IrfuseError, RuntimeError) as e:  # (no GPU, a solve that did not converge)
        print(f"elastic_cube_cg.py: {e}", file=sys.stderr)
        return 1
    print(f"{len(conn):,} tetrahedra, {len(X):,} nodes: CG in {steps} steps, largest settlement {-u[:, 2].min():.6g}")
    print(f"assembled matrix, direct solve: largest settlement {-direct[:, 2].min():.6g}; Jacobi-CG in "
          f"{jacobi_steps} steps: {-jacobi[:, 2].min():.6g}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
