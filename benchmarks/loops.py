"""Loops inside kernels against the same loops run from the host, a hand-written kernel and peers.

    python benchmarks/loops.py [--n 4194304] [--rounds 5] [--repeat 30] [--profile h100]
                               [--skip-torch-compile] [--skip-unrolled PROGRAMS] [--torch-matmul]
                               [--with-eager] [--programs P,...] [--json loops.json]

Three iterative programs from `examples/`, float32, arrays of structures (N, *shape), the
same random data for every contender:

- power_iteration.kas: 100 steps of x <- A x / |A x|;
- precession.kas: W = A - A^T, then 300 forward-Euler steps of dx/dt = W x projected back
  onto the unit sphere, and of dp/dt = x;
- rotation_loop.kas: 4 steps of R <- R Q + Q, v = R x, then |v| (memory-bound).

Contenders: irfuse's default plan (the loop inside one kernel); irfuse with every loop on the
host (`fuse-partition{loops=host}`: the body's kernels launched once per iteration, one CUDA
graph per run); a hand-written CUDA kernel with the loop inside (one thread per element,
every value in registers, compiled by the same NVRTC with the same options); `jax.jit` with
`lax.fori_loop` (where JAX is installed); `torch.compile` of the PyTorch code with a Python
loop (Dynamo unrolls it into one graph; `--skip-unrolled` leaves it out where compiling takes
too long), `torch.compile` of one step called from a Python loop (the way a long time loop is
usually compiled), and with `--with-eager` PyTorch eager. The PyTorch code writes the 3x3
products as broadcast products and sums (`(A * x[:, None, :]).sum(-1)`), which Inductor fuses
with the rest; written with `@`, each step's product is a batched cuBLAS call that nothing
fuses (`--torch-matmul` times that form). Every contender is checked against the float64
NumPy reference on a sample of elements. Times are device times of 10 runs back to back
(CUDA events; JAX: the host clock around dispatch and completion), medians over rounds that
visit every contender in turn. Ratios: irfuse's default plan over the hand-written kernel
(the target is at most 1.15), each peer over irfuse, and the effective bandwidth (inputs read
once, outputs written once) as a fraction of the device-to-device copy measured in the run.
The cost model's predicted time of each irfuse plan (for the profile planned for: a profile
saved by `irfuse calibrate` on this GPU, else the built-in one) is printed beside it.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import ROOT, in_context, interleaved_medians, jax_sampler, peer_check, torch_sampler  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

PROGRAMS = {
    "power_iteration": ("power_iteration.kas", ["A", "x"], ["x"]),
    "precession": ("precession.kas", ["A", "x", "p", "h"], ["x", "p"]),
    "rotation_loop": ("rotation_loop.kas", ["R", "Q", "x"], ["R", "n"]),
}

# One thread per element, every value in registers, the loop inside; the same arithmetic as the
# programs' ops (IEEE square roots and divisions, as irfuse's kernels compile them).
HAND = {
    "power_iteration": r"""
extern "C" __global__ void __launch_bounds__(128) hand(const float* __restrict__ A, const float* __restrict__ X,
                                                      float* __restrict__ out, long long n) {
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  float a[9], x[3];
  for (int k = 0; k < 9; ++k) a[k] = A[e * 9 + k];
  for (int k = 0; k < 3; ++k) x[k] = X[e * 3 + k];
  for (int it = 0; it < 100; ++it) {
    float y[3];
    for (int i = 0; i < 3; ++i) y[i] = a[3 * i] * x[0] + a[3 * i + 1] * x[1] + a[3 * i + 2] * x[2];
    const float r = 1.0f / sqrtf(y[0] * y[0] + y[1] * y[1] + y[2] * y[2]);
    for (int i = 0; i < 3; ++i) x[i] = y[i] * r;
  }
  for (int k = 0; k < 3; ++k) out[e * 3 + k] = x[k];
}
""",
    "precession": r"""
