"""Ad hoc: SoA kernels with register loads staged through shared memory (16-byte runs) or not,
the four seed workloads, by the staging cap (kernel_model.STAGED_RUN_BYTES)."""
import json, os, sys
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
import irfuse.analysis.kernel_model as km
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import effective_bytes, random_inputs


def profiled(dev, rec, names):
    for _ in range(5):
        rec.replay()
    one = float(np.median([rec.time_once() for _ in range(60)]))
    ten = float(np.median([rec.time_once(10) for _ in range(20)])) / 10
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            rec.replay()
        dev.drv.Context.synchronize()
    ks = sum(e.device_time_total / 20 for e in prof.key_averages() if any(nm in e.key for nm in names))
    if not ks:  # CUPTI may misname a kernel: take every kernel but the profiler's own
        ks = sum(e.device_time_total / 20 for e in prof.key_averages() if e.device_time_total > 0 and "emcpy" not in e.key)
    return {"one_run_us": round(one * 1e6, 2), "b2b_us": round(ten * 1e6, 2), "kernels_us": round(ks, 2)}


torch.zeros(1, device="cuda")
n = 4194304
caps = {"direct": 0, "staged": 64 * 1024}
out = {"gpu": torch.cuda.get_device_name(), "n": n, "rows": []}
for w in sys.argv[1:] or ["synctest", "bigfusion", "stvenant", "stvenant_inner"]:
    plans = {}
    for name, cap in caps.items():
        km.STAGED_RUN_BYTES = cap
        plans[name] = compile_program(f"examples/{w}.kas", None, "f32", layout="soa")[0]
    ref = plans["direct"].reference_program
    inputs = {k: np.ascontiguousarray(np.moveaxis(v, 0, -1)) for k, v in random_inputs(ref, n, seed=1).items()}
    nbytes = effective_bytes(ref, n, 4)
    want = None
    for rnd in range(2):
        for name, plan in plans.items():
            dev = CudaDevice(plan)
            if "copy_Bps" not in out:
                out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
                print("copy", out["copy_Bps"] / 1e9, flush=True)
            rec = Executor(plan, dev).prepare(inputs, n)
            rec.replay()
            got = {k: v.tobytes() for k, v in rec.outputs().items()}
            want = want or got
            r = profiled(dev, rec, [k.name for k in plan.kernels])
            r.update(workload=w, variant=name, round=rnd, same_bits=got == want, arrays=[k.arrays for k in plan.kernels],
                     one_of_copy=round(nbytes / (r["one_run_us"] * 1e-6) / out["copy_Bps"], 4),
                     b2b_of_copy=round(nbytes / (r["b2b_us"] * 1e-6) / out["copy_Bps"], 4),
                     kernels_of_copy=round(nbytes / (r["kernels_us"] * 1e-6) / out["copy_Bps"], 4) if r["kernels_us"] else None)
            out["rows"].append(r)
            print(w, rnd, name, r["same_bits"], r["one_of_copy"], r["b2b_of_copy"], r["kernels_of_copy"], flush=True)
            dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "stage_exp.json"), "w"), indent=1)
