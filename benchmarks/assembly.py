"""Assembly through a connectivity (issue 40): two residuals on P1 tetrahedra computed element
by element and added into the nodes, on a box of tetrahedra in a random and a reordered
numbering. Linear elasticity, r = K u (gather X and u, the Jacobian, its inverse and
determinant, the strain, the stress of a uniform material, the element's nodal forces), and a
compressible Neo-Hookean solid (the deformation gradient, its determinant, inverse and log,
the first Piola-Kirchhoff stress).

    python benchmarks/assembly.py [--cubes 128] [--repeat 20] [--rounds 5] [--skip-jax]
                                  [--skip-compile] [--json assembly.json]

Contenders, float32, every one timed in turns (`--rounds` alternating rounds), medians:
- hand-written CUDA (`assembly_kernels.cu`): one thread per element, atomicAdd into r;
- PyTorch eager and `torch.compile`: `X[conn]`, closed-form det and inverse, `index_add_`;
- `jax.jit`: `X[conn]`, the same math, `.at[].add`.
- irfuse, `examples/mesh/p1_residual.kas` and `neo_hookean_residual.kas` (gather, element code
  and store of each element's rows in one kernel; then each node adds its rows in a fixed
  order): deterministic; each of its kernels is also timed alone. And with `scatter="atomic"`
  (the element kernel adding its rows into the nodes with atomicAdd itself). Its
  connectivity is prepared once (`irfuse.mesh.Connectivity`: checked, inverted), whose time is
  reported apart.

Bytes floor: the connectivity once (int32), X and u once per node, r written once per node;
"of copy" is that over the time, against a 1 GiB device copy measured in the same run.
Results are checked against a float64 NumPy reference (relative to the largest |r|), and the
hand-written kernel is run 20 times to count how many different results its atomics give.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import interleaved_medians, jax_sampler, torch_sampler  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "assembly_kernels.cu")
LAMBDA, MU = 1.5, 0.75


def inverse3(A):
    """det A and A^-1 of a 3x3 matrix given as lists of arrays (closed form: what a fusing
    compiler can fuse)."""
    def at(i, j):
        return A[i % 3][j % 3]
    c = [[at(i + 1, j + 1) * at(i + 2, j + 2) - at(i + 1, j + 2) * at(i + 2, j + 1) for j in range(3)]
         for i in range(3)]  # cofactors
    det = A[0][0] * c[0][0] + A[0][1] * c[0][1] + A[0][2] * c[0][2]
    idet = 1.0 / det
    return det, [[c[j][i] * idet for j in range(3)] for i in range(3)]


def shape_gradients(xe):
    """det J and G = dN J^-1 (rows: the four nodes) of P1 tetrahedra with nodes xe (E, 4, 3)."""
    d = xe[:, 1:, :] - xe[:, :1, :]  # d[e, j, i] = J[i][j]
    det, Ji = inverse3([[d[:, j, i] for j in range(3)] for i in range(3)])
    G = [[-(Ji[0][j] + Ji[1][j] + Ji[2][j]) for j in range(3)]] + [[Ji[a][j] for j in range(3)] for a in range(3)]
    return det, G


def nodal_forces(xp, P, G, vol):
    """(E, 4, 3): row a of element e is vol P G[a]."""
    return xp.stack([xp.stack([vol * (P[i][0] * G[a][0] + P[i][1] * G[a][1] + P[i][2] * G[a][2]) for i in range(3)],
                              axis=-1) for a in range(4)], axis=1)


def elasticity(xp, X, u, conn, lam, mu, scatter):
    """r = K u of linear elasticity element by element in array code (`xp`: numpy, torch or
    jax.numpy); `scatter(values, conn)` adds the (E, 4, 3) nodal forces into the nodes."""
    xe, ue = X[conn], u[conn]  # (E, 4, 3)
    det, G = shape_gradients(xe)
    H = [[sum(ue[:, a, i] * G[a][j] for a in range(4)) for j in range(3)] for i in range(3)]
    tr = H[0][0] + H[1][1] + H[2][2]
    S = [[mu * (H[i][j] + H[j][i]) + (lam * tr if i == j else 0.0) for j in range(3)] for i in range(3)]
    return scatter(nodal_forces(xp, S, G, det / 6.0), conn)


def neo_hookean(xp, X, u, conn, lam, mu, scatter):
    """The compressible Neo-Hookean residual: P = mu (F - F^-T) + lam log(det F) F^-T."""
    xe, ue = X[conn], u[conn]
    det, G = shape_gradients(xe)
    F = [[sum(ue[:, a, i] * G[a][j] for a in range(4)) + (1.0 if i == j else 0.0) for j in range(3)]
         for i in range(3)]
    detF, Fi = inverse3(F)
    ll = lam * xp.log(detF)
    P = [[mu * (F[i][j] - Fi[j][i]) + ll * Fi[j][i] for j in range(3)] for i in range(3)]
    return scatter(nodal_forces(xp, P, G, det / 6.0), conn)


# residual -> (array code, hand-written kernel, irfuse example)
MODELS = {"elasticity": (elasticity, "p1_elastic_atomic", "p1_residual.kas"),
          "Neo-Hookean": (neo_hookean, "neo_hookean_atomic", "neo_hookean_residual.kas")}


def numpy_reference(fn, X, u, conn):
    def scatter(f, conn):
        idx = conn.ravel()
        return np.stack([np.bincount(idx, f.reshape(-1, 3)[:, i], minlength=len(X)) for i in range(3)], axis=1)
    return fn(np, X.astype(np.float64), u.astype(np.float64), conn, LAMBDA, MU, scatter)


def step_milliseconds(run, artifact, repeat: int = 20) -> dict[str, float]:
    """Each recorded step of an irfuse run timed alone (median of `repeat`), named by the
    kernel of its host-plan step (a program without loops records one call per kernel): where
    the time of the whole goes."""
    labels = [s.kernel for s in artifact.host.steps if hasattr(s, "kernel")]  # (constants record no call)
    out = {}
    for i, step in enumerate(run.steps):
        times = []
        for _ in range(repeat):
            with run.device.timer() as t:
                step()
            times.append(t.seconds)
        out[labels[i] if len(labels) == len(run.steps) else f"step {i}"] = float(np.median(times)) * 1e3
    return out


def gpu_array_calls(program, Xt, ut, ct, prepared, dN, nodes, step=None, repeat: int = 20) -> dict[str, float]:
    """Wall-clock milliseconds (medians) of whole calls on PyTorch GPU tensors, each timed
    until the GPU is done: with a prepared `Connectivity` (nothing checked; the call itself
    returns before the GPU is done), with the connectivity as a tensor and atomics (checked on
    the GPU first), that check alone, and with `step` (examples/mesh/explicit_step.kas: the
    residual between two passes over the nodes) the whole explicit step."""
    import torch

    from irfuse.api.device_arrays import device_array
    from irfuse.runtime.cuda_mesh import check_connectivity_on_gpu

    lam, mu = np.float32(LAMBDA), np.float32(MU)
    cases = {"call, Connectivity": lambda: program(Xt, ut, prepared, dN, lam, mu),
             "call, tensor connectivity, atomic": lambda: program(Xt, ut, ct, dN, lam, mu, scatter="atomic"),
             "connectivity check alone": lambda: check_connectivity_on_gpu(
                 program.opened_device(), "conn", device_array(ct).ptr, tuple(ct.shape), device_array(ct).dtype, nodes)}
    if step is not None:
        mt = torch.ones(nodes, device=ut.device)
        cases["explicit step (nodes, elements, nodes), Connectivity"] = lambda: step(
            Xt, ut, ut, mt, prepared, dN, lam, mu, np.float32(1e-3))
    out = {}
    for name, fn in cases.items():
        fn()
        torch.cuda.synchronize()
        times = []
        for _ in range(repeat):
            t0 = time.perf_counter()
            fn()
            torch.cuda.synchronize()
            times.append(time.perf_counter() - t0)
        out[name] = float(np.median(times)) * 1e3
    return out


def copy_bandwidth(torch) -> float:
    """Bytes a second (read + written) of a 1 GiB device copy timed with events: the yardstick."""
    src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return 2 * (1 << 30) / interleaved_medians({"copy": torch_sampler(lambda: dst.copy_(src), [])}, 10, 2)["copy"]


def arguments(argv, json_name: str) -> argparse.Namespace:
    """The command line of the mesh benchmarks (this one, `mesh_derivatives.py`)."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubes", type=int, default=128, help="cubes per side (6 tetrahedra each)")
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument("--json", default=json_name)
    return ap.parse_args(argv)


