"""The four seed workloads in irfuse, PyTorch (eager, torch.compile) and JAX (jax.jit), in one run.

    python benchmarks/peers.py [--n 4194304] [--top 10] [--back-to-back K] [--rounds 5] [--repeat 50]
                               [--reuse-tuning DIR] [--skip-max-autotune] [--skip-cuda-graphs] [--json peers.json]

Same random float32 data, same layout (array of structures, shaped (N, *value shape)) for
every contender. For each workload: irfuse's N best plans are tuned on the GPU and the
fastest is timed again beside the peers; a device-to-device copy gives the bandwidth limit.
Every contender's outputs are checked against the float64 NumPy reference.
Effective bandwidth = (inputs read once + outputs written once) / time. Prints elements/s,
effective bandwidth as a fraction of the copy bandwidth, and irfuse's speedup over each peer.
A yardstick row, "(copy of the same bytes)", times one cudaMemcpy moving the workload's
traffic: short transfers do not reach the 1 GiB copy's bandwidth either. The 1 GiB copy is
timed on the device alone (queued behind another copy), the strictest limit; every contender,
the same-size copy included, is timed from an idle GPU, host launch costs included. `--back-to-back K`
times K runs issued one after another for every contender (and the same-size copy), the
steady state of a time-stepping code, where each launch's latency overlaps the previous run.
The contenders of a workload are timed in turns: `--rounds` rounds, each taking
`--repeat / --rounds` timings of every contender (every other round in reverse order), so
that a drift of clocks or temperature during the run weighs on all of them alike.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SAME_SIZE_COPY = "(copy of the same bytes)"
WORKLOADS = {
    "BigFusion": "bigfusion_bench.kas",
    "SyncTest": "synctest.kas",
    "StVenant": "stvenant.kas",
    "StVenantInner": "stvenant_inner.kas",
}


def torch_fns():
    import torch

    def bigfusion(A, B, c, D, E):
        M1 = A @ B
        v1 = (M1 @ c.unsqueeze(-1)).squeeze(-1)
        s1 = torch.sqrt((v1 * v1).sum(-1))
        M2 = D @ E
        return (M2 * s1[:, None, None],)

    def synctest(A):
        M1 = A + A
        M2 = A + M1
        M3 = A + M2
        return (A + M3,)

    def stvenant(T4, Mf, phi, M1, w):
        v = (M1 @ phi.unsqueeze(-1)).squeeze(-1) * w[:, None]
        t3 = torch.einsum("nijkl,nl->nijk", T4, v)
        return (torch.einsum("nijl,nlk->nijk", t3, Mf), v)

    def stvenant_inner(T3, psi, phi, S, w):
        h2 = torch.einsum("nijk,nk->nij", T3, psi)
        vh = (S @ phi.unsqueeze(-1)).squeeze(-1)
        sc = torch.abs((vh * psi).sum(-1))
        eye = torch.eye(3, device=T3.device, dtype=T3.dtype)
        mt = (w[:, None, None] * eye) * sc[:, None, None]
        return (mt + h2 * w[:, None, None],)

    return {"BigFusion": bigfusion, "SyncTest": synctest, "StVenant": stvenant, "StVenantInner": stvenant_inner}


def array_fns(xp, loop=None):
    """The workloads written with an array module's matmul/einsum (`numpy` or `jax.numpy`).
    `loop(count, body, x)` runs `x = body(x)` `count` times (a Python loop by default;
    `jax.lax.fori_loop` under `jax.jit`)."""
    def python_loop(count, body, x):
        for _ in range(count):
            x = body(x)
        return x

    loop = loop or python_loop

    def bigfusion(A, B, c, D, E):
        M1 = A @ B
        v1 = xp.einsum("nij,nj->ni", M1, c)
        s1 = xp.sqrt((v1 * v1).sum(-1))
        return ((D @ E) * s1[:, None, None],)

    def synctest(A):
        return (A + (A + (A + (A + A))),)

    def stvenant(T4, Mf, phi, M1, w):
        v = xp.einsum("nij,nj->ni", M1, phi) * w[:, None]
        t3 = xp.einsum("nijkl,nl->nijk", T4, v)
        return (xp.einsum("nijl,nlk->nijk", t3, Mf), v)

    def stvenant_inner(T3, psi, phi, S, w):
        h2 = xp.einsum("nijk,nk->nij", T3, psi)
        vh = xp.einsum("nij,nj->ni", S, phi)
        sc = xp.abs((vh * psi).sum(-1))
        mt = (w[:, None, None] * xp.eye(3, dtype=T3.dtype)) * sc[:, None, None]
        return (mt + h2 * w[:, None, None],)

    def power_iteration(A, x):
        def step(x):
            x = xp.einsum("nij,nj->ni", A, x)
            return x * (1 / xp.sqrt((x * x).sum(-1)))[:, None]
        return (loop(100, step, x),)

    def cfl_step(x, v, cfl):
        dt = cfl / xp.sqrt((v * v).sum(-1)).max()
        return (x + v * dt, dt)

    def strain_energy(eps, vol, C):
        sig = xp.einsum("ij,nj->ni", C, eps)
        e = (eps * sig).sum(-1) * vol * 0.5
        return (sig, e, e.sum())

    def rotation_loop(R, Q, x):
        R = loop(4, lambda R: R @ Q + Q, R)
        v = xp.einsum("nij,nj->ni", R, x)
        return (R, xp.sqrt((v * v).sum(-1)))

    def precession(A, x, p, h):
        W = A - xp.swapaxes(A, -1, -2)

        def step(xp_):
            x, p = xp_
            x = x + xp.einsum("nij,nj->ni", W, x) * h[:, None]
            x = x * (1 / xp.sqrt((x * x).sum(-1)))[:, None]
            return (x, p + x * h[:, None])
        return loop(300, step, (x, p))

    return {"BigFusion": bigfusion, "SyncTest": synctest, "StVenant": stvenant, "StVenantInner": stvenant_inner,
            "PowerIteration": power_iteration, "CflStep": cfl_step, "StrainEnergy": strain_energy,
            "RotationLoop": rotation_loop, "Precession": precession}


def numba_fns():
    """The workloads as numba loops over elements (`prange`: every core), each element's small
    matrices indexed in place and summed in float32, as one writes them with numba; the
    outputs allocated once per input shape and written again by later calls (as irfuse's
    recorded runs do: fresh memory costs a page fault per 4 KB at its first write). Compiled
    on their first call (`cache=True`: once per machine). For float32 arrays."""
    import numba
    from numba import prange

    jit = numba.njit(parallel=True, cache=True)
    zero = np.float32(0)

    @jit
    def bigfusion(A, B, c, D, E, F):
        for e in prange(A.shape[0]):
            s = zero
            for i in range(3):
                v = zero
                for j in range(3):
                    m = zero
                    for k in range(3):
                        m += A[e, i, k] * B[e, k, j]
                    v += m * c[e, j]
                s += v * v
            s = np.sqrt(s)
            for i in range(5):
                for j in range(5):
                    m = zero
                    for k in range(5):
                        m += D[e, i, k] * E[e, k, j]
                    F[e, i, j] = m * s

    @jit
    def synctest(A, F):
        for e in prange(A.shape[0]):
            for i in range(3):
                for j in range(3):
                    a = A[e, i, j]
                    F[e, i, j] = a + (a + (a + (a + a)))

    @jit
    def stvenant(T4, Mf, phi, M1, w, out, v):
        for e in prange(T4.shape[0]):
            for i in range(3):
                x = zero
                for j in range(3):
                    x += M1[e, i, j] * phi[e, j]
                v[e, i] = x * w[e]
            for i in range(3):
                for j in range(3):
                    t0 = t1 = t2 = zero
                    for m in range(3):
                        t0 += T4[e, i, j, 0, m] * v[e, m]
                        t1 += T4[e, i, j, 1, m] * v[e, m]
                        t2 += T4[e, i, j, 2, m] * v[e, m]
                    for k in range(3):
                        out[e, i, j, k] = t0 * Mf[e, 0, k] + t1 * Mf[e, 1, k] + t2 * Mf[e, 2, k]

    @jit
    def stvenant_inner(T3, psi, phi, S, w, out):
        for e in prange(T3.shape[0]):
            sc = zero
            for i in range(3):
                x = zero
                for j in range(3):
                    x += S[e, i, j] * phi[e, j]
                sc += x * psi[e, i]
            sc = abs(sc)
            for i in range(3):
                for j in range(3):
                    h = zero
                    for k in range(3):
                        h += T3[e, i, j, k] * psi[e, k]
                    out[e, i, j] = (w[e] * sc if i == j else zero) + h * w[e]

    @jit
    def power_iteration(A, x, out):
        for e in prange(A.shape[0]):
            a, b, c = x[e, 0], x[e, 1], x[e, 2]
            for _ in range(100):
                p = A[e, 0, 0] * a + A[e, 0, 1] * b + A[e, 0, 2] * c
                q = A[e, 1, 0] * a + A[e, 1, 1] * b + A[e, 1, 2] * c
                r = A[e, 2, 0] * a + A[e, 2, 1] * b + A[e, 2, 2] * c
                k = np.float32(1) / np.sqrt(p * p + q * q + r * r)
                a, b, c = p * k, q * k, r * k
            out[e, 0], out[e, 1], out[e, 2] = a, b, c

    @jit
    def rotation_loop(R, Q, x, Rout, nout):
        for e in prange(R.shape[0]):
            for i in range(3):
                for j in range(3):
                    Rout[e, i, j] = R[e, i, j]
            for _ in range(4):
                for i in range(3):  # (row i of R Q + Q needs row i of R only)
                    r0, r1, r2 = Rout[e, i, 0], Rout[e, i, 1], Rout[e, i, 2]
                    for j in range(3):
                        Rout[e, i, j] = (r0 * Q[e, 0, j] + r1 * Q[e, 1, j] + r2 * Q[e, 2, j]) + Q[e, i, j]
            s = zero
            for i in range(3):
                v = Rout[e, i, 0] * x[e, 0] + Rout[e, i, 1] * x[e, 1] + Rout[e, i, 2] * x[e, 2]
                s += v * v
            nout[e] = np.sqrt(s)

    @jit
    def precession(A, x, p, h, xout, pout):
        for e in prange(A.shape[0]):
            # (W = A - A^T whole, its diagonal's zeros included, as the program computes it)
            w00, w01, w02 = A[e, 0, 0] - A[e, 0, 0], A[e, 0, 1] - A[e, 1, 0], A[e, 0, 2] - A[e, 2, 0]
            w10, w11, w12 = A[e, 1, 0] - A[e, 0, 1], A[e, 1, 1] - A[e, 1, 1], A[e, 1, 2] - A[e, 2, 1]
            w20, w21, w22 = A[e, 2, 0] - A[e, 0, 2], A[e, 2, 1] - A[e, 1, 2], A[e, 2, 2] - A[e, 2, 2]
            x0, x1, x2 = x[e, 0], x[e, 1], x[e, 2]
            p0, p1, p2 = p[e, 0], p[e, 1], p[e, 2]
            he = h[e]
            for _ in range(300):
                y0 = w00 * x0 + w01 * x1 + w02 * x2
                y1 = w10 * x0 + w11 * x1 + w12 * x2
                y2 = w20 * x0 + w21 * x1 + w22 * x2
                x0, x1, x2 = x0 + y0 * he, x1 + y1 * he, x2 + y2 * he
                k = np.float32(1) / np.sqrt(x0 * x0 + x1 * x1 + x2 * x2)
                x0, x1, x2 = x0 * k, x1 * k, x2 * k
                p0, p1, p2 = p0 + x0 * he, p1 + x1 * he, p2 + x2 * he
            xout[e, 0], xout[e, 1], xout[e, 2] = x0, x1, x2
            pout[e, 0], pout[e, 1], pout[e, 2] = p0, p1, p2

    # The reductions over the batch: each of `chunks` ranges of elements reduced by one
    # `prange` iteration in order, then the partials (numba's parallel reductions take `+=`,
    # not max).
    @jit
    def cfl_step(x, v, cfl, xn, partial):
        n, chunks = v.shape[0], partial.shape[0]
        for c in prange(chunks):
            m = zero
            for e in range(c * n // chunks, (c + 1) * n // chunks):
                s = np.sqrt(v[e, 0] * v[e, 0] + v[e, 1] * v[e, 1] + v[e, 2] * v[e, 2])
                m = s if s > m else m
            partial[c] = m
        dt = cfl[0] / partial.max()
        for e in prange(n):
            for i in range(3):
                xn[e, i] = x[e, i] + v[e, i] * dt
        return dt

    @jit
    def strain_energy(eps, vol, C, sig, en, partial):
        n, chunks = eps.shape[0], partial.shape[0]
        for c in prange(chunks):
            acc = zero
            for e in range(c * n // chunks, (c + 1) * n // chunks):
                w = zero
                for i in range(6):
                    s = zero
                    for j in range(6):
                        s += C[i, j] * eps[e, j]
                    sig[e, i] = s
                    w += eps[e, i] * s
                en[e] = w * vol[e] * np.float32(0.5)
                acc += en[e]
            partial[c] = acc
        return partial.sum()

    chunks = 8 * numba.get_num_threads()
    # Outputs on the allocations irfuse's CPU backend uses (page-aligned): on 16 cores of the
    # GPU machine's Xeon a kernel ran several times faster on those than on NumPy's own
    # (benchmarks/NOTES.md, The CPU backend, 2026-11-26); every contender gets the same.
    from irfuse.runtime.cpu_device import page_aligned

    def reducing(kernel, shapes, uniform_inputs=()):
        outputs: dict = {}

        def run(*args):
            key = tuple(a.shape for a in args)
            if key not in outputs:
                outputs[key] = tuple(page_aligned(shape, np.float32) for shape in shapes(args[0].shape[0]))
            flat = [a.reshape(1) if k in uniform_inputs else a for k, a in enumerate(args)]
            total = kernel(*flat, *outputs[key], np.empty(chunks, np.float32))
            return (*outputs[key], np.float32(total))
        return run

    def kept(kernel, shapes):
        outputs: dict = {}

        def run(*args):
            key = tuple(a.shape for a in args)
            if key not in outputs:
                outputs[key] = tuple(page_aligned(shape, np.float32) for shape in shapes(args[0].shape[0]))
            kernel(*args, *outputs[key])
            return outputs[key]
        return run

    return {"BigFusion": kept(bigfusion, lambda n: [(n, 5, 5)]), "SyncTest": kept(synctest, lambda n: [(n, 3, 3)]),
            "StVenant": kept(stvenant, lambda n: [(n, 3, 3, 3), (n, 3)]),
            "StVenantInner": kept(stvenant_inner, lambda n: [(n, 3, 3)]),
            "PowerIteration": kept(power_iteration, lambda n: [(n, 3)]),
            "CflStep": reducing(cfl_step, lambda n: [(n, 3)], uniform_inputs=(2,)),
            "StrainEnergy": reducing(strain_energy, lambda n: [(n, 6), (n,)]),
            "RotationLoop": kept(rotation_loop, lambda n: [(n, 3, 3), (n,)]),
            "Precession": kept(precession, lambda n: [(n, 3), (n, 3)])}


def jax_fns():
    import jax.numpy as jnp

    return array_fns(jnp)


def torch_sampler(fn, args, warmup=5, back_to_back=1):
    """One timing of `fn` per call: CUDA events around `back_to_back` calls."""
    import torch

    for _ in range(warmup):
        fn(*args)
    torch.cuda.synchronize()

    def once() -> float:
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        for _ in range(back_to_back):
            fn(*args)
        e.record()
        e.synchronize()
        return s.elapsed_time(e) / 1e3 / back_to_back
    return once


def jax_sampler(fn, args, warmup=5, back_to_back=1):
    """Host clock around dispatch and `block_until_ready` (JAX has no event API); with
    back_to_back > 1 the dispatches overlap the device work, as in a time-stepping loop."""
    import jax

    for _ in range(warmup):
        jax.block_until_ready(fn(*args))

    def once() -> float:
        t0 = time.perf_counter()
        outs = [fn(*args) for _ in range(back_to_back)]
        jax.block_until_ready(outs)
        return (time.perf_counter() - t0) / back_to_back
    return once


def peer_check(outs, names: list[str], reference: dict) -> str:
    """A peer's outputs (torch tensors or JAX arrays, in the program's output order) against
    the float64 NumPy reference: 'ok' or the mismatch, with the relative error."""
    from irfuse.verification.verify import check_outputs

    got = {name: np.asarray(o.detach().cpu() if hasattr(o, "detach") else o) for name, o in zip(names, outs)}
    checks = check_outputs(got, reference, "f32")
    worst = max(c.rel_error for c in checks)
    return f"ok ({worst:.1e})" if all(c.ok for c in checks) else "; ".join(c.describe() for c in checks if not c.ok)


def in_context(dev, fn):
    """`fn` run with irfuse's CUDA context pushed (outside the timed region), popped after."""
    def once() -> float:
        dev.context.push()
        try:
            return fn()
        finally:
            dev.drv.Context.pop()
    return once


