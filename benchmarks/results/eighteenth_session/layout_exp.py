"""Ad hoc: SyncTest's kernel (AoS and SoA) with cache hints, shared-memory staging and TMA bulk copies."""
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

TMA = r'''
__device__ __forceinline__ void tma_init(unsigned long long* bar) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;" :: "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
__device__ __forceinline__ void tma_expect(unsigned long long* bar, unsigned bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" :: "r"((unsigned)__cvta_generic_to_shared(bar)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_load(void* dst, const void* src, unsigned bytes, unsigned long long* bar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];"
               :: "r"((unsigned)__cvta_generic_to_shared(dst)), "l"(src), "r"(bytes), "r"((unsigned)__cvta_generic_to_shared(bar)) : "memory");
}
__device__ __forceinline__ void tma_wait(unsigned long long* bar) {
  unsigned a = (unsigned)__cvta_generic_to_shared(bar);
  asm volatile("{\n .reg .pred p;\n W: mbarrier.try_wait.parity.shared::cta.b64 p, [%0], 0;\n @!p bra W;\n}" :: "r"(a) : "memory");
}
__device__ __forceinline__ void tma_store(void* dst, const void* src, unsigned bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;" :: "l"(dst), "r"((unsigned)__cvta_generic_to_shared(src)), "r"(bytes) : "memory");
}
__device__ __forceinline__ void tma_store_done() {
  asm volatile("cp.async.bulk.commit_group;\n cp.async.bulk.wait_group.read 0;" ::: "memory");
}
__device__ __forceinline__ void proxy_fence() { asm volatile("fence.proxy.async.shared::cta;" ::: "memory"); }
'''


def aos_base_cs(B, minb):
    return HEAD % (B, minb) + f'''  IRFUSE_SHARED_STATIC(real_t, smem, {18 * B});
  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * {B};
  const int count = n - first < {B} ? (int)(n - first) : {B};
  irf_load_async16(smem, g_A + first * 9, count * 9, tid, {B});
  irf_async_wait();
  __syncthreads();
  if (tid < count) {{
    #pragma unroll
    for (int k = 0; k < 9; ++k) {{ const real_t x = smem[tid * 9 + k]; smem[{9 * B} + tid * 9 + k] = {F}; }}
  }}
  __syncthreads();
  const int nvec = count * 9 / 4;
  float4* d = reinterpret_cast<float4*>(g_F + first * 9);
  const float4* s = reinterpret_cast<const float4*>(smem + {9 * B});
  for (int i = tid; i < nvec; i += {B}) __stcs(d + i, s[i]);
  for (int i = nvec * 4 + tid; i < count * 9; i += {B}) g_F[first * 9 + i] = smem[{9 * B} + i];
}}
'''


def aos_tma(B, minb, store_tma=True):
    return HEAD % (B, minb) + f'''  IRFUSE_SHARED_STATIC(real_t, smem, {18 * B});
  __shared__ __align__(8) unsigned long long bar;
  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * {B};
  const int count = n - first < {B} ? (int)(n - first) : {B};
  const bool full = count == {B};
  if (full) {{
    if (tid == 0) {{ tma_init(&bar); tma_expect(&bar, {36 * B}); tma_load(smem, g_A + first * 9, {36 * B}, &bar); }}
    __syncthreads();
    tma_wait(&bar);
  }} else {{
    irf_copy(smem, g_A + first * 9, count * 9, tid, {B});
    __syncthreads();
  }}
  if (tid < count) {{
    #pragma unroll
    for (int k = 0; k < 9; ++k) {{ const real_t x = smem[tid * 9 + k]; smem[{9 * B} + tid * 9 + k] = {F}; }}
  }}
  {"if (full) { proxy_fence(); __syncthreads(); if (tid == 0) { tma_store(g_F + first * 9, smem + %d, %d); tma_store_done(); } } else" % (9 * B, 36 * B) if store_tma else ""}
  {{ __syncthreads(); irf_copy16(g_F + first * 9, smem + {9 * B}, count * 9, tid, {B}); }}
}}
'''


def soa_direct(B, minb, ld="", st=""):
    L = (lambda a: f"{ld}(&{a})") if ld else (lambda a: a)
    S = (lambda a, v: f"{st}(&{a}, {v})") if st else (lambda a, v: f"{a} = {v}")
    return HEAD % (B, minb) + f'''  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * {B};
  if (first + tid < n) {{
    real_t a[9];
    #pragma unroll
    for (int k = 0; k < 9; ++k) a[k] = {L("g_A[(long long)k * n + first + tid]")};
    #pragma unroll
    for (int k = 0; k < 9; ++k) {{ const real_t x = a[k]; {S("g_F[(long long)k * n + first + tid]", F)}; }}
  }}
}}
'''


def soa_staged4(B, minb):
    """The block's 9 runs through shared memory with 4-byte cp.async (what irf_load_soa does)."""
    return HEAD % (B, minb) + f'''  IRFUSE_SHARED_STATIC(real_t, smem, {9 * B});
  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * {B};
  const int count = n - first < {B} ? (int)(n - first) : {B};
  irf_load_soa<9, 1, {B}>(smem, g_A + first, n, count, tid, {B});
  irf_async_wait();
  __syncthreads();
  if (tid < count) {{
    #pragma unroll
    for (int k = 0; k < 9; ++k) {{ const real_t x = smem[tid + k * {B}]; g_F[(long long)k * n + first + tid] = {F}; }}
  }}
}}
'''


