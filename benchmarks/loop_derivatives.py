"""Reverse derivatives of programs with loops on the GPU: loops unrolled against loops taped
(a history of the carried values, checkpointed segments where it would be long), in one run.

    python benchmarks/loop_derivatives.py [--n 1048576] [--repeat 20] [--rounds 4]
                                          [--programs time_loop power precession]
                                          [--json loop_derivatives.json]

Programs (float32, per element, their gradient or vector-Jacobian product by every input):
- time_loop: 40 steps of x <- x + h tanh(A x), E = sum of x.x
  (`irfuse.testing.derivatives.TIME_LOOP`): the gradient of E by A, x and h; time_loop8, 16,
  24: the same in fewer steps;
- scalar_loop40, 60, 100: 40, 60, 100 steps of x <- x + h tanh(a x) carrying one scalar, E = sum
  of x^2: the gradient by x, a and h (many statements, few words live at once unrolled);
- rotation: `examples/rotation_loop.kas` (4 steps carrying a 3x3 matrix): the vjp by R, Q, x;
  rotation12, 20, 28: the same in more steps (few statements, many words live at once unrolled);
- power: `examples/power_iteration.kas` (100 steps of x <- A x / |A x|): the vjp by A and x;
- precession: `examples/precession.kas` (300 steps, two carried vectors): the vjp by A, x, p, h.
For each, `irfuse.grad`/`irfuse.vjp` with `loops="unroll"` and `loops="tape"` (and which of the
two `loops="auto"` builds, the same program text), each compiled
through `irfuse.compile` (its default plan; compile time measured), called on PyTorch tensors
with `out=`, every per-element output checked against the float64 reference of its own
program on the first 20,000 elements, and timed (CUDA events, medians, contenders in turns).
The bytes each must move (its per-element inputs and outputs) give a fraction of a
device-to-device copy of 1 GiB measured in the same run; these programs are bound by their
arithmetic, which is what unrolling and taping differ in (taping computes each iteration
again in the adjoint loop, a checkpointed segment twice).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import interleaved_medians, torch_sampler  # noqa: E402

from irfuse.testing.derivatives import SCALAR_LOOP, TIME_LOOP  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def programs() -> dict:
    def example(name):
        with open(os.path.join(ROOT, "examples", name)) as f:
            return f.read()
    return {"time_loop": (TIME_LOOP, "grad", ("A", "x", "h")),
            **{f"time_loop{k}": (TIME_LOOP.replace("loop 40", f"loop {k}"), "grad", ("A", "x", "h"))
               for k in (8, 16, 24)},
            **{f"scalar_loop{k}": (SCALAR_LOOP.replace("loop 40", f"loop {k}"), "grad", ("x", "a", "h"))
               for k in (40, 60, 100)},
            "rotation": (example("rotation_loop.kas"), "vjp", ("R", "Q", "x")),
            **{f"rotation{k}": (example("rotation_loop.kas").replace("loop 4", f"loop {k}"), "vjp", ("R", "Q", "x"))
               for k in (12, 20, 28)},
            "power": (example("power_iteration.kas"), "vjp", ("A", "x")),
            "precession": (example("precession.kas"), "vjp", ("A", "x", "p", "h"))}


def inputs(prog, n: int, rng) -> dict:
    out = {}
    for k in prog.inputs:
        shape = prog.shapes[k]
        if k == "h":
            out[k] = np.array(0.05, np.float32) if k in prog.uniform else np.full(n, 0.05, np.float32)
        elif k == "Q":
            out[k] = 0.5 * rng.uniform(-1, 1, (n, *shape)).astype(np.float32)
        elif k == "A":
            out[k] = (np.eye(3) + 0.3 * rng.uniform(-1, 1, (n, 3, 3))).astype(np.float32)
        else:
            out[k] = rng.uniform(-1, 1, (n, *shape)).astype(np.float32)
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_048_576)
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--programs", nargs="+", default=list(programs()))
    ap.add_argument("--modes", nargs="+", default=["unroll", "tape"])
    ap.add_argument("--json", default=meta.result_path("derivatives"))
    args = ap.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.table import Table

    import irfuse
    from irfuse.dialects.context import module_text
    from irfuse.runtime.cuda_device import measure_copy_bandwidth

    console = Console(width=200)
    torch.cuda.init()
    n = args.n
    rows = []
    copy_bw = None
    for name in args.programs:
        source, mode, wrt = programs()[name]
        samplers, checks, compile_s, kernels, nbytes, texts = {}, {}, {}, {}, 0, {}

        def derive(loops, source=source, mode=mode, wrt=wrt):
            return (irfuse.grad(source, of="E", wrt=wrt, loops=loops) if mode == "grad"
                    else irfuse.vjp(source, wrt=wrt, loops=loops))
        for loops in args.modes:
            t0 = time.perf_counter()
            module = derive(loops)
            texts[loops] = module_text(module)
            prog = irfuse.compile(module, backend="cuda", n=n, filename=f"{name}_{loops}.kas")
            compile_s[loops] = time.perf_counter() - t0
            kernels[loops] = len(prog.kernels)
            dev = prog.opened_device()
            if copy_bw is None:
                copy_bw = measure_copy_bandwidth(dev.drv)
            host = inputs(prog, n, np.random.default_rng(1))
            tensors = [torch.from_numpy(host[k]).cuda() for k in prog.inputs]
            first = prog(*tensors)  # (its outputs' shapes: the uniform ones hold one value)
            outs = [torch.empty_like(first[k]) for k in prog.outputs]
            prog(*tensors, out=outs)
            torch.cuda.synchronize()
            sample = {k: v if v.ndim == 0 else v[:20_000] for k, v in host.items()}
            checks[loops] = "ok" if prog.check(**sample).ok else "MISMATCH"
            nbytes = 4 * n * (sum(int(np.prod(prog.shapes[k])) for k in prog.inputs if host[k].ndim > 0)
                              + sum(int(np.prod(prog.shapes[k])) for k, o in zip(prog.outputs, outs) if o.ndim > 0))

            def call(*a, prog=prog, outs=outs):
                prog(*a, out=outs)
            samplers[loops] = torch_sampler(call, tensors)
        times = interleaved_medians(samplers, args.repeat, args.rounds)
        auto = module_text(derive("auto"))
        picked = next((k for k, t in texts.items() if t == auto), "neither")
        rows.append({"program": name, "n": n, "bytes": nbytes, "times_s": times, "checks": checks, "auto": picked,
                     "compile_s": compile_s, "kernels": kernels,
                     "fraction_of_copy": {k: nbytes / t / copy_bw for k, t in times.items()},
                     "tape_over_unroll": times["tape"] / times["unroll"] if len(times) == 2 else None})
        with open(args.json, "w") as f:
            meta.dump({"copy_bandwidth": copy_bw, "gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=1)

    table = Table(title=f"Reverse derivatives of loops, {torch.cuda.get_device_name()}, n = {n:,}, float32; "
                        f"copy {copy_bw / 1e9:.0f} GB/s")
    for col in ("program", "loops", "ms", "of copy", "compile s", "kernels", "check", "tape / unroll", "auto"):
        table.add_column(col)
    for r in rows:
        for loops in r["times_s"]:
            table.add_row(r["program"], loops, f"{r['times_s'][loops] * 1e3:.4f}",
                          f"{r['fraction_of_copy'][loops]:.1%}", f"{r['compile_s'][loops]:.1f}",
                          str(r["kernels"][loops]), r["checks"][loops],
                          f"{r['tape_over_unroll']:.2f}x" if loops == "tape" and r["tape_over_unroll"] else "",
                          "<-" if loops == r["auto"] else "")
    console.print(table)
    return 0


if __name__ == "__main__":
    sys.exit(main())