def interleaved_medians(samplers: dict, repeat: int, rounds: int, settle: int = 0) -> dict[str, float]:
    """Median of `repeat` timings per contender, taken in `rounds` rounds that visit every
    contender in turn (alternating order): all contenders see the same machine state.
    `settle`: untimed calls at the start of each turn (on the CPU, the previous contender's
    threads still spin for a while after its last call, and its data sits in the caches of
    the cores its partition of the batch gave it: a turn's first call measures the switch)."""
    from irfuse.tools.tune import alternating_rounds

    times: dict[str, list[float]] = {k: [] for k in samplers}
    per_round = max(1, repeat // rounds)
    for _, k in alternating_rounds(list(samplers), rounds):
        for _ in range(settle):
            samplers[k]()
        times[k] += [samplers[k]() for _ in range(per_round)]
    return {k: float(np.median(v)) for k, v in times.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--top", type=int, default=10)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--skip-max-autotune", action="store_true")
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--skip-cuda-graphs", action="store_true",
                    help="leave out torch.compile(mode='reduce-overhead'), Inductor with CUDA graphs")
    ap.add_argument("--back-to-back", type=int, default=1, metavar="K",
                    help="time K runs issued one after another and divide (steady state, launch "
                         "latency hidden); 1 = one run per timing")
    ap.add_argument("--repeat", type=int, default=50, help="timings per contender (default 50)")
    ap.add_argument("--rounds", type=int, default=5,
                    help="rounds visiting every contender in turn, alternating order (default 5)")
    ap.add_argument("--json", default=meta.result_path("seeds"))
    ap.add_argument("--tuning-dir", default=".")
    ap.add_argument("--no-tune", action="store_true",
                    help="time irfuse's default plan (the planner's prediction) instead of the tuned best")
    ap.add_argument("--reuse-tuning", default=None, metavar="DIR",
                    help="take <workload>.tuning.json from DIR instead of tuning again")
    args = ap.parse_args(argv)

    # JAX would otherwise take 75% of the GPU's memory at its first call, while irfuse's and
    # torch's buffers of the same workload are still held (contenders are timed in turns).
    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import torch
    from rich.console import Console
    from rich.table import Table

    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice, DeviceCopy, measure_copy_bandwidth
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import effective_bytes, random_inputs, run_references
    from irfuse.verification.verify import check_outputs
    from irfuse.tools.cli import build_parser
    from irfuse.driver.tuned import compile_tuned
    from irfuse.tools.tune import tune

    console = Console(width=200)
    rows = []
    copy_bw = None
    tfns = torch_fns()
    jfns = None if args.skip_jax else jax_fns()
    b2b = args.back_to_back
    for wl in args.workloads:
        path = os.path.join(ROOT, "examples", WORKLOADS[wl])
        tuning_json = os.path.join(args.tuning_dir, f"{wl}.tuning.json")
        if args.no_tune:
            tuning = {"spearman": float("nan"), "predicted_best_gap": float("nan"),
                      "best": {"pipeline": None, "groups": ["(default plan)"]}}
        else:
            if args.reuse_tuning and os.path.exists(os.path.join(args.reuse_tuning, f"{wl}.tuning.json")):
                tuning_json = os.path.join(args.reuse_tuning, f"{wl}.tuning.json")
            else:
                tune(build_parser().parse_args(
                    ["tune", path, "--top", str(args.top), "--n", str(args.n), "--back-to-back", str(b2b),
                     "--json", tuning_json, "--plot", os.path.join(args.tuning_dir, f"{wl}.tuning.png")]), console)
            with open(tuning_json) as f:
                tuning = json.load(f)
        if args.no_tune:
            plan, _ = compile_program(path, None, "f32")
            tuning["best"]["groups"] = [k.name for k in plan.kernels]
        else:
            plan = compile_tuned(tuning_json, path)
        prog = plan.reference_program
        inputs = random_inputs(prog, args.n, 1, np.float32)
        nbytes = effective_bytes(prog, args.n, 4)
        dev = CudaDevice(plan)
        same_size, popped = None, False
        try:
            if copy_bw is None:
                copy_bw = measure_copy_bandwidth(dev.drv, back_to_back=b2b)  # same timing as all
            rec = Executor(plan, dev).prepare(inputs, args.n)
            rec.replay()
            reference = run_references(prog, inputs, "f32")
            ok = all(c.ok for c in check_outputs(rec.outputs(), reference, "f32"))
            peer_checks: dict[str, str] = {}
            for _ in range(5):
                rec.replay()
            # The same traffic as one cudaMemcpy (nbytes/2 read, nbytes/2 written): the fixed
            # costs of a short transfer, which the 1 GiB copy above amortizes, included.
            same_size = DeviceCopy(dev.drv, nbytes // 2 // 16 * 16)
            for _ in range(3):
                same_size.copy()
            samplers = {"irfuse": in_context(dev, lambda: rec.time_once(b2b)),
                        SAME_SIZE_COPY: in_context(
                            dev, lambda: same_size.time_once(b2b) * nbytes / (2 * same_size.nbytes))}
            # The peers run without irfuse's context pushed on the thread, as they would alone.
            dev.drv.Context.pop()
            popped = True
            targs_t = [torch.from_numpy(inputs[name]).cuda() for name in prog.inputs]
            peers = {"torch eager": tfns[wl], "torch.compile": torch.compile(tfns[wl])}
            if not args.skip_max_autotune:
                peers["torch.compile max-autotune-no-cudagraphs"] = torch.compile(
                    tfns[wl], mode="max-autotune-no-cudagraphs")
            if not args.skip_cuda_graphs:
                # irfuse submits each run as one CUDA graph; Inductor's own CUDA graphs are the
                # like-for-like peer (it copies inputs into the graph's buffers on each call).
                peers["torch.compile reduce-overhead (CUDA graphs)"] = torch.compile(
                    tfns[wl], mode="reduce-overhead")
            for k, fn in peers.items():
                samplers[k] = torch_sampler(fn, targs_t, back_to_back=b2b)
                peer_checks[k] = peer_check(fn(*targs_t), prog.outputs, reference)
            if jfns is not None:
                import jax

                jargs = [jax.device_put(inputs[name]) for name in prog.inputs]
                jfn = jax.jit(jfns[wl])
                samplers["jax.jit"] = jax_sampler(jfn, jargs, back_to_back=b2b)
                peer_checks["jax.jit"] = peer_check(jfn(*jargs), prog.outputs, reference)
            times = interleaved_medians(samplers, args.repeat, args.rounds)
        finally:
            if popped:
                dev.context.push()
            if same_size is not None:
                same_size.free()
            dev.close()
        peer_best = min(v for k, v in times.items() if k not in ("irfuse", SAME_SIZE_COPY))
        rows.append({"workload": wl, "n": args.n, "bytes": nbytes, "verified": ok, "times_s": times,
                     "fraction_of_copy": {k: nbytes / v / copy_bw for k, v in times.items()},
                     "speedup_over_best_peer": peer_best / times["irfuse"],
                     "spearman": tuning["spearman"], "predicted_best_gap": tuning["predicted_best_gap"],
                     "best_plan": tuning["best"]["groups"], "peer_checks": peer_checks})
        del samplers, targs_t
        torch.cuda.empty_cache()
    timing = "one run per timing" if args.back_to_back == 1 else f"{args.back_to_back} runs back to back per timing"
    table = Table(title=f"{torch.cuda.get_device_name()}: n = {args.n}, float32, {timing}; copy bandwidth "
                        f"{copy_bw / 1e9:.0f} GB/s (read + write)")
    for col in ("workload", "contender", "ms", "M elem/s", "GB/s", "of copy", "irfuse speedup"):
        table.add_column(col)
    for r in rows:
        for k, t in sorted(r["times_s"].items(), key=lambda kv: kv[1]):
            table.add_row(r["workload"], k, f"{t * 1e3:.3f}", f"{args.n / t / 1e6:.0f}",
                          f"{r['bytes'] / t / 1e9:.0f}", f"{r['fraction_of_copy'][k]:.1%}",
                          "" if k == "irfuse" else f"{t / r['times_s']['irfuse']:.2f}x")
    console.print(table)
    for r in rows:
        console.print(f"{r['workload']}: verified={r['verified']}, best plan {r['best_plan']}, Spearman "
                      f"{r['spearman']:.2f}, predicted best {r['predicted_best_gap']:.1%} off the measured best")
        console.print("  peers against the reference: " + "; ".join(f"{k} {v}" for k, v in r["peer_checks"].items()))
    with open(args.json, "w") as f:
        meta.dump({"gpu": torch.cuda.get_device_name(), "copy_bandwidth_Bps": copy_bw,
                   "back_to_back": args.back_to_back, "repeat": args.repeat, "rounds": args.rounds,
                   "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
