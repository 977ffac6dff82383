// What irfuse's generated source needs to compile as host C++ (with IRFUSE_HOST
// defined, the source holds each kernel as a host function over a range of
// blocks, see render_cpu) and the runner that spreads a launch's blocks over
// worker threads. It includes C headers and <cmath> only: the C++ thread
// library's headers and their template instances took more than half of every
// host build (see host_compile).
//
// Shared memory is per block and filled with all-ones words (NaN) before the
// block runs, so reading shared memory that no thread of the block wrote shows
// up in the results.
#pragma once
#define IRFUSE_HOST 1

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <pthread.h>

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

// A kernel's scratch memory on the host (its blocks' shared memory and the values its
// threads keep across barriers), freed when the kernel returns. `get()` is null when the
// memory could not be had: the kernel then runs no block and reports it.
template <class T>
class Scratch {
 public:
  explicit Scratch(long long words) : data_(static_cast<T*>(std::malloc(sizeof(T) * (words > 0 ? words : 1)))) {}
  ~Scratch() { std::free(data_); }
  Scratch(const Scratch&) = delete;
  Scratch& operator=(const Scratch&) = delete;
  T* get() const { return data_; }

 private:
  T* data_;
};

// What a kernel's launcher hands its ranges of blocks: the arrays, the batch, the order of
// each region's threads.
struct LaunchArgs {
  void** args;
  long long n;
  bool reverse;
};

// A range of a launch's blocks, [begin, end), run by the kernel: 0, or 1 where the kernel
// could not allocate its scratch.
typedef int (*BlockRange)(const LaunchArgs* launch, long long begin, long long end);

struct Blocks {
  BlockRange body;
  const LaunchArgs* launch;
  long long grid, chunk, next;
  int failed;
};

// One worker: the next range of blocks until there are none.
inline void* run_ranges(void* p) {
  Blocks* b = static_cast<Blocks*>(p);
  for (long long first = __atomic_fetch_add(&b->next, b->chunk, __ATOMIC_RELAXED); first < b->grid;
       first = __atomic_fetch_add(&b->next, b->chunk, __ATOMIC_RELAXED))
    if (b->body(b->launch, first, first + b->chunk < b->grid ? first + b->chunk : b->grid) != 0)
      __atomic_store_n(&b->failed, 1, __ATOMIC_RELAXED);
  return nullptr;
}

// Runs the blocks [0, grid) on `workers` threads (the calling thread alone when that is 1
// or there is one block), each taking the next range of blocks as it becomes free. Blocks
// are independent, so which thread runs one does not change its results; a thread that
// cannot be started leaves its share to the others. Returns 0, or 1 if a range failed.
inline int run_blocks(long long grid, int workers, BlockRange body, const LaunchArgs* launch) {
  const long long nworkers = workers < 1 ? 1 : (workers > grid ? grid : workers);
  if (nworkers <= 1) return body(launch, 0, grid);
  // Several ranges per worker balance blocks of uneven cost; not so many that the counter
  // is contended.
  const long long chunk = grid / (nworkers * 8);
  Blocks b{body, launch, grid, chunk < 1 ? 1 : chunk, 0, 0};
  pthread_t* threads = static_cast<pthread_t*>(std::malloc(sizeof(pthread_t) * (nworkers - 1)));
  long long started = 0;
  for (long long w = 1; threads != nullptr && w < nworkers; ++w)
    if (pthread_create(&threads[started], nullptr, run_ranges, &b) == 0) ++started;
  run_ranges(&b);
  for (long long i = 0; i < started; ++i) pthread_join(threads[i], nullptr);
  std::free(threads);
  return b.failed;
}
}  // namespace irf
