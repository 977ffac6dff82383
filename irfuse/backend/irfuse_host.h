// Maps the CUDA built-ins used by irfuse's generated kernels to host C++,
// so the exact source given to NVRTC also runs on the CPU.
//
// A launch runs the grid's blocks one after another; each block's
// bx*by threads are real std::threads that meet at a std::barrier for
// __syncthreads().  Before each block its shared memory is filled with NaN,
// so reading shared memory that no thread wrote shows up in the results.
#pragma once
#define IRFUSE_HOST 1

#include <barrier>
#include <cmath>
#include <cstring>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)

struct irf_dim3 {
  unsigned x = 1, y = 1, z = 1;
};

namespace irf {
struct BlockContext {
  std::barrier<>* barrier = nullptr;
  unsigned char* smem = nullptr;
};
inline thread_local irf_dim3 thread_idx, block_idx;
inline irf_dim3 block_dim, grid_dim;
inline BlockContext ctx;
}  // namespace irf

#define threadIdx (irf::thread_idx)
#define blockIdx (irf::block_idx)
#define blockDim (irf::block_dim)
#define gridDim (irf::grid_dim)

inline void __syncthreads() { irf::ctx.barrier->arrive_and_wait(); }

#define IRFUSE_SHARED_STATIC(T, name, words) T* name = reinterpret_cast<T*>(irf::ctx.smem)
#define IRFUSE_SHARED_DYNAMIC(T, name) T* name = reinterpret_cast<T*>(irf::ctx.smem)

using std::fabs;
using std::sqrt;

namespace irf {
// Runs `kernel` over `grid` blocks of (bx, by) threads.  Returns 0, or 1 if a thread threw.
inline int run_grid(unsigned grid, unsigned bx, unsigned by, size_t smem_bytes,
                    const std::function<void()>& kernel) {
  const unsigned nthreads = bx * by;
  std::vector<unsigned char> smem(smem_bytes + 16);
  std::barrier<> bar(nthreads);
  block_dim = {bx, by, 1};
  grid_dim = {grid, 1, 1};
  ctx.barrier = &bar;
  ctx.smem = smem.data();
  std::exception_ptr failure;
  std::mutex failure_lock;
  auto body = [&](unsigned tid) {
    thread_idx = {tid % bx, tid / bx, 1};
    thread_idx.z = 0;
    for (unsigned b = 0; b < grid; ++b) {
      if (tid == 0) std::memset(smem.data(), 0xff, smem.size());  // all-ones words are NaN
      bar.arrive_and_wait();
      block_idx = {b, 0, 0};
      try {
        kernel();
      } catch (...) {
        std::lock_guard<std::mutex> g(failure_lock);
        failure = std::current_exception();
      }
      bar.arrive_and_wait();
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(nthreads);
  for (unsigned t = 0; t < nthreads; ++t) threads.emplace_back(body, t);
  for (auto& t : threads) t.join();
  return failure ? 1 : 0;
}
}  // namespace irf

// Vector types used for 16-byte copies.
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };
