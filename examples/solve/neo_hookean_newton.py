"""A compressible Neo-Hookean block stretched in load steps, each solved by Newton's method
with matrix-free CG: the tangent is the residual's forward derivative at the current
displacement (`irfuse.linear_operator`), preconditioned by its diagonal (`irfuse.diagonal`).

    python examples/solve/neo_hookean_newton.py [--cubes 6] [--steps 4] [--stretch 0.3]
                                                [--backend cpu|cuda]

The residual is `examples/mesh/neo_hookean_residual.kas` on a unit box of P1 tetrahedra. The
bottom face (z = 0) is held; the top face (z = 1) is moved up by `stretch` in `--steps` equal
load steps, its x and y held. Each load step starts from the last state stretched evenly by
the step (the top's displacement set), then Newton steps solve J du = -r on the free components (the held ones are identity rows and columns of
the operator, and their right-hand side 0) until the free residual's norm is below `atol`.
Prints each load step's Newton and CG iterations; `solve` returns the displacement and the
counts for `tests/test_operators.py`, which checks the converged state against an
independent float64 solve.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
MESH = os.path.join(HERE, "..", "mesh")
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)


def solve(cubes: int = 6, steps: int = 4, stretch: float = 0.3, backend: str = "cpu", lam: float = 1.0,
          mu: float = 0.5, atol: float = 1e-10, newton: int = 20):
    """(coordinates, connectivity, the displacement at the last load step, the fixed
    components, [(Newton steps, CG steps)] for each load step)."""
    from scipy.sparse.linalg import LinearOperator, cg

    import irfuse
    from irfuse.mesh import Connectivity, box_tetrahedra

    X, conn = box_tetrahedra(cubes)
    prepared = Connectivity(conn, len(X))
    residual = irfuse.compile(os.path.join(MESH, "neo_hookean_residual.kas"), backend=backend, dtype="f64")
    top = np.isclose(X[:, 2], 1.0)
    fixed = np.zeros(X.shape, bool)
    fixed[np.isclose(X[:, 2], 0.0) | top] = True
    u = np.zeros_like(X)
    counts = []
    for step in range(1, steps + 1):
        # The first guess: the last state stretched evenly by the step. Moving the top face
        # alone strains its layer of elements by (stretch / steps) * cubes, which on a fine
        # mesh inverts elements in the first Newton update (log J of a negative J).
        u[:, 2] += stretch / steps * X[:, 2]
        u[top, 2] = stretch * step / steps
        newton_steps = cg_steps = 0
        while True:
            args = (X, u, prepared, DN, lam, mu)
            r = residual(*args).r
            r[fixed] = 0.0
            if np.linalg.norm(r) < atol:
                break
            if newton_steps == newton:
                raise RuntimeError(f"load step {step}: no convergence in {newton} Newton steps "
                                   f"(|r| = {np.linalg.norm(r):.3e})")
            tangent = irfuse.linear_operator(residual, *args, wrt="u", fixed=fixed)
            diagonal = irfuse.diagonal(residual, *args, wrt="u", fixed=fixed).reshape(-1)
            jacobi = LinearOperator(tangent.shape, matvec=lambda v, d=diagonal: v / d)
            counter = []
            du, info = cg(tangent, -r.reshape(-1), rtol=1e-12, atol=atol * 1e-2, M=jacobi,
                          callback=lambda _, counter=counter: counter.append(1))
            if info != 0:
                raise RuntimeError(f"load step {step}: CG did not converge (info {info})")
            u += du.reshape(u.shape)
            newton_steps += 1
            cg_steps += len(counter)
        counts.append((newton_steps, cg_steps))
    return X, conn, u, fixed, counts


def at_least(least: int):
    """A command line's whole number of at least `least`."""
    def whole(text: str) -> int:
        if not text.isdigit() or int(text) < least:
            raise argparse.ArgumentTypeError(f"a whole number, at least {least}, not {text!r}")
        return int(text)
    return whole


def stretch_of(text: str) -> float:
    """A command line's stretch: a finite number above -1 (the top face moved below the bottom
    one inverts every element)."""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not np.isfinite(value) or value <= -1:
        raise argparse.ArgumentTypeError(f"a finite number above -1, not {text!r}")
    return value


def main(argv=None) -> int:
    import irfuse

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cubes", type=at_least(2), default=6)  # (one cube: every node on a held face)
    ap.add_argument("--steps", type=at_least(1), default=4)
    ap.add_argument("--stretch", type=stretch_of, default=0.3)
    ap.add_argument("--backend", default="cpu", choices=("cpu", "cuda"))
    a = ap.parse_args(argv)
    try:
        X, conn, u, _, counts = solve(a.cubes, a.steps, a.stretch, a.backend)
    except (irfuse.IrfuseError, RuntimeError) as e:  # (no GPU, a load step that did not converge)
        print(f"neo_hookean_newton.py: {e}", file=sys.stderr)
        return 1
    for k, (n, c) in enumerate(counts, 1):
        print(f"load step {k}: {n} Newton steps, {c} CG steps")
    side = np.isclose(X[:, 0], 1.0)
    print(f"{len(conn)} tetrahedra; the face x = 1 moves in by up to {-u[side, 0].min():.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
