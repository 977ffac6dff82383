"""The derivative of an energy over a mesh (issue 41 on the mesh of issue 40): a compressible
Neo-Hookean solid on P1 tetrahedra, its energy E and, derived by irfuse, its gradient by the
nodal displacements (the residual), against the same residual written by hand and the peers'
automatic differentiation, in one run.

    python benchmarks/mesh_derivatives.py [--cubes 128] [--repeat 20] [--rounds 5] [--skip-jax]
                                          [--skip-compile] [--json mesh_derivatives.json]

Contenders, float32, a box of tetrahedra in Morton order, timed in turns (medians):
- irfuse `examples/mesh/neo_hookean_energy.kas` with its `derivative grad of E wrt u` line:
  E and grad_u in one plan (the gather's adjoint is the deterministic scatter);
- irfuse, the energy alone (the same file without the derivative line);
- irfuse `examples/mesh/neo_hookean_residual.kas`: the residual written by hand (no energy);
- hand-written CUDA (`assembly_kernels.cu`): the residual, one thread an element, atomicAdd;
- `jax.value_and_grad` of the energy under `jax.jit` (`X[conn]`; its gradient's scatter is
  XLA's scatter-add) and `torch.func.grad_and_value` under `torch.compile`.
Bytes floor of the gradient: the connectivity once (int32), X and u once per node, grad_u
written once per node; "of copy" is that over the time against a 1 GiB device copy in the same
run. The residuals are checked against a float64 NumPy reference (relative to the largest
|r|), E against the float64 energy.
"""

from __future__ import annotations

import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from assembly import (KERNELS, LAMBDA, MU, arguments, copy_bandwidth, inverse3, neo_hookean,  # noqa: E402
                      numpy_reference, shape_gradients)
from peers import interleaved_medians, jax_sampler, torch_sampler  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

EXAMPLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "examples", "mesh")


def energy(xp, X, u, conn, lam, mu):
    """E = sum over elements of vol W(F) in array code (`xp`: numpy, torch or jax.numpy)."""
    xe, ue = X[conn], u[conn]
    det, G = shape_gradients(xe)
    F = [[sum(ue[:, a, i] * G[a][j] for a in range(4)) + (1.0 if i == j else 0.0) for j in range(3)]
         for i in range(3)]
    J, _ = inverse3(F)
    logJ = xp.log(J)
    trC = sum(F[i][j] * F[i][j] for i in range(3) for j in range(3))
    W = 0.5 * mu * (trC - 3.0) - mu * logJ + 0.5 * lam * logJ * logJ
    return (W * (det / 6.0)).sum()


