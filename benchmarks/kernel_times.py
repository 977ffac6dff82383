"""Where a default plan's time goes on the GPU: each kernel's device time, next to the whole run.

    python benchmarks/kernel_times.py [--n 8388608] [--profile h200] [--dtype f32] [--json kernel_times.json] [FILE.kas ...]

Two variants of each program in one run: the default plan, and the plan of a search where every
kernel runs one element a thread (`fuse-partition{per_thread=one}`; skipped where it compiles to
the same source), so that what running several elements a thread buys is measured side by side.

For each program (default: the programs that reduce over the batch: `examples/strain_energy.kas`,
`examples/cfl_step.kas`, `benchmarks/programs/chain_sum.kas`), irfuse's default plan runs on
random data (float32 unless `--dtype f64`; planned for the compile's default profile unless
`--profile` names one); the whole run is timed one run per timing (median of 60) and ten runs back
to back (median of 20), each as a fraction of the device-to-device copy bandwidth measured in
the same run (per-element inputs once and outputs once). Then 20 runs are traced with CUPTI
(torch.profiler, which sees every kernel of the process, irfuse's CUDA graphs included): each
kernel's average device time, and its share of the one-run time. Needs torch with CUDA.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT = [os.path.join(ROOT, "examples", "strain_energy.kas"), os.path.join(ROOT, "examples", "cfl_step.kas"),
           os.path.join(ROOT, "benchmarks", "programs", "chain_sum.kas")]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="*", default=DEFAULT)
    ap.add_argument("--n", type=int, default=8_388_608)
    ap.add_argument("--profile", default=None, help="the device profile planned for (default: the compile's)")
    ap.add_argument("--dtype", choices=["f32", "f64"], default="f32")
    ap.add_argument("--json", default=meta.result_path("reductions"))
    args = ap.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.table import Table
    from torch.profiler import ProfilerActivity, profile

    from irfuse.driver.compile import PlanningOptions, compile_program
    from irfuse.passes.registry import DEFAULT_PIPELINE
    from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import DTYPES, effective_bytes, random_inputs

    torch.zeros(1, device="cuda")  # the primary context, which irfuse's device shares
    dtype = DTYPES[args.dtype]
    planning = PlanningOptions(profile=args.profile) if args.profile else None
    table = Table(title=f"{torch.cuda.get_device_name()}: n = {args.n}, {np.dtype(dtype).name}"
                        + (f", planned for {args.profile}" if args.profile else ""))
    for col in ("program", "kernel", "runs", "us per run", "of one run"):
        table.add_column(col)
    rows = []
    one_a_thread = DEFAULT_PIPELINE.replace("fuse-partition", "fuse-partition{per_thread=one}")
    runs = []
    for path in args.files:
        plan, _ = compile_program(path, None, args.dtype, planning=planning)
        runs.append((path, "default plan", plan))
        one, _ = compile_program(path, one_a_thread, args.dtype, planning=planning)
        if one.source != plan.source:
            runs.append((path, "one element a thread", one))
    for path, variant, plan in runs:
        program = plan.reference_program
        inputs = random_inputs(program, args.n, 1, dtype)
        nbytes = effective_bytes(program, args.n, np.dtype(dtype).itemsize)
        dev = CudaDevice(plan)
        try:
            copy_bw = measure_copy_bandwidth(dev.drv)
            rec = Executor(plan, dev).prepare(inputs, args.n)
            rec.replay()
            one = float(np.median([rec.time_once() for _ in range(60)]))
            ten = float(np.median([rec.time_once(10) for _ in range(20)]))
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    rec.replay()
                dev.drv.Context.synchronize()
        finally:
            dev.close()
        name = os.path.basename(path) + ("" if variant == "default plan" else f" ({variant})")
        kernels = {e.key: e.device_time_total / e.count * 1e-6 for e in prof.key_averages()
                   if e.device_time_total > 0}
        table.add_row(name, "whole run, one per timing", "", f"{one * 1e6:.1f}", f"{nbytes / one / copy_bw:.1%} of copy")
        table.add_row(name, "whole run, ten back to back", "", f"{ten * 1e6:.1f}",
                      f"{nbytes / ten / copy_bw:.1%} of copy")
        for k, t in sorted(kernels.items(), key=lambda kv: -kv[1]):
            table.add_row(name, k, "20", f"{t * 1e6:.2f}", f"{t / one:.1%}")
        rows.append({"program": name, "variant": variant, "n": args.n, "dtype": args.dtype, "profile": args.profile,
                     "bytes": nbytes, "copy_bandwidth_Bps": copy_bw,
                     "one_run_s": one, "ten_runs_s": ten, "fraction_of_copy_one": nbytes / one / copy_bw,
                     "fraction_of_copy_ten": nbytes / ten / copy_bw, "kernels_s": kernels})
    Console(width=160).print(table)
    with open(args.json, "w") as f:
        meta.dump({"gpu": torch.cuda.get_device_name(), "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
