"""A hyperelastic Newton solve end to end: irfuse against the same algorithm in JAX, one run.

    python benchmarks/newton.py [--cubes 64] [--steps 4] [--stretch 0.2] [--device cuda|cpu]
                                [--dtype f32|f64] [--skip-jax] [--json ...]

The problem of `examples/solve/neo_hookean_newton.py` at scale: a compressible Neo-Hookean
unit box of 6 c^3 P1 tetrahedra (`--cubes` c), the bottom face held, the top face moved up by
`--stretch` in `--steps` load steps (its x and y held). Each load step: Newton steps until the
free residual's norm falls below `NEWTON_RTOL` times its value after the top was moved (at most
`NEWTON_STEPS`); each Newton step solves J du = -r by CG preconditioned by J's diagonal
(Jacobi), stopping at `CG_RTOL` times the right-hand side's norm (at most `CG_STEPS`). Both
contenders run this very algorithm, the same loops and tests:

- irfuse: `examples/mesh/neo_hookean_residual.kas` for r, `irfuse.linear_operator` (the forward
  derivative, matrix-free) for J, `irfuse.diagonal` for the preconditioner, on PyTorch tensors
  (`--device cuda`) or NumPy arrays on the CPU backend (`--device cpu`); CG in the arrays' own
  operations, its norms read on the host at every step.
- JAX: the energy W = sum of vol (mu/2 (tr F^T F - 3) - mu log J + lam/2 (log J)^2), whose
  gradient is that residual; `jax.grad` for r, `jax.jvp` of it for J, the diagonal of each
  element's `jax.hessian` added into the nodes for the preconditioner; CG as one jitted
  `lax.while_loop`, so it pays no host step per CG iteration.

Reported: seconds end to end (after a warm-up solve of the first load step, each contender set
up once: programs compiled and the mesh prepared, functions jitted), the Newton and
CG iterations of each load step, and the largest difference of the final displacements
(relative to the largest). Times include everything a user's solve does after compiling.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place
from peers import ROOT  # noqa: E402

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
LAM, MU = 1.0, 0.5
NEWTON_RTOL, NEWTON_STEPS = 1e-4, 8
CG_RTOL, CG_STEPS = 1e-3, 2000


def box(cubes: int):
    from irfuse.mesh import box_tetrahedra, renumber, reorder

    X, conn = box_tetrahedra(cubes)
    conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
    top = np.isclose(X[:, 2], 1.0)
    fixed = np.zeros(X.shape, bool)
    fixed[np.isclose(X[:, 2], 0.0) | top] = True
    return X, conn, top, fixed


def cg(apply, b, inverse_diagonal, norm):
    """Jacobi-preconditioned CG from 0 on arrays with `*`, `+`, `-` and `.sum()` (NumPy,
    PyTorch): (x, steps). `norm(a)`: a's 2-norm as a Python float (a host read)."""
    x = b * 0
    r = b * 1
    z = r * inverse_diagonal
    p = z
    rz = float((r * z).sum())
    stop = CG_RTOL * norm(b)
    steps = 0
    while steps < CG_STEPS and norm(r) > stop:
        q = apply(p)
        alpha = rz / float((p * q).sum())
        x = x + alpha * p
        r = r - alpha * q
        z = r * inverse_diagonal
        rz, previous = float((r * z).sum()), rz
        p = z + (rz / previous) * p
        steps += 1
    return x, steps


def irfuse_solver(X, conn, top, fixed, device: str, dtype: str):
    """The load steps by irfuse, set up once (programs compiled, the mesh prepared): a
    function of (steps, stretch) giving (final u as NumPy, [(Newton steps, CG steps)])."""
    import irfuse
    from irfuse.mesh import Connectivity

    residual = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "neo_hookean_residual.kas"),
                              backend="cuda" if device == "cuda" else "cpu", dtype=dtype)
    real = np.float32 if dtype == "f32" else np.float64
    if device == "cuda":
        import torch

        def put(a):
            return torch.from_numpy(np.ascontiguousarray(a)).cuda()

        def norm(a):
            return float(torch.linalg.vector_norm(a))

        prepared = Connectivity(put(conn.astype(np.int32)), len(X))
    else:
        def put(a):
            return np.ascontiguousarray(a)

        def norm(a):
            return float(np.linalg.norm(a))

        prepared = Connectivity(conn, len(X))
    Xd, dN, mask = put(X.astype(real)), put(DN.astype(real)), put(fixed)
    free = put((~fixed).reshape(-1).astype(real))
    held = put((~fixed).astype(real))

    def solve(steps: int, stretch: float):
        u = put(np.zeros(X.shape, real))
        counts = []
        for step in range(1, steps + 1):
            moved = np.zeros(X.shape, real)
            moved[top, 2] = stretch * step / steps
            u = u * held + put(moved)
            newton = cg_steps = 0
            first = None
            while newton < NEWTON_STEPS:
                args = (Xd, u, prepared, dN, LAM, MU)
                r = residual(*args).r.reshape(-1) * free
                size = norm(r)
                first = size if first is None else first
                if size <= NEWTON_RTOL * first:
                    break
                J = irfuse.linear_operator(residual, *args, wrt="u", fixed=mask)
                d = irfuse.diagonal(residual, *args, wrt="u", fixed=mask).reshape(-1)
                du, k = cg(J.matvec, -r, 1 / d, norm)
                u = u + du.reshape(u.shape)
                newton, cg_steps = newton + 1, cg_steps + k
            counts.append((newton, cg_steps))
        return (u.cpu().numpy() if device == "cuda" else np.asarray(u)), counts

    return solve


