// CflStep's chain from irfuse's own cubin (record of benchmarks/NOTES.md, 2026-12-01): the cubin comes
// from 2026-12-01_cflstep_chain_probe.py time N CUBIN.
// CflStep's chain from irfuse's own cubin (NVRTC), captured as irfuse does: k0, combine, sdiv, k2.
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <algorithm>
#include <cuda.h>
#include <cuda_runtime.h>
#define CK(x) do { cudaError_t e = (x); if (e != cudaSuccess) { printf("%s:%d %s\n", __FILE__, __LINE__, cudaGetErrorString(e)); exit(1); } } while (0)
#define DK(x) do { CUresult e = (x); if (e != CUDA_SUCCESS) { printf("%s:%d driver error %d\n", __FILE__, __LINE__, (int)e); exit(1); } } while (0)
static void launch(CUstream s, bool pdl, CUfunction f, int grid, int block, void** args) {
  CUlaunchConfig c = {}; c.gridDimX = grid; c.gridDimY = 1; c.gridDimZ = 1; c.blockDimX = block == 1024 ? 1024 : 1; c.blockDimY = block == 1024 ? 1 : block; c.blockDimZ = 1; c.hStream = s;
  CUlaunchAttribute at[1]; at[0].id = CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION; at[0].value.programmaticStreamSerializationAllowed = 1;
  c.attrs = at; c.numAttrs = pdl ? 1 : 0;
  DK(cuLaunchKernelEx(&c, f, args, nullptr));
}
int main(int argc, char** argv) {
  long long n = atoll(argv[1]);
  CK(cudaFree(0));
  CUmodule m; DK(cuModuleLoad(&m, argv[2]));
  CUfunction k0, cb, k1, k2;
  DK(cuModuleGetFunction(&k0, m, "cfl_step_k0_venorm3_max")); DK(cuModuleGetFunction(&cb, m, "irf_combine_max_1"));
  DK(cuModuleGetFunction(&k1, m, "cfl_step_k1_sdiv")); DK(cuModuleGetFunction(&k2, m, "cfl_step_k2_svmul3_vadd3"));
  float *v, *x, *xn, *cfl, *parts, *vmax, *dt; long long P = (n + 511) / 512, one = 1;
  CK(cudaMalloc(&v, n * 12)); CK(cudaMalloc(&x, n * 12)); CK(cudaMalloc(&xn, n * 12));
  CK(cudaMalloc(&cfl, 16)); CK(cudaMalloc(&parts, P * 4)); CK(cudaMalloc(&vmax, 16)); CK(cudaMalloc(&dt, 16));
  std::vector<float> h(n * 3);
  for (long long i = 0; i < n * 3; ++i) h[i] = (float)((i * 2654435761ull) % 1000) / 1000.0f - 0.5f;
  CK(cudaMemcpy(v, h.data(), n * 12, cudaMemcpyHostToDevice)); CK(cudaMemcpy(x, h.data(), n * 12, cudaMemcpyHostToDevice));
  float c = 0.3f; CK(cudaMemcpy(cfl, &c, 4, cudaMemcpyHostToDevice));
  cudaStream_t s; CK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
  int g0 = (int)P, g2 = (int)((n + 127) / 128);
  void* a0[] = {&v, &parts, &n}; void* ac[] = {&parts, &vmax, &P}; void* a1[] = {&cfl, &vmax, &dt, &one}; void* a2[] = {&v, &dt, &x, &xn, &n};
  cudaEvent_t e0, e1; CK(cudaEventCreate(&e0)); CK(cudaEventCreate(&e1));
  cudaStream_t blocking; CK(cudaStreamCreate(&blocking));
  cudaStream_t ls[3] = {s, (cudaStream_t)0, blocking}; const char* ln[3] = {"non-blocking stream", "legacy default stream", "blocking stream"};
  for (int round = 0; round < 6; ++round) {
    cudaStream_t L = ls[round % 3];
    cudaGraph_t g; cudaGraphExec_t ge;
    CK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    launch(s, false, k0, g0, 256, a0); launch(s, true, cb, 8, 1024, ac); launch(s, true, k1, 1, 1, a1); launch(s, true, k2, g2, 128, a2);
    CK(cudaStreamEndCapture(s, &g)); CK(cudaGraphInstantiate(&ge, g, 0));
    for (int i = 0; i < 5; ++i) CK(cudaGraphLaunch(ge, L));
    CK(cudaStreamSynchronize(L));
    std::vector<float> one_, ten;
    for (int i = 0; i < 60; ++i) { CK(cudaEventRecord(e0, L)); CK(cudaGraphLaunch(ge, L)); CK(cudaEventRecord(e1, L)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); one_.push_back(ms * 1e3f); }
    for (int i = 0; i < 20; ++i) { CK(cudaEventRecord(e0, L)); for (int j = 0; j < 10; ++j) CK(cudaGraphLaunch(ge, L)); CK(cudaEventRecord(e1, L)); CK(cudaEventSynchronize(e1)); float ms; CK(cudaEventElapsedTime(&ms, e0, e1)); ten.push_back(ms * 1e2f); }
    std::sort(one_.begin(), one_.end()); std::sort(ten.begin(), ten.end());
    printf("round %d irfuse's cubin, graph launched on the %s: one %.2f us, ten %.2f us\n", round, ln[round % 3], one_[30], ten[10]);
  }
  return 0;
}
