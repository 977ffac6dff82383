"""A hyperelastic Newton solve end to end: irfuse against the same algorithm in JAX, one run.

    python benchmarks/newton.py [--cubes 64] [--steps 4] [--stretch 0.2] [--device cuda|cpu]
                                [--dtype f32|f64] [--skip-jax] [--profile] [--json ...]

The problem of `examples/solve/neo_hookean_newton.py` at scale: a compressible Neo-Hookean
unit box of 6 c^3 P1 tetrahedra (`--cubes` c), the bottom face held, the top face moved up by
`--stretch` in `--steps` load steps (its x and y held). Each load step starts from the last
state stretched evenly by the step (`predictor`), then takes Newton steps until the
free residual's norm falls below `NEWTON_RTOL` times its value at the first guess (at most
`NEWTON_STEPS`); each Newton step solves J du = -r by CG preconditioned by J's diagonal
(Jacobi), stopping at `CG_RTOL` times the right-hand side's norm (at most `CG_STEPS`). Both
contenders run this very algorithm, the same loops and tests:

- irfuse: `examples/mesh/neo_hookean_residual.kas` for r, `irfuse.linear_operator` (the forward
  derivative, matrix-free) for J, `irfuse.diagonal` for the preconditioner, on PyTorch tensors
  (`--device cuda`) or NumPy arrays on the CPU backend (`--device cpu`); CG in the arrays' own
  operations, its scalars kept on the device, the stopping test read on the host every
  `CHECK_EVERY` iterations (`cg`: the iterations after the test fails change nothing).
  On the GPU a second irfuse contender, "irfuse, CG captured", runs those blocks of
  iterations captured once into a CUDA graph with `torch.cuda.graph` and replayed by every
  solve (`CapturedCG`; irfuse's calls are capturable; one tangent operator whose
  linearization point is refilled at each Newton step): the same kernels and bits without
  their host time, as a PyTorch user removes it.
- JAX: the residual P = mu (F - F^-T) + lam log(det F) F^-T written componentwise with
  closed-form 3x3 inverses (`assembly.neo_hookean`, the peers' form in the other benchmarks),
  `jax.jvp` of it for J, the diagonal by one `jax.jvp` a local direction of each element's
  forces added into the nodes; CG as one jitted `lax.while_loop`, so it pays no host step per
  CG iteration. The mesh's arrays are arguments of the jitted functions.

Reported: seconds end to end and those spent in the CG solves (per CG step) (after a warm-up
solve of the first load step, each contender set up once: programs compiled and the mesh prepared, functions jitted), the Newton and
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
SECONDS_IN_CG = {"irfuse": [0.0], "irfuse, CG captured": [0.0], "jax": [0.0]}  # (each contender's last solve's seconds in its CG solves)
CG_RTOL, CG_STEPS = 1e-3, 2000


def box(cubes: int):
    from irfuse.mesh import box_tetrahedra, renumber, reorder

    X, conn = box_tetrahedra(cubes)
    conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
    top = np.isclose(X[:, 2], 1.0)
    fixed = np.zeros(X.shape, bool)
    fixed[np.isclose(X[:, 2], 0.0) | top] = True
    return X, conn, top, fixed


def predictor(X, increment: float):
    """A load step's first guess, added to the last state: the box stretched evenly by the
    step's `increment` (the top face moves by it, the bottom stays). Moving the top face alone
    strains the top layer of elements by increment * cubes, which inverts elements in the
    first Newton update on fine meshes."""
    guess = np.zeros(X.shape)
    guess[:, 2] = increment * X[:, 2]
    return guess


CHECK_EVERY = 16  # CG iterations queued between two host reads of whether CG goes on


def cg(apply, b, inverse_diagonal, where, sqrt):
    """Jacobi-preconditioned CG from 0 on arrays with `*`, `+`, `-` and `.sum()` (NumPy,
    PyTorch), JAX's `lax.while_loop` below step for step: each iteration tests ||r|| > stop
    on the arrays' device and, once it fails, leaves x, r and p as they are (`where`), so
    the host reads the test only every `CHECK_EVERY` iterations and never waits for a scalar
    inside one: (x, steps)."""
    x = b * 0
    r = b * 1
    z = r * inverse_diagonal
    p = z
    rz = (r * z).sum()
    stop = CG_RTOL * sqrt((b * b).sum())
    steps, done, going = 0, 0, True
    while going and done < CG_STEPS:
        for _ in range(min(CHECK_EVERY, CG_STEPS - done)):
            going = sqrt((r * r).sum()) > stop
            q = apply(p)
            alpha = where(going, rz / (p * q).sum(), 0 * rz)
            x = x + alpha * p
            r = r - alpha * q
            z = r * inverse_diagonal
            rz_next = (r * z).sum()
            p = where(going, z + (rz_next / rz) * p, p)
            rz = where(going, rz_next, rz)
            steps = steps + going
            done += 1
        going = bool(going)
    return x, int(steps)


class CapturedCG:
    """`cg` on PyTorch CUDA tensors with its blocks of `CHECK_EVERY` iterations captured once
    into a CUDA graph (`torch.cuda.graph`) and replayed: the same iterations, kernels and
    bits, without their host time. The graph is captured at the first solve and replayed by
    every later one: the operator (`apply`, the same object each time: its linearization
    point is an array the caller refills) and the solve's state live at fixed addresses, each
    solve copying its right-hand side and diagonal in. At the first solve the first block
    runs as written (on a side stream, as PyTorch asks before a capture) and the capture
    (which runs nothing) follows; the blocks are replayed while the test read between them
    says CG goes on."""

    def __init__(self):
        self.graph = None
        self.apply = None

    def __call__(self, apply, b, inverse_diagonal):
        import torch

        if self.graph is None:
            self.apply = apply
            self.b, self.inverse_diagonal = b.clone(), inverse_diagonal.clone()
            self.x, self.r, self.p = torch.empty_like(b), torch.empty_like(b), torch.empty_like(b)
            self.rz, self.stop = (torch.empty((), dtype=b.dtype, device=b.device) for _ in range(2))
            self.steps = torch.empty((), dtype=torch.int64, device=b.device)
            self.going = torch.empty((), dtype=torch.bool, device=b.device)
        elif apply != self.apply:  # (a bound method is made anew at each access: equal, not identical)
            raise ValueError("CapturedCG replays the operator it captured: pass the same one")
        else:
            self.b.copy_(b)
            self.inverse_diagonal.copy_(inverse_diagonal)
        x, r, p, rz, going, steps = self.x, self.r, self.p, self.rz, self.going, self.steps
        x.zero_()
        r.copy_(self.b)
        p.copy_(r * self.inverse_diagonal)
        rz.copy_((r * p).sum())
        self.stop.copy_(CG_RTOL * torch.sqrt((self.b * self.b).sum()))
        steps.zero_()
        going.fill_(True)
        done = 0
        if self.graph is None:
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                self._block()
            torch.cuda.current_stream().wait_stream(side)
            done = CHECK_EVERY
            self.graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(self.graph):
                self._block()
        while bool(going) and done < CG_STEPS:
            self.graph.replay()
            done += CHECK_EVERY
        return x, int(steps)

    def _block(self):  # (`cg`'s iteration with its state updated in place: the graph's addresses)
        import torch

        x, r, p, rz, going, steps = self.x, self.r, self.p, self.rz, self.going, self.steps
        for _ in range(CHECK_EVERY):
            going.copy_(torch.sqrt((r * r).sum()) > self.stop)
            q = self.apply(p)
            alpha = torch.where(going, rz / (p * q).sum(), 0 * rz)
            x.add_(alpha * p)
            r.sub_(alpha * q)
            z = r * self.inverse_diagonal
            rz_next = (r * z).sum()
            p.copy_(torch.where(going, z + (rz_next / rz) * p, p))
            rz.copy_(torch.where(going, rz_next, rz))
            steps.add_(going)


def irfuse_solver(X, conn, top, fixed, device: str, dtype: str, captured: bool = False):
    """The load steps by irfuse, set up once (programs compiled, the mesh prepared): a
    function of (steps, stretch) giving (final u as NumPy, [(Newton steps, CG steps)]).
    `captured`: CG by `CapturedCG` (PyTorch CUDA tensors) instead of `cg`."""
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

        where, sqrt = torch.where, torch.sqrt

        prepared = Connectivity(put(conn.astype(np.int32)), len(X))
    else:
        def put(a):
            return np.ascontiguousarray(a)

        def norm(a):
            return float(np.linalg.norm(a))

        where, sqrt = np.where, np.sqrt

        prepared = Connectivity(conn, len(X))
    Xd, dN, mask = put(X.astype(real)), put(DN.astype(real)), put(fixed)
    in_cg = SECONDS_IN_CG["irfuse, CG captured" if captured else "irfuse"]
    free = put((~fixed).reshape(-1).astype(real))
    if captured:  # (one operator at a linearization point refilled at each Newton step: the graph's)
        captured_cg, at = CapturedCG(), put(np.zeros(X.shape, real))
        operator = irfuse.linear_operator(residual, Xd, at, prepared, dN, LAM, MU, wrt="u", fixed=mask)

    def solve(steps: int, stretch: float):
        in_cg[0] = 0.0
        u = put(np.zeros(X.shape, real))
        counts = []
        for step in range(1, steps + 1):
            u = u + put(predictor(X, stretch / steps).astype(real))
            newton = cg_steps = 0
            first = None
            while newton < NEWTON_STEPS:
                args = (Xd, u, prepared, dN, LAM, MU)
                r = residual(*args).r.reshape(-1) * free
                size = norm(r)
                first = size if first is None else first
                if size <= NEWTON_RTOL * first:
                    break
                d = irfuse.diagonal(residual, *args, wrt="u", fixed=mask).reshape(-1)
                if captured:
                    at.copy_(u)
                    t0 = time.perf_counter()
                    du, k = captured_cg(operator.matvec, -r, 1 / d)
                else:
                    J = irfuse.linear_operator(residual, *args, wrt="u", fixed=mask)
                    t0 = time.perf_counter()
                    du, k = cg(J.matvec, -r, 1 / d, where, sqrt)
                in_cg[0] += time.perf_counter() - t0
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
    from assembly import neo_hookean
    from jax import lax

    real = jnp.float32 if dtype == "f32" else jnp.float64
    Xj, c = jnp.asarray(X, real), jnp.asarray(conn)
    mask = jnp.asarray(fixed)
    nodes = len(X)
    in_cg = SECONDS_IN_CG["jax"]

    # The residual written as the other benchmarks' peers write it (`assembly.neo_hookean`:
    # closed-form 3x3 inverses and determinants, componentwise; jnp.linalg's batched LU took 15
    # ms a CG step on an H200), the mesh's arrays passed as arguments, not closed over.
    def at_add(f, cc):
        return jnp.zeros((nodes, 3), f.dtype).at[cc.reshape(-1)].add(f.reshape(-1, 3))

    def forces(u, X, c):
        return neo_hookean(jnp, X, u, c, LAM, MU, at_add)

    @jax.jit
    def residual(u, X, c, mask):
        return jnp.where(mask, 0, forces(u, X, c))

    @jax.jit
    def diagonal(u, X, c, mask):
        # each element's own rows, one forward derivative a local direction (12), added into the nodes
        xe, ue = X[c].reshape(-1, 3), u[c]
        local = jnp.arange(ue.size // 3, dtype=c.dtype).reshape(c.shape)

        def element_forces(w):
            return neo_hookean(jnp, xe, w.reshape(-1, 3), local, LAM, MU, lambda f, cc: f)

        rows = []
        for a in range(4):
            for i in range(3):
                seed = jnp.zeros_like(ue).at[:, a, i].set(1)
                rows.append(jax.jvp(element_forces, (ue,), (seed,))[1][:, a, i])
        own = jnp.stack(rows, axis=1).reshape(ue.shape)  # (E, 4, 3)
        return jnp.where(mask, 1, at_add(own, c))

    @jax.jit
    def solve(u, r, d, X, c, mask):
        def apply(v):
            v = jnp.where(mask, 0, v)
            return jnp.where(mask, v, jax.jvp(lambda w: forces(w, X, c), (u,), (v,))[1])

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

    mesh = (Xj, c, mask)

    def run(steps: int, stretch: float):
        in_cg[0] = 0.0
        u = jnp.zeros((nodes, 3), real)
        counts = []
        for step in range(1, steps + 1):
            u = u + jnp.asarray(predictor(X, stretch / steps), real)
            newton = cg_steps = 0
            first = None
            while newton < NEWTON_STEPS:
                r = residual(u, *mesh)
                size = float(jnp.linalg.norm(r))
                first = size if first is None else first
                if size <= NEWTON_RTOL * first:
                    break
                d = diagonal(u, *mesh)
                t0 = time.perf_counter()
                du, k = solve(u, r, d, *mesh)
                k = int(k)  # (waits for the solve)
                in_cg[0] += time.perf_counter() - t0
                u = u + du
                newton, cg_steps = newton + 1, cg_steps + k
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
    ap.add_argument("--profile", action="store_true",
                    help="then the GPU work of irfuse's first load step (torch.profiler): busy time against the span, kernels by total time")
    ap.add_argument("--json", default=meta.result_path("matrices"))
    a = ap.parse_args(argv)
    X, conn, top, fixed = box(a.cubes)
    result = {"meta": meta.run_meta(), "tets": len(conn), "nodes": len(X), "load steps": a.steps,
              "stretch": a.stretch, "dtype": a.dtype, "newton rtol": NEWTON_RTOL, "cg rtol": CG_RTOL}
    contenders = {"irfuse": irfuse_solver(X, conn, top, fixed, a.device, a.dtype)}
    if a.device == "cuda":
        contenders["irfuse, CG captured"] = irfuse_solver(X, conn, top, fixed, a.device, a.dtype, captured=True)
    if not a.skip_jax:
        contenders["jax"] = jax_solver(X, conn, top, fixed, a.dtype)
    finals = {}
    for name, run in contenders.items():
        run(1, a.stretch / a.steps)  # (a warm-up: the first load step; compiled, kept, jitted)
        t0 = time.perf_counter()
        finals[name], counts = run(a.steps, a.stretch)
        seconds = time.perf_counter() - t0
        cg_steps = sum(k for _, k in counts)
        result[name] = {"seconds": seconds, "newton steps": [n for n, _ in counts], "cg steps": [k for _, k in counts],
                        "seconds in CG": SECONDS_IN_CG[name][0],
                        "ms per CG step": SECONDS_IN_CG[name][0] / max(cg_steps, 1) * 1e3}
        print(f"{name}: {seconds:.3f} s ({SECONDS_IN_CG[name][0]:.3f} s in CG, "
              f"{result[name]['ms per CG step']:.3f} ms a CG step), Newton {result[name]['newton steps']}, "
              f"CG {result[name]['cg steps']}", flush=True)
    if "jax" in finals:
        scale = float(np.abs(finals["jax"]).max())
        result["largest u difference (relative)"] = float(np.abs(finals["irfuse"] - finals["jax"]).max()) / scale
        for name in (n for n in finals if n != "jax"):
            result[f"jax / {name}"] = result["jax"]["seconds"] / result[name]["seconds"]
            print(f"{name}: u difference {float(np.abs(finals[name] - finals['jax']).max()) / scale:.2e}; "
                  f"jax / {name} {result[f'jax / {name}']:.2f}")
    if "irfuse, CG captured" in finals:
        result["captured CG bit-equal to cg"] = bool(np.array_equal(finals["irfuse"], finals["irfuse, CG captured"]))
        print(f"captured CG bit-equal to cg: {result['captured CG bit-equal to cg']}")
    if a.profile and a.device == "cuda":
        from torch.profiler import ProfilerActivity, profile

        for name in (n for n in contenders if n != "jax"):
            with profile(activities=[ProfilerActivity.CUDA]) as traced:
                _, counts = contenders[name](1, a.stretch / a.steps)
            steps = sum(k for _, k in counts)
            events = [e for e in traced.events() if e.device_type.name == "CUDA"]
            busy = sum(e.time_range.elapsed_us() for e in events)
            span = max(e.time_range.end for e in events) - min(e.time_range.start for e in events)
            print(f"{name}: the first load step's GPU work ({steps} CG steps): busy {busy / 1e3:.2f} ms "
                  f"of {span / 1e3:.2f} ms from first to last; {busy / steps:.1f} us busy a CG step")
            if name == "irfuse":
                print(traced.key_averages().table(sort_by="cuda_time_total", row_limit=30, max_name_column_width=70))
            # Where the GPU waits: the idle time before each kind of work, by what ran before it.
            events.sort(key=lambda e: e.time_range.start)
            idle: dict = {}
            for before, after in zip(events, events[1:]):
                key = (before.name[:48], after.name[:48])
                idle[key] = idle.get(key, 0.0) + max(0, after.time_range.start - before.time_range.end)
            for (before, after), us in sorted(idle.items(), key=lambda kv: -kv[1])[:12]:
                print(f"  idle {us / steps:7.1f} us a CG step: after {before} before {after}")
    with open(a.json, "w") as f:
        meta.dump(result, f, indent=1)
    print(f"written {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
