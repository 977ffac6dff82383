"""irfuse programs over Dask arrays on a `dask_cuda.LocalCUDACluster`: one GPU against two,
with the batch resident on the GPUs (CuPy chunks) or in the workers' host memory (NumPy
chunks), and what Dask adds per task and per run.

    python benchmarks/dask_scale.py [--workloads SyncTest BigFusion StVenantInner StVenant CflStep StrainEnergy]
                                    [--data resident host] [--gpus 1 2] [--chunks 8] [--repeat 5]
                                    [--resident-bytes 16e9] [--host-bytes 4e9] [--chain K] [--json dask_scale.json]

For each cluster size (one worker per GPU, one thread each), each workload and each place of
the data: the inputs are made on the workers (`--chunks` chunks along the batch, persisted:
CuPy arrays made on the GPUs, or NumPy arrays), then the graph of `irfuse.dask.apply` is
built in the client (timed apart: it does not depend on the workers) and persisted and
waited for, then every worker's GPU synchronized (a call on GPU arrays returns before its
kernels finish), the results then cancelled so that the next run computes them again; the median of `--repeat` such runs after one warm-up (which compiles the
program, and its phases for a program that reduces, on every worker). The batch size of
each workload is the one whose inputs and outputs take `--resident-bytes` (`--host-bytes`
for host data). Beside them:
- the same program called directly on one chunk's CuPy arrays in this process (GPU 0):
  chunks x that time is what the kernels alone take on one GPU, and the rest of a run's
  time per chunk is what Dask and the call add to a task;
- what Dask costs without irfuse: a task's round trip (`client.submit(...).result()`), a
  graph of `--chunks` tasks that do nothing persisted and waited for, the GPUs' synchronizing
  `client.run`, and building the graph of `apply` in the client.
`--chain K` applies a one-input program K times in one graph (each output the next input):
K times the GPU work per run against the same fixed cost. Effective bandwidth: inputs read
once and outputs written once. Requires the `dask` extra and CuPy.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {"SyncTest": "synctest.kas", "BigFusion": "bigfusion_bench.kas", "StVenantInner": "stvenant_inner.kas",
             "StVenant": "stvenant.kas", "CflStep": "cfl_step.kas", "StrainEnergy": "strain_energy.kas"}


def _sync_gpu() -> None:
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def _nothing(*_) -> int:
    return 0


def _known(keys, dask_scheduler=None) -> bool:
    return any(k in dask_scheduler.tasks for k in keys)


def _random_chunk(shape: tuple, seed: int, on_gpu: bool):
    """A chunk of uniform random float32 made where the task runs: on its worker's GPU (CuPy)
    or in its host memory (NumPy)."""
    if on_gpu:
        import cupy

        return cupy.random.default_rng(seed).random(shape, dtype=cupy.float32)
    import numpy as np

    return np.random.default_rng(seed).random(shape, dtype=np.float32)


def _median_time(fn, repeat: int) -> tuple[float, list[float]]:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times), times


def _inputs(client, prog, n: int, chunk: int, data: str, seed: int) -> dict:
    """The program's inputs, chunked along the batch and persisted: chunk i made on worker
    i * workers // chunks (consecutive chunks on one worker, every worker the same number when
    they divide), since Dask's own placement of the tasks that make them may leave one GPU with
    more chunks than another; uniform inputs as NumPy arrays (irfuse.dask copies them next to
    CuPy chunks)."""
    import dask
    import dask.array as da
    import numpy as np

    from irfuse.dask.parts import cluster_workers

    workers = cluster_workers(client)
    rng = np.random.default_rng(seed)
    out = {}
    for k in prog.inputs:
        shape = prog.shapes[k]
        if k in prog.uniform:
            out[k] = rng.uniform(0.5, 1.5, shape).astype(np.float32)
            continue
        starts = range(0, n, chunk)
        parts = []
        for i, start in enumerate(starts):
            m = min(chunk, n - start)
            with dask.annotate(workers=[workers[i * len(workers) // len(starts)]], allow_other_workers=False):
                made = dask.delayed(_random_chunk, pure=False)((m, *shape), seed + 1000 * len(out) + i,
                                                               data == "resident")
            parts.append(da.from_delayed(made, shape=(m, *shape), dtype=np.float32))
        out[k] = client.persist(da.concatenate(parts), optimize_graph=False)
    from distributed import wait

    wait([v for k, v in out.items() if k not in prog.uniform])
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--data", nargs="+", choices=["resident", "host"], default=["resident", "host"])
    ap.add_argument("--gpus", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--chunks", type=int, default=8)
    ap.add_argument("--resident-bytes", type=float, default=16e9)
    ap.add_argument("--host-bytes", type=float, default=4e9)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chain", type=int, default=1, metavar="K",
                    help="apply a one-input program K times in one graph, each output the next input (SyncTest): K "
                         "times the GPU work per run, against the fixed cost of a run's round trips")
    ap.add_argument("--json", default=meta.result_path("big-batches"))
    args = ap.parse_args(argv)

    import cupy
    from dask_cuda import LocalCUDACluster
    from distributed import Client, futures_of, wait

    import irfuse
    import irfuse.dask
    from irfuse.verification.reference import effective_bytes

    progs = {wl: irfuse.compile(os.path.join(ROOT, "examples", WORKLOADS[wl]), backend="cuda")
             for wl in args.workloads}
    sizes, direct = {}, {}
    for wl, prog in progs.items():
        if args.chain > 1 and (len(prog.inputs) != 1 or prog.shapes[prog.outputs[0]] != prog.shapes[prog.inputs[0]]):
            raise SystemExit(f"--chain needs a program of one input whose first output has its shape, not {wl}")
        ref = prog.compiled.reference_program
        per = effective_bytes(ref, 2, 4) - effective_bytes(ref, 1, 4)  # an element's own bytes (not uniform ones)
        for data in args.data:
            total = args.resident_bytes if data == "resident" else args.host_bytes
            chunk = int(total / per / args.chunks)
            sizes[wl, data] = (chunk * args.chunks, chunk)
        if "resident" not in args.data:
            continue
        # One chunk of the resident size called directly, in this process, on GPU 0.
        n_chunk = sizes[wl, "resident"][1]
        rng = cupy.random.default_rng(0)
        one = {k: (cupy.asarray(rng.random(prog.shapes[k], dtype=cupy.float32)) if k in prog.uniform
                   else rng.random((n_chunk, *prog.shapes[k]), dtype=cupy.float32)) for k in prog.inputs}
        for _ in range(3):
            prog(**one)
        cupy.cuda.runtime.deviceSynchronize()
        direct[wl] = _median_time(lambda: (prog(**one), cupy.cuda.runtime.deviceSynchronize()), 11)[0]
        one = None
        prog.close()  # its recorded buffers: the clusters need the memory
        cupy.get_default_memory_pool().free_all_blocks()

    rows, fixed = [], {}
    for gpus in args.gpus:
        devices = ",".join(str(g) for g in range(gpus))
        with LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices, n_workers=gpus, threads_per_worker=1,
                              dashboard_address=None) as cluster, Client(cluster) as client:
            # What Dask costs without irfuse.
            client.submit(_nothing, 0, pure=False).result()
            trip = _median_time(lambda: client.submit(_nothing, time.perf_counter_ns(), pure=False).result(), 50)[0]

            def empty_graph():
                futures = client.map(_nothing, [time.perf_counter_ns() + k for k in range(args.chunks)], pure=False)
                wait(futures)
            empty_graph()
            graph = _median_time(empty_graph, 20)[0]
            client.run(_sync_gpu)
            sync = _median_time(lambda: client.run(_sync_gpu), 20)[0]
            fixed[gpus] = {"task_round_trip_s": trip, "empty_graph_of_chunks_s": graph, "sync_all_gpus_s": sync}
            print(f"{gpus} GPU(s): a task's round trip {trip * 1e3:.2f} ms, {args.chunks} empty tasks persisted and "
                  f"waited for {graph * 1e3:.2f} ms, client.run(synchronize) {sync * 1e3:.2f} ms")
            for wl, prog in progs.items():
                for data in args.data:
                    n, chunk = sizes[wl, data]
                    inputs = _inputs(client, prog, n, chunk, data, 7)
                    held = {w: len(keys) for w, keys in client.has_what().items()}

                    def build():
                        step = inputs
                        for _ in range(args.chain):
                            got = irfuse.dask.apply(prog, **step)
                            step = {prog.inputs[0]: got[0]}
                        return got
                    build_s = _median_time(build, 5)[0]

                    def run():
                        graph = list(build())  # the client's own work, timed apart (graph_build_s)
                        t0 = time.perf_counter()
                        outs = client.persist(graph)
                        wait(outs)
                        client.run(_sync_gpu)
                        took = time.perf_counter() - t0
                        # Forgotten before the next run: its tasks (the same keys, pure) would
                        # otherwise find these results still held and not run at all.
                        keys = [o.key for o in futures_of(outs)]
                        del outs
                        while client.run_on_scheduler(_known, keys):
                            time.sleep(0.001)
                        return took
                    run()  # compiles the program (and its phases) on every worker
                    times = [run() for _ in range(args.repeat)]
                    t = statistics.median(times)
                    nbytes = effective_bytes(prog.compiled.reference_program, n, 4) * args.chain
                    tasks = args.chunks * args.chain * len(prog.phase_plan().phases)
                    kernels = direct[wl] * args.chain * args.chunks if data == "resident" else None
                    row = {"gpus": gpus, "workload": wl, "data": data, "n": n, "chunk": chunk, "chunks": args.chunks,
                           "chain": args.chain, "phases": len(prog.phase_plan().phases), "bytes": nbytes, "s": t,
                           "times_s": times, "effective_GBps": nbytes / t / 1e9, "graph_build_s": build_s,
                           "kernels_alone_one_gpu_s": kernels, "input_chunks_by_worker": held,
                           "per_task_beyond_kernels_s": (t * gpus - kernels) / tasks if kernels else None}
                    rows.append(row)
                    extra = (f", {row['per_task_beyond_kernels_s'] * 1e3:.2f} ms a task beyond its kernels"
                             if kernels else "")
                    print(f"  {wl} {data}: n = {n:,} in {args.chunks} chunks, {t * 1e3:.1f} ms, "
                          f"{row['effective_GBps']:.0f} GB/s (graph built in {build_s * 1e3:.1f} ms){extra}")
                    inputs = None
                    client.run(lambda: __import__("cupy").get_default_memory_pool().free_all_blocks())
    base = {(r["workload"], r["data"]): r["s"] for r in rows if r["gpus"] == min(args.gpus)}
    print(f"\n| workload | data | n | chunk | {' | '.join(f'{g} GPU(s)' for g in args.gpus)} | "
          f"{max(args.gpus)} over {min(args.gpus)} |")
    print("|---|---|---|---|" + "---|" * len(args.gpus) + "---|")
    for (wl, data), s1 in base.items():
        these = {r["gpus"]: r for r in rows if (r["workload"], r["data"]) == (wl, data)}
        for r in these.values():
            r["speedup_over_fewest"] = s1 / r["s"]
        top = these[max(args.gpus)]
        cells = " | ".join(f"{these[g]['s'] * 1e3:.1f} ms ({these[g]['effective_GBps']:.0f} GB/s)" for g in args.gpus)
        print(f"| {wl} | {data} | {top['n']:,} | {top['chunk']:,} | {cells} | {top['speedup_over_fewest']:.2f}x |")
    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    with open(args.json, "w") as f:
        meta.dump({"gpu": gpu, "repeat": args.repeat, "direct_chunk_s": direct, "dask_fixed": fixed,
                   "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
