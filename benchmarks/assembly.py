"""Assembly through a connectivity (issue 40): the P1 linear elasticity residual r = K u,
computed element by element (gather X and u, the Jacobian, its inverse and determinant, the
strain, the stress of a uniform material, the element's nodal forces) and added into the
nodes, on a box of tetrahedra in a random and a reordered numbering.

    python benchmarks/assembly.py [--cubes 128] [--repeat 20] [--rounds 5] [--skip-jax]
                                  [--skip-compile] [--json assembly.json]

Contenders, float32, every one timed in turns (`--rounds` alternating rounds), medians:
- hand-written CUDA (`assembly_kernels.cu`): one thread per element, atomicAdd into r;
- PyTorch eager and `torch.compile`: `X[conn]`, closed-form det and inverse, `index_add_`;
- `jax.jit`: `X[conn]`, the same math, `.at[].add`.
- irfuse, `examples/mesh/p1_residual.kas` (gather, element code and store of each element's rows
  in one kernel; then each node adds its rows in a fixed order): deterministic. Its
  connectivity is prepared once (`irfuse.mesh.Connectivity`: checked, inverted), whose time is
  reported apart.

Bytes floor: the connectivity once (int32), X and u once per node, r written once per node;
"of copy" is that over the time, against a 1 GiB device copy measured in the same run.
Results are checked against a float64 NumPy reference (relative to the largest |r|), and the
hand-written kernel is run 20 times to count how many different results its atomics give.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import interleaved_medians, jax_sampler, torch_sampler  # noqa: E402

KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assembly_kernels.cu")
LAMBDA, MU = 1.5, 0.75


def residual(xp, X, u, conn, lam, mu, scatter):
    """r = K u element by element in array code (`xp`: numpy, torch or jax.numpy); closed-form
    determinant and inverse (what a fusing compiler can fuse); `scatter(values, conn)` adds
    the (E, 4, 3) nodal forces into the nodes."""
    xe, ue = X[conn], u[conn]  # (E, 4, 3)
    d = xe[:, 1:, :] - xe[:, :1, :]  # d[e, j, i] = J[i][j]
    J = [[d[:, j, i] for j in range(3)] for i in range(3)]
    c00 = J[1][1] * J[2][2] - J[1][2] * J[2][1]
    c01 = J[1][2] * J[2][0] - J[1][0] * J[2][2]
    c02 = J[1][0] * J[2][1] - J[1][1] * J[2][0]
    det = J[0][0] * c00 + J[0][1] * c01 + J[0][2] * c02
    idet = 1.0 / det
    Ji = [[c00 * idet, (J[0][2] * J[2][1] - J[0][1] * J[2][2]) * idet, (J[0][1] * J[1][2] - J[0][2] * J[1][1]) * idet],
          [c01 * idet, (J[0][0] * J[2][2] - J[0][2] * J[2][0]) * idet, (J[0][2] * J[1][0] - J[0][0] * J[1][2]) * idet],
          [c02 * idet, (J[0][1] * J[2][0] - J[0][0] * J[2][1]) * idet, (J[0][0] * J[1][1] - J[0][1] * J[1][0]) * idet]]
    G = [[-(Ji[0][j] + Ji[1][j] + Ji[2][j]) for j in range(3)]] + [[Ji[a][j] for j in range(3)] for a in range(3)]
    H = [[sum(ue[:, a, i] * G[a][j] for a in range(4)) for j in range(3)] for i in range(3)]
    tr = H[0][0] + H[1][1] + H[2][2]
    S = [[mu * (H[i][j] + H[j][i]) + (lam * tr if i == j else 0.0) for j in range(3)] for i in range(3)]
    vol = xp.abs(det) / 6.0
    f = xp.stack([xp.stack([vol * (S[i][0] * G[a][0] + S[i][1] * G[a][1] + S[i][2] * G[a][2]) for i in range(3)],
                           axis=-1) for a in range(4)], axis=1)
    return scatter(f, conn)


def numpy_reference(X, u, conn):
    def scatter(f, conn):
        idx = conn.ravel()
        return np.stack([np.bincount(idx, f.reshape(-1, 3)[:, i], minlength=len(X)) for i in range(3)], axis=1)
    return residual(np, X.astype(np.float64), u.astype(np.float64), conn, LAMBDA, MU, scatter)


def copy_bandwidth(torch) -> float:
    """Bytes a second (read + written) of a 1 GiB device copy timed with events: the yardstick."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * (1 << 30) / interleaved_medians({"copy": torch_sampler(lambda: dst.copy_(src), [])}, 10, 2)["copy"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubes", type=int, default=128, help="cubes per side (6 tetrahedra each)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument("--json", default="assembly.json")
    args = ap.parse_args(argv)

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import cupy
    import torch
    from rich.console import Console
    from rich.table import Table

    import irfuse.mesh as mesh

    console = Console(width=200)
    t0 = time.perf_counter()
    X0, conn0 = mesh.box_tetrahedra(args.cubes, numbering="random", seed=0)
    made = time.perf_counter() - t0
    t0 = time.perf_counter()
    order = mesh.reorder(conn0, X0, method="morton")
    morton_s = time.perf_counter() - t0
    conn1, X1 = mesh.renumber(conn0, *order, X0)
    rng = np.random.default_rng(1)
    u0 = rng.standard_normal(X0.shape) * 1e-2
    u1 = u0[order[0]]
    elements, nodes = conn0.shape[0], X0.shape[0]
    console.print(f"{elements:,} tetrahedra, {nodes:,} nodes (made in {made:.1f} s; Morton order {morton_s:.1f} s)")

    torch.cuda.init()
    module = cupy.RawModule(code=open(KERNELS).read(), options=("-std=c++17",))
    kernel = module.get_function("p1_elastic_atomic")
    copy_bw = copy_bandwidth(torch)
    floor = elements * 4 * 4 + nodes * 3 * 4 * 3  # conn (int32), X and u read, r written
    rows = []
    import irfuse
    from irfuse.runtime.executor import Executor

    program = irfuse.compile(os.path.join(os.path.dirname(KERNELS), "..", "examples", "mesh", "p1_residual.kas"),
                             backend="cuda")
    device = program._opened_device()
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    prepared_s = {}
    if not args.skip_jax:
        import jax
        import jax.numpy as jnp
    for numbering, X, conn, u in (("random", X0, conn0, u0), ("reordered (Morton)", X1, conn1, u1)):
        ref = numpy_reference(X, u, conn)
        scale = float(np.abs(ref).max())
        Xt = torch.from_numpy(X.astype(np.float32)).cuda()
        ut = torch.from_numpy(u.astype(np.float32)).cuda()
        ct = torch.from_numpy(conn).cuda()
        ct64 = ct.long()
        r = torch.empty_like(ut)
        pointers = [cupy.asarray(t) for t in (Xt, ut, ct, r)]
        grid = (elements + 127) // 128

        def hand():
            r.zero_()
            with cupy.cuda.Stream.from_external(torch.cuda.current_stream()):
                kernel((grid,), (128,), (*pointers, np.float32(LAMBDA), np.float32(MU), np.int64(elements)))

        def torch_scatter(f, c):
            return torch.zeros((nodes, 3), dtype=f.dtype, device=f.device).index_add_(0, c.reshape(-1),
                                                                                      f.reshape(-1, 3))

        def torch_fn(X, u, c):
            return residual(torch, X, u, c, LAMBDA, MU, torch_scatter)

        def error(got) -> float:
            return float(np.abs(np.asarray(got, dtype=np.float64) - ref).max() / scale)

        samplers, errors = {}, {}
        hand()
        torch.cuda.synchronize()
        errors["hand-written CUDA (atomicAdd)"] = error(r.cpu())
        results = set()
        for _ in range(20):
            hand()
            results.add(r.cpu().numpy().tobytes())
        distinct = len(results)
        samplers["hand-written CUDA (atomicAdd)"] = torch_sampler(hand, [])
        t0 = time.perf_counter()
        prepared = mesh.Connectivity(conn, nodes)
        prepared_s[numbering] = time.perf_counter() - t0
        run = Executor(program._with_binary(), device).prepare(
            {"X": X.astype(np.float32), "u": u.astype(np.float32), "conn": prepared.conn, "dN": dN,
             "lam": np.float32(LAMBDA), "mu": np.float32(MU)}, elements, nodes=nodes,
            inverses={"conn": prepared.inverse})
        run.replay()
        first = run.outputs()["r"]
        errors["irfuse (deterministic)"] = error(first)
        irfuse_results = set()
        for _ in range(20):
            run.replay()
            irfuse_results.add(run.outputs()["r"].tobytes())
        samplers["irfuse (deterministic)"] = run.time_once
        peers = {"torch eager": torch_fn}
        if not args.skip_compile:
            peers["torch.compile"] = torch.compile(torch_fn)
        for name, fn in peers.items():
            errors[name] = error(fn(Xt, ut, ct64).cpu())
            samplers[name] = torch_sampler(fn, [Xt, ut, ct64])
        if not args.skip_jax:
            Xj, uj = jax.device_put(X.astype(np.float32)), jax.device_put(u.astype(np.float32))
            cj = jax.device_put(conn)

            def jax_scatter(f, c):
                return jnp.zeros((nodes, 3), f.dtype).at[c.reshape(-1)].add(f.reshape(-1, 3))
            jfn = jax.jit(lambda X, u, c: residual(jnp, X, u, c, LAMBDA, MU, jax_scatter))
            errors["jax.jit"] = error(jfn(Xj, uj, cj))
            samplers["jax.jit"] = jax_sampler(jfn, [Xj, uj, cj])
        times = interleaved_medians(samplers, args.repeat, args.rounds)
        for name, t in times.items():
            rows.append({"numbering": numbering, "contender": name, "ms": t * 1e3,
                         "elements_per_s": elements / t, "of_copy": floor / t / copy_bw,
                         "max_error_over_max_r": errors[name],
                         "distinct_results_in_20_runs": distinct if name.startswith("hand") else
                         len(irfuse_results) if name.startswith("irfuse") else None})

    table = Table(title=f"P1 elasticity residual, float32, {elements:,} tetrahedra, {nodes:,} nodes; "
                        f"floor {floor / 1e6:.1f} MB; copy {copy_bw / 1e9:.0f} GB/s ({torch.cuda.get_device_name()})")
    for col in ("numbering", "contender", "ms", "G elements/s", "of copy", "error / max |r|", "distinct of 20"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["numbering"], row["contender"], f"{row['ms']:.3f}", f"{row['elements_per_s'] / 1e9:.2f}",
                      f"{100 * row['of_copy']:.1f}%", f"{row['max_error_over_max_r']:.1e}",
                      "" if row["distinct_results_in_20_runs"] is None else str(row["distinct_results_in_20_runs"]))
    console.print(table)
    with open(args.json, "w") as f:
        json.dump({"device": torch.cuda.get_device_name(), "elements": elements, "nodes": nodes,
                   "floor_bytes": floor, "copy_bytes_per_s": copy_bw, "mesh_seconds": made,
                   "morton_seconds": morton_s, "irfuse_connectivity_seconds": prepared_s, "rows": rows}, f, indent=1)
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