def main(argv=None) -> int:
    args = arguments(argv, meta.result_path("meshes"))

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
    u0 = rng.standard_normal(X0.shape) * (0.05 / args.cubes)  # displacement gradients ~0.05: det F > 0
    u1 = u0[order[0]]
    elements, nodes = conn0.shape[0], X0.shape[0]
    console.print(f"{elements:,} tetrahedra, {nodes:,} nodes (made in {made:.1f} s; Morton order {morton_s:.1f} s)")

    torch.cuda.init()
    module = cupy.RawModule(code=open(KERNELS).read(), options=("-std=c++17",))
    copy_bw = copy_bandwidth(torch)
    floor = elements * 4 * 4 + nodes * 3 * 4 * 3  # conn (int32), X and u read, r written
    rows = []
    import irfuse
    from irfuse.runtime.executor import Executor

    examples = os.path.join(os.path.dirname(KERNELS), "..", "examples", "mesh")
    programs = {model: irfuse.compile(os.path.join(examples, kas), backend="cuda")
                for model, (_, _, kas) in MODELS.items()}
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    prepared_s, split, gpu_calls = {}, {}, {}
    if not args.skip_jax:
        import jax
        import jax.numpy as jnp
    for numbering, X, conn, u in (("random", X0, conn0, u0), ("reordered (Morton)", X1, conn1, u1)):
        Xt = torch.from_numpy(X.astype(np.float32)).cuda()
        ut = torch.from_numpy(u.astype(np.float32)).cuda()
        ct = torch.from_numpy(conn).cuda()
        ct64 = ct.long()
        r = torch.empty_like(ut)
        pointers = [cupy.asarray(t) for t in (Xt, ut, ct, r)]
        grid = (elements + 127) // 128
        t0 = time.perf_counter()
        prepared = mesh.Connectivity(conn, nodes)
        prepared_s[numbering] = time.perf_counter() - t0
        for model, (fn, hand_name, _) in MODELS.items():
            ref = numpy_reference(fn, X, u, conn)
            scale = float(np.abs(ref).max())
            kernel = module.get_function(hand_name)

            def hand():
                r.zero_()
                with cupy.cuda.Stream.from_external(torch.cuda.current_stream()):
                    kernel((grid,), (128,), (*pointers, np.float32(LAMBDA), np.float32(MU), np.int64(elements)))

            def torch_scatter(f, c):
                return torch.zeros((nodes, 3), dtype=f.dtype, device=f.device).index_add_(0, c.reshape(-1),
                                                                                          f.reshape(-1, 3))

            def torch_fn(X, u, c, fn=fn):
                return fn(torch, X, u, c, LAMBDA, MU, torch_scatter)

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
            artifact = programs[model]._with_binary()
            inputs = {"X": X.astype(np.float32), "u": u.astype(np.float32), "conn": prepared.conn, "dN": dN,
                      "lam": np.float32(LAMBDA), "mu": np.float32(MU)}
            distinct_irfuse = {}
            for name, scatter in (("irfuse (deterministic)", "ordered"), ("irfuse (atomic)", "atomic")):
                run = Executor(artifact, programs[model].opened_device()).prepare(
                    inputs, elements, nodes=nodes, inverses={"conn": prepared.inverse}, scatter=scatter)
                run.replay()
                errors[name] = error(run.outputs()["r"])
                seen = set()
                for _ in range(20):
                    run.replay()
                    seen.add(run.outputs()["r"].tobytes())
                distinct_irfuse[name] = len(seen)
                samplers[name] = run.time_once
                if scatter == "ordered":
                    split[f"{model}, {numbering}"] = step_milliseconds(run, artifact)
            peers = {"torch eager": torch_fn}
            if not args.skip_compile:
                peers["torch.compile"] = torch.compile(torch_fn)
            for name, f in peers.items():
                errors[name] = error(f(Xt, ut, ct64).cpu())
                samplers[name] = torch_sampler(f, [Xt, ut, ct64])
            if not args.skip_jax:
                Xj, uj = jax.device_put(X.astype(np.float32)), jax.device_put(u.astype(np.float32))
                cj = jax.device_put(conn)

                def jax_scatter(f, c):
                    return jnp.zeros((nodes, 3), f.dtype).at[c.reshape(-1)].add(f.reshape(-1, 3))
                jfn = jax.jit(lambda X, u, c, fn=fn: fn(jnp, X, u, c, LAMBDA, MU, jax_scatter))
                errors["jax.jit"] = error(jfn(Xj, uj, cj))
                samplers["jax.jit"] = jax_sampler(jfn, [Xj, uj, cj])
            if numbering.startswith("reordered") and model == "elasticity":
                step = irfuse.compile(os.path.join(examples, "explicit_step.kas"), backend="cuda")
                gpu_calls[model] = gpu_array_calls(programs[model], Xt, ut, ct, prepared, dN, nodes, step)
            times = interleaved_medians(samplers, args.repeat, args.rounds)
            for name, t in times.items():
                rows.append({"residual": model, "numbering": numbering, "contender": name, "ms": t * 1e3,
                             "elements_per_s": elements / t, "of_copy": floor / t / copy_bw,
                             "max_error_over_max_r": errors[name],
                             "distinct_results_in_20_runs": distinct if name.startswith("hand") else
                             distinct_irfuse.get(name)})

    table = Table(title=f"P1 residuals, float32, {elements:,} tetrahedra, {nodes:,} nodes; "
                        f"floor {floor / 1e6:.1f} MB; copy {copy_bw / 1e9:.0f} GB/s ({torch.cuda.get_device_name()})")
    for col in ("residual", "numbering", "contender", "ms", "G elements/s", "of copy", "error / max |r|",
                "distinct of 20"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["residual"], row["numbering"], row["contender"], f"{row['ms']:.3f}",
                      f"{row['elements_per_s'] / 1e9:.2f}",
                      f"{100 * row['of_copy']:.1f}%", f"{row['max_error_over_max_r']:.1e}",
                      "" if row["distinct_results_in_20_runs"] is None else str(row["distinct_results_in_20_runs"]))
    console.print(table)
    for model, calls in gpu_calls.items():
        console.print(f"irfuse on PyTorch GPU tensors, {model}, Morton: " + ", ".join(f"{k} {v:.3f} ms"
                                                                                     for k, v in calls.items()))
    for case, parts in split.items():
        console.print(f"irfuse's steps, {case}: " + ", ".join(f"{k} {v:.3f} ms" for k, v in parts.items()))
    with open(args.json, "w") as f:
        meta.dump({"device": torch.cuda.get_device_name(), "elements": elements, "nodes": nodes,
                   "floor_bytes": floor, "copy_bytes_per_s": copy_bw, "mesh_seconds": made,
                   "morton_seconds": morton_s, "irfuse_connectivity_seconds": prepared_s,
                   "irfuse_step_ms": split, "irfuse_gpu_array_calls_ms": gpu_calls, "rows": rows}, f, indent=1)
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