extern "C" __global__ void __launch_bounds__(128) hand(const float* __restrict__ A, const float* __restrict__ X,
                                                      const float* __restrict__ P, const float* __restrict__ H,
                                                      float* __restrict__ xo, float* __restrict__ po, long long n) {
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  float a[9], w[9], x[3], p[3];
  for (int k = 0; k < 9; ++k) a[k] = A[e * 9 + k];
  for (int i = 0; i < 3; ++i) for (int j = 0; j < 3; ++j) w[3 * i + j] = a[3 * i + j] - a[3 * j + i];
  for (int k = 0; k < 3; ++k) { x[k] = X[e * 3 + k]; p[k] = P[e * 3 + k]; }
  const float h = H[e];
  for (int it = 0; it < 300; ++it) {
    float y[3];
    for (int i = 0; i < 3; ++i) y[i] = w[3 * i] * x[0] + w[3 * i + 1] * x[1] + w[3 * i + 2] * x[2];
    for (int i = 0; i < 3; ++i) x[i] = x[i] + y[i] * h;
    const float r = 1.0f / sqrtf(x[0] * x[0] + x[1] * x[1] + x[2] * x[2]);
    for (int i = 0; i < 3; ++i) { x[i] = x[i] * r; p[i] = p[i] + x[i] * h; }
  }
  for (int k = 0; k < 3; ++k) { xo[e * 3 + k] = x[k]; po[e * 3 + k] = p[k]; }
}
""",
    "rotation_loop": r"""
extern "C" __global__ void __launch_bounds__(128) hand(const float* __restrict__ RR, const float* __restrict__ QQ,
                                                      const float* __restrict__ X, float* __restrict__ ro,
                                                      float* __restrict__ no, long long n) {
  const long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  float r[9], q[9], x[3], v[3];
  for (int k = 0; k < 9; ++k) { r[k] = RR[e * 9 + k]; q[k] = QQ[e * 9 + k]; }
  for (int k = 0; k < 3; ++k) x[k] = X[e * 3 + k];
  for (int it = 0; it < 4; ++it) {
    float t[9];
    for (int i = 0; i < 3; ++i) for (int j = 0; j < 3; ++j)
      t[3 * i + j] = r[3 * i] * q[j] + r[3 * i + 1] * q[3 + j] + r[3 * i + 2] * q[6 + j];
    for (int k = 0; k < 9; ++k) r[k] = t[k] + q[k];
    for (int i = 0; i < 3; ++i) v[i] = r[3 * i] * x[0] + r[3 * i + 1] * x[1] + r[3 * i + 2] * x[2];
  }
  for (int k = 0; k < 9; ++k) ro[e * 9 + k] = r[k];
  no[e] = sqrtf(v[0] * v[0] + v[1] * v[1] + v[2] * v[2]);
}
""",
}


def torch_programs(matmul: bool = False):
    """Each program as a whole (the loop in Python) and as (setup, step, steps, finish), the
    pieces a host loop around a compiled step needs."""
    import torch

    if matmul:
        def mv(M, v):
            return (M @ v.unsqueeze(-1)).squeeze(-1)

        def mm(M, N):
            return M @ N
    else:
        def mv(M, v):
            return (M * v[:, None, :]).sum(-1)

        def mm(M, N):
            return (M[:, :, :, None] * N[:, None, :, :]).sum(2)

    def normalize(x):
        return x * (1 / torch.sqrt((x * x).sum(-1)))[:, None]

    def power_step(A, x):
        return A, normalize(mv(A, x))

    def precession_step(W, x, p, h):
        x = normalize(x + mv(W, x) * h[:, None])
        return W, x, p + x * h[:, None], h

    def rotation_step(R, Q, x):
        return mm(R, Q) + Q, Q, x

    steps = {
        "power_iteration": (lambda A, x: (A, x), power_step, 100, lambda A, x: (x,)),
        "precession": (lambda A, x, p, h: (A - A.transpose(1, 2), x, p, h), precession_step, 300,
                       lambda W, x, p, h: (x, p)),
        "rotation_loop": (lambda R, Q, x: (R, Q, x), rotation_step, 4,
                          lambda R, Q, x: (R, torch.sqrt((mv(R, x) ** 2).sum(-1)))),
    }

    def whole(setup, step, count, finish):
        def program(*args):
            state = setup(*args)
            for _ in range(count):
                state = step(*state)
            return finish(*state)
        return program

    return {k: whole(*v) for k, v in steps.items()}, steps


def compiled_step_program(setup, step, count, finish):
    """torch.compile of one step, called `count` times from Python."""
    import torch

    step_c = torch.compile(step)

    def program(*args):
        state = setup(*args)
        for _ in range(count):
            state = step_c(*state)
        return finish(*state)
    return program


def predicted_seconds(path: str, n: int, profile: str, loops: str) -> float:
    """The cost model's time for the best plan, loops inside kernels allowed or not."""
    from irfuse.driver.compile import run_pipeline
    from irfuse.frontend.irgen import compile_file
    from irfuse.passes.fuse_partition import FusePartition
    from irfuse.verification.reference import find_program

    module = run_pipeline(compile_file(path).module, "kas-dce")
    _, plans, _ = FusePartition(n=n, profile=profile, loops=loops).search(find_program(module), 4)
    return plans[0].predicted_time


