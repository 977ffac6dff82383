"""Ad hoc: StrainEnergy's kernel with and without bank padding (pitch 7 and 4-byte cp.async, or
pitch 6 and 16-byte copies with 2-way conflicts)."""
import json, os
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from irfuse.driver.compile import compile_program
from irfuse.passes.registry import DEFAULT_PIPELINE
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import random_inputs, effective_bytes, run_references
from irfuse.runtime.verify import check_outputs

N = 8_388_608
torch.zeros(1, device="cuda")
out = {"gpu": torch.cuda.get_device_name()}
for path in ("examples/strain_energy.kas", "examples/cfl_step.kas"):
    res = {}
    for rnd in range(2):
        for name, pipe in (("padded (default)", None),
                           ("unpadded", DEFAULT_PIPELINE.replace("fuse-allocate-shared", "fuse-allocate-shared{pad-banks=false}"))):
            plan, _ = compile_program(path, pipe, "f32")
            prog = plan.reference_program
            inputs = random_inputs(prog, N, 1, np.float32)
            dev = CudaDevice(plan)
            if "copy_Bps" not in out:
                out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
            rec = Executor(plan, dev).prepare(inputs, N)
            rec.replay()
            if rnd == 0:
                ok = all(c.ok for c in check_outputs(rec.outputs(), run_references(prog, inputs, "f32", N, plan.sum_by), "f32"))
                res[name + " verified"] = ok
            for _ in range(5):
                rec.replay()
            one = float(np.median([rec.time_once() for _ in range(80)]))
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(20):
                    rec.replay()
                dev.drv.Context.synchronize()
            ks = {e.key: round(e.device_time_total / e.count, 2) for e in prof.key_averages() if e.device_time_total > 0}
            res[f"{name} #{rnd}"] = {"one_us": round(one * 1e6, 1), "of_copy": round(effective_bytes(prog, N, 4) / one / out["copy_Bps"], 4),
                                     "kernels_us": ks}
            dev.close()
    out[os.path.basename(path)] = res
print(json.dumps(out, indent=1))
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "pad_exp_%s.json" % out["gpu"].split()[1]), "w"), indent=1)
