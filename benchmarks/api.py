"""The Python API on GPU arrays: bandwidth next to `irfuse run`'s replay, host time per call,
and growth over many calls, in one run.

    python benchmarks/api.py [--n 4194304] [--calls 10000] [--small-n 1024] [--json api.json]

1. The four seed workloads (default plans) on PyTorch CUDA tensors through `prog(*args,
   out=...)` (the same tensors every call, as a time-stepping code passes them), timed with CUDA events on the current stream, next to the same plan replayed
   as `irfuse run` does (one CUDA graph) and a device-to-device copy of 1 GiB: effective
   bandwidth (inputs read once + outputs written once) as a fraction of the copy's, for one
   call per timing (the host's time per call inside) and for 10 calls back to back (a
   time-stepping loop, where the host's time overlaps the GPU's), the latter also with every
   call submitted as its CUDA graph ("graphs only": no programmatic dependent launches,
   `runtime/dependent_launch.py`).
2. Host time per call of a one-kernel program (SyncTest) on a small batch: the median over
   `--calls` calls of the API, of a bare PyCUDA prepared launch of the same kernel, and of a
   CuPy RawKernel launch of the same cubin (when CuPy is installed).
   The same in structure-of-arrays layout: the same data as `(*shape, N)` tensors through
   the same program (its SoA variant, compiled at the first such call).
3. GPU memory (driver's free memory and torch's allocated bytes) after 10 calls and after
   `--calls` calls.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import ROOT, WORKLOADS  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--calls", type=int, default=10_000)
    ap.add_argument("--small-n", type=int, default=1024)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--json", default=meta.result_path("calls"))
    args = ap.parse_args(argv)

    import torch
    from rich.console import Console
    from rich.table import Table

    import irfuse
    from irfuse.runtime.cuda_device import measure_copy_bandwidth
    from irfuse.runtime.dependent_launch import InPlaceRun
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import effective_bytes, random_inputs, run_references
    from irfuse.verification.verify import check_outputs

    console = Console(width=200)
    torch.cuda.init()
    rows, copy_bw = [], None
    for wl, file in WORKLOADS.items():
        prog = irfuse.compile(os.path.join(ROOT, "examples", file), backend="cuda", n=args.n)
        ref = prog.compiled.reference_program
        host = random_inputs(ref, args.n, 1, np.float32)
        tensors = {k: torch.from_numpy(v).cuda() for k, v in host.items()}
        outs = [torch.empty((args.n, *prog.shapes[k]), device="cuda") for k in prog.outputs]
        dev = prog.opened_device()
        if copy_bw is None:
            copy_bw = measure_copy_bandwidth(dev.drv)
        got = prog(**tensors, out=outs)
        torch.cuda.synchronize()
        sample = {k: v[:100_000] for k, v in host.items()}
        ok = all(c.ok for c in check_outputs({k: v[:100_000].cpu().numpy() for k, v in got.items()},
                                             run_references(ref, sample, "f32"), "f32"))
        rec = Executor(prog.compiled, dev).prepare(host, args.n)
        rec.replay()

        ordered = [tensors[k] for k in prog.inputs]

        def api_once(prog=prog, ordered=ordered, outs=outs, calls=1) -> float:
            s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            s.record()
            for _ in range(calls):
                prog(*ordered, out=outs)
            e.record()
            e.synchronize()
            return s.elapsed_time(e) / 1e3 / calls

        # The same data in structure-of-arrays layout, (*shape, N), through the same program:
        # its first call compiles the variant for SoA (planned and emitted for that layout).
        soa = {k: v.movedim(0, -1).contiguous() for k, v in tensors.items()}
        soa_outs = [torch.empty(o.movedim(0, -1).shape, device="cuda") for o in outs]
        soa_ordered = [soa[k] for k in prog.inputs]
        got_soa = prog(*soa_ordered, out=soa_outs)
        torch.cuda.synchronize()
        soa_ok = all(c.ok for c in check_outputs(
            {k: v[..., :100_000].movedim(-1, 0).cpu().numpy() for k, v in got_soa.items()},
            run_references(ref, sample, "f32"), "f32"))
        soa_prog = prog.for_layout("soa")

        def soa_once(calls=1, ordered=soa_ordered, outs=soa_outs) -> float:
            return api_once(prog, ordered, outs, calls)

        for _ in range(5):
            api_once()
            soa_once()
            rec.time_once()
        api_t, run_t, api_b, run_b, soa_t, soa_b, api_g, soa_g = [], [], [], [], [], [], [], []
        for k in range(args.repeat):  # in turns, so drift weighs on all alike
            order = [0, 1, 2, 3] if k % 2 else [3, 2, 1, 0]
            for which in order:
                if which == 3:  # calls back to back as CUDA graphs only, no dependent launches
                    InPlaceRun.dependent_launches = False
                    try:
                        api_g.append(api_once(calls=10))
                        soa_g.append(soa_once(calls=10))
                    finally:
                        InPlaceRun.dependent_launches = True
                elif which == 2:
                    run_t.append(rec.time_once())
                    run_b.append(rec.time_once(10))
                elif which == 1:
                    soa_t.append(soa_once())
                    soa_b.append(soa_once(calls=10))
                else:
                    api_t.append(api_once())
                    api_b.append(api_once(calls=10))
        nbytes = effective_bytes(ref, args.n, 4)
        api_s, run_s, soa_s = float(np.median(api_t)), float(np.median(run_t)), float(np.median(soa_t))
        api_bs, run_bs, soa_bs = float(np.median(api_b)), float(np.median(run_b)), float(np.median(soa_b))
        api_gs, soa_gs = float(np.median(api_g)), float(np.median(soa_g))
        rows.append({"workload": wl, "verified": ok, "api_s": api_s, "run_s": run_s, "bytes": nbytes,
                     "api_of_copy": nbytes / api_s / copy_bw, "run_of_copy": nbytes / run_s / copy_bw,
                     "api_over_run": api_s / run_s, "api_10_s": api_bs, "run_10_s": run_bs,
                     "api_10_of_copy": nbytes / api_bs / copy_bw, "run_10_of_copy": nbytes / run_bs / copy_bw,
                     "kernels": prog.kernels, "soa_verified": soa_ok, "soa_s": soa_s, "soa_10_s": soa_bs,
                     "soa_of_copy": nbytes / soa_s / copy_bw, "soa_10_of_copy": nbytes / soa_bs / copy_bw,
                     "api_10_graphs_of_copy": nbytes / api_gs / copy_bw,
                     "soa_10_graphs_of_copy": nbytes / soa_gs / copy_bw,
                     "soa_kernels": soa_prog.kernels,
                     "soa_registers": {k.name: soa_prog.compiled.resources(k.name).registers
                                       for k in soa_prog.compiled.kernels},
                     "soa_shared_words": {k.name: k.shared_words for k in soa_prog.compiled.kernels}})
        soa_prog.close()
        prog.close()
        del tensors, outs, got, soa, soa_outs, got_soa
        torch.cuda.empty_cache()

    gpu = torch.cuda.get_device_name()
    t = Table(title=f"{gpu}: the API on torch tensors, n = {args.n}, float32, median of {args.repeat}; "
                    f"copy {copy_bw / 1e9:.0f} GB/s")
    for col in ("workload", "API ms", "of copy", "irfuse run ms", "of copy ", "API / run",
                "10 back to back: API of copy", "graphs only", "run of copy", "verified", "SoA API ms",
                "SoA of copy", "SoA 10 b2b of copy", "graphs only ", "SoA verified"):
        t.add_column(col)
    for r in rows:
        t.add_row(r["workload"], f"{r['api_s'] * 1e3:.3f}", f"{r['api_of_copy']:.1%}", f"{r['run_s'] * 1e3:.3f}",
                  f"{r['run_of_copy']:.1%}", f"{r['api_over_run']:.3f}", f"{r['api_10_of_copy']:.1%}",
                  f"{r['api_10_graphs_of_copy']:.1%}", f"{r['run_10_of_copy']:.1%}", str(r["verified"]),
                  f"{r['soa_s'] * 1e3:.3f}", f"{r['soa_of_copy']:.1%}", f"{r['soa_10_of_copy']:.1%}",
                  f"{r['soa_10_graphs_of_copy']:.1%}", str(r["soa_verified"]))
    console.print(t)

    # 2. Host time per call, small batch.
    prog = irfuse.compile(os.path.join(ROOT, "examples", "synctest.kas"), backend="cuda")
    a = torch.rand(args.small_n, 3, 3, device="cuda")
    f = torch.empty_like(a)
    prog(a, out=f)
    dev = prog.opened_device()
    torch.cuda.synchronize()
    free0 = dev.drv.mem_get_info()[0]
    alloc0 = torch.cuda.memory_allocated()

    def per_call(fn, calls: int) -> float:
        times = np.empty(calls)
        for i in range(calls):
            t0 = time.perf_counter()
            fn()
            times[i] = time.perf_counter() - t0
            if i % 256 == 255:
                torch.cuda.synchronize()  # keep the launch queue from filling
        torch.cuda.synchronize()
        return float(np.median(times))

    for _ in range(10):
        prog(a, out=f)
    torch.cuda.synchronize()
    free10, alloc10 = dev.drv.mem_get_info()[0], torch.cuda.memory_allocated()
    host = {"irfuse API (prog(a, out=f))": per_call(lambda: prog(a, out=f), args.calls)}
    free_n, alloc_n = dev.drv.mem_get_info()[0], torch.cuda.memory_allocated()
    host["irfuse API by keyword (prog(A=a, out=f))"] = per_call(lambda: prog(A=a, out=f), args.calls)
    host["irfuse API (prog(a), new output)"] = per_call(lambda: prog(a), args.calls)
    k = prog.compiled.kernels[0]
    fn = dev.functions[k.name]
    fn.prepare("PPq")
    grid = -(-args.small_n // k.by)
    ptr_a, ptr_f = a.data_ptr(), f.data_ptr()
    host["bare PyCUDA prepared launch"] = per_call(
        lambda: fn.prepared_async_call((grid, 1, 1), k.block_dims, None, ptr_a, ptr_f, args.small_n), args.calls)
    try:
        import cupy

        with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as tmp:
            tmp.write(next(image for image, names in prog.compiled.cubin.parts() if names is None or k.name in names))
        raw = cupy.RawModule(path=tmp.name).get_function(k.name)
        ca, cf = cupy.asarray(a), cupy.asarray(f)
        nn = np.int64(args.small_n)
        host["CuPy RawKernel launch (same cubin)"] = per_call(
            lambda: raw((grid,), k.block_dims[:2], (ca, cf, nn)), args.calls)
        host["irfuse API on CuPy arrays (prog(ca, out=cf))"] = per_call(lambda: prog(ca, out=cf), args.calls)
    except ImportError:
        console.print("CuPy is not installed: its row is left out")
    t2 = Table(title=f"host time per call, one-kernel program (SyncTest), n = {args.small_n}, median of {args.calls}")
    t2.add_column("path")
    t2.add_column("us per call")
    for name, s in host.items():
        t2.add_row(name, f"{s * 1e6:.2f}")
    console.print(t2)
    growth = {"driver_free_bytes_after_10": free10, "driver_free_bytes_after_calls": free_n,
              "torch_allocated_after_10": alloc10, "torch_allocated_after_calls": alloc_n,
              "before": [free0, alloc0], "recorded_runs": len(prog._bound)}
    console.print(f"GPU memory after 10 calls: {free10} B free (driver), {alloc10} B allocated (torch); after "
                  f"{args.calls} more: {free_n} B free, {alloc_n} B allocated; recorded runs kept: {len(prog._bound)}")
    with open(args.json, "w") as fh:
        meta.dump({"gpu": gpu, "n": args.n, "copy_bandwidth_Bps": copy_bw, "rows": rows,
                   "host_seconds_per_call": host, "small_n": args.small_n, "calls": args.calls,
                   "growth": growth}, fh, indent=2)
    console.print(f"wrote {args.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