def jax_programs():
    import jax
    import jax.numpy as jnp
    from jax import lax

    def power_iteration(A, x):
        def step(_, x):
            x = jnp.einsum("nij,nj->ni", A, x)
            return x * (1 / jnp.sqrt((x * x).sum(-1)))[:, None]
        return (lax.fori_loop(0, 100, step, x),)

    def precession(A, x, p, h):
        W = A - jnp.swapaxes(A, 1, 2)

        def step(_, state):
            x, p = state
            x = x + jnp.einsum("nij,nj->ni", W, x) * h[:, None]
            x = x * (1 / jnp.sqrt((x * x).sum(-1)))[:, None]
            return x, p + x * h[:, None]
        return lax.fori_loop(0, 300, step, (x, p))

    def rotation_loop(R, Q, x):
        def step(_, state):
            R, _ = state
            R = R @ Q + Q
            return R, jnp.einsum("nij,nj->ni", R, x)
        R, v = lax.fori_loop(0, 4, step, (R, jnp.zeros_like(x)))
        return (R, jnp.sqrt((v * v).sum(-1)))

    return {k: jax.jit(f) for k, f in
            {"power_iteration": power_iteration, "precession": precession, "rotation_loop": rotation_loop}.items()}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--profile", default=None, help="device profile the search plans for (default: the GPU's)")
    ap.add_argument("--skip-torch-compile", action="store_true")
    ap.add_argument("--skip-unrolled", default="", metavar="PROGRAMS",
                    help="programs (comma-separated) whose whole-loop torch.compile is left out")
    ap.add_argument("--torch-matmul", action="store_true", help="PyTorch products written with @ (batched cuBLAS)")
    ap.add_argument("--with-eager", action="store_true", help="also PyTorch eager (seconds per run: slow to time)")
    ap.add_argument("--programs", default=",".join(PROGRAMS), help="which programs, comma-separated")
    ap.add_argument("--json", default=meta.result_path("loops"))
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from irfuse.backend.nvrtc import compile_cubin
    from irfuse.driver.compile import PlanningOptions, compile_program
    from irfuse.passes.registry import partition_pipeline
    from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import effective_bytes, random_inputs, run_references
    from irfuse.verification.verify import check_outputs, subset

    console = Console(width=200)
    try:
        import torch
        tfns, tsteps = torch_programs(args.torch_matmul)
    except ImportError:
        torch, tfns, tsteps = None, {}, {}
    try:
        jfns = jax_programs()
    except ImportError:
        jfns = {}
    rows, copy_bw, gpu = [], None, None
    for name in args.programs.split(","):
        if name not in PROGRAMS:
            ap.error(f"unknown program '{name}' (known: {', '.join(PROGRAMS)})")
        file, input_names, output_names = PROGRAMS[name]
        console.print(f"{name}: compiling and checking the contenders", highlight=False)
        path = os.path.join(ROOT, "examples", file)
        row: dict = {"program": name, "contenders": {}}
        samplers: dict = {}
        devices = []
        profile = args.profile
        host_inputs = index = reference = None
        for label, pipeline in (("irfuse (default plan)", None),
                                ("irfuse (loop on the host)", "host")):
            t0 = time.perf_counter()
            if profile is None:
                import pycuda.driver as cuda
                cuda.init()
                profile = "h200" if "H200" in cuda.Device(0).name() else "h100"
            planning = PlanningOptions(n=args.n, profile=profile)
            text = None if pipeline is None else partition_pipeline(1, 0, 8, args.n, profile, loops="host")
            plan, _ = compile_program(path, text, "f32", planning=planning)
            compile_s = time.perf_counter() - t0
            dev = CudaDevice(plan)
            devices.append(dev)
            gpu = dev.gpu_name
            if copy_bw is None:
                copy_bw = measure_copy_bandwidth(dev.drv)
            ref = plan.reference_program
            if host_inputs is None:
                host_inputs = random_inputs(ref, args.n, 1, np.float32)
                index = np.arange(0, args.n, max(1, args.n // 20_000))
                reference = run_references(ref, subset(host_inputs, index), "f32")
                row["bytes"] = effective_bytes(ref, args.n, 4)
            rec = Executor(plan, dev).prepare(host_inputs, args.n)
            rec.replay()
            got = subset(rec.outputs(), index)
            checks = check_outputs(got, reference, "f32")
            row["contenders"][label] = {
                "verified": all(c.ok for c in checks), "compile_s": compile_s,
                "predicted_s": predicted_seconds(path, args.n, profile, "host" if pipeline else "auto"),
                "kernels": [f"{k.name} ({k.bx}x{k.by}, {plan.resources(k.name).registers} regs, "
                            f"{k.shared_words} shared words, {k.barriers} barriers)" for k in plan.kernels]}
            samplers[label] = in_context(dev, lambda rec=rec: rec.time_once(10))
        # The hand-written kernel, on irfuse's context and buffers of the same data.
        dev = devices[0]
        drv = dev.drv
        dev.context.push()
        cubin = compile_cubin(HAND[name], None)
        fn = drv.module_from_buffer(cubin.cubin).get_function("hand")
        ins = [drv.to_device(np.ascontiguousarray(host_inputs[k])) for k in input_names]
        shapes = {k: (args.n, *host_inputs_shape) for k, host_inputs_shape in
                  ((o, tuple(v.type.shape)) for o, v in zip(ref.outputs, ref.return_op.values))}
        outs = {k: drv.mem_alloc(int(np.prod(shapes[k])) * 4) for k in output_names}
        grid = (-(-args.n // 128), 1)

        def hand_once(fn=fn, ins=ins, outs=outs, grid=grid):
            start, stop = drv.Event(), drv.Event()
            start.record()
            for _ in range(10):
                fn(*ins, *outs.values(), np.int64(args.n), block=(128, 1, 1), grid=grid)
            stop.record()
            stop.synchronize()
            return stop.time_since(start) / 1e3 / 10
        hand_once()
        got = {k: drv.from_device(outs[k], shapes[k], np.float32) for k in output_names}
        drv.Context.pop()
        checks = check_outputs(subset(got, index), reference, "f32")
        row["contenders"]["hand-written kernel"] = {"verified": all(c.ok for c in checks)}
        samplers["hand-written kernel"] = in_context(dev, hand_once)
        if jfns:
            import jax.numpy as jnp
            jargs = [jnp.asarray(host_inputs[k]) for k in input_names]
            t0 = time.perf_counter()
            outs_j = jfns[name](*jargs)
            row["contenders"]["jax.jit + lax.fori_loop"] = {
                "verified": peer_check([np.asarray(o)[index] for o in outs_j], output_names, reference),
                "compile_s": time.perf_counter() - t0}
            samplers["jax.jit + lax.fori_loop"] = jax_sampler(jfns[name], jargs, back_to_back=10)
        else:
            row["contenders"]["jax.jit + lax.fori_loop"] = {"verified": "JAX is not installed"}
        if tfns:
            targs = [torch.from_numpy(host_inputs[k]).cuda() for k in input_names]
            peers = {"torch eager": tfns[name]} if args.with_eager else {}
            if not args.skip_torch_compile:
                if name not in args.skip_unrolled.split(","):
                    peers["torch.compile"] = torch.compile(tfns[name])
                peers["torch.compile (step, host loop)"] = compiled_step_program(*tsteps[name])
            for label, f in peers.items():
                t0 = time.perf_counter()
                outs_t = f(*targs)
                torch.cuda.synchronize()
                row["contenders"][label] = {
                    "verified": peer_check([o[torch.from_numpy(index).cuda()] for o in outs_t], output_names,
                                           reference),
                    "compile_s": time.perf_counter() - t0}
                samplers[label] = torch_sampler(f, targs, back_to_back=10)
        medians = interleaved_medians(samplers, args.repeat, args.rounds)
        base = medians["irfuse (default plan)"]
        for label, s in medians.items():
            c = row["contenders"][label]
            c["seconds"] = s
            c["of_copy"] = row["bytes"] / s / copy_bw
            c["vs_irfuse"] = s / base
        row["irfuse_over_hand"] = base / medians["hand-written kernel"]
        from irfuse.planner.cost import load_profile
        row["profile"] = load_profile(profile).to_json()  # what the predictions used
        rows.append(row)
        console.print(f"{name}: " + ", ".join(f"{k} {v * 1e3:.3f} ms" for k, v in medians.items()), highlight=False)
        with open(args.json, "w") as f:  # after every program: a run cut short keeps what it measured
            meta.dump({"gpu": gpu, "n": args.n, "copy_bandwidth_Bps": copy_bw, "rows": rows}, f, indent=1)
        for b in [*ins, *outs.values()]:
            b.free()
        for d in devices:
            d.close()

    t = Table(title=f"{gpu}: n = {args.n}, float32, 10 runs back to back, median of {args.repeat}; "
                    f"copy bandwidth {copy_bw / 1e9:.0f} GB/s")
    for col in ("program", "contender", "time per run", "predicted", "of copy", "time / irfuse default",
                "verified", "compile s"):
        t.add_column(col)
    for r in rows:
        for label, c in r["contenders"].items():
            t.add_row(r["program"], label, f"{c['seconds'] * 1e3:.3f} ms" if "seconds" in c else "-",
                      f"{c['predicted_s'] * 1e3:.3f} ms" if "predicted_s" in c else "-",
                      f"{c['of_copy']:.1%}" if "of_copy" in c else "-",
                      f"{c['vs_irfuse']:.2f}x" if "vs_irfuse" in c else "-", str(c["verified"]),
                      f"{c['compile_s']:.1f}" if "compile_s" in c else "-")
    console.print(t)
    for r in rows:
        console.print(f"{r['program']}: irfuse default / hand-written = {r['irfuse_over_hand']:.3f}; kernels: "
                      + "; ".join(r["contenders"]["irfuse (default plan)"]["kernels"]))
    with open(args.json, "w") as f:
        meta.dump({"gpu": gpu, "n": args.n, "copy_bandwidth_Bps": copy_bw, "rows": rows}, f, indent=1)
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
