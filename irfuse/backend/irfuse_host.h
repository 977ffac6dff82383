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
#include <unistd.h>

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
// qualifier the CPU backend measured as fast (benchmarks/cpu.py; NOTES, The CPU backend, 2026-11-24).
#define __restrict__

using std::cos;
using std::exp;
using std::fabs;
using std::log;
using std::pow;
using std::sin;
using std::sqrt;
using std::tanh;

// A hint that the bytes at p will be read soon (the CPU loop renderer's prefetch of a later
// element's row, see render_cpu_loop); nothing on a compiler without the builtin.
#if defined(__GNUC__) || defined(__clang__)
#define IRF_PREFETCH(p) __builtin_prefetch(p)
#else
#define IRF_PREFETCH(p) ((void)0)
#endif

// 16-byte vectors of GCC's and Clang's vector extensions (every host compiler irfuse uses has
// them): a call's uniform words made once per launch by the CPU loop renderer
// (render_uniform_vectors); arithmetic on them is IEEE arithmetic per lane.
typedef float irf_f32x4 __attribute__((vector_size(16)));
typedef double irf_f64x2 __attribute__((vector_size(16)));

// Vector types used for 16-byte copies.
struct alignas(16) float4 { float x, y, z, w; };
struct alignas(16) double2 { double x, y; };

// The workers' pool is one object per process for every host library built from this
// header (its C++ symbols are unique across the libraries a process loads), and a library
// built from another version of the header must not share it: its structures differ. The
// host build names the version (IRFUSE_HOST_ABI, from the header's hash), and everything
// here lives in an inline namespace of that name.
#ifndef IRFUSE_HOST_ABI
#define IRFUSE_HOST_ABI unversioned
#endif

