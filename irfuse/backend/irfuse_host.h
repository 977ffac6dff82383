// What irfuse's generated source needs to compile as host C++ (with IRFUSE_HOST
// defined, the source holds each kernel as a host function over a range of
// blocks, see cuda_emit) and the runner that spreads a launch's blocks over
// worker threads.
//
// Shared memory is per block and filled with all-ones words (NaN) before the
// block runs, so reading shared memory that no thread of the block wrote shows
// up in the results.
#pragma once
#define IRFUSE_HOST 1

#include <atomic>
#include <cmath>
#include <cstring>
#include <exception>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline
#define __launch_bounds__(...)
#define __align__(n) alignas(n)
// No `__restrict__` on the host (after the standard headers above). The device functions'
// operands are restrict-qualified, and once g++ 12 (-O2) had inlined them into a region, it
// read a value through one (vneg3's) before the call just before had written it (vadd3's
// result): poisoned words, NaN results (tests/regressions/restrict_reordered_across_inlined_
// calls.kas; right with -fno-inline, -fno-tree-slp-vectorize, ASan or UBSan). Without the
// qualifier the CPU backend measured as fast (benchmarks/cpu.py, eighteenth session).
#define __restrict__

using std::cos;
using std::exp;
using std::fabs;
using std::log;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;

// Vector types used for 16-byte copies.
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };

namespace irf {
template <class T>
inline void poison(T* smem, long long words) {
  std::memset(static_cast<void*>(smem), 0xff, sizeof(T) * words);  // all-ones words are NaN
}

// Runs body(begin, end) over the blocks [0, grid) on `workers` threads (the calling thread
// alone when that is 1 or there is one block), handing out chunks of blocks as threads
// become free.  Blocks are independent, so which thread runs one does not change its
// results.  Returns 0, or 1 if the body threw.
template <class Body>
inline int run_blocks(long long grid, int workers, const Body& body) {
  const long long nworkers = workers < 1 ? 1 : (workers > grid ? grid : workers);
  if (nworkers <= 1) {
    try {
      body(0LL, grid);
    } catch (...) {
      return 1;
    }
    return 0;
  }
  // Several chunks per worker balance blocks of uneven cost; not so many that the
  // counter is contended.
  long long chunk = grid / (nworkers * 8);
  if (chunk < 1) chunk = 1;
  std::atomic<long long> next{0};
  std::atomic<int> failed{0};
  auto work = [&] {
    try {
      for (long long b = next.fetch_add(chunk); b < grid; b = next.fetch_add(chunk))
        body(b, b + chunk < grid ? b + chunk : grid);
    } catch (...) {
      failed = 1;
    }
  };
  std::vector<std::thread> threads;
  threads.reserve(nworkers - 1);
  for (long long w = 1; w < nworkers; ++w) threads.emplace_back(work);
  work();
  for (auto& t : threads) t.join();
  return failed.load();
}
}  // namespace irf
