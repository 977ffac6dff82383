"""irfuse programs over Dask arrays of CuPy chunks on a `dask_cuda.LocalCUDACluster`: one GPU
against two, and what a task costs beyond its kernels.

    python benchmarks/dask_scale.py [--n 33554432] [--chunk 4194304] [--workloads SyncTest BigFusion]
                                    [--gpus 1 2] [--repeat 5] [--json dask_scale.json]

For each workload and each cluster size (one worker per GPU, one thread each): the inputs are
made on the workers (CuPy chunks of `--chunk` elements, persisted), `irfuse.dask.apply` is
persisted and waited for, then every worker's GPU synchronized (a call on GPU arrays returns
before its kernels finish); the median of `--repeat` such runs after one warm-up (which
compiles the program on every worker). Beside it, the same program called directly on one
chunk's CuPy arrays in this process (GPU 0), timed the same way: chunks x that time is what the
kernels alone would take on one GPU; the difference per chunk is a task's overhead (scheduling,
the call's checks and its recorded run's replay, and the run's fixed round trips spread over its
chunks). `--chain K` applies a one-input program K times in one graph (each output the next
input): K times the GPU work per run against the same fixed cost. Effective bandwidth: inputs read once and
outputs written once. Requires the `dask` extra and CuPy.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {"SyncTest": "synctest.kas", "BigFusion": "bigfusion_bench.kas", "StVenantInner": "stvenant_inner.kas"}


def _sync_gpu() -> None:
    import cupy

    cupy.cuda.runtime.deviceSynchronize()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=33_554_432)
    ap.add_argument("--chunk", type=int, default=4_194_304)
    ap.add_argument("--workloads", nargs="+", default=["SyncTest", "BigFusion"])
    ap.add_argument("--gpus", nargs="+", type=int, default=[1, 2])
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--chain", type=int, default=1, metavar="K",
                    help="apply a one-input program K times in one graph, each output the next input (SyncTest): K "
                         "times the GPU work per run, against the fixed cost of a run's round trips")
    ap.add_argument("--json", default="dask_scale.json")
    args = ap.parse_args(argv)

    import cupy
    import dask.array as da
    import numpy as np
    from dask_cuda import LocalCUDACluster
    from distributed import Client, wait

    import irfuse
    import irfuse.dask
    from irfuse.runtime.reference import effective_bytes

    rows = []
    for wl in args.workloads:
        path = os.path.join(ROOT, "examples", WORKLOADS[wl])
        prog = irfuse.compile(path, backend="cuda")
        nbytes = effective_bytes(prog.compiled.reference_program, args.n, 4) * args.chain
        if args.chain > 1 and (len(prog.inputs) != 1 or prog.shapes[prog.outputs[0]] != prog.shapes[prog.inputs[0]]):
            raise SystemExit(f"--chain needs a program of one input whose first output has its shape, not {wl}")
        # One chunk called directly, in this process, on GPU 0.
        rng = cupy.random.default_rng(0)
        one = {k: rng.random((args.chunk, *prog.shapes[k]), dtype=cupy.float32) for k in prog.inputs}
        for _ in range(3):
            prog(**one)
        cupy.cuda.runtime.deviceSynchronize()
        direct = []
        for _ in range(max(5, args.repeat)):
            t0 = time.perf_counter()
            prog(**one)
            cupy.cuda.runtime.deviceSynchronize()
            direct.append(time.perf_counter() - t0)
        t_chunk = statistics.median(direct)
        del one
        chunks = -(-args.n // args.chunk)
        row = {"workload": wl, "n": args.n, "chunk": args.chunk, "chunks": chunks, "bytes": nbytes,
               "chain": args.chain, "direct_chunk_s": t_chunk, "kernels_alone_one_gpu_s": args.chain * chunks * t_chunk,
               "clusters": {}}
        for gpus in args.gpus:
            devices = ",".join(str(g) for g in range(gpus))
            with LocalCUDACluster(CUDA_VISIBLE_DEVICES=devices, n_workers=gpus, threads_per_worker=1,
                                  dashboard_address=None) as cluster, Client(cluster) as client:
                inputs = {k: da.random.random((args.n, *prog.shapes[k]), chunks=(args.chunk, *prog.shapes[k]))
                          .astype(np.float32).map_blocks(cupy.asarray, dtype=np.float32) for k in prog.inputs}
                inputs = dict(zip(inputs, client.persist(list(inputs.values()))))
                wait(list(inputs.values()))
                times = []
                for r in range(args.repeat + 1):
                    t0 = time.perf_counter()
                    step = inputs
                    for _ in range(args.chain):
                        got = irfuse.dask.apply(prog, **step)
                        step = {prog.inputs[0]: got[0]}
                    outs = client.persist(list(got))
                    wait(outs)
                    client.run(_sync_gpu)
                    if r:  # the first run compiles the program on every worker
                        times.append(time.perf_counter() - t0)
                    del outs
                placed = client.run(lambda: os.environ.get("CUDA_VISIBLE_DEVICES"))
            t = statistics.median(times)
            row["clusters"][gpus] = {"s": t, "times_s": times, "effective_GBps": nbytes / t / 1e9,
                                     "per_chunk_overhead_s": (t * gpus - args.chain * chunks * t_chunk)
                                     / (args.chain * chunks),
                                     "workers_devices": sorted(placed.values())}
        base = row["clusters"].get(min(args.gpus))
        for gpus, c in row["clusters"].items():
            c["speedup_over_fewest"] = base["s"] / c["s"]
        rows.append(row)
        print(f"{wl}: n = {args.n:,}, {chunks} chunks of {args.chunk:,}, applied {args.chain} time(s) per run; one chunk "
              f"called directly {t_chunk * 1e3:.3f} ms ({args.chunk / args.n * nbytes / args.chain / t_chunk / 1e9:.0f} GB/s)")
        for gpus, c in row["clusters"].items():
            print(f"  {gpus} GPU(s): {c['s'] * 1e3:.1f} ms, {c['effective_GBps']:.0f} GB/s, {c['speedup_over_fewest']:.2f}x "
                  f"over {min(args.gpus)}; per-chunk overhead {c['per_chunk_overhead_s'] * 1e3:.2f} ms; "
                  f"workers see GPUs {c['workers_devices']}")
    gpu = cupy.cuda.runtime.getDeviceProperties(0)["name"].decode()
    with open(args.json, "w") as f:
        json.dump({"gpu": gpu, "repeat": args.repeat, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
