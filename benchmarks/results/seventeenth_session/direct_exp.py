"""Ad hoc: the reducing programs with loaded (and stored) values promoted to registers in every
kernel (each thread reads its own element's words from global memory, no shared staging),
against the default pipeline; per-kernel CUPTI times, n = 8,388,608."""
import json, os
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from irfuse.driver.compile import compile_program
from irfuse.passes.registry import DEFAULT_PIPELINE
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import random_inputs, effective_bytes

N = 8_388_608
PIPES = {"default": DEFAULT_PIPELINE,
         "inputs in registers": DEFAULT_PIPELINE.replace("fuse-promote-registers", "fuse-promote-registers{inputs=true}"),
         "inputs and outputs in registers": DEFAULT_PIPELINE.replace("fuse-promote-registers", "fuse-promote-registers{inputs=true outputs=true}")}
torch.zeros(1, device="cuda")
out = {"gpu": torch.cuda.get_device_name()}
for path in ("examples/cfl_step.kas", "examples/strain_energy.kas", "benchmarks/programs/chain_sum.kas", "examples/synctest.kas"):
    want = None
    for name, pipe in PIPES.items():
        plan, _ = compile_program(path, pipe, "f32")
        inputs = random_inputs(plan.reference_program, N, 1, np.float32)
        nbytes = effective_bytes(plan.reference_program, N, 4)
        dev = CudaDevice(plan)
        bw = out.setdefault("copy_Bps", measure_copy_bandwidth(dev.drv))
        rec = Executor(plan, dev).prepare(inputs, N)
        for _ in range(5):
            rec.replay()
        got = {k: v.tobytes() for k, v in rec.outputs().items()}
        want = want or got
        one = float(np.median([rec.time_once() for _ in range(60)]))
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                rec.replay()
            dev.drv.Context.synchronize()
        ks = {e.key: round(e.device_time_total / e.count, 2) for e in prof.key_averages() if e.device_time_total > 0}
        r = {"one_run_us": round(one * 1e6, 1), "of_copy": round(nbytes / one / bw, 4), "kernels_us": ks,
             "same_bits_as_default": got == want}
        out[f"{os.path.basename(path)}: {name}"] = r
        print(os.path.basename(path), name, r, flush=True)
        dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "direct_exp.json"), "w"), indent=1)