namespace irf {
inline namespace IRFUSE_HOST_ABI {
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

// A launch's blocks are cut into one contiguous range per worker, in order: worker w runs
// the w-th of every launch, so the elements a worker wrote in one kernel are those it reads
// in the next, from its own core's cache (on 16 cores of the GPU machine, numba's static
// `prange` kept them there and irfuse's shared counter did not). A worker takes its range in
// chunks through the range's own counter; one that has finished takes chunks from the
// others' ranges, so a slow or missing worker delays no block and every block runs once.
struct alignas(64) Range {
  long long next, end;
};

struct Blocks {
  BlockRange body;
  const LaunchArgs* launch;
  long long chunk;
  int ranges;
  Range* range;
  int failed;
};

// Worker `self`: the chunks of its own range, then those left in the others'.
inline void run_ranges(Blocks* b, int self) {
  for (int k = 0; k < b->ranges; ++k) {
    Range& r = b->range[(self + k) % b->ranges];
    for (long long first = __atomic_fetch_add(&r.next, b->chunk, __ATOMIC_RELAXED); first < r.end;
         first = __atomic_fetch_add(&r.next, b->chunk, __ATOMIC_RELAXED))
      if (b->body(b->launch, first, first + b->chunk < r.end ? first + b->chunk : r.end) != 0)
        __atomic_store_n(&b->failed, 1, __ATOMIC_RELAXED);
  }
}

// The launches' worker threads, started once per process (per host library) and kept: a
// launch that started and joined its own threads spent about 0.3 ms on 16 cores doing so,
// more than a small kernel runs. One launch at a time uses them; a launch made while another
// runs (from another thread of the caller) starts threads of its own for its blocks. A forked
// child (whose copy of the pool has no threads) starts its own.
//
// A launch is handed over without a lock: the launching thread publishes the work and then,
// for each worker it wants, the launch's generation in that worker's own `assigned` slot; a
// worker, spinning on its slot, takes the launch, runs its range and counts itself out of
// `running`. A worker acts only on its own slot: the launch it was given cannot finish (nor
// its work be replaced) before the worker counts itself out. (A shared generation that every
// worker read, with the wanted count beside it, let a worker not wanted in one launch, paused
// between the two reads, take part in the next launch twice and count itself out twice, so
// that launch returned while another worker still ran its blocks: a crash seen with several
// processes' pools on 16 cores.) The mutex and condition variables serve sleeping only (a
// worker idle past POOL_SPINS, or a launching thread waiting that long for the workers): with
// the mutex taken by every worker at every launch, as before, a launch on 16 threads cost
// about 26 us of handover. `sleepers` and `waiting` say who sleeps; each side writes its own
// flag and then reads the other side's (sequentially consistent), so no wake-up is lost.
constexpr int POOL_MAX = 1024;  // threads a pool keeps (a launch's other workers start their own)
struct Pool {
  pthread_mutex_t busy;  // held by the launch using the pool
  pthread_mutex_t m;     // guards sleeping on `wake` and `done`
  pthread_cond_t wake, done;
  Blocks* work;
  unsigned long long generation;  // launches handed to the threads so far
  int size;      // threads started
  int running;   // taking part in the current launch and not yet finished
  int sleepers;  // workers asleep on `wake` (or about to be)
  int waiting;   // 1 while the launching thread sleeps on `done`
  long long pid;  // the process the threads belong to; -1 while being made
  unsigned long long assigned[POOL_MAX];  // per thread: the generation of the last launch it was given
};

inline Pool& pool() {
  static Pool p = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER,
                   PTHREAD_COND_INITIALIZER, nullptr, 0, 0, 0, 0, 0, 0, {}};
  return p;
}

struct PoolStart {
  int index;
  unsigned long long seen;  // its slot's generation when it was started
};

// Waking a sleeping thread took 60-80 us here, as long as a small launch runs: a worker that
// finished waits this many pauses (tens of microseconds) for the next launch before it
// sleeps, and a launch as long for its workers before it does, so back-to-back launches (a
// program's kernels, a recorded run's replays) hand over without sleeping.
constexpr int POOL_SPINS = 4000;

inline void pool_pause() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

inline void* pool_worker(void* arg) {
  const PoolStart start = *static_cast<PoolStart*>(arg);
  std::free(arg);
  Pool& p = pool();
  unsigned long long* const mine = &p.assigned[start.index];
  unsigned long long seen = start.seen;
  for (;;) {
    unsigned long long now = __atomic_load_n(mine, __ATOMIC_ACQUIRE);
    for (int i = 0; now == seen && i < POOL_SPINS; ++i) {
      pool_pause();
      now = __atomic_load_n(mine, __ATOMIC_ACQUIRE);
    }
    if (now == seen) {
      pthread_mutex_lock(&p.m);
      __atomic_add_fetch(&p.sleepers, 1, __ATOMIC_SEQ_CST);
      while ((now = __atomic_load_n(mine, __ATOMIC_SEQ_CST)) == seen) pthread_cond_wait(&p.wake, &p.m);
      __atomic_sub_fetch(&p.sleepers, 1, __ATOMIC_SEQ_CST);
      pthread_mutex_unlock(&p.m);
    }
    // (the launch given cannot finish, nor the next be made, before this worker counts itself
    // out: `work` is that launch's)
    seen = now;
    run_ranges(p.work, start.index + 1);
    if (__atomic_sub_fetch(&p.running, 1, __ATOMIC_SEQ_CST) == 0 && __atomic_load_n(&p.waiting, __ATOMIC_SEQ_CST)) {
      pthread_mutex_lock(&p.m);
      pthread_cond_signal(&p.done);
      pthread_mutex_unlock(&p.m);
    }
  }
  return nullptr;
}

// The pool of this process, ready (made anew in a forked child), or null where another
// thread is making it or another launch uses it (then held: `release_pool` lets it go).
inline Pool* acquire_pool() {
  Pool& p = pool();
  const long long me = static_cast<long long>(getpid());
  long long owner = __atomic_load_n(&p.pid, __ATOMIC_ACQUIRE);
  if (owner != me) {
    if (owner == -1 || !__atomic_compare_exchange_n(&p.pid, &owner, -1, false, __ATOMIC_ACQ_REL,
                                                    __ATOMIC_ACQUIRE))
      return nullptr;
    pthread_mutex_init(&p.busy, nullptr);
    pthread_mutex_init(&p.m, nullptr);
    pthread_cond_init(&p.wake, nullptr);
    pthread_cond_init(&p.done, nullptr);
    p.work = nullptr;
    p.generation = 0;
    p.size = p.running = p.sleepers = p.waiting = 0;
    for (int w = 0; w < POOL_MAX; ++w) p.assigned[w] = 0;
    __atomic_store_n(&p.pid, me, __ATOMIC_RELEASE);
  }
  return pthread_mutex_trylock(&p.busy) == 0 ? &p : nullptr;
}

// Runs the blocks [0, grid) on `workers` threads (the calling thread alone when that is 1
// or there is one block), worker w first the w-th of `workers` contiguous ranges (see
// `Range`). Blocks are independent, so which thread runs one does not change its results; a
// thread that cannot be started leaves its range to the others. Returns 0, or 1 if a range
// failed.
inline int run_blocks(long long grid, int workers, BlockRange body, const LaunchArgs* launch) {
  const long long nworkers = workers < 1 ? 1 : (workers > grid ? grid : workers);
  if (nworkers <= 1) return body(launch, 0, grid);
  // Each range in several chunks balances blocks of uneven cost; not so many that a
  // counter is contended.
  Range* range = static_cast<Range*>(std::aligned_alloc(alignof(Range), sizeof(Range) * nworkers));
  if (range == nullptr) return body(launch, 0, grid);
  for (long long w = 0; w < nworkers; ++w) range[w] = Range{grid * w / nworkers, grid * (w + 1) / nworkers};
  const long long chunk = grid / (nworkers * 8);
  Blocks b{body, launch, chunk < 1 ? 1 : chunk, static_cast<int>(nworkers), range, 0};
  // (freed by hand on each return: no destructors, which would need the C++ runtime's
  // unwinder in a library a C compiler links, `gcc`)
  if (Pool* p = acquire_pool()) {
    pthread_mutex_lock(&p->m);
    pthread_attr_t attr;
    const bool detached = pthread_attr_init(&attr) == 0 &&
                          pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED) == 0;
    while (detached && p->size < nworkers - 1 && p->size < POOL_MAX) {
      PoolStart* start = static_cast<PoolStart*>(std::malloc(sizeof(PoolStart)));
      pthread_t thread;
      if (start == nullptr) break;
      *start = PoolStart{p->size, p->assigned[p->size]};
      if (pthread_create(&thread, &attr, pool_worker, start) != 0) {
        std::free(start);
        break;
      }
      ++p->size;
    }
    pthread_attr_destroy(&attr);
    pthread_mutex_unlock(&p->m);
    const int wanted = p->size < nworkers - 1 ? p->size : static_cast<int>(nworkers - 1);
    p->work = &b;
    __atomic_store_n(&p->running, wanted, __ATOMIC_RELAXED);
    const unsigned long long generation = ++p->generation;  // (written by the pool's holder alone)
    for (int w = 0; w < wanted; ++w) __atomic_store_n(&p->assigned[w], generation, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&p->sleepers, __ATOMIC_SEQ_CST) > 0) {
      pthread_mutex_lock(&p->m);
      pthread_cond_broadcast(&p->wake);
      pthread_mutex_unlock(&p->m);
    }
    run_ranges(&b, 0);
    for (int i = 0; i < POOL_SPINS && __atomic_load_n(&p->running, __ATOMIC_ACQUIRE) > 0; ++i) pool_pause();
    if (__atomic_load_n(&p->running, __ATOMIC_ACQUIRE) > 0) {
      pthread_mutex_lock(&p->m);
      __atomic_store_n(&p->waiting, 1, __ATOMIC_SEQ_CST);
      while (__atomic_load_n(&p->running, __ATOMIC_SEQ_CST) > 0) pthread_cond_wait(&p->done, &p->m);
      __atomic_store_n(&p->waiting, 0, __ATOMIC_SEQ_CST);
      pthread_mutex_unlock(&p->m);
    }
    pthread_mutex_unlock(&p->busy);
    std::free(range);
    return b.failed;
  }
  // (another launch uses the pool: threads of this launch's own, worker w running range w)
  struct Own {
    Blocks* b;
    int self;
  };
  pthread_t* threads = static_cast<pthread_t*>(std::malloc(sizeof(pthread_t) * (nworkers - 1)));
  Own* own = static_cast<Own*>(std::malloc(sizeof(Own) * (nworkers - 1)));
  long long started = 0;
  for (long long w = 1; threads != nullptr && own != nullptr && w < nworkers; ++w) {
    own[started] = Own{&b, static_cast<int>(w)};
    void* (*entry)(void*) = [](void* arg) -> void* {
      Own* o = static_cast<Own*>(arg);
      run_ranges(o->b, o->self);
      return nullptr;
    };
    if (pthread_create(&threads[started], nullptr, entry, &own[started]) == 0) ++started;
  }
  run_ranges(&b, 0);
  for (long long i = 0; i < started; ++i) pthread_join(threads[i], nullptr);
  std::free(threads);
  std::free(own);
  std::free(range);
  return b.failed;
}
}  // namespace IRFUSE_HOST_ABI
}  // namespace irf
