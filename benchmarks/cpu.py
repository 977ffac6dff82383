"""irfuse's CPU backend against NumPy and jax.jit on the CPU, in one run.

    python benchmarks/cpu.py [--n 1048576] [--workloads ...] [--repeat 10] [--rounds 5]
                             [--settle 2] [--threads T] [--skip-jax] [--skip-numba] [--numpy-limit 2]
                             [--json cpu.json]

The four seed workloads, three loops inside the element (`examples/power_iteration.kas`: 100
steps of a normalized matrix-vector product; `rotation_loop.kas`: 4 steps carrying a 3x3
matrix; `precession.kas`: 300 explicit time steps carrying two vectors) and two programs
that reduce over the batch (`cfl_step.kas`: a maximum read back by every element;
`strain_energy.kas`: a sum), float32, array of structures, the same random data for every
contender. irfuse runs its default plan on the CPU backend (`--backend cpu`: planned with the
CPU profile, each kernel as a loop over its elements, `render_cpu_loop`, blocks of elements
spread over every core), and the same plan's CPU twins (IRFUSE_CPU_RENDERER=emulate: the
generated CUDA run block by block), checked to give the same bits; NumPy runs the same chains
written with `matmul`/`einsum` (one thread, as NumPy's element-wise operations are; a Python loop over the
steps of the loops, timed by one call where that call takes over `--numpy-limit` seconds); JAX
runs them under `jax.jit` on its CPU device (`lax.fori_loop` for the loops); numba runs each as a
parallel loop over elements (`prange` on every core, `peers.numba_fns`). Every contender's
outputs are checked against irfuse's float64 NumPy reference. Contenders are timed in turns
(`--rounds` rounds, alternating order) so a drift of the machine weighs on all alike; each
turn starts with `--settle` untimed calls, so a timing sees the contender's own steady state
(its threads awake, its data in the caches of the cores it gave them to), not the switch
from the previous contender.

Also printed: a host memory copy of the workload's bytes (half read, half written) on as
many threads as irfuse uses (a numba parallel loop where numba is installed), as the
bandwidth yardstick; "of copy" is each contender's
effective bandwidth (inputs read once + outputs written once) over that copy's.
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import ROOT, array_fns, interleaved_medians, numba_fns, peer_check  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

WORKLOADS = {
    "BigFusion": "bigfusion_bench.kas",
    "SyncTest": "synctest.kas",
    "StVenant": "stvenant.kas",
    "StVenantInner": "stvenant_inner.kas",
    "PowerIteration": "power_iteration.kas",
    "CflStep": "cfl_step.kas",
    "StrainEnergy": "strain_energy.kas",
    "RotationLoop": "rotation_loop.kas",
    "Precession": "precession.kas",
}


def wall_sampler(fn, args, warmup=2):
    """One timing of `fn(*args)` per call on the host clock (JAX results waited for)."""
    def run():
        out = fn(*args)
        if hasattr(out[0], "block_until_ready"):
            for o in out:
                o.block_until_ready()
        return out

    for _ in range(warmup):
        run()

    def once() -> float:
        t0 = time.perf_counter()
        run()
        return time.perf_counter() - t0
    return once


def copy_sampler(nbytes: int, threads: int):
    """A host copy of nbytes/2 bytes into another nbytes/2 on `threads` threads, the yardstick
    for memory-bound work: a numba `prange` loop where numba is installed (NumPy's copies
    spread by a Python thread pool cost about a millisecond of dispatch on 16 threads, more
    than the copy of a small workload), else NumPy's copy on a thread pool (it releases the
    GIL)."""
    words = max(threads, nbytes // 2 // 4)
    from irfuse.runtime.cpu_device import page_aligned

    src = page_aligned((words,), np.float32)  # (as every contender's arrays: see `main`)
    src[...] = np.random.default_rng(0).random(words, dtype=np.float32)
    dst = page_aligned((words,), np.float32)
    scale = nbytes / (2 * words * 4)
    try:
        import numba

        @numba.njit(parallel=True, cache=True)
        def parallel_copy(d, s):
            for i in numba.prange(s.shape[0]):
                d[i] = s[i]

        numba.set_num_threads(min(threads, numba.config.NUMBA_NUM_THREADS))
        parallel_copy(dst, src)

        def once() -> float:
            t0 = time.perf_counter()
            parallel_copy(dst, src)
            return (time.perf_counter() - t0) * scale
        return once
    except ImportError:
        pass
    parts = np.array_split(np.arange(words), threads)
    bounds = [(int(p[0]), int(p[-1]) + 1) for p in parts if len(p)]
    pool = ThreadPoolExecutor(len(bounds))

    def once() -> float:
        t0 = time.perf_counter()
        list(pool.map(lambda b: np.copyto(dst[b[0]:b[1]], src[b[0]:b[1]]), bounds))
        return (time.perf_counter() - t0) * scale
    once()
    return once


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_048_576)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS), choices=list(WORKLOADS))
    ap.add_argument("--repeat", type=int, default=10, help="timings per contender (default 10)")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of turns (default 5)")
    ap.add_argument("--profile", default="cpu",
                    help="the profile irfuse plans with (default cpu, the CPU backend's: the built-in one or "
                         "'irfuse calibrate --backend cpu''s)")
    ap.add_argument("--settle", type=int, default=2,
                    help="untimed calls at the start of each contender's turn (default 2)")
    ap.add_argument("--threads", type=int, default=None,
                    help="irfuse's worker threads (IRFUSE_CPU_THREADS; default: every core)")
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--skip-numba", action="store_true")
    ap.add_argument("--numpy-limit", type=float, default=2.0,
                    help="seconds: NumPy taking longer for one call is timed by that call alone (default 2)")
    ap.add_argument("--json", default=meta.result_path("cpu-backend"))
    args = ap.parse_args(argv)
    if args.threads:
        os.environ["IRFUSE_CPU_THREADS"] = str(args.threads)

    from rich.console import Console
    from rich.table import Table

    from irfuse.api.host_calls import aligned_copy
    from irfuse.driver.binaries import with_cpu_rendering
    from irfuse.runtime.host_library import cpu_threads
    from irfuse.driver.compile import PlanningOptions, compile_program
    from irfuse.runtime.executor import CpuDevice, Executor
    from irfuse.verification.reference import effective_bytes, random_inputs, run_references
    from irfuse.verification.verify import check_outputs

    threads = cpu_threads()
    console = Console(width=200)
    numpy_fns = array_fns(np)
    jax_fns = None
    if not args.skip_jax:
        try:
            import jax
            import jax.numpy as jnp

            jax.config.update("jax_platforms", "cpu")
            jax_fns = array_fns(jnp, loop=lambda count, body, x: jax.lax.fori_loop(0, count, lambda i, y: body(y), x))
        except ImportError:
            console.print("JAX is not installed: its column is left out (pip install jax)")
    numba_loops = None
    if not args.skip_numba:
        try:
            numba_loops = numba_fns()
        except ImportError:
            console.print("numba is not installed: its column is left out (pip install numba)")
    rows = []
    for wl in args.workloads:
        path = os.path.join(ROOT, "examples", WORKLOADS[wl])
        plan, _ = compile_program(path, None, "f32", compile_gpu=False,
                                  planning=PlanningOptions(n=args.n, profile=args.profile))
        prog = plan.reference_program
        inputs = random_inputs(prog, args.n, 1, np.float32)
        # (the peers' inputs on page-aligned allocations, as irfuse's uploads are: see
        # `peers.numba_fns`)
        ordered = [aligned_copy(inputs[name]) for name in prog.inputs]
        nbytes = effective_bytes(prog, args.n, 4)
        reference = run_references(prog, inputs, "f32")
        rec = Executor(plan, CpuDevice(plan)).prepare(inputs, args.n)
        rec.replay()
        checks = {"irfuse": "ok" if all(c.ok for c in check_outputs(rec.outputs(), reference, "f32")) else "WRONG"}
        # The same plan's kernels as their CPU twins (IRFUSE_CPU_RENDERER=emulate: the generated
        # CUDA run block by block), the CPU backend's rendering before the loop renderer.
        twin = with_cpu_rendering(plan, "emulate")
        twin_rec = Executor(twin, CpuDevice(twin)).prepare(inputs, args.n)
        twin_rec.replay()
        same = all(a.tobytes() == b.tobytes() for a, b in zip(twin_rec.outputs().values(), rec.outputs().values()))
        checks["irfuse twin"] = "ok, the same bits" if same else "WRONG: not the same bits"
        samplers = {"irfuse (cpu backend)": lambda: rec.time_once(),
                    "irfuse twin (IRFUSE_CPU_RENDERER=emulate)": lambda: twin_rec.time_once(),
                    "(copy of the same bytes)": copy_sampler(nbytes, threads)}
        t0 = time.perf_counter()
        checks["NumPy"] = peer_check(numpy_fns[wl](*ordered), prog.outputs, reference)
        numpy_once = time.perf_counter() - t0  # (the check included: a little more than one call)
        if numpy_once <= args.numpy_limit:
            samplers["NumPy"] = wall_sampler(numpy_fns[wl], ordered)
        if jax_fns is not None:
            jfn = jax.jit(jax_fns[wl])
            jargs = [jax.device_put(a) for a in ordered]
            samplers["jax.jit (cpu)"] = wall_sampler(jfn, jargs)
            checks["jax.jit"] = peer_check(jfn(*jargs), prog.outputs, reference)
        if numba_loops is not None:  # (compiled by its first call, in the sampler's warm-up)
            samplers["numba (prange)"] = wall_sampler(numba_loops[wl], ordered)
            checks["numba"] = peer_check(numba_loops[wl](*ordered), prog.outputs, reference)
        times = interleaved_medians(samplers, args.repeat, args.rounds, settle=args.settle)
        if "NumPy" not in samplers:  # (timed once: its Python loop over whole arrays takes seconds)
            times["NumPy (one call)"] = numpy_once
        copy_s = times["(copy of the same bytes)"]
        ours = times["irfuse (cpu backend)"]
        rows.append({"workload": wl, "n": args.n, "bytes": nbytes, "times_s": times, "checks": checks,
                     "fraction_of_copy": {k: copy_s / v for k, v in times.items()},
                     "irfuse_speedup": {k: v / ours for k, v in times.items() if not k.startswith("(")},
                     "kernels": [k.name for k in plan.kernels]})
        # (each workload's times as soon as they are measured, and the JSON so far: a run cut
        # short by a time limit keeps what it measured)
        ranked = sorted(times.items(), key=lambda kv: kv[1])
        console.print(f"{wl}: " + ", ".join(f"{k} {t * 1e3:.3f} ms" for k, t in ranked))
        _write_json(args, threads, rows)
    table = Table(title=f"CPU ({platform.processor() or platform.machine()}, {os.cpu_count()} cores; irfuse on "
                        f"{threads} threads): n = {args.n}, float32, median of {args.repeat}")
    for col in ("workload", "contender", "ms", "M elem/s", "GB/s", "of copy", "irfuse speedup", "check"):
        table.add_column(col)
    for r in rows:
        for k, t in sorted(r["times_s"].items(), key=lambda kv: kv[1]):
            table.add_row(r["workload"], k, f"{t * 1e3:.2f}", f"{args.n / t / 1e6:.1f}",
                          f"{r['bytes'] / t / 1e9:.1f}", f"{r['fraction_of_copy'][k]:.0%}",
                          f"{r['irfuse_speedup'][k]:.2f}x" if k in r["irfuse_speedup"] else "",
                          r["checks"].get(k.split(" (")[0], ""))
    console.print(table)
    _write_json(args, threads, rows)
    console.print(f"wrote {args.json}")
    return 0


def _write_json(args, threads: int, rows: list) -> None:
    with open(args.json, "w") as f:
        meta.dump({"machine": platform.machine(), "cores": os.cpu_count(), "irfuse_threads": threads,
                   "n": args.n, "repeat": args.repeat, "rounds": args.rounds, "rows": rows}, f, indent=2)


if __name__ == "__main__":
    sys.exit(main())
