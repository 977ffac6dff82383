"""Batch-wide values on the GPU: programs with a shared parameter and a reduction over the batch,
in irfuse, PyTorch (eager: library calls in sequence; torch.compile) and JAX (jax.jit), in one run.

    python benchmarks/reductions.py [--n 8388608] [--repeat 50] [--rounds 5] [--skip-max-autotune]
                                    [--skip-jax] [--json reductions.json]

Workloads: `examples/strain_energy.kas` (a shared 6x6 stiffness matrix, the energy of every
element summed), `examples/cfl_step.kas` (the batch maximum of a per-element speed, a time
step computed from it, every element moved by it: a reduction, a global barrier, a kernel
after it) and `benchmarks/programs/chain_sum.kas` (a fused chain whose scalar result is only
summed). Same random float32 data for every contender, arrays of structures. irfuse runs its
default plan (no tuning). Effective bandwidth = per-element inputs read once + per-element
outputs written once (a uniform value's bytes are negligible), as a fraction of the
device-to-device copy bandwidth measured in the same run; every contender's outputs are
checked against the float64 NumPy reference (a sum against its summation-error allowance).
irfuse's results are also replayed `--determinism` times (default 20): the reduced values
must be the same bits every time. The row "irfuse: combine kernel alone" times the finishing
step of the reduction by itself (the block partials combined by one small kernel).
"""

from __future__ import annotations

import argparse
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import in_context, interleaved_medians, jax_sampler, peer_check, torch_sampler  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {
    "StrainEnergy": os.path.join(ROOT, "examples", "strain_energy.kas"),
    "CflStep": os.path.join(ROOT, "examples", "cfl_step.kas"),
    "ChainSum": os.path.join(ROOT, "benchmarks", "programs", "chain_sum.kas"),
}


def array_fns(xp):
    """The workloads with an array module (torch or jax.numpy): library calls in sequence."""
    def strain_energy(eps, vol, C):
        sig = eps @ C.T
        e = (eps * sig).sum(-1) * vol * 0.5
        return sig, e, e.sum()

    def cfl_step(x, v, cfl):
        vmax = xp.sqrt((v * v).sum(-1)).max()
        dt = cfl / vmax
        return x + v * dt, dt

    def chain_sum(A, B, c):
        v = ((A @ B) @ c[..., None])[..., 0]
        return (xp.sqrt((v * v).sum(-1)).sum(),)

    return {"StrainEnergy": strain_energy, "CflStep": cfl_step, "ChainSum": chain_sum}