def main(argv=None) -> int:
    args = arguments(argv, meta.result_path("derivatives"))

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import cupy
    import torch
    from rich.console import Console
    from rich.table import Table

    import irfuse
    import irfuse.mesh as mesh
    from irfuse.runtime.executor import Executor

    console = Console(width=200)
    X0, conn0 = mesh.box_tetrahedra(args.cubes, numbering="random", seed=0)
    conn, X = mesh.renumber(conn0, *mesh.reorder(conn0, X0, method="morton"), X0)
    u = np.random.default_rng(1).standard_normal(X.shape) * (0.05 / args.cubes)
    elements, nodes = conn.shape[0], X.shape[0]
    console.print(f"{elements:,} tetrahedra, {nodes:,} nodes")
    torch.cuda.init()
    copy_bw = copy_bandwidth(torch)
    floor = elements * 4 * 4 + nodes * 3 * 4 * 3
    ref_r = numpy_reference(neo_hookean, X, u, conn)
    ref_E = float(energy(np, X.astype(np.float64), u.astype(np.float64), conn, LAMBDA, MU))
    scale = float(np.abs(ref_r).max())

    def r_error(got) -> float:
        return float(np.abs(np.asarray(got, dtype=np.float64) - ref_r).max() / scale)

    def E_error(got) -> float:
        return abs(float(got) - ref_E) / abs(ref_E)

    path = os.path.join(EXAMPLES, "neo_hookean_energy.kas")
    source = open(path).read()
    programs = {"irfuse: E and grad_u (derived, one plan)": irfuse.compile(path, backend="cuda"),
                "irfuse: E alone": irfuse.compile(source.replace("derivative grad of E wrt u;", ""),
                                                  backend="cuda", filename="neo_hookean_energy_only.kas"),
                "irfuse: residual written by hand": irfuse.compile(os.path.join(EXAMPLES, "neo_hookean_residual.kas"),
                                                                  backend="cuda")}
    prepared = mesh.Connectivity(conn, nodes)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    inputs = {"X": X.astype(np.float32), "u": u.astype(np.float32), "conn": prepared.conn, "dN": dN,
              "lam": np.float32(LAMBDA), "mu": np.float32(MU)}
    samplers, errors, kernels = {}, {}, {}
    for name, program in programs.items():
        run = Executor(program._with_binary(), program.opened_device()).prepare(
            inputs, elements, nodes=nodes, inverses={"conn": prepared.inverse}, scatter="ordered")
        run.replay()
        out = run.outputs()
        errors[name] = {k: (E_error(v) if k == "E" else r_error(v)) for k, v in out.items()}
        samplers[name] = run.time_once
        kernels[name] = len(program.kernels)

    module = cupy.RawModule(code=open(KERNELS).read(), options=("-std=c++17",))
    kernel = module.get_function("neo_hookean_atomic")
    Xt = torch.from_numpy(X.astype(np.float32)).cuda()
    ut = torch.from_numpy(u.astype(np.float32)).cuda()
    ct = torch.from_numpy(conn).cuda()
    r = torch.empty_like(ut)
    pointers = [cupy.asarray(t) for t in (Xt, ut, ct, r)]

    def hand():
        r.zero_()
        with cupy.cuda.Stream.from_external(torch.cuda.current_stream()):
            kernel(((elements + 127) // 128,), (128,), (*pointers, np.float32(LAMBDA), np.float32(MU),
                                                          np.int64(elements)))
    hand()
    torch.cuda.synchronize()
    errors["hand-written CUDA residual (atomicAdd)"] = {"r": r_error(r.cpu())}
    samplers["hand-written CUDA residual (atomicAdd)"] = torch_sampler(hand, [])

    import torch.func as tf
    ct64 = ct.long()

    def torch_grad(u):
        return tf.grad_and_value(lambda u: energy(torch, Xt, u, ct64, LAMBDA, MU))(u)
    peers = {"torch eager (torch.func)": torch_grad}
    if not args.skip_compile:
        peers["torch.compile (torch.func)"] = torch.compile(torch_grad)
    for name, fn in peers.items():
        g, E = fn(ut)
        errors[name] = {"E": E_error(E.item()), "grad_u": r_error(g.cpu())}
        samplers[name] = torch_sampler(fn, [ut])
    if not args.skip_jax:
        import jax

        Xj, uj, cj = (jax.device_put(a) for a in (X.astype(np.float32), u.astype(np.float32), conn))
        jfn = jax.jit(jax.value_and_grad(lambda u: energy(jax.numpy, Xj, u, cj, LAMBDA, MU)))
        E, g = jfn(uj)
        errors["jax.jit (value_and_grad)"] = {"E": E_error(E), "grad_u": r_error(g)}
        samplers["jax.jit (value_and_grad)"] = jax_sampler(jfn, [uj])
    times = interleaved_medians(samplers, args.repeat, args.rounds)
    derived = times["irfuse: E and grad_u (derived, one plan)"]
    rows = [{"contender": k, "ms": t * 1e3, "of_copy": floor / t / copy_bw, "over_derived": t / derived,
             "errors": errors[k], "kernels": kernels.get(k)} for k, t in sorted(times.items(), key=lambda kv: kv[1])]
    gpu = torch.cuda.get_device_name()
    table = Table(title=f"{gpu}: Neo-Hookean energy and residual on {elements:,} tetrahedra, {nodes:,} nodes, "
                        f"float32; floor {floor / 1e6:.1f} MB, copy {copy_bw / 1e9:.0f} GB/s")
    for col in ("contender", "kernels", "ms", "of copy", "time / derived", "errors"):
        table.add_column(col)
    for row in rows:
        table.add_row(row["contender"], "" if row["kernels"] is None else str(row["kernels"]), f"{row['ms']:.3f}",
                      f"{row['of_copy']:.1%}", f"{row['over_derived']:.2f}x",
                      ", ".join(f"{k} {v:.1e}" for k, v in row["errors"].items()))
    console.print(table)
    with open(args.json, "w") as f:
        meta.dump({"gpu": gpu, "elements": elements, "nodes": nodes, "floor_bytes": floor,
                   "copy_bytes_per_s": copy_bw, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
