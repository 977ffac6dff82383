"""Ad hoc: SyncTest's kernel (AoS and SoA) as a persistent kernel: a grid of (SMs x R) blocks, each
over a balanced contiguous range of elements in tiles of B, the next S-1 tiles' loads in flight
(cp.async 16 B) while one is computed and stored. Against the default kernel, at two sizes."""
import json, os, sys
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import effective_bytes

NAME = "synctest_k0_madd33_madd33_madd33_etc"
HEAD = 'extern "C" __global__ void __launch_bounds__(%d, %d) ' + NAME + '(const real_t* __restrict__ g_A, real_t* __restrict__ g_F, const long long n)\n{\n'
F = "x + (x + (x + (x + x)))"

RANGE = '''  const int tid = threadIdx.y;
  const long long q = n / 4;
  const long long e0 = q * blockIdx.x / gridDim.x * 4, e1 = blockIdx.x + 1 == gridDim.x ? n : q * (blockIdx.x + 1) / gridDim.x * 4;
  const int ntile = (int)((e1 - e0 + %(B)d - 1) / %(B)d);
'''


def aos_persist(B, R, S):
    p = dict(B=B, S=S, T=9 * B)
    return HEAD % (B, R) + f'''  IRFUSE_SHARED_STATIC(real_t, smem, {S * 9 * B});
''' + RANGE % p + '''  #pragma unroll
  for (int s = 0; s < %(S)d - 1; ++s) {
    if (s < ntile) { const long long f = e0 + (long long)s * %(B)d; const int c = e1 - f < %(B)d ? (int)(e1 - f) : %(B)d;
      irf_load_async16(smem + s * %(T)d, g_A + f * 9, c * 9, tid, %(B)d); }
    asm volatile("cp.async.commit_group;\\n" ::: "memory");
  }
  for (int t = 0; t < ntile; ++t) {
    const int nt = t + %(S)d - 1;
    if (nt < ntile) { const long long f = e0 + (long long)nt * %(B)d; const int c = e1 - f < %(B)d ? (int)(e1 - f) : %(B)d;
      irf_load_async16(smem + (nt %% %(S)d) * %(T)d, g_A + f * 9, c * 9, tid, %(B)d); }
    asm volatile("cp.async.commit_group;\\n" ::: "memory");
    asm volatile("cp.async.wait_group %%0;\\n" :: "n"(%(S)d - 1) : "memory");
    __syncthreads();
    real_t* buf = smem + (t %% %(S)d) * %(T)d;
    const long long f = e0 + (long long)t * %(B)d; const int c = e1 - f < %(B)d ? (int)(e1 - f) : %(B)d;
    if (tid < c) {
      #pragma unroll
      for (int k = 0; k < 9; ++k) { const real_t x = buf[tid * 9 + k]; buf[tid * 9 + k] = %(F)s; }
    }
    __syncthreads();
    irf_copy16(g_F + f * 9, buf, c * 9, tid, %(B)d);
    __syncthreads();
  }
}
''' % dict(p, F=F)


