"""Ad hoc: SyncTest's AoS kernel by hand at other block sizes and resident-block minimums, its
results computed in place in the loaded buffer, against the default kernel and a cudaMemcpy of
the same bytes as one CUDA graph (one run per timing from an idle GPU, and CUPTI kernel time)."""
import json, os
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, DeviceCopy, _EventTimer, measure_copy_bandwidth
from irfuse.runtime.cuda_graph import CudaGraph
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import effective_bytes

NAME = "synctest_k0_madd33_madd33_madd33_etc"
HEAD = 'extern "C" __global__ void __launch_bounds__(%d, %d) ' + NAME + '(const real_t* __restrict__ g_A, real_t* __restrict__ g_F, const long long n)\n{\n'
F = "x + (x + (x + (x + x)))"


def aos_hand(B, minb, inplace=False):
    out = 0 if inplace else 9 * B
    return HEAD % (B, minb) + f'''  IRFUSE_SHARED_STATIC(real_t, smem, {(9 if inplace else 18) * B});
  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * {B};
  const int count = n - first < {B} ? (int)(n - first) : {B};
  irf_load_async16(smem, g_A + first * 9, count * 9, tid, {B});
  irf_async_wait();
  __syncthreads();
  if (tid < count) {{
    #pragma unroll
    for (int k = 0; k < 9; ++k) {{ const real_t x = smem[tid * 9 + k]; smem[{out} + tid * 9 + k] = {F}; }}
  }}
  __syncthreads();
  irf_copy16(g_F + first * 9, smem + {out}, count * 9, tid, {B});
}}
'''


def replace_kernel(src, new):
    i = src.index(NAME + "(")
    i = src.rindex('extern "C"', 0, i)
    j = src.index("\n}\n", i) + 3
    return src[:i] + new + src[j:]


torch.zeros(1, device="cuda")
out = {"gpu": torch.cuda.get_device_name(), "rows": []}
n = 4194304
plan, _ = compile_program("examples/synctest.kas", None, "f32")
base = plan.source
k0 = plan.kernels[0]
variants = {"base": (base, 128)}
for B, mins in ((128, (10, 11, 12)), (64, (16, 20, 22, 24)), (32, (32,)), (256, (5, 6))):
    for m in mins:
        variants[f"hand B{B} min{m}"] = (replace_kernel(base, aos_hand(B, m)), B)
variants["hand B128 min11 in place"] = (replace_kernel(base, aos_hand(128, 11, True)), 128)
variants["hand B64 min22 in place"] = (replace_kernel(base, aos_hand(64, 22, True)), 64)
rng = np.random.default_rng(1)
inputs = {"A": rng.random((n, 3, 3), dtype=np.float32)}
nbytes = effective_bytes(plan.reference_program, n, 4)
want = None
for rnd in range(3):
    for name, (src, B) in variants.items():
        plan.source, plan.cubin = src, None
        k0.by = B
        dev = CudaDevice(plan)
        if "copy_Bps" not in out:
            out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
        if name == "base":
            same = DeviceCopy(dev.drv, nbytes // 2 // 16 * 16)
            g = CudaGraph(dev.drv, lambda s: dev.drv.memcpy_dtod_async(same.dst, same.src, same.nbytes, s))
            for _ in range(5):
                g()
            ts = []
            for _ in range(150):
                with _EventTimer(dev.drv) as t:
                    g()
                ts.append(t.seconds)
            t = float(np.median(ts)) * nbytes / (2 * same.nbytes)
            out["rows"].append({"variant": "cudaMemcpy graph", "round": rnd, "one_of_copy": nbytes / t / out["copy_Bps"]})
            print("memcpy graph", rnd, round(nbytes / t / out["copy_Bps"], 4), flush=True)
            g.destroy(); same.free()
        rec = Executor(plan, dev).prepare(inputs, n)
        rec.replay()
        got = rec.outputs()["F"].tobytes()
        want = want or got
        for _ in range(5):
            rec.replay()
        one = float(np.median([rec.time_once() for _ in range(150)]))
        ten = float(np.median([rec.time_once(10) for _ in range(20)])) / 10
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                rec.replay()
            dev.drv.Context.synchronize()
        kern = [e.device_time_total / e.count for e in prof.key_averages() if e.device_time_total > 0 and NAME in e.key][0] * 1e-6
        r = {"variant": name, "round": rnd, "same_bits": got == want, "registers": plan.resources(k0.name).registers,
             "one_of_copy": nbytes / one / out["copy_Bps"], "b2b_of_copy": nbytes / ten / out["copy_Bps"],
             "kernel_of_copy": nbytes / kern / out["copy_Bps"]}
        out["rows"].append(r)
        print(name, rnd, "same" if r["same_bits"] else "DIFFERENT", r["registers"], "one %.4f b2b %.4f kern %.4f" % (r["one_of_copy"], r["b2b_of_copy"], r["kernel_of_copy"]), flush=True)
        dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "block_exp.json"), "w"), indent=1)
