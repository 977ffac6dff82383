"""Where the time of one short run goes: a plan timed from an idle GPU (CUDA events around one
call, as `benchmarks/peers.py` times every contender), its launches submitted one by one
(PyCUDA prepared calls) or as one CUDA graph (irfuse's runtime), and each also queued behind a
busy kernel so that no host time falls between the events (device time only). An empty kernel
gives the fixed cost of each path alone; a cudaMemcpy of the plan's bytes is timed the same ways.

    python benchmarks/launch_paths.py examples/synctest.kas [--pipeline P] [--json F]

Needs a GPU. Prints a table of medians (fractions of the 1 GiB copy bandwidth) and writes JSON.
"""
from __future__ import annotations

import argparse
import time

import numpy as np
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

HELPERS = r"""
extern "C" __global__ void irf_spin(long long cycles)
{
  const long long t0 = clock64();
  while (clock64() - t0 < cycles) { }
}
extern "C" __global__ void irf_empty() { }
"""


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("file")
    ap.add_argument("--pipeline", default=None)
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--repeat", type=int, default=200)
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--spin-us", type=float, default=100.0, help="busy kernel ahead of a 'queued' timing")
    ap.add_argument("--json", default=meta.result_path("calls"))
    args = ap.parse_args(argv)

    from rich.console import Console
    from rich.table import Table

    from irfuse.backend.nvrtc import compile_cubin
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice, DeviceCopy, _EventTimer, measure_copy_bandwidth
    from irfuse.runtime.cuda_graph import CudaGraph
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import effective_bytes, random_inputs, run_references
    from irfuse.verification.verify import check_outputs
    from irfuse.tools.tune import alternating_rounds

    plan, _ = compile_program(args.file, args.pipeline, "f32")
    prog = plan.reference_program
    nbytes = effective_bytes(prog, args.n, 4)
    inputs = random_inputs(prog, args.n, 1, np.float32)
    reference = run_references(prog, inputs, "f32")
    graphs = CudaDevice(plan)
    steps = CudaDevice(plan, graphs=False)
    drv = graphs.drv
    try:
        copy_bw = measure_copy_bandwidth(drv)
        clock_hz = graphs.dev.get_attribute(drv.device_attribute.CLOCK_RATE) * 1e3
        helpers = drv.module_from_buffer(compile_cubin(HELPERS, plan.cubin.arch).cubin)
        spin, empty = helpers.get_function("irf_spin"), helpers.get_function("irf_empty")
        spin.prepare("q")
        empty.prepare("")
        spin_cycles = int(args.spin_us * 1e-6 * clock_hz)
        recorded = {}
        for label, dev in (("launch by launch", steps), ("one CUDA graph", graphs)):
            rec = Executor(plan, dev).prepare(inputs, args.n)
            rec.replay()
            bad = [c.describe() for c in check_outputs(rec.outputs(), reference, "f32") if not c.ok]
            if bad:
                raise SystemExit(f"{label}: " + "; ".join(bad))
            recorded[label] = rec
        empty_graph = CudaGraph(drv, lambda s: empty.prepared_async_call((1, 1), (32, 1, 1), s))
        same = DeviceCopy(drv, nbytes // 2 // 16 * 16)
        scale = nbytes / (2 * same.nbytes)
        same_graph = CudaGraph(drv, lambda s: drv.memcpy_dtod_async(same.dst, same.src, same.nbytes, s))

        paths = {
            f"plan ({len(plan.kernels)} kernels): launch by launch": (recorded["launch by launch"].replay, 1.0),
            f"plan ({len(plan.kernels)} kernels): one CUDA graph": (recorded["one CUDA graph"].replay, 1.0),
            "empty kernel: prepared call": (lambda: empty.prepared_call((1, 1), (32, 1, 1)), None),
            "empty kernel: one CUDA graph": (empty_graph, None),
            "cudaMemcpy of the same bytes: direct": (same.copy, scale),
            "cudaMemcpy of the same bytes: one CUDA graph": (same_graph, scale),
        }

        def timed(call, queued: bool):
            def once() -> float:
                if queued:
                    spin.prepared_call((1, 1), (1, 1, 1), spin_cycles)
                with _EventTimer(drv) as t:
                    call()
                return t.seconds
            return once

        samplers = {}
        for name, (call, _) in paths.items():
            for _ in range(3):
                call()
            samplers[(name, "idle")] = timed(call, False)
            samplers[(name, "queued")] = timed(call, True)
        graphs.synchronize()
        host_us = {}  # host time alone: 2000 launches of the empty kernel, no events
        for name, call in (("prepared call", lambda: empty.prepared_call((1, 1), (32, 1, 1))),
                           ("one CUDA graph", empty_graph)):
            t0 = time.perf_counter()
            for _ in range(2000):
                call()
            host_us[name] = (time.perf_counter() - t0) / 2000 * 1e6
            graphs.synchronize()

        # The copy limit: 1 GiB called directly (what measure_copy_bandwidth times) or as a graph.
        big = DeviceCopy(drv, 1 << 30)
        big_graph = CudaGraph(drv, lambda s: drv.memcpy_dtod_async(big.dst, big.src, big.nbytes, s))
        big_bw = {}
        for name, call in (("direct", big.copy), ("one CUDA graph", big_graph)):
            ts = []
            for _ in range(20):
                call()
                with _EventTimer(drv) as t:
                    call()
                ts.append(t.seconds)
            big_bw[name] = 2 * big.nbytes / float(np.median(ts))
        big_graph.destroy()
        big.free()

        times: dict = {k: [] for k in samplers}
        per_round = max(1, args.repeat // args.rounds)
        for _, k in alternating_rounds(list(samplers), args.rounds):
            times[k] += [samplers[k]() for _ in range(per_round)]
        empty_graph.destroy()
        same_graph.destroy()
        same.free()
    finally:
        steps.close()
        graphs.close()

    rows = []
    for (name, how), v in times.items():
        scale = paths[name][1]
        t = float(np.median(v)) * (scale or 1.0)
        rows.append({"path": name, "start": how, "median_s": t,
                     "iqr_s": float(np.subtract(*np.percentile(v, [75, 25]))),
                     "fraction_of_copy": None if scale is None else nbytes / t / copy_bw})
    table = Table(title=f"{graphs.gpu_name}: {args.file}, n = {args.n}, copy {copy_bw / 1e9:.0f} GB/s; "
                        f"queued = behind a {args.spin_us:.0f} us busy kernel")
    for c in ("path", "start", "median us", "IQR us", "of copy"):
        table.add_column(c)
    for r in rows:
        f = r["fraction_of_copy"]
        table.add_row(r["path"], r["start"], f"{r['median_s'] * 1e6:.1f}", f"{r['iqr_s'] * 1e6:.1f}",
                      "" if f is None else f"{f:.1%}")
    Console(width=160).print(table)
    print("host time per launch (us):", {k: round(v, 2) for k, v in host_us.items()})
    print("1 GiB copy, device time (GB/s):", {k: round(v / 1e9) for k, v in big_bw.items()})
    with open(args.json, "w") as f:
        meta.dump({"gpu": graphs.gpu_name, "file": args.file, "pipeline": args.pipeline, "n": args.n,
                   "bytes": nbytes, "copy_bandwidth_Bps": copy_bw, "spin_us": args.spin_us,
                   "host_launch_us": host_us, "copy_1GiB_Bps": big_bw, "rows": rows,
                   "times_s": {f"{k[0]} | {k[1]}": v for k, v in times.items()}}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
