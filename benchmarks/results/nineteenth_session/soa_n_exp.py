"""Ad hoc: SyncTest's default SoA kernel at batch sizes around 2^22: whether word arrays a power of
two bytes apart (k * n * 4) cost bandwidth. CUPTI kernel time and 10 back-to-back dependent
launches, fractions of the 1 GiB copy; AoS alongside."""
import json, os
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
for rnd in range(2):
    for layout in ("soa", "aos"):
        plan, _ = compile_program("examples/synctest.kas", None, "f32", layout=layout)
        k0 = plan.kernels[0]
        dev = CudaDevice(plan)
        if "copy_Bps" not in out:
            out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
        for n in (4194304, 4194304 + 128, 4194304 + 4096, 4194304 + 65536, 3 * 1398144, 5242880, 4194304 * 2):
            rng = np.random.default_rng(1)
            inputs = {"A": rng.random((n, 3, 3) if layout == "aos" else (3, 3, n), dtype=np.float32)}
            nbytes = effective_bytes(plan.reference_program, n, 4)
            rec = Executor(plan, dev).prepare(inputs, n)
            ptrs = tuple(int(b) for b in dev.allocations[-2:])
            dl = dev.dependent_launch(LaunchRecord(k0.name, k0.blocks(n), k0.block_dims, dev.shared[k0.name], ptrs, n))
            for _ in range(5):
                rec.replay(); dl.launch_on(0)
            dev.synchronize()

            def timed(call, k):
                with _EventTimer(dev.drv) as t:
                    for _ in range(k):
                        call()
                return t.seconds / k
            d = float(np.median([timed(lambda: dl.launch_on(0), 10) for _ in range(20)]))
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    rec.replay()
                dev.synchronize()
            kern = [e.device_time_total / e.count for e in prof.key_averages() if e.device_time_total > 0 and k0.name in e.key][0] * 1e-6
            r = {"layout": layout, "n": n, "round": rnd, "b2b_dependent_of_copy": nbytes / d / out["copy_Bps"],
                 "kernel_of_copy": nbytes / kern / out["copy_Bps"]}
            out["rows"].append(r)
            print(layout, n, rnd, "dependent %.4f kernel %.4f" % (r["b2b_dependent_of_copy"], r["kernel_of_copy"]), flush=True)
            for a in dev.allocations:
                a.free()
            dev.allocations.clear()
        dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "soa_n_exp.json"), "w"), indent=1)