def soa_persist(B, R, S):
    p = dict(B=B, S=S, T=9 * B, P=B // 4)
    return HEAD % (B, R) + f'''  IRFUSE_SHARED_STATIC(real_t, smem, {S * 9 * B});
''' + RANGE % p + '''  #pragma unroll
  for (int s = 0; s < %(S)d - 1; ++s) {
    if (s < ntile) { const long long f = e0 + (long long)s * %(B)d; const int c = e1 - f < %(B)d ? (int)(e1 - f) : %(B)d;
      for (int i = tid; i < 9 * %(P)d; i += %(B)d) { const int k = i / %(P)d, j = (i %% %(P)d) * 4;
        if (j < c) { const unsigned a = (unsigned)__cvta_generic_to_shared(smem + s * %(T)d + k * %(B)d + j);
          asm volatile("cp.async.cg.shared.global [%%0], [%%1], 16;\\n" :: "r"(a), "l"(g_A + (long long)k * n + f + j) : "memory"); } } }
    asm volatile("cp.async.commit_group;\\n" ::: "memory");
  }
  for (int t = 0; t < ntile; ++t) {
    const int nt = t + %(S)d - 1;
    if (nt < ntile) { const long long f = e0 + (long long)nt * %(B)d; const int c = e1 - f < %(B)d ? (int)(e1 - f) : %(B)d;
      for (int i = tid; i < 9 * %(P)d; i += %(B)d) { const int k = i / %(P)d, j = (i %% %(P)d) * 4;
        if (j < c) { const unsigned a = (unsigned)__cvta_generic_to_shared(smem + (nt %% %(S)d) * %(T)d + k * %(B)d + j);
          asm volatile("cp.async.cg.shared.global [%%0], [%%1], 16;\\n" :: "r"(a), "l"(g_A + (long long)k * n + f + j) : "memory"); } } }
    asm volatile("cp.async.commit_group;\\n" ::: "memory");
    asm volatile("cp.async.wait_group %%0;\\n" :: "n"(%(S)d - 1) : "memory");
    __syncthreads();
    const real_t* buf = smem + (t %% %(S)d) * %(T)d;
    const long long f = e0 + (long long)t * %(B)d; const int c = e1 - f < %(B)d ? (int)(e1 - f) : %(B)d;
    if (tid < c) {
      #pragma unroll
      for (int k = 0; k < 9; ++k) { const real_t x = buf[k * %(B)d + tid]; g_F[(long long)k * n + f + tid] = %(F)s; }
    }
    __syncthreads();
  }
}
''' % dict(p, F=F)


def replace_kernel(src, new):
    i = src.index(NAME + "(")
    i = src.rindex('extern "C"', 0, i)
    j = src.index("\n}\n", i) + 3
    return src[:i] + new + src[j:]


def profiled(dev, rec):
    for _ in range(5):
        rec.replay()
    one = float(np.median([rec.time_once() for _ in range(60)]))
    ten = float(np.median([rec.time_once(10) for _ in range(20)])) / 10
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            rec.replay()
        dev.drv.Context.synchronize()
    ks = [round(e.device_time_total / e.count, 2) for e in prof.key_averages() if e.device_time_total > 0 and NAME in e.key]
    return {"one_run_us": round(one * 1e6, 2), "b2b_us": round(ten * 1e6, 2), "kernel_us": ks[0]}


torch.zeros(1, device="cuda")
sizes = [int(a) for a in sys.argv[1:]] or [4194304]
sms = torch.cuda.get_device_properties(0).multi_processor_count
out = {"gpu": torch.cuda.get_device_name(), "sms": sms, "rows": []}
for layout in ("aos", "soa"):
    plan, _ = compile_program("examples/synctest.kas", None, "f32", layout=layout)
    base = plan.source
    k0 = plan.kernels[0]
    mk = aos_persist if layout == "aos" else soa_persist
    variants = {"base": (base, None)}
    for (R, S) in ((8, 2), (11, 2), (8, 3), (11, 3), (6, 4), (16, 2)):
        variants[f"persist R{R} S{S}"] = (replace_kernel(base, mk(128, R, S)), sms * R)
    for n in sizes:
        rng = np.random.default_rng(1)
        inputs = {"A": rng.random((n, 3, 3), dtype=np.float32) if layout == "aos" else rng.random((3, 3, n), dtype=np.float32)}
        nbytes = effective_bytes(plan.reference_program, n, 4)
        want = None
        for rnd in range(2):
            for name, (src, grid) in variants.items():
                if name != "base" and n != sizes[0] and rnd:
                    continue
                plan.source, plan.cubin = src, None
                k0.fixed_grid = grid
                try:
                    dev = CudaDevice(plan)
                except Exception as e:
                    print(name, "FAILED", str(e)[:3000], flush=True)
                    continue
                if "copy_Bps" not in out:
                    out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
                    print("copy", out["copy_Bps"] / 1e9, flush=True)
                rec = Executor(plan, dev).prepare(inputs, n)
                rec.replay()
                got = rec.outputs()["F"].tobytes()
                want = want or got
                r = profiled(dev, rec)
                r.update(layout=layout, n=n, variant=name, round=rnd, same_bits=got == want,
                         one_of_copy=round(nbytes / (r["one_run_us"] * 1e-6) / out["copy_Bps"], 4),
                         b2b_of_copy=round(nbytes / (r["b2b_us"] * 1e-6) / out["copy_Bps"], 4),
                         kernel_of_copy=round(nbytes / (r["kernel_us"] * 1e-6) / out["copy_Bps"], 4))
                out["rows"].append(r)
                print(layout, n, name, rnd, "same" if r["same_bits"] else "DIFFERENT", "one", r["one_of_copy"], "b2b", r["b2b_of_copy"], "kern", r["kernel_of_copy"], flush=True)
                dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "persist_exp.json"), "w"), indent=1)
