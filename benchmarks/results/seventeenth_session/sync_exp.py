"""Ad hoc: SyncTest's kernel with E elements per thread (fewer, longer blocks), AoS and SoA."""
import json, os, sys
import numpy as np
import torch
from torch.profiler import ProfilerActivity, profile
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import effective_bytes

NAME = "synctest_k0_madd33_madd33_madd33_etc"
HEAD = 'extern "C" __global__ void __launch_bounds__(128, %d) ' + NAME + '(const real_t* __restrict__ g_A, real_t* __restrict__ g_F, const long long n)\n{\n'


def aos(E, minb):
    return HEAD % minb + f'''  IRFUSE_SHARED_STATIC(real_t, smem, {1152 * E});
  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * {128 * E};
  const int count = n - first < {128 * E} ? (int)(n - first) : {128 * E};
  irf_load_async16(smem, g_A + first * 9, count * 9, tid, 128);
  irf_async_wait();
  __syncthreads();
  #pragma unroll
  for (int e = 0; e < {E}; ++e) {{
    const int y = tid + e * 128;
    if (y < count) {{
      real_t* a = smem + y * 9;
      #pragma unroll
      for (int k = 0; k < 9; ++k) {{ const real_t x = a[k]; a[k] = x + (x + (x + (x + x))); }}
    }}
  }}
  __syncthreads();
  irf_copy16(g_F + first * 9, smem, count * 9, tid, 128);
}}
'''


def soa_strided(E, minb):
    return HEAD % minb + f'''  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * {128 * E};
  const int count = n - first < {128 * E} ? (int)(n - first) : {128 * E};
  real_t a[{E}][9];
  #pragma unroll
  for (int e = 0; e < {E}; ++e) {{
    const int y = tid + e * 128;
    if (y < count) {{
      #pragma unroll
      for (int k = 0; k < 9; ++k) a[e][k] = g_A[(long long)k * n + first + y];
    }}
  }}
  #pragma unroll
  for (int e = 0; e < {E}; ++e) {{
    const int y = tid + e * 128;
    if (y < count) {{
      #pragma unroll
      for (int k = 0; k < 9; ++k) {{ const real_t x = a[e][k]; g_F[(long long)k * n + first + y] = x + (x + (x + (x + x))); }}
    }}
  }}
}}
'''


def soa_vec4(minb):
    return HEAD % minb + '''  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * 512;
  const int count = n - first < 512 ? (int)(n - first) : 512;
  const int y = tid * 4;
  if ((n & 3) == 0 && y + 3 < count) {
    float4 a[9];
    #pragma unroll
    for (int k = 0; k < 9; ++k) a[k] = *reinterpret_cast<const float4*>(g_A + (long long)k * n + first + y);
    #pragma unroll
    for (int k = 0; k < 9; ++k) {
      float4 x = a[k];
      x.x = x.x + (x.x + (x.x + (x.x + x.x))); x.y = x.y + (x.y + (x.y + (x.y + x.y)));
      x.z = x.z + (x.z + (x.z + (x.z + x.z))); x.w = x.w + (x.w + (x.w + (x.w + x.w)));
      *reinterpret_cast<float4*>(g_F + (long long)k * n + first + y) = x;
    }
  } else {
    for (int j = y; j < y + 4 && j < count; ++j)
      for (int k = 0; k < 9; ++k) { const real_t x = g_A[(long long)k * n + first + j]; g_F[(long long)k * n + first + j] = x + (x + (x + (x + x))); }
  }
}
'''


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
sizes = [int(a) for a in sys.argv[1:]] or [4194304, 16777216]
out = {"gpu": torch.cuda.get_device_name(), "rows": []}
for layout in ("aos", "soa"):
    plan, _ = compile_program("examples/synctest.kas", None, "f32", layout=layout)
    base = plan.source
    k0 = plan.kernels[0]
    if layout == "aos":
        variants = {"base": (base, 1), "E=1 in place": (replace_kernel(base, aos(1, 16)), 1),
                    "E=2 in place": (replace_kernel(base, aos(2, 16)), 2), "E=4 in place": (replace_kernel(base, aos(4, 12)), 4)}
    else:
        variants = {"base": (base, 1), "E=2 strided": (replace_kernel(base, soa_strided(2, 8)), 2),
                    "E=4 strided": (replace_kernel(base, soa_strided(4, 8)), 4), "vec4": (replace_kernel(base, soa_vec4(8)), 4)}
    for n in sizes:
        rng = np.random.default_rng(1)
        inputs = {"A": rng.random((n, 3, 3), dtype=np.float32) if layout == "aos" else rng.random((3, 3, n), dtype=np.float32)}
        nbytes = effective_bytes(plan.reference_program, n, 4)
        want = None
        for rnd in range(2):
            for name, (src, E) in variants.items():
                plan.source, plan.cubin = src, None
                k0.fixed_grid = -(-n // (128 * E)) if E > 1 else 0
                dev = CudaDevice(plan)
                if "copy_Bps" not in out:
                    out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
                    print("copy", out["copy_Bps"] / 1e9, flush=True)
                key = f"same_bytes_copy_{n}"
                if key not in out:
                    out[key] = measure_copy_bandwidth(dev.drv, nbytes=nbytes // 2, repeat=40)
                rec = Executor(plan, dev).prepare(inputs, n)
                rec.replay()
                got = rec.outputs()["F"].tobytes()
                want = want or got
                r = profiled(dev, rec)
                r.update(layout=layout, n=n, variant=name, round=rnd, same_bits=got == want,
                          one_of_copy=round(nbytes / (r["one_run_us"] * 1e-6) / out["copy_Bps"], 4),
                          b2b_of_copy=round(nbytes / (r["b2b_us"] * 1e-6) / out["copy_Bps"], 4),
                          kernel_of_copy=round(nbytes / (r["kernel_us"] * 1e-6) / out["copy_Bps"], 4),
                          same_bytes_copy_of_copy=round(out[key] / out["copy_Bps"], 4))
                out["rows"].append(r)
                print(r, flush=True)
                dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "sync_exp.json"), "w"), indent=1)
