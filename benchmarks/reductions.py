"""Batch-wide values on the GPU: programs with a shared parameter and a reduction over the batch,
in irfuse, PyTorch (eager: library calls in sequence; torch.compile) and JAX (jax.jit), in one run,
at several batch sizes.

    python benchmarks/reductions.py [--sizes 65536 1048576 4194304 16777216] [--repeat 30]
                                    [--rounds 3] [--workloads ...] [--skip-max-autotune]
                                    [--skip-jax] [--skip-cpu] [--json reductions.json]

Workloads: `examples/strain_energy.kas` (a shared 6x6 stiffness matrix, the energy of every
element summed), `examples/cfl_step.kas` (the batch maximum of a per-element speed, a time
step computed from it, every element moved by it: a reduction, a global barrier, a kernel
after it), `benchmarks/programs/chain_sum.kas` (a fused chain whose scalar result is only
summed) and `benchmarks/programs/norm_scale.kas` (a per-element vector scaled by the batch's
largest energy: a per-element value made before the reduction is needed after it). Same random
float32 data for every contender, arrays of structures. irfuse runs its default plan for each
batch size (the search told the size, no tuning).

Byte floors, from the compiled plan's host steps, per element:
- "recompute": what a run must move if every pass over the batch reads the inputs it needs
  and computes again what it needs (the passes of a run in chunks, `analysis.batch_passes`:
  each pass's per-element inputs read and its outputs written);
- "store": what irfuse's kernels move (each kernel's per-element arguments and results:
  a value a later pass needs written once and read once), which is the floor of storing
  such values where each pass over the batch is one kernel, as in every plan measured here.
"of floor" is the cheaper floor at the device-to-device copy bandwidth measured in the same
run, over the time. "of copy" counts per-element inputs read once and outputs written once
(a uniform value's bytes are negligible), which is below both floors where a pass must read a
value again (CflStep's v, NormScale's v or A and x).

Every contender's outputs are checked against the float64 NumPy reference (a sum against its
summation-error allowance). irfuse's results are also replayed `--determinism` times (default
20): every output must be the same bits every time; and the same plan is run on the CPU backend
(unless `--skip-cpu`), whose outputs must be the GPU's bits. The row "irfuse: combine kernel
alone" times the finishing step of the reduction by itself (the block partials combined by
one small kernel).

Variants of irfuse's default plan, in the same run (`--variants`, on by default): "combine
kernels" (`fuse-partition{finish=kernels}`: the partials combined by kernels of their own),
"last block" (`finish=last-block`: always by the reducing kernel's last block), and "plain
graph" (the default plan with every kernel of the captured graph launched normally, not as a
programmatic dependent launch).
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import in_context, interleaved_medians, jax_sampler, peer_check, torch_sampler  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKLOADS = {
    "StrainEnergy": os.path.join(ROOT, "examples", "strain_energy.kas"),
    "CflStep": os.path.join(ROOT, "examples", "cfl_step.kas"),
    "ChainSum": os.path.join(ROOT, "benchmarks", "programs", "chain_sum.kas"),
    "NormScale": os.path.join(ROOT, "benchmarks", "programs", "norm_scale.kas"),
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

    def norm_scale(A, C, x):
        v = (((A @ C) * 0.5) @ x[..., None])[..., 0]
        e = (v * x).sum(-1)
        return e.sum(), v * e.max()

    return {"StrainEnergy": strain_energy, "CflStep": cfl_step, "ChainSum": chain_sum, "NormScale": norm_scale}


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


def byte_floors(host, n: int, itemsize: int) -> dict[str, int]:
    """The bytes a run of `n` elements must move (see the module's docstring), from a plan's
    host steps: "recompute" (every pass reads its inputs again) and "store" (irfuse's kernels'
    per-element arguments and results)."""
    from irfuse.artifact.host_plan import ELEMENT

    names = dict(host.inputs) | dict(host.outputs)
    per_element = {v for v, value in enumerate(host.values) if value.extent == ELEMENT}
    recompute = sum(host.values[names[name]].words for p in host.passes for name in (*p.reads, *p.outputs)
                    if names[name] in per_element)
    store = sum(host.values[v].words for launch in host.launches() for v in (*launch.args, *launch.results)
                if v in per_element)
    return {"recompute": recompute * n * itemsize, "store": store * n * itemsize}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[65_536, 1_048_576, 4_194_304, 16_777_216])
    ap.add_argument("--workloads", nargs="+", default=list(WORKLOADS))
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--determinism", type=int, default=20, help="replays whose outputs must agree bit for bit")
    ap.add_argument("--skip-max-autotune", action="store_true")
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--skip-cpu", action="store_true", help="leave out the comparison with the CPU backend's bits")
    ap.add_argument("--json", default=meta.result_path("reductions"))
    ap.add_argument("--no-variants", dest="variants", action="store_false",
                    help="leave out the plan's variants (combine kernels, last block, plain graph)")
    args = ap.parse_args(argv)

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import torch
    from rich.console import Console
    from rich.table import Table

    from irfuse.driver.compile import PlanningOptions, compile_program
    from irfuse.passes.registry import DEFAULT_PIPELINE
    from irfuse.runtime.cpu_device import CpuDevice
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
    compiled_peers = {}  # (workload, name) -> callable: compiled once, every size
    rows, copy_bw = [], None
    for n in args.sizes:
        for wl in args.workloads:
            plan, _ = compile_program(WORKLOADS[wl], None, "f32", planning=PlanningOptions(n=n))
            prog = plan.reference_program
            inputs = random_inputs(prog, n, 1, np.float32)
            nbytes = effective_bytes(prog, n, 4)
            floors = byte_floors(plan.host, n, 4)
            dev = CudaDevice(plan)
            popped = False
            held = ()
            vdevs = []
            try:
                if copy_bw is None:
                    copy_bw = measure_copy_bandwidth(dev.drv)
                rec = Executor(plan, dev).prepare(inputs, n)
                rec.replay()
                first = rec.outputs()
                reference = run_references(prog, inputs, "f32", n, plan.sum_by)
                checks = check_outputs(first, reference, "f32")
                ok = all(c.ok for c in checks)
                same_bits = True
                for _ in range(args.determinism):
                    rec.replay()
                    again = rec.outputs()
                    same_bits &= all(np.array_equal(again[k], first[k]) for k in first)
                samplers = {"irfuse": in_context(dev, lambda: rec.time_once())}
                variant_bits = {}
                if args.variants:
                    for label, finish in (("combine kernels", "kernels"), ("last block", "last-block")):
                        pipeline = DEFAULT_PIPELINE.replace("fuse-partition", f"fuse-partition{{finish={finish}}}", 1)
                        vplan, _ = compile_program(WORKLOADS[wl], pipeline, "f32", planning=PlanningOptions(n=n))
                        vdevs.append(CudaDevice(vplan))
                        vrec = Executor(vplan, vdevs[-1]).prepare(inputs, n)
                        vrec.replay()
                        out = vrec.outputs()
                        variant_bits[label] = all(np.array_equal(out[k], first[k]) for k in first)
                        samplers[f"irfuse: {label}"] = in_context(dev, vrec.time_once)
                    dev.graph_dependent_launches = False
                    plain = Executor(plan, dev).prepare(inputs, n)
                    dev.graph_dependent_launches = dev.dependent_launches
                    plain.replay()
                    out = plain.outputs()
                    variant_bits["plain graph"] = all(np.array_equal(out[k], first[k]) for k in first)
                    samplers["irfuse: plain graph"] = in_context(dev, plain.time_once)
                combine_once, held, parts = combine_sampler(dev, plan, rec, n)
                samplers["irfuse: combine kernel alone"] = in_context(dev, combine_once)
                dev.drv.Context.pop()
                popped = True
                targs = [torch.from_numpy(np.array(inputs[name], order="C")).cuda() for name in prog.inputs]
                peers = {"torch eager (library calls)": tfns[wl]}
                for mode in ("default", *(() if args.skip_max_autotune else ("max-autotune-no-cudagraphs",))):
                    name = "torch.compile" + ("" if mode == "default" else f" {mode}")
                    if (wl, name) not in compiled_peers:
                        compiled_peers[wl, name] = torch.compile(tfns[wl], mode=None if mode == "default" else mode)
                    peers[name] = compiled_peers[wl, name]
                peer_checks = {}
                for k, fn in peers.items():
                    samplers[k] = torch_sampler(fn, targs)
                    peer_checks[k] = peer_check(fn(*targs), prog.outputs, reference)
                if jfns is not None:
                    import jax

                    jargs = [jax.device_put(inputs[name]) for name in prog.inputs]
                    if (wl, "jax.jit") not in compiled_peers:
                        compiled_peers[wl, "jax.jit"] = jax.jit(jfns[wl])
                    jfn = compiled_peers[wl, "jax.jit"]
                    samplers["jax.jit"] = jax_sampler(jfn, jargs)
                    peer_checks["jax.jit"] = peer_check(jfn(*jargs), prog.outputs, reference)
                # The combine kernel alone is timed with irfuse's context, like irfuse.
                times = interleaved_medians(samplers, args.repeat, args.rounds)
            finally:
                if popped:
                    dev.context.push()
                for buf in held:
                    buf.free()
                for d in vdevs:
                    d.close()
                dev.close()
            cpu_bits = None
            if not args.skip_cpu:
                on_cpu = Executor(plan, CpuDevice(plan)).run(inputs, n).outputs
                cpu_bits = all(np.array_equal(np.asarray(on_cpu[k]), np.asarray(first[k])) for k in first)
            contenders = {k: v for k, v in times.items() if not k.startswith("irfuse")}
            best_peer = min(contenders, key=contenders.get)
            cheaper = min(floors.values())
            rows.append({"workload": wl, "n": n, "bytes": nbytes, "floors": floors, "verified": ok,
                         "checks": [c.describe() for c in checks], "bit_identical_replays": args.determinism,
                         "bit_identical": bool(same_bits), "cpu_backend_same_bits": cpu_bits,
                         "reduced": sorted(uniform_outputs(prog)),
                         "kernels": [f"{k.name} ({k.bx},{k.by})" + (f" x{k.per_thread}" if k.per_thread > 1 else "")
                                     for k in plan.kernels],
                         "combine_parts": parts, "times_s": times, "variants_same_bits": variant_bits,
                         "fraction_of_copy": {k: nbytes / v / copy_bw for k, v in times.items()},
                         "fraction_of_floor": {k: cheaper / v / copy_bw for k, v in times.items()},
                         "best_peer": best_peer, "speedup_over_best_peer": times[best_peer] / times["irfuse"],
                         "peer_checks": peer_checks})
            r = rows[-1]
            console.print(f"{wl} n={n}: irfuse {times['irfuse'] * 1e3:.4f} ms, {r['fraction_of_floor']['irfuse']:.1%} "
                          f"of the cheaper floor ({cheaper // n} B an element), best peer {best_peer} "
                          f"{times[best_peer] * 1e3:.4f} ms ({r['speedup_over_best_peer']:.2f}x); verified {ok}, "
                          f"same bits {same_bits}, CPU backend's bits {cpu_bits}; variants' bits {variant_bits}; "
                          + ", ".join(f"{k} {v * 1e3:.4f}" for k, v in times.items() if k.startswith("irfuse")),
                          highlight=False)
            with open(args.json, "w") as f:  # after every row: a run cut short keeps what it measured
                meta.dump({"gpu": torch.cuda.get_device_name(), "copy_bandwidth_Bps": copy_bw, "repeat": args.repeat,
                           "rounds": args.rounds, "rows": rows}, f, indent=2)
            del samplers, targs
            torch.cuda.empty_cache()
    table = Table(title=f"{torch.cuda.get_device_name()}: float32, one run per timing; copy bandwidth "
                        f"{copy_bw / 1e9:.0f} GB/s (read + write)")
    for col in ("workload", "n", "contender", "ms", "of copy", "of floor", "irfuse speedup"):
        table.add_column(col)
    for r in rows:
        for k, t in sorted(r["times_s"].items(), key=lambda kv: kv[1]):
            table.add_row(r["workload"], str(r["n"]), k, f"{t * 1e3:.4f}", f"{r['fraction_of_copy'][k]:.1%}",
                          f"{r['fraction_of_floor'][k]:.1%}",
                          "" if k.startswith("irfuse") else f"{t / r['times_s']['irfuse']:.2f}x")
    console.print(table)
    summary = Table(title="irfuse's default plan against its byte floors and the best peer")
    for col in ("workload", "n", "floor B/elem (store, recompute)", "irfuse ms", "of cheaper floor", "best peer",
                "speedup", "verified", "same bits x20", "CPU backend same bits"):
        summary.add_column(col)
    for r in rows:
        f = r["floors"]
        summary.add_row(r["workload"], str(r["n"]), f"{f['store'] // r['n']}, {f['recompute'] // r['n']}",
                        f"{r['times_s']['irfuse'] * 1e3:.4f}", f"{r['fraction_of_floor']['irfuse']:.1%}",
                        r["best_peer"], f"{r['speedup_over_best_peer']:.2f}x", str(r["verified"]),
                        str(r["bit_identical"]), str(r["cpu_backend_same_bits"]))
    console.print(summary)
    for r in rows:
        console.print(f"{r['workload']} n={r['n']}: verified={r['verified']} ({'; '.join(r['checks'])}); kernels "
                      f"{r['kernels']}; {r['combine_parts']} partials per word")
        console.print("  peers against the reference: " + "; ".join(f"{k} {v}" for k, v in r["peer_checks"].items()))
    with open(args.json, "w") as f:
        meta.dump({"gpu": torch.cuda.get_device_name(), "copy_bandwidth_Bps": copy_bw, "repeat": args.repeat,
                   "rounds": args.rounds, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
