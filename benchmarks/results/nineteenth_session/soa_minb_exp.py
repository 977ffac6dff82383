"""Ad hoc (argv: layouts, minimums): SyncTest's kernel (default plan, staged loads, with irf_after_previous_grid) at other
launch-bounds minimums: 10 calls back to back as CUDA graphs and as programmatic dependent
launches, and CUPTI kernel time; fractions of the 1 GiB copy."""
import json, os, re, sys
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, _EventTimer, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.runtime.dependent_launch import LaunchRecord
from irfuse.runtime.reference import effective_bytes

torch.zeros(1, device="cuda")
out = {"gpu": torch.cuda.get_device_name(), "rows": []}
n = 4194304
LAYOUTS = sys.argv[1].split(",") if len(sys.argv) > 1 else ["soa", "aos"]
MINS = [int(x) for x in sys.argv[2].split(",")] if len(sys.argv) > 2 else [8, 11, 13, 16]
for layout in LAYOUTS:
    plan, _ = compile_program("examples/synctest.kas", None, "f32", layout=layout)
    k0 = plan.kernels[0]
    base = plan.source
    rng = np.random.default_rng(1)
    inputs = {"A": rng.random((n, 3, 3) if layout == "aos" else (3, 3, n), dtype=np.float32)}
    nbytes = effective_bytes(plan.reference_program, n, 4)
    want = None
    for rnd in range(2):
        for minb in MINS:
            plan.source = re.sub(r"__launch_bounds__\(128, \d+\) " + k0.name, f"__launch_bounds__(128, {minb}) {k0.name}", base)
            plan.cubin = None
            dev = CudaDevice(plan)
            if "copy_Bps" not in out:
                out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
            rec = Executor(plan, dev).prepare(inputs, n)
            rec.replay()
            got = rec.outputs()["F"].tobytes()
            want = want or got
            ptrs = tuple(int(b) for b in dev.allocations[:2])
            dl = dev.dependent_launch(LaunchRecord(k0.name, k0.blocks(n), k0.block_dims, dev.shared[k0.name], ptrs, n))
            for _ in range(5):
                rec.replay(); dl.launch_on(0)
            dev.synchronize()

            def timed(call, k):
                with _EventTimer(dev.drv) as t:
                    for _ in range(k):
                        call()
                return t.seconds / k
            g = float(np.median([timed(rec.replay, 10) for _ in range(30)]))
            one = float(np.median([timed(rec.replay, 1) for _ in range(200)]))
            d = float(np.median([timed(lambda: dl.launch_on(0), 10) for _ in range(30)]))
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    rec.replay()
                dev.synchronize()
            kern = [e.device_time_total / e.count for e in prof.key_averages() if e.device_time_total > 0 and k0.name in e.key][0] * 1e-6
            r = {"layout": layout, "min_blocks": minb, "round": rnd, "same_bits": got == want,
                 "registers": plan.resources(k0.name).registers,
                 "b2b_graphs_of_copy": nbytes / g / out["copy_Bps"], "b2b_dependent_of_copy": nbytes / d / out["copy_Bps"],
                 "kernel_of_copy": nbytes / kern / out["copy_Bps"], "one_run_of_copy": nbytes / one / out["copy_Bps"]}
            out["rows"].append(r)
            print(layout, minb, rnd, r["same_bits"], r["registers"], "one %.4f graphs %.4f dependent %.4f kernel %.4f" % (
                r["one_run_of_copy"], r["b2b_graphs_of_copy"], r["b2b_dependent_of_copy"], r["kernel_of_copy"]), flush=True)
            dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "soa_minb_exp.json"), "w"), indent=1)