def jax_solver(X, conn, top, fixed, dtype: str):
    """The same load steps in JAX (see the module), its functions jitted once: a function of
    (steps, stretch) giving (final u as NumPy, counts)."""
    import jax

    if dtype == "f64":
        jax.config.update("jax_enable_x64", True)
    import jax.numpy as jnp
    from jax import lax

    real = jnp.float32 if dtype == "f32" else jnp.float64
    Xj, c = jnp.asarray(X, real), jnp.asarray(conn)
    dN = jnp.asarray(DN, real)
    mask = jnp.asarray(fixed)
    nodes = len(X)

    def element_energy(xe, ue):
        Jr = xe.T @ dN
        G = dN @ jnp.linalg.inv(Jr)
        F = jnp.eye(3, dtype=real) + ue.T @ G
        J = jnp.linalg.det(F)
        w = MU / 2 * (jnp.sum(F * F) - 3) - MU * jnp.log(J) + LAM / 2 * jnp.log(J) ** 2
        return jnp.linalg.det(Jr) / 6 * w

    def energy(u):
        return jnp.sum(jax.vmap(element_energy)(Xj[c], u[c]))

    gradient = jax.grad(energy)

    @jax.jit
    def residual(u):
        return jnp.where(mask, 0, gradient(u))

    @jax.jit
    def diagonal(u):
        h = jax.vmap(jax.hessian(element_energy, argnums=1))(Xj[c], u[c])  # (E, 4, 3, 4, 3)
        k = jnp.arange(4)
        own = h[:, k, :, k, :]  # (4, E, 3, 3)
        rows = jnp.diagonal(own, axis1=2, axis2=3).transpose(1, 0, 2)  # (E, 4, 3)
        d = jnp.zeros((nodes, 3), real).at[c.reshape(-1)].add(rows.reshape(-1, 3))
        return jnp.where(mask, 1, d)

    @jax.jit
    def solve(u, r, d):
        def apply(v):
            v = jnp.where(mask, 0, v)
            return jnp.where(mask, v, jax.jvp(gradient, (u,), (v,))[1])

        b = -r
        inverse = 1 / d
        stop = CG_RTOL * jnp.linalg.norm(b)

        def body(state):
            x, r_, p, rz, k = state
            q = apply(p)
            alpha = rz / jnp.sum(p * q)
            x, r_ = x + alpha * p, r_ - alpha * q
            z = r_ * inverse
            rz_new = jnp.sum(r_ * z)
            return x, r_, z + (rz_new / rz) * p, rz_new, k + 1

        def going(state):
            return (state[4] < CG_STEPS) & (jnp.linalg.norm(state[1]) > stop)

        z = b * inverse
        x, _, _, _, k = lax.while_loop(going, body, (b * 0, b, z, jnp.sum(b * z), 0))
        return x, k

    def run(steps: int, stretch: float):
        u = jnp.zeros((nodes, 3), real)
        counts = []
        for step in range(1, steps + 1):
            moved = np.zeros(X.shape)
            moved[top, 2] = stretch * step / steps
            u = jnp.where(mask, jnp.asarray(moved, real), u)
            newton = cg_steps = 0
            first = None
            while newton < NEWTON_STEPS:
                r = residual(u)
                size = float(jnp.linalg.norm(r))
                first = size if first is None else first
                if size <= NEWTON_RTOL * first:
                    break
                du, k = solve(u, r, diagonal(u))
                u = u + du
                newton, cg_steps = newton + 1, cg_steps + int(k)
            counts.append((newton, cg_steps))
        return np.asarray(u), counts

    return run


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubes", type=int, default=64)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--stretch", type=float, default=0.2)
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--dtype", default="f32", choices=("f32", "f64"))
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--json", default=meta.result_path("matrices"))
    a = ap.parse_args(argv)
    X, conn, top, fixed = box(a.cubes)
    result = {"meta": meta.run_meta(), "tets": len(conn), "nodes": len(X), "load steps": a.steps,
              "stretch": a.stretch, "dtype": a.dtype, "newton rtol": NEWTON_RTOL, "cg rtol": CG_RTOL}
    contenders = {"irfuse": irfuse_solver(X, conn, top, fixed, a.device, a.dtype)}
    if not a.skip_jax:
        contenders["jax"] = jax_solver(X, conn, top, fixed, a.dtype)
    finals = {}
    for name, run in contenders.items():
        run(1, a.stretch / a.steps)  # (a warm-up: the first load step; compiled, kept, jitted)
        t0 = time.perf_counter()
        finals[name], counts = run(a.steps, a.stretch)
        seconds = time.perf_counter() - t0
        result[name] = {"seconds": seconds, "newton steps": [n for n, _ in counts], "cg steps": [k for _, k in counts]}
        print(f"{name}: {seconds:.3f} s, Newton {result[name]['newton steps']}, CG {result[name]['cg steps']}",
              flush=True)
    if "jax" in finals:
        scale = float(np.abs(finals["jax"]).max())
        result["largest u difference (relative)"] = float(np.abs(finals["irfuse"] - finals["jax"]).max()) / scale
        result["jax / irfuse"] = result["jax"]["seconds"] / result["irfuse"]["seconds"]
        print(f"u difference {result['largest u difference (relative)']:.2e}; jax / irfuse "
              f"{result['jax / irfuse']:.2f}")
    with open(a.json, "w") as f:
        meta.dump(result, f, indent=1)
    print(f"written {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