def combine_sampler(dev, plan, rec, n: int):
    """One timing of the plan's first combine kernel alone, on the partials of the run."""
    from irfuse.dialects import fuse

    combine = next(op for op in plan.program.walk() if isinstance(op, fuse.CombineOp))
    infos = {k.name: k for k in plan.kernels}
    parts = infos[combine.partials.owner.kernel_name].blocks(n)
    size = combine.res.type.size
    partials = dev.drv.mem_alloc(max(4, parts * size * plan.itemsize))
    out = dev.drv.mem_alloc(max(4, size * plan.itemsize))
    launch = dev.launcher(combine.kernel_name, [partials, out], parts)

    def once() -> float:
        start, end = dev.drv.Event(), dev.drv.Event()
        start.record()
        launch()
        end.record()
        end.synchronize()
        return end.time_since(start) / 1e3
    return once, (partials, out), parts


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=8_388_608)
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--determinism", type=int, default=20, help="replays whose reduced values must agree bit for bit")
    ap.add_argument("--skip-max-autotune", action="store_true")
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--json", default="reductions.json")
    args = ap.parse_args(argv)

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import torch
    from rich.console import Console
    from rich.table import Table

    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import effective_bytes, random_inputs, run_references, uniform_outputs
    from irfuse.verification.verify import check_outputs

    console = Console(width=200)
    tfns = array_fns(torch)
    jfns = None
    if not args.skip_jax:
        import jax.numpy as jnp
        jfns = array_fns(jnp)
    rows, copy_bw = [], None
    for wl in args.workloads:
        plan, _ = compile_program(WORKLOADS[wl], None, "f32")
        prog = plan.reference_program
        inputs = random_inputs(prog, args.n, 1, np.float32)
        nbytes = effective_bytes(prog, args.n, 4)
        dev = CudaDevice(plan)
        popped = False
        held = ()
        try:
            if copy_bw is None:
                copy_bw = measure_copy_bandwidth(dev.drv)
            rec = Executor(plan, dev).prepare(inputs, args.n)
            rec.replay()
            first = rec.outputs()
            reference = run_references(prog, inputs, "f32", args.n, plan.sum_by)
            checks = check_outputs(first, reference, "f32")
            ok = all(c.ok for c in checks)
            reduced = sorted(uniform_outputs(prog))
            same_bits = True
            for _ in range(args.determinism):
                rec.replay()
                again = rec.outputs()
                same_bits &= all(np.array_equal(again[k], first[k]) for k in reduced)
            samplers = {"irfuse": in_context(dev, lambda: rec.time_once())}
            combine_once, held, parts = combine_sampler(dev, plan, rec, args.n)
            samplers["irfuse: combine kernel alone"] = in_context(dev, combine_once)
            dev.drv.Context.pop()
            popped = True
            targs = [torch.from_numpy(np.array(inputs[name], order="C")).cuda() for name in prog.inputs]  # 0-d stays 0-d
            peers = {"torch eager (library calls)": tfns[wl], "torch.compile": torch.compile(tfns[wl])}
            if not args.skip_max_autotune:
                peers["torch.compile max-autotune-no-cudagraphs"] = torch.compile(
                    tfns[wl], mode="max-autotune-no-cudagraphs")
            peer_checks = {}
            for k, fn in peers.items():
                samplers[k] = torch_sampler(fn, targs)
                peer_checks[k] = peer_check(fn(*targs), prog.outputs, reference)
            if jfns is not None:
                import jax

                jargs = [jax.device_put(inputs[name]) for name in prog.inputs]
                jfn = jax.jit(jfns[wl])
                samplers["jax.jit"] = jax_sampler(jfn, jargs)
                peer_checks["jax.jit"] = peer_check(jfn(*jargs), prog.outputs, reference)
            # The combine kernel alone is timed with irfuse's context, like irfuse.
            times = interleaved_medians(samplers, args.repeat, args.rounds)
        finally:
            if popped:
                dev.context.push()
            for buf in held:
                buf.free()
            dev.close()
        contenders = {k: v for k, v in times.items() if not k.startswith("irfuse")}
        best_peer = min(contenders, key=contenders.get)
        rows.append({"workload": wl, "n": args.n, "bytes": nbytes, "verified": ok,
                     "checks": [c.describe() for c in checks], "bit_identical_replays": args.determinism,
                     "bit_identical": bool(same_bits), "kernels": [k.name for k in plan.kernels],
                     "combine_parts": parts, "times_s": times,
                     "fraction_of_copy": {k: nbytes / v / copy_bw for k, v in times.items()},
                     "best_peer": best_peer, "speedup_over_best_peer": times[best_peer] / times["irfuse"],
                     "peer_checks": peer_checks})
        del samplers, targs
        torch.cuda.empty_cache()
    table = Table(title=f"{torch.cuda.get_device_name()}: n = {args.n}, float32, one run per timing; copy "
                        f"bandwidth {copy_bw / 1e9:.0f} GB/s (read + write)")
    for col in ("workload", "contender", "ms", "GB/s effective", "of copy", "irfuse speedup"):
        table.add_column(col)
    for r in rows:
        for k, t in sorted(r["times_s"].items(), key=lambda kv: kv[1]):
            table.add_row(r["workload"], k, f"{t * 1e3:.3f}", f"{r['bytes'] / t / 1e9:.0f}",
                          f"{r['fraction_of_copy'][k]:.1%}",
                          "" if k.startswith("irfuse") else f"{t / r['times_s']['irfuse']:.2f}x")
    console.print(table)
    for r in rows:
        console.print(f"{r['workload']}: verified={r['verified']} ({'; '.join(r['checks'])}); reduced values "
                      f"bit-identical over {r['bit_identical_replays']} replays: {r['bit_identical']}; kernels "
                      f"{r['kernels']}; {r['combine_parts']} partials per word; best peer {r['best_peer']}, "
                      f"irfuse {r['speedup_over_best_peer']:.2f}x faster")
        console.print("  peers against the reference: " + "; ".join(f"{k} {v}" for k, v in r["peer_checks"].items()))
    with open(args.json, "w") as f:
        json.dump({"gpu": torch.cuda.get_device_name(), "copy_bandwidth_Bps": copy_bw, "repeat": args.repeat,
                   "rounds": args.rounds, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
