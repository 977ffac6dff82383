// CflStep's chain (record of benchmarks/NOTES.md, 2026-12-01): emitted.cuh and variants.cuh come from
// 2026-12-01_cflstep_chain_probe.py headers DIR, variants2.cuh (F, G) from the same with `early DIR`,
// persistent.cuh is 2026-12-01_cflstep_chain_probe_persistent.cuh; build with -I DIR.
// CflStep's chain at n elements: the emitted kernels and variants, in CUDA graphs with
// programmatic edges as irfuse captures them; whole runs timed one per timing and ten back to back.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <type_traits>
#include <cuda_runtime.h>
#include "emitted.cuh"
#include "variants.cuh"
#include "variants2.cuh"
#include "persistent.cuh"
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)

template <typename... A>
void launch(cudaStream_t s, bool pdl, void (*k)(A...), int grid, int block, typename std::remove_reference<A>::type... args) {
  cudaLaunchConfig_t c = {};
  c.gridDim = dim3(grid); c.blockDim = block == 1024 ? dim3(1024) : dim3(1, block); c.stream = s;
  cudaLaunchAttribute at[1];
  at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  at[0].val.programmaticStreamSerializationAllowed = 1;
  c.attrs = at; c.numAttrs = pdl ? 1 : 0;
  CK(cudaLaunchKernelEx(&c, k, args...));
}