def soa_staged(B, minb, st16=False, tma=False):
    """The block's 9 runs of B words each, copied to shared (cp.async 16 B, or TMA bulk)."""
    head = HEAD % (B, minb) + f'''  IRFUSE_SHARED_STATIC(real_t, smem, {18 * B});
  __shared__ __align__(8) unsigned long long bar;
  const int tid = threadIdx.y;
  const long long first = (long long)blockIdx.x * {B};
  const int count = n - first < {B} ? (int)(n - first) : {B};
  const bool full = count == {B} && (n & 3) == 0;
'''
    if tma:
        load = f'''  if (full) {{
    if (tid == 0) {{ tma_init(&bar); tma_expect(&bar, {36 * B});
      #pragma unroll
      for (int k = 0; k < 9; ++k) tma_load(smem + k * {B}, g_A + (long long)k * n + first, {4 * B}, &bar); }}
    __syncthreads();
    tma_wait(&bar);
  }}'''
    else:
        load = f'''  if (full) {{
    for (int i = tid; i < {9 * B // 4}; i += {B}) {{
      const int k = i / {B // 4}, j = i % {B // 4};
      const unsigned s = (unsigned)__cvta_generic_to_shared(smem + k * {B} + j * 4);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\\n" :: "r"(s), "l"(g_A + (long long)k * n + first + j * 4) : "memory");
    }}
    irf_async_wait();
    __syncthreads();
  }}'''
    load += f''' else {{
    for (int i = tid; i < {9 * B}; i += {B}) {{ const int k = i / {B}, j = i % {B}; if (j < count) smem[i] = g_A[(long long)k * n + first + j]; }}
    __syncthreads();
  }}
'''
    if st16 or tma:
        comp = f'''  if (tid < count) {{
    #pragma unroll
    for (int k = 0; k < 9; ++k) {{ const real_t x = smem[k * {B} + tid]; smem[{9 * B} + k * {B} + tid] = {F}; }}
  }}
'''
        if tma:
            store = f'''  if (full) {{ proxy_fence(); __syncthreads();
    if (tid == 0) {{
      #pragma unroll
      for (int k = 0; k < 9; ++k) tma_store(g_F + (long long)k * n + first, smem + {9 * B} + k * {B}, {4 * B});
      tma_store_done(); }}
  }} else {{ __syncthreads(); for (int i = tid; i < {9 * B}; i += {B}) {{ const int k = i / {B}, j = i % {B}; if (j < count) g_F[(long long)k * n + first + j] = smem[{9 * B} + i]; }} }}
}}
'''
        else:
            store = f'''  __syncthreads();
  if (full) {{
    for (int i = tid; i < {9 * B // 4}; i += {B}) {{
      const int k = i / {B // 4}, j = i % {B // 4};
      *reinterpret_cast<float4*>(g_F + (long long)k * n + first + j * 4) = *reinterpret_cast<const float4*>(smem + {9 * B} + k * {B} + j * 4);
    }}
  }} else {{ for (int i = tid; i < {9 * B}; i += {B}) {{ const int k = i / {B}, j = i % {B}; if (j < count) g_F[(long long)k * n + first + j] = smem[{9 * B} + i]; }} }}
}}
'''
        return head + load + comp + store
    return head + load + f'''  if (tid < count) {{
    #pragma unroll
    for (int k = 0; k < 9; ++k) {{ const real_t x = smem[k * {B} + tid]; g_F[(long long)k * n + first + tid] = {F}; }}
  }}
}}
'''


def replace_kernel(src, new):
    i = src.index(NAME + "(")
    i = src.rindex('extern "C"', 0, i)
    j = src.index("\n}\n", i) + 3
    return src[:i] + TMA + new + src[j:]


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
out = {"gpu": torch.cuda.get_device_name(), "rows": []}
for layout in ("aos", "soa"):
    plan, _ = compile_program("examples/synctest.kas", None, "f32", layout=layout)
    base = plan.source
    k0 = plan.kernels[0]
    if layout == "aos":
        variants = {"base": (base, 128), "stcs": (replace_kernel(base, aos_base_cs(128, 11)), 128),
                    "tma load+store": (replace_kernel(base, aos_tma(128, 11)), 128),
                    "tma load": (replace_kernel(base, aos_tma(128, 11, False)), 128),
                    "tma 256": (replace_kernel(base, aos_tma(256, 5)), 256)}
    else:
        variants = {"base": (base, 128), "direct": (replace_kernel(base, soa_direct(128, 11)), 128),
                    "ldcs/stcs": (replace_kernel(base, soa_direct(128, 11, "__ldcs", "__stcs")), 128),
                    "ldg/stcs": (replace_kernel(base, soa_direct(128, 11, "__ldg", "__stcs")), 128),
                    "direct 256": (replace_kernel(base, soa_direct(256, 6)), 256),
                    "staged16": (replace_kernel(base, soa_staged(128, 11)), 128),
                    "staged4": (replace_kernel(base, soa_staged4(128, 11)), 128),
                    "staged16 st16": (replace_kernel(base, soa_staged(128, 11, st16=True)), 128),
                    "tma": (replace_kernel(base, soa_staged(128, 11, tma=True)), 128),
                    "tma 256": (replace_kernel(base, soa_staged(256, 5, tma=True)), 256),
                    "staged16 256": (replace_kernel(base, soa_staged(256, 5)), 256)}
    for n in sizes:
        rng = np.random.default_rng(1)
        inputs = {"A": rng.random((n, 3, 3), dtype=np.float32) if layout == "aos" else rng.random((3, 3, n), dtype=np.float32)}
        nbytes = effective_bytes(plan.reference_program, n, 4)
        want = None
        for rnd in range(2):
            for name, (src, B) in variants.items():
                plan.source, plan.cubin = src, None
                k0.by = B
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
                print(r, flush=True)
                dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "layout_exp.json"), "w"), indent=1)
