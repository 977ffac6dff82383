"""A mesh across GPUs on Dask (issue 44): the P1 elasticity residual and an explicit
elastodynamics time loop (`examples/mesh/explicit_step.kas`) on a box of tetrahedra, on one
GPU and on several, each worker keeping its parts on its GPU (`irfuse.dask.PartedMesh`,
CuPy blocks).

    python benchmarks/dask_mesh.py [--cubes 256] [--gpus 1 2] [--steps 100] [--repeat 5]
                                   [--json dask_mesh.json]

`--cubes n`: n^3 hexahedra of six tetrahedra each (256: 100,663,296 tetrahedra, 16,974,593
nodes), numbered in the structured order (`irfuse.mesh.box_tetrahedra`: compact ranges of
elements). For each number of GPUs G: a cluster of G workers, one per GPU (one thread each;
`irfuse.dask.cluster.local_gpu_cluster`), the mesh cut into G parts, its nodal arrays placed on the
workers. Timed, medians of `--repeat` after a warm-up that compiles on every worker:
- residual: `irfuse.dask.apply` of `p1_residual.kas` until every part's result is on its GPU
  with its ghost rows completed (what a user waits for; Dask's tasks included);
- time loop: `irfuse.dask.time_loop` of `--steps` explicit steps, the lumped mass from
  `lumped_mass.kas` on the same parts: per step, the client's wall time (Dask's task round
  trips included) and the workers' own (`timings=`: from their first step to their GPUs
  done with the last exchange, the slowest worker); the same steps without any exchange
  (each worker stepping its parts alone: what the kernels and calls take), and the
  difference of the workers' time and that: what exchanging shared nodes costs per step.
Speedups are G GPUs against one on the same machine. Bits: the assembled residual and the
loop's final u and v of every G compared with one GPU's, byte for byte.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

import numpy as np
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MESH = os.path.join(ROOT, "examples", "mesh")
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
LAM, MU, RHO, DT = np.float32(1.5), np.float32(0.75), np.float32(1.0), np.float32(1e-4)


def _sync_gpu() -> None:
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _steps_alone(program, steps: int, carry: dict, inputs: dict, nodes: dict) -> tuple[float, float]:
    """A worker's parts stepped `steps` times with no exchange: seconds (the GPU synchronized
    before and after), and seconds until the host had queued the last step."""
    import cupy

    states = {p: dict(v) for p, v in inputs.items()}
    cupy.cuda.runtime.deviceSynchronize()
    start = time.perf_counter()
    for _ in range(steps):
        for p, state in states.items():
            out = dict(zip(program.outputs, program(**state, nodes=nodes[p])))
            state.update({i: out[o] for i, o in carry.items()})
    queued = time.perf_counter() - start
    cupy.cuda.runtime.deviceSynchronize()
    return time.perf_counter() - start, queued


def run_on(gpus: int, X, u, v, conn, args) -> dict:
    import distributed

    import irfuse
    import irfuse.dask
    from irfuse.dask.cluster import local_gpu_cluster

    residual = irfuse.compile(os.path.join(MESH, "p1_residual.kas"))
    lumped = irfuse.compile(os.path.join(MESH, "lumped_mass.kas"))
    step = irfuse.compile(os.path.join(MESH, "explicit_step.kas"))
    carry = {"u": "u1", "v": "v1"}
    with local_gpu_cluster(gpus) as c, distributed.Client(c) as client:
        client.wait_for_workers(gpus)
        start = time.perf_counter()
        mesh = irfuse.dask.PartedMesh(conn, gpus, client, nodes=len(X), gpu=True)
        Xp, up, vp = mesh.nodal(X), mesh.nodal(u), mesh.nodal(v)
        distributed.wait([*mesh.connectivity, *Xp.blocks, *up.blocks, *vp.blocks])
        setup = time.perf_counter() - start
        ghosts = sum(len(p.elements) - (p.span[1] - p.span[0]) for p in mesh.parts)
        sent = sum(len(p.sends) for p in mesh.parts)

        def residual_once():
            out = irfuse.dask.apply(residual, Xp, up, mesh, DN, LAM, MU)
            distributed.wait(out.r.blocks)
            client.run(_sync_gpu)
            return out

        def wall(fn):
            t = time.perf_counter()
            kept = fn()
            return time.perf_counter() - t, kept

        residual_once()  # compiles on every worker
        res_times = [wall(residual_once)[0] for _ in range(args.repeat)]
        r = mesh.assemble(residual_once().r)
        m = irfuse.dask.apply(lumped, Xp, mesh, DN, np.full(4, 0.25, np.float32), RHO).m
        distributed.wait(m.blocks)
        given = (Xp, up, vp, m, mesh, DN, LAM, MU, DT)
        irfuse.dask.time_loop(step, 2, carry, *given)  # compiles on every worker
        loop_times, inside, queued, exchanging, end = [], [], [], [], None
        for _ in range(args.repeat):
            seconds, end = wall(lambda: irfuse.dask.time_loop(step, args.steps, carry, *given))
            loop_times.append(seconds)
            timings: dict = {}  # (apart: gathering them costs the client a round trip)
            irfuse.dask.time_loop(step, args.steps, carry, *given, timings=timings)
            inside.append(max(t["seconds"] for t in timings.values()))
            exchanging.append(max(t["exchanging"] for t in timings.values()))
            queued.append(max(t["queued"] for t in timings.values()))
        u_end, v_end = mesh.assemble(end.u1), mesh.assemble(end.v1)
        alone, alone_queued = [], []
        for _ in range(args.repeat):
            tasks = []
            for w in sorted(set(mesh.worker_of)):
                mine = [p for p, o in enumerate(mesh.worker_of) if o == w]
                inputs = {p: {"X": Xp.blocks[p], "u": up.blocks[p], "v": vp.blocks[p], "m": m.blocks[p],
                              "conn": mesh.connectivity[p], "dN": DN, "lam": LAM, "mu": MU, "dt": DT} for p in mine}
                tasks.append(client.submit(_steps_alone, step, args.steps, carry, inputs,
                                           {p: len(mesh.parts[p].nodes) for p in mine}, workers=[w], pure=False))
            done = client.gather(tasks)
            alone.append(max(t for t, _ in done))
            alone_queued.append(max(q for _, q in done))
        gpu_names = client.run(lambda: __import__("cupy").cuda.runtime.getDeviceProperties(0)["name"].decode())
    loop = statistics.median(loop_times)
    stepping = statistics.median(inside)
    return {"gpus": gpus, "setup_s": setup, "ghost_elements": ghosts, "shared_rows_sent": sent,
            "residual_ms": statistics.median(res_times) * 1e3, "loop_ms_per_step": loop / args.steps * 1e3,
            "stepping_ms_per_step": stepping / args.steps * 1e3,
            "host_queued_ms_per_step": statistics.median(queued) / args.steps * 1e3,
            "host_exchanging_ms_per_step": statistics.median(exchanging) / args.steps * 1e3,
            "alone_host_queued_ms_per_step": statistics.median(alone_queued) / args.steps * 1e3,
            "steps_alone_ms_per_step": statistics.median(alone) / args.steps * 1e3,
            "exchange_ms_per_step": (stepping - statistics.median(alone)) / args.steps * 1e3,
            "devices": sorted(set(gpu_names.values())), "_bits": (r, u_end, v_end)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cubes", type=int, default=256)
    ap.add_argument("--gpus", type=int, nargs="+", default=[1, 2])
    ap.add_argument("--steps", type=int, default=100)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--json", default=meta.result_path("big-batches"))
    args = ap.parse_args(argv)
    from irfuse.mesh import box_tetrahedra

    n = args.cubes
    start = time.perf_counter()
    coords, conn = box_tetrahedra(n, n, n)[:2]
    X = coords.astype(np.float32)
    rng = np.random.default_rng(1)
    u = (1e-3 * rng.standard_normal(X.shape)).astype(np.float32)
    v = (1e-3 * rng.standard_normal(X.shape)).astype(np.float32)
    print(f"mesh: {len(conn):,} tetrahedra, {len(X):,} nodes (made in {time.perf_counter() - start:.1f} s)",
          flush=True)
    rows = []
    for g in args.gpus:
        rows.append(run_on(g, X, u, v, conn, args))
        print({k: v for k, v in rows[-1].items() if k != "_bits"}, flush=True)
    base = rows[0]
    print(f"\n{'GPUs':>4} {'residual ms':>12} {'speedup':>8} {'loop ms/step':>13} {'speedup':>8} "
          f"{'stepping ms/step':>17} {'alone ms/step':>14} {'exchange ms/step':>17} {'same bits':>10}")
    for row in rows:
        same = all(a.tobytes() == b.tobytes() for a, b in zip(row["_bits"], base["_bits"]))
        row["same_bits_as_first"] = same
        row["residual_speedup"] = base["residual_ms"] / row["residual_ms"]
        row["loop_speedup"] = base["loop_ms_per_step"] / row["loop_ms_per_step"]
        row["stepping_speedup"] = base["stepping_ms_per_step"] / row["stepping_ms_per_step"]
        print(f"{row['gpus']:>4} {row['residual_ms']:>12.2f} {row['residual_speedup']:>8.2f} "
              f"{row['loop_ms_per_step']:>13.3f} {row['loop_speedup']:>8.2f} {row['stepping_ms_per_step']:>17.3f} "
              f"{row['steps_alone_ms_per_step']:>14.3f} "
              f"{row['exchange_ms_per_step']:>17.3f} {str(same):>10}")
    if args.json:
        with open(args.json, "w") as f:
            meta.dump({"tetrahedra": int(len(conn)), "nodes": int(len(X)), "steps": args.steps,
                       "rows": [{k: v for k, v in r.items() if k != "_bits"} for r in rows]}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
