"""Simulations at device speed: what a user's time loop meets, every contender in one run.

    python benchmarks/simulations.py [--calls 2000] [--steps 200] [--cubes 16,64,128]
                                     [--skip-compile] [--skip-jax] [--skip-mesh-preparation]
                                     [--json ...]

1. Host time per call, back to back (PyTorch CUDA tensors, the same tensors every call,
   synchronized once at the end): the issuing time of `--calls` calls over their number
   ("host us"), and the whole over their number ("per call us": the GPU's time where it is
   longer). irfuse: SyncTest, the Neo-Hookean element code and the strain energy (a sum over
   the batch) on 1,024 elements; the P1 residual with a `Connectivity` and the explicit step
   (`examples/mesh/explicit_step.kas`, three passes) on 24,576 tetrahedra; each with `out=`,
   without (outputs made by torch's allocator) and with its uniform scalars as Python numbers
   that change at every call; and the P1 residual on a new `u` at every call, as a loop that
   updates `u` with torch's operations meets it (`u = torch.add(u, r)`, timed with it and
   alone). Peers: torch eager, `torch.compile` (default and
   `mode="reduce-overhead"`) and `jax.jit` of SyncTest and of the explicit step (the P1
   residual in array code with `index_add_` / `.at[].add`), and a bare CUDA graph launch of
   one small kernel (`torch.cuda.CUDAGraph.replay`: the floor).
2. The explicit step as a time loop, per step, at each box of `--cubes` cubes a side (6 c^3
   tetrahedra, structured numbering): `irfuse.time_loop` (one CUDA graph of 16 steps
   replayed; also with its passes run one by one, the node pass after the elements a kernel of
   its own), the step called from Python, `jax.lax.fori_loop` of the step and the `jax.jit`
   step called from Python; and the device time of one step: the sum of its kernels'
   durations (torch.profiler's CUDA activity, which sees every kernel of the process).
3. Preparing the largest box (both numberings): `irfuse.mesh.Connectivity` and a Morton
   `reorder` on the host (compiled and by arrays) and on the GPU (`--mesh-only`: this alone;
   it runs without a GPU too).

`--cpu CUBES`: instead, the CPU backend's calls (`cpu_calls`): the explicit step and the P1
residual on 6 CUBES^3 tetrahedra, a call back to back against its kernels alone.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place
from assembly import LAMBDA, MU, elasticity  # noqa: E402
from peers import ROOT, torch_fns  # noqa: E402

EXAMPLES = os.path.join(ROOT, "examples")
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
DT = 1e-4


def back_to_back(fn, calls: int, sync) -> tuple[float, float]:
    """(host us, per call us) of `calls` calls of `fn` issued back to back, synced at the end."""
    for _ in range(20):
        fn()
    sync()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    t1 = time.perf_counter()
    sync()
    t2 = time.perf_counter()
    return (t1 - t0) / calls * 1e6, (t2 - t0) / calls * 1e6


def per_step(loop, steps: int, sync) -> float:
    """Microseconds a step of `loop(count)` over `steps` steps, after a warm-up loop of 70."""
    loop(70)
    sync()
    t0 = time.perf_counter()
    loop(steps)
    sync()
    return (time.perf_counter() - t0) / steps * 1e6


def mesh_arrays(torch, cubes: int):
    from irfuse.mesh import Connectivity, box_tetrahedra

    X, conn = box_tetrahedra(cubes)
    rng = np.random.default_rng(0)
    host = {"X": X.astype(np.float32), "u": (1e-3 * rng.standard_normal(X.shape)).astype(np.float32),
            "v": (1e-2 * rng.standard_normal(X.shape)).astype(np.float32),
            "m": rng.uniform(0.5, 1.5, len(X)).astype(np.float32), "dN": DN}
    t0 = time.perf_counter()
    prepared = Connectivity(conn, len(X))
    seconds = time.perf_counter() - t0
    return {k: torch.from_numpy(a).cuda() for k, a in host.items()}, prepared, conn, X, seconds


def step_peers(xp, scatter_into):
    """The explicit step in array code: u1 = u + dt v, r = K u1, v1 = v - dt r / m."""
    def step(X, u, v, m, conn):
        u1 = u + DT * v
        r = elasticity(xp, X, u1, conn, LAMBDA, MU, scatter_into)
        return u1, v - DT * r / m[:, None]
    return step


def kernel_seconds(torch, fn, count: int) -> float:
    """Seconds of GPU kernels per repetition of `fn` (run `count` times) as the profiler saw them."""
    from torch.profiler import ProfilerActivity, profile

    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA], acc_events=True) as prof:
        fn()
        torch.cuda.synchronize()
    total = 0.0
    for e in prof.events():
        t = getattr(e, "device_time", None)
        if t is None:
            t = getattr(e, "cuda_time", 0.0)
        if str(getattr(e, "device_type", "")).endswith("CUDA"):
            total += t
    return total * 1e-6 / count


def cpu_calls(cubes: int, calls: int) -> dict:
    """The explicit step on the CPU backend (NumPy arrays, `out=`, numbers for its scalars):
    microseconds a call back to back, a step of `irfuse.time_loop`, and its kernels alone (each
    pass's recorded run replayed on the same arrays), and the P1 residual likewise; both
    called without `out=`, and as loops written in Python make new arrays at every call (the
    step's outputs fed back; `u` updated by NumPy)."""
    import irfuse

    step = irfuse.compile(os.path.join(EXAMPLES, "mesh", "explicit_step.kas"), backend="cpu")
    res = irfuse.compile(os.path.join(EXAMPLES, "mesh", "p1_residual.kas"), backend="cpu")
    from irfuse.mesh import Connectivity, box_tetrahedra

    X, conn = box_tetrahedra(cubes)
    X = X.astype(np.float32)
    rng = np.random.default_rng(0)
    u = (1e-3 * rng.standard_normal(X.shape)).astype(np.float32)
    v, m = np.zeros_like(u), np.ones(len(X), np.float32)
    prepared = Connectivity(conn, len(X))
    r = np.empty_like(u)
    out = {}
    for name, program, call in (
            ("explicit step", step, lambda: step(X, u, v, m, prepared, DN, LAMBDA, MU, DT, out=outs)),
            ("P1 residual", res, lambda: res(X, u, prepared, DN, LAMBDA, MU, out=r))):
        outs = [np.empty_like(u), np.empty_like(u)]
        seconds = back_to_back(call, calls, lambda: None)[1]
        # (each pass's program the call ran: the fused stages' where the step has them)
        runs = [p._host_fast[0].bound for p in getattr(program, "fused_programs", None) or
                getattr(program, "programs", [program])]
        replays = [getattr(b, "mesh_run", b).recorded.replay for b in runs]
        kernels = back_to_back(lambda: [f() for f in replays], calls, lambda: None)[1]
        out[f"{name}, {len(conn):,} tets: call us"] = seconds
        out[f"{name}, {len(conn):,} tets: kernels us"] = kernels
        out[f"{name}, {len(conn):,} tets: call / kernels"] = seconds / kernels
    tets = f"{len(conn):,} tets"
    out[f"explicit step, {tets}: call without out= us"] = back_to_back(
        lambda: step(X, u, v, m, prepared, DN, LAMBDA, MU, DT), calls, lambda: None)[1]
    out[f"P1 residual, {tets}: call without out= us"] = back_to_back(
        lambda: res(X, u, prepared, DN, LAMBDA, MU), calls, lambda: None)[1]
    state = {"u": u, "v": v}

    def fed_back():  # (a time loop written in Python: each call's outputs the next one's inputs)
        state["u"], state["v"] = step(X, state["u"], state["v"], m, prepared, DN, LAMBDA, MU, DT)

    def new_u():  # (u updated with NumPy's operations: a new array at every call)
        state["u"] = state["u"] + np.float32(1e-9) * res(X, state["u"], prepared, DN, LAMBDA, MU).r
    out[f"explicit step, {tets}: u, v = step(X, u, v, ...) us/step"] = back_to_back(fed_back, calls, lambda: None)[1]
    state["u"] = u
    out[f"P1 residual, {tets}: u = u + h * res(X, u, ...).r us/step"] = back_to_back(new_u, calls, lambda: None)[1]
    t0 = time.perf_counter()
    irfuse.time_loop(step, calls, {"u": "u1", "v": "v1"}, X, u, v, m, prepared, DN, LAMBDA, MU, DT)
    out[f"explicit step, {tets}: time_loop us/step"] = (time.perf_counter() - t0) / calls * 1e6
    return out


def mesh_preparation(torch, cubes: int, out: dict) -> None:
    """3. Preparing the largest mesh: `Connectivity`, a Morton `reorder` and `renumber` on the
    host, by the compiled helper (`irfuse.mesh.native`) and by the array versions (PyTorch's
    CPU ops: `IRFUSE_MESH_NATIVE=0`), the best of two each; and, where there is a GPU, on it
    from tensors already there (the best of three after one, each synchronized); both
    numberings."""
    from irfuse.mesh import Connectivity, box_tetrahedra, native, renumber, reorder

    gpu = torch.cuda.is_available()

    def best(fn, runs: int = 3, warm: bool = True) -> float:
        if warm:
            fn()
        seconds = []
        for _ in range(runs):
            if gpu:
                torch.cuda.synchronize()
            t0 = time.perf_counter()
            fn()
            if gpu:
                torch.cuda.synchronize()
            seconds.append(time.perf_counter() - t0)
        return min(seconds)

    for numbering in ("structured", "random"):
        X, conn = box_tetrahedra(cubes, numbering=numbering)
        tets = f"{len(conn):,} tets, {numbering} numbering"
        for way, switch in (("compiled", "1"), ("arrays", "0")):
            os.environ[native.SWITCH] = switch
            out[f"Connectivity, {tets}, host {way} s"] = best(lambda: Connectivity(conn, len(X)), 2, False)
            out[f"reorder morton, {tets}, host {way} s"] = best(lambda: reorder(conn, X, method="morton"), 2, False)
        os.environ.pop(native.SWITCH)
        order = reorder(conn, X, method="morton")
        out[f"renumber, {tets}, host s"] = best(lambda: renumber(conn, *order, X), 2, False)
        if gpu:
            gc, gx = torch.from_numpy(conn).cuda(), torch.from_numpy(X).cuda()
            out[f"Connectivity, {tets}, GPU s"] = best(lambda: Connectivity(gc, len(X)))
            out[f"reorder morton, {tets}, GPU s"] = best(lambda: reorder(gc, gx, method="morton"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--calls", type=int, default=2000)
    ap.add_argument("--steps", type=int, default=640)
    ap.add_argument("--cubes", default="16,64,128")
    ap.add_argument("--skip-compile", action="store_true")
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--cpu", type=int, metavar="CUBES", help="only the CPU backend's calls, on a box of CUBES cubes")
    ap.add_argument("--json", default=None)
    ap.add_argument("--mesh-only", action="store_true", help="only 3., preparing the largest mesh")
    ap.add_argument("--skip-mesh-preparation", action="store_true", help="leave 3. out")
    args = ap.parse_args(argv)
    if args.cpu:
        results = {"cpu_calls": cpu_calls(args.cpu, args.calls)}
        for name, value in results["cpu_calls"].items():
            print(f"{name}: {value:.3g}")
        path = args.json or meta.result_path("cpu-backend")
        with open(path, "w") as f:
            meta.dump(results, f, indent=1)
        print(f"wrote {path}")
        return 0
    args.json = args.json or meta.result_path("calls")

    import torch
    from rich.console import Console
    from rich.table import Table

    import irfuse

    sync = torch.cuda.synchronize
    results: dict = {"host_per_call": {}, "time_loop": {}, "mesh_preparation": {}}
    if args.mesh_only:
        mesh_preparation(torch, max(int(c) for c in args.cubes.split(",")), results["mesh_preparation"])
        for name, value in results["mesh_preparation"].items():
            print(f"{name}: {value:.4f}")
        with open(args.json, "w") as f:
            meta.dump(results, f, indent=1)
        return 0
    calls = args.calls
    rng = np.random.default_rng(0)

    # 1. Host time per call
    rows = results["host_per_call"]
    n = 1024
    sync_prog = irfuse.compile(os.path.join(EXAMPLES, "synctest.kas"), backend="cuda")
    A = torch.from_numpy(rng.random((n, 3, 3), dtype=np.float32)).cuda()
    Fo = torch.empty_like(A)
    rows["SyncTest, out="] = back_to_back(lambda: sync_prog(A, out=Fo), calls, sync)
    rows["SyncTest, no out="] = back_to_back(lambda: sync_prog(A), calls, sync)
    nh = irfuse.compile(os.path.join(EXAMPLES, "neo_hookean.kas"), backend="cuda")
    F = torch.from_numpy((np.eye(3) + 0.1 * rng.standard_normal((n, 3, 3))).astype(np.float32)).cuda()
    mu_t, lam_t = torch.tensor(0.8, device="cuda"), torch.tensor(1.5, device="cuda")
    nh_out = [torch.empty_like(F), torch.empty_like(F), torch.empty(n, device="cuda")]
    rows["Neo-Hookean, out="] = back_to_back(lambda: nh(F, mu_t, lam_t, out=nh_out), calls, sync)
    rows["Neo-Hookean, no out="] = back_to_back(lambda: nh(F, mu_t, lam_t), calls, sync)
    k = iter(range(10**9))
    rows["Neo-Hookean, out=, mu a changing Python float"] = back_to_back(
        lambda: nh(F, 0.8 + 1e-6 * (next(k) % 7), 1.5, out=nh_out), calls, sync)
    energy = irfuse.compile(os.path.join(EXAMPLES, "strain_energy.kas"), backend="cuda")
    e_in = {name: torch.from_numpy(rng.standard_normal((n, *shape)).astype(np.float32) * 0.1 +
                                   (np.eye(3, dtype=np.float32) if shape == (3, 3) else 0)).cuda()
            if name not in energy.uniform else torch.from_numpy(
                np.asarray(rng.uniform(0.5, 1.5, shape), dtype=np.float32)).cuda()
            for name, shape in ((nm, energy.shapes[nm]) for nm in energy.inputs)}
    e_out = [torch.empty(energy.shapes[o] if o in energy.uniform else (n, *energy.shapes[o]), device="cuda")
             for o in energy.outputs]
    rows["StrainEnergy (a sum), out="] = back_to_back(lambda: energy(**e_in, out=e_out), calls, sync)
    rows["StrainEnergy (a sum), no out="] = back_to_back(lambda: energy(**e_in), calls, sync)

    t, prepared, conn, X, _ = mesh_arrays(torch, 16)
    res = irfuse.compile(os.path.join(EXAMPLES, "mesh", "p1_residual.kas"), backend="cuda")
    r_out = torch.empty_like(t["u"])
    lam32, mu32 = torch.tensor(LAMBDA, device="cuda"), torch.tensor(MU, device="cuda")
    rows["P1 residual 24,576 tets, Connectivity, out="] = back_to_back(
        lambda: res(t["X"], t["u"], prepared, t["dN"], lam32, mu32, out=r_out), calls, sync)
    rows["P1 residual 24,576 tets, Connectivity, no out="] = back_to_back(
        lambda: res(t["X"], t["u"], prepared, t["dN"], lam32, mu32), calls, sync)
    state = {"u": t["u"].clone()}

    def p1_on_a_new_u():  # (a loop updating u with the array library's operations: a new u each call)
        r = res(t["X"], state["u"], prepared, t["dN"], lam32, mu32).r
        state["u"] = torch.add(state["u"], r, alpha=1e-9)
    rows["P1 residual 24,576 tets, a new u each call, no out=, with u = torch.add(u, r)"] = back_to_back(
        p1_on_a_new_u, calls, sync)
    rows["torch.add(u, r) alone (that loop's update)"] = back_to_back(
        lambda: torch.add(t["u"], r_out, alpha=1e-9), calls, sync)
    step = irfuse.compile(os.path.join(EXAMPLES, "mesh", "explicit_step.kas"), backend="cuda")
    s_out = [torch.empty_like(t["u"]), torch.empty_like(t["u"])]
    dt_t = torch.tensor(DT, device="cuda")
    rows["explicit step 24,576 tets, out="] = back_to_back(
        lambda: step(t["X"], t["u"], t["v"], t["m"], prepared, t["dN"], lam32, mu32, dt_t, out=s_out), calls, sync)
    rows["explicit step 24,576 tets, no out="] = back_to_back(
        lambda: step(t["X"], t["u"], t["v"], t["m"], prepared, t["dN"], lam32, mu32, dt_t), calls, sync)
    rows["explicit step 24,576 tets, out=, dt a changing Python float"] = back_to_back(
        lambda: step(t["X"], t["u"], t["v"], t["m"], prepared, t["dN"], LAMBDA, MU, DT * (1 + (next(k) % 3)),
                     out=s_out), calls, sync)

    # peers
    x = torch.zeros(1, device="cuda")
    g = torch.cuda.CUDAGraph()
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        x.add_(1)
    torch.cuda.current_stream().wait_stream(s)
    with torch.cuda.graph(g):
        x.add_(1)
    rows["floor: bare CUDA graph replay (torch)"] = back_to_back(g.replay, calls, sync)
    rows["floor of a call without out=: torch.empty, one output"] = back_to_back(
        lambda: torch.empty((n, 3, 3), device="cuda"), calls, sync)
    synctest = torch_fns()["SyncTest"]
    ct = torch.from_numpy(conn.astype(np.int64)).cuda()

    def index_add(f, c):
        return torch.zeros((len(X), 3), dtype=f.dtype, device=f.device).index_add_(0, c.reshape(-1), f.reshape(-1, 3))
    torch_step = step_peers(torch, index_add)
    rows["torch eager SyncTest"] = back_to_back(lambda: synctest(A), calls, sync)
    rows["torch eager explicit step 24,576 tets"] = back_to_back(
        lambda: torch_step(t["X"], t["u"], t["v"], t["m"], ct), calls // 4, sync)
    if not args.skip_compile:
        for mode in ("default", "reduce-overhead"):
            c_sync = torch.compile(synctest, mode=mode)
            c_step = torch.compile(torch_step, mode=mode)
            rows[f"torch.compile({mode}) SyncTest"] = back_to_back(lambda: c_sync(A), calls, sync)
            rows[f"torch.compile({mode}) explicit step 24,576 tets"] = back_to_back(
                lambda: c_step(t["X"], t["u"], t["v"], t["m"], ct), calls, sync)
    if not args.skip_jax:
        import jax
        import jax.numpy as jnp

        def at_add(f, c):
            return jnp.zeros((len(X), 3), f.dtype).at[c.reshape(-1)].add(f.reshape(-1, 3))
        j_sync = jax.jit(lambda a: (a + a + a + a + a,))
        j_step = jax.jit(step_peers(jnp, at_add))
        jA = jnp.asarray(A.cpu().numpy())
        jt = {key: jnp.asarray(t[key].cpu().numpy()) for key in ("X", "u", "v", "m")}
        jc = jnp.asarray(conn.astype(np.int32))
        jsync = lambda: jax.block_until_ready(j_sync(jA))  # noqa: E731
        rows["jax.jit SyncTest"] = back_to_back(lambda: j_sync(jA), calls, jsync)
        rows["jax.jit explicit step 24,576 tets"] = back_to_back(
            lambda: j_step(jt["X"], jt["u"], jt["v"], jt["m"], jc), calls, jsync)

    console = Console()
    table = Table(title="Host time per call, back to back (PyTorch CUDA tensors)")
    table.add_column("call")
    table.add_column("host us", justify="right")
    table.add_column("per call us", justify="right")
    for name, (host, whole) in rows.items():
        table.add_row(name, f"{host:.1f}", f"{whole:.1f}")
    console.print(table)

    # 2. Time loops
    loops = results["time_loop"]
    for cubes in [int(c) for c in args.cubes.split(",")]:
        tets = 6 * cubes**3
        t, prepared, conn, X, conn_seconds = mesh_arrays(torch, cubes)
        row = loops[f"{tets:,} tets"] = {"Connectivity seconds (host)": conn_seconds}
        steps = args.steps

        def loop(count):
            return irfuse.time_loop(step, count, {"u": "u1", "v": "v1"}, X=t["X"], u=t["u"], v=t["v"], m=t["m"],
                                    conn=prepared, dN=t["dN"], lam=LAMBDA, mu=MU, dt=DT)
        def python_loop(count):
            u, v = t["u"], t["v"]
            for _ in range(count):
                u, v = step(t["X"], u, v, t["m"], prepared, t["dN"], LAMBDA, MU, DT)
            return u
        row["irfuse.time_loop us/step"] = per_step(loop, steps, sync)
        # The same loop with the passes run one by one (the node pass after the elements a
        # kernel of its own, reading the scatter's sums from memory): what the fused stages save.
        from irfuse.api.staged_programs import StagedProgram
        apart = StagedProgram(step.artifact, "cuda", [])
        apart.fused_programs = None
        row["irfuse.time_loop, passes one by one us/step"] = per_step(
            lambda count: irfuse.time_loop(apart, count, {"u": "u1", "v": "v1"}, X=t["X"], u=t["u"], v=t["v"],
                                           m=t["m"], conn=prepared, dN=t["dN"], lam=LAMBDA, mu=MU, dt=DT), steps, sync)
        apart.close()
        # (the kernels of steps called from Python: in the loop's graph a kernel's blocks start
        # while the one before it ends, so their durations overlap and their sum is longer)
        row["irfuse step kernels us/step (profiler)"] = kernel_seconds(torch, lambda: python_loop(70), 70) * 1e6
        row["irfuse step called from Python us/step"] = per_step(python_loop, steps, sync)
        if not args.skip_jax:
            import jax
            import jax.numpy as jnp

            def at_add_m(f, c, nodes=len(X)):
                return jnp.zeros((nodes, 3), f.dtype).at[c.reshape(-1)].add(f.reshape(-1, 3))
            body = step_peers(jnp, at_add_m)
            jt = {key: jnp.asarray(t[key].cpu().numpy()) for key in ("X", "u", "v", "m")}
            jc = jnp.asarray(conn.astype(np.int32))

            @jax.jit
            def fori(X, u, v, m, c):
                return jax.lax.fori_loop(0, steps, lambda i, uv: body(X, uv[0], uv[1], m, c), (u, v))
            j_step = jax.jit(body)
            jax.block_until_ready(fori(jt["X"], jt["u"], jt["v"], jt["m"], jc))
            t0 = time.perf_counter()
            jax.block_until_ready(fori(jt["X"], jt["u"], jt["v"], jt["m"], jc))
            row["jax.lax.fori_loop us/step"] = (time.perf_counter() - t0) / steps * 1e6
            uv = (jt["u"], jt["v"])
            uv = j_step(jt["X"], *uv, jt["m"], jc)
            jax.block_until_ready(uv)
            t0 = time.perf_counter()
            for _ in range(steps):
                uv = j_step(jt["X"], *uv, jt["m"], jc)
            jax.block_until_ready(uv)
            row["jax.jit step called from Python us/step"] = (time.perf_counter() - t0) / steps * 1e6
            ju = np.asarray(fori(jt["X"], jt["u"], jt["v"], jt["m"], jc)[0])
            iu = loop(steps).u1.cpu().numpy()
            row["largest |u| difference, irfuse vs jax (relative)"] = float(np.abs(iu - ju).max() / np.abs(ju).max())
        row["irfuse.time_loop / step kernels"] = row["irfuse.time_loop us/step"] / \
            row["irfuse step kernels us/step (profiler)"]
        r_out = torch.empty_like(t["u"])
        res(t["X"], t["u"], prepared, t["dN"], LAMBDA, MU, out=r_out)  # (its first call uploads the scatter order)
        row["P1 residual alone, its kernels us (profiler)"] = kernel_seconds(
            torch, lambda: [res(t["X"], t["u"], prepared, t["dN"], LAMBDA, MU, out=r_out) for _ in range(70)], 70) * 1e6
        row["irfuse.time_loop / P1 residual alone"] = row["irfuse.time_loop us/step"] / \
            row["P1 residual alone, its kernels us (profiler)"]
        if "jax.lax.fori_loop us/step" in row:
            row["jax.lax.fori_loop / irfuse.time_loop"] = row["jax.lax.fori_loop us/step"] / \
                row["irfuse.time_loop us/step"]

    if not args.skip_mesh_preparation:
        mesh_preparation(torch, max(int(c) for c in args.cubes.split(",")), results["mesh_preparation"])

    for size, row in loops.items():
        table = Table(title=f"Explicit step as a time loop, {size}")
        table.add_column("what")
        table.add_column("value", justify="right")
        for name, value in row.items():
            table.add_row(name, f"{value:.4g}")
        console.print(table)
    for name, value in results["mesh_preparation"].items():
        console.print(f"{name}: {value:.4f}")
    os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
    with open(args.json, "w") as f:
        meta.dump(results, f, indent=1)
    print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
