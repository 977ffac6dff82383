"""Ad hoc: a block partial's last six tree steps on warp 0's registers (shuffles) instead of shared memory."""
import json, os, re
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import random_inputs, effective_bytes

N = 8_388_608
FILES = {"StrainEnergy": "examples/strain_energy.kas", "CflStep": "examples/cfl_step.kas",
         "ChainSum": "benchmarks/programs/chain_sum.kas"}
STEP32 = re.compile(r"\n  for \(int irf_i = tid; irf_i < 32; irf_i \+= (\d+)\) if \(irf_i / 1 \+ 32 < count\) (irf_red\d+)\[irf_i\] = (.*?);\n"
                    r"(?:.*\n)*?  for \(int irf_k = tid; irf_k < 1; irf_k \+= \d+\) (g_\w+\[.*?\]) = irf_red\d+\[irf_k\];\n")


def patched(src):
    def repl(m):
        red, expr, dst = m.group(2), m.group(3), m.group(4)
        op = expr.replace(f"{red}[irf_i + 32]", "{b}").replace(f"{red}[irf_i]", "{a}")
        step = op.format(a="irf_x", b="irf_y")
        return ("\n  if (tid < 32) {\n"
                f"    real_t irf_x = {red}[tid];\n"
                f"    if (tid + 32 < count) {{ const real_t irf_y = {red}[tid + 32]; irf_x = {step}; }}\n"
                "#pragma unroll\n"
                "    for (int irf_s = 16; irf_s > 0; irf_s >>= 1) {\n"
                "      const real_t irf_y = __shfl_down_sync(0xffffffffu, irf_x, irf_s);\n"
                f"      if (tid < irf_s && tid + irf_s < count) irf_x = {step};\n"
                "    }\n"
                f"    if (tid == 0) {dst.replace('irf_k', '0')} = irf_x;\n"
                "  }\n")
    gpu_end = src.index("#else", src.index("extern \"C\" __global__"))
    out, k = STEP32.subn(repl, src[:gpu_end], count=1)
    assert k == 1
    return out + src[gpu_end:]


def measure(dev, rec):
    for _ in range(5):
        rec.replay()
    one = float(np.median([rec.time_once() for _ in range(80)]))
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            rec.replay()
        dev.drv.Context.synchronize()
    ks = {e.key: round(e.device_time_total / e.count, 2) for e in prof.key_averages() if e.device_time_total > 0}
    return one, ks


torch.zeros(1, device="cuda")
out = {"gpu": torch.cuda.get_device_name()}
for wl, path in FILES.items():
    plan, _ = compile_program(path, None, "f32")
    inputs = random_inputs(plan.reference_program, N, 1, np.float32)
    nbytes = effective_bytes(plan.reference_program, N, 4)
    base = plan.source
    res = {}
    for rnd in range(2):
        for name in ("shared tree", "warp shuffles"):
            plan.source, plan.cubin = (base if name == "shared tree" else patched(base)), None
            dev = CudaDevice(plan)
            if "copy_Bps" not in out:
                out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
            rec = Executor(plan, dev).prepare(inputs, N)
            rec.replay()
            got = {k: v.tobytes() for k, v in rec.outputs().items() if v.ndim == 0}
            one, ks = measure(dev, rec)
            res[f"{name} #{rnd}"] = {"one_us": round(one * 1e6, 1), "of_copy": round(nbytes / one / out["copy_Bps"], 4),
                                     "kernels_us": ks}
            res.setdefault("bits", []).append(got)
            dev.close()
    res["same bits"] = all(b == res["bits"][0] for b in res["bits"])
    del res["bits"]
    out[wl] = res
print(json.dumps(out, indent=1))
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "shfl_exp_%s.json" % out["gpu"].split()[1]), "w"), indent=1)