int main(int argc, char** argv) {
  long long n = argc > 1 ? atoll(argv[1]) : 4194304;
  float *v, *x, *xn, *cfl, *parts, *vmax, *dt, *dt2, *xn2;
  long long P = (n + 511) / 512;
  CK(cudaMalloc(&v, n * 12)); CK(cudaMalloc(&x, n * 12)); CK(cudaMalloc(&xn, n * 12)); CK(cudaMalloc(&xn2, n * 12));
  CK(cudaMalloc(&cfl, 16)); CK(cudaMalloc(&parts, P * 4)); CK(cudaMalloc(&vmax, 16)); CK(cudaMalloc(&dt, 16)); CK(cudaMalloc(&dt2, 16));
  std::vector<float> h(n * 3);
  for (long long i = 0; i < n * 3; ++i) h[i] = (float)((i * 2654435761ull) % 1000) / 1000.0f - 0.5f;
  CK(cudaMemcpy(v, h.data(), n * 12, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(x, h.data(), n * 12, cudaMemcpyHostToDevice));
  float c = 0.3f; CK(cudaMemcpy(cfl, &c, 4, cudaMemcpyHostToDevice));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int g0 = (int)P, g2 = (int)((n + 127) / 128);
  const char* names[] = {"A emitted: k0, combine, sdiv, k2", "B combine+sdiv, k2", "C k0, combine, sdiv, k2 prefetch", "D combine+sdiv, k2 prefetch", "A no programmatic edges", "F combine+sdiv, k2: both trigger first", "G as F, k2 loads x, v first", "P one kernel resident across the barrier", "P, the update in reverse order", "P4 as P reversed, loops unrolled 4", "P8 as P reversed, loops unrolled 8"};
  // copy bandwidth
  float *ca, *cb; size_t cbytes = 1ull << 30; CK(cudaMalloc(&ca, cbytes)); CK(cudaMalloc(&cb, cbytes));
  int per_sm = 0, sms = 0;
  CK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, cfl_persistent<8>, 256, 0));
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const int pgrid = per_sm * sms;
  printf("persistent grid %d (%d an SM)\n", pgrid, per_sm);
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  for (int i = 0; i < 3; ++i) CK(cudaMemcpyAsync(cb, ca, cbytes, cudaMemcpyDeviceToDevice, s));
  std::vector<float> ct;
  for (int i = 0; i < 10; ++i) { CK(cudaEventRecord(e0, s)); CK(cudaMemcpyAsync(cb, ca, cbytes, cudaMemcpyDeviceToDevice, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); ct.push_back(ms); }
  std::sort(ct.begin(), ct.end()); double copy = 2.0 * cbytes / (ct[5] * 1e-3);
  double floor_us = 48.0 * n / copy * 1e6;
  printf("copy %.0f GB/s, floor %.2f us\n", copy / 1e9, floor_us);
  std::vector<float> ref;
  for (int round = 0; round < 3; ++round)
  for (int var = 0; var < 11; ++var) {
    bool pdl = var != 4;
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    if (var < 7) launch(s, false, cfl_step_k0_venorm3_max, g0, 256, (const float*)v, parts, n);
    if (var >= 7) {
      cudaLaunchConfig_t pc = {}; pc.gridDim = dim3(pgrid); pc.blockDim = dim3(256); pc.stream = s;
      int rev = var == 8;
      if (var == 9) CK(cudaLaunchKernelEx(&pc, cfl_persistent<4>, (const float*)v, (const float*)x, xn, (const float*)cfl, parts, dt, n, 1));
      else if (var == 10) CK(cudaLaunchKernelEx(&pc, cfl_persistent<8>, (const float*)v, (const float*)x, xn, (const float*)cfl, parts, dt, n, 1));
      else CK(cudaLaunchKernelEx(&pc, cfl_persistent<1>, (const float*)v, (const float*)x, xn, (const float*)cfl, parts, dt, n, rev));
    } else if (var >= 5) {
      launch(s, true, combine_sdiv_early, 8, 1024, (const float*)parts, vmax, P, (const float*)cfl, dt);
      if (var == 5) launch(s, true, k2_early, g2, 128, (const float*)v, (const float*)dt, (const float*)x, xn, n);
      else launch(s, true, k2_early_prefetch, g2, 128, (const float*)v, (const float*)dt, (const float*)x, xn, n);
    } else if (var == 1 || var == 3) {
      launch(s, pdl, combine_sdiv, 8, 1024, (const float*)parts, vmax, P, (const float*)cfl, dt);
    } else {
      launch(s, pdl, irf_combine_max_1, 8, 1024, (const float*)parts, vmax, P);
      launch(s, pdl, cfl_step_k1_sdiv, 1, 1, (const float*)cfl, (const float*)vmax, dt, 1LL);
    }
    if (var >= 5) {}
    else if (var == 2 || var == 3) launch(s, pdl, k2_prefetch, g2, 128, (const float*)v, (const float*)dt, (const float*)x, xn, n);
    else launch(s, pdl, cfl_step_k2_svmul3_vadd3, g2, 128, (const float*)v, (const float*)dt, (const float*)x, xn, n);
    CK(cudaStreamEndCapture(s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 5; ++i) CK(cudaGraphLaunch(ge, s));
    CK(cudaStreamSynchronize(s));
    std::vector<float> one, ten;
    for (int i = 0; i < 60; ++i) { CK(cudaEventRecord(e0, s)); CK(cudaGraphLaunch(ge, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); one.push_back(ms * 1e3f); }
    for (int i = 0; i < 20; ++i) { CK(cudaEventRecord(e0, s)); for (int j = 0; j < 10; ++j) CK(cudaGraphLaunch(ge, s)); CK(cudaEventRecord(e1, s)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); ten.push_back(ms * 1e2f); }
    std::sort(one.begin(), one.end()); std::sort(ten.begin(), ten.end());
    std::vector<float> out(n * 3); float hdt;
    CK(cudaMemcpy(out.data(), xn, n * 12, cudaMemcpyDeviceToHost)); CK(cudaMemcpy(&hdt, dt, 4, cudaMemcpyDeviceToHost));
    if (ref.empty()) { ref = out; ref.push_back(hdt); }
    bool same = hdt == ref.back() && std::equal(out.begin(), out.end(), ref.begin());
    if (!same) { long long bad = -1, nbad = 0; for (long long i = 0; i < n * 3; ++i) if (out[i] != ref[i]) { if (bad < 0) bad = i; ++nbad; }
      printf("   dt %.9g vs %.9g; %lld words differ, first %lld: %.9g vs %.9g\n", hdt, ref.back(), nbad, bad, bad >= 0 ? out[bad] : 0.f, bad >= 0 ? ref[bad] : 0.f); }
    printf("round %d %-40s one %.2f us (%.1f%% of floor)  ten %.2f us (%.1f%%)  bits %s\n", round, names[var], one[30], 100 * floor_us / one[30], ten[10], 100 * floor_us / ten[10], same ? "same" : "DIFFER");
    CK(cudaGraphExecDestroy(ge)); CK(cudaGraphDestroy(g));
  }
  return 0;
}
