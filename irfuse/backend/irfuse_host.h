// What irfuse's generated source needs to compile as host C++ (with IRFUSE_HOST
// defined, the source holds each kernel as a host function over a range of
// blocks, see render_cpu). Spreading a launch's blocks over worker threads is the
// runtime's (irfuse.runtime.host_library), so that this header, which every host
// build parses, needs no more of the standard library than the C math functions.
//
// Shared memory is per block and filled with all-ones words (NaN) before the
// block runs, so reading shared memory that no thread of the block wrote shows
// up in the results.
#pragma once
#define IRFUSE_HOST 1

#include <cmath>
#include <cstdlib>
#include <cstring>

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
}  // namespace irf
