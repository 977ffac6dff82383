// A CUDA kernel's source run on the host, for tests: the blocks one after another, a block's
// threads as std::threads, __syncthreads a barrier among them, __shared__ arrays static (one
// block runs at a time). Enough CUDA for the tangent's rows kernels (tests/test_assembly.py).
#include <math.h>
#include <atomic>
#include <barrier>
#include <functional>
#include <thread>
#include <vector>
#define __device__
#define __host__
#define __forceinline__ inline
#define __global__
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
#define __shared__ static
#define __restrict__ __restrict
struct irf_dim3 { unsigned x = 0, y = 0, z = 0; };
inline thread_local irf_dim3 threadIdx;
inline irf_dim3 blockIdx, blockDim, gridDim;
inline std::barrier<>* irf_block_barrier = nullptr;
inline void __syncthreads() { irf_block_barrier->arrive_and_wait(); }
inline unsigned long long atomicMax(unsigned long long* at, unsigned long long v)
{
  std::atomic_ref<unsigned long long> word(*at);
  unsigned long long old = word.load();
  while (old < v && !word.compare_exchange_weak(old, v)) {}
  return old;
}
struct uchar4 { unsigned char x, y, z, w; };
struct int4 { int x, y, z, w; };
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
struct alignas(8) float2 { float x, y; };

// `blocks` blocks of (bx, by) threads, each running `body`.
inline void irf_launch(unsigned blocks, unsigned bx, unsigned by, const std::function<void()>& body)
{
  blockDim = {bx, by, 1};
  gridDim = {blocks, 1, 1};
  for (unsigned b = 0; b < blocks; ++b) {
    blockIdx = {b, 0, 0};
    std::barrier<> barrier(bx * by);
    irf_block_barrier = &barrier;
    std::vector<std::thread> threads;
    for (unsigned y = 0; y < by; ++y)
      for (unsigned x = 0; x < bx; ++x)
        threads.emplace_back([=, &body] { threadIdx = {x, y, 0}; body(); });
    for (auto& t : threads) t.join();
  }
}
