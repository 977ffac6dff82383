"""CUDA C emission for `fuse` kernels.

The emitted source is self-contained and compiles unchanged with NVRTC
(for the GPU) and with the host C++ compiler plus `irfuse_host.h` (for CPU
execution).  Conventions:

- `real_t` is `float` or `double` (`IRFUSE_REAL`, defined at the top of the
  source for float64);
- kernel parameters: the global input arrays, the output arrays, then the
  batch size `n` (`long long`); all element offsets are 64-bit;
- block `(bx, by)`: `by` elements per block, `bx` threads per element; the
  last block may hold fewer than `by` elements (`count`), and threads of
  missing elements skip the calls but still reach every barrier; a kernel
  whose threads run E elements each (`elements_per_thread`) has by/E thread
  rows, and each per-element statement is a loop over the thread's elements
  ty, ty + by/E, ... (`irf_y`, unrolled on the GPU, `IRF_UNROLL`), its
  register values E rows of words (row `irf_e` for element `irf_y`);
- shared values hold the block's elements element after element, exactly
  as an array of structures holds them in global memory, so loads and stores
  are contiguous copies by all threads (coalesced); register values hold the
  thread's own element;
- in a structure-of-arrays kernel (`layout(soa)`) word k of element e is
  `g[k*n + e]`: the block copies a shared value one word's run of elements
  at a time, and a register value's words are read and written by each
  thread for its own element, consecutive threads on consecutive elements;
  the kernel's leading register loads (`staged_run_loads`: all or none) go
  through shared arrays of their own on the GPU, the block copying each
  value's runs 16 bytes at a time where the block is full and the arrays
  aligned (`irf_runs16`), then one barrier before each thread reads its words;
- every kernel starts (after its shared declarations) with `irf_after_previous_grid()`:
  launched as a programmatic dependent launch (sm_90, `runtime.dependent_launch`) it
  waits there for the previous kernel on its stream to complete, then lets the next be
  scheduled; otherwise (and on the CPU, where it is empty) it passes at once;
- a program input or output that is a strided view (`kas.strides`,
  `strided_arguments`) is read and written word by word at its strides, the
  words of a shared value by the whole block, a register value's by each
  thread for its own element.

Each kernel comes twice, from the same statements: the `__global__` kernel
for the GPU, and (under `IRFUSE_HOST`) a host function that runs a range of
blocks the way CPU implementations of OpenCL do. A block's body is cut at
its barriers into regions, and each region becomes a loop over the block's
threads (in a given order, forward or reverse), so a barrier's semantics are
exact: every thread finishes the region before any thread starts the next.
Register values used in more than one region are kept per thread across the
barrier; the others stay local to the loop, where the host compiler keeps
them in registers. The device functions are the same text for both.

A `fuse.loop` becomes a `for` loop with a constant trip count (not unrolled; the
compilers may unroll it by a small factor). On the CPU, a loop without a barrier
inside stays within its region, each thread running all its iterations; a loop
with barriers runs at the block level, its body's regions each a loop over the
threads, and register values used in such a body are kept per thread.
A `fuse.copy` is run by the threads `kernel.model.copy_pattern` names, each
copying the words it holds.

Uniform inputs (`uniform(...)` of a kernel) are copied once per block into a small
shared array of their own, right after the kernel's first loads are issued when a
planned barrier follows those loads (else first, with a barrier of their own), and
every element reads its words there. A `fuse.store ... reduce` stages the block's elements of the value in a
shared array of its own and combines them by a fixed tree (halving the elements at
each step, a barrier after each: `__syncwarp` once a step's words fit the first warp,
whose threads alone take part in it and in every later step), then writes word k of the
block's partial at k * blocks + block. For a scalar, the first step reads the value where
it is in shared memory (no staging copy first), and on the GPU the steps within the first
warp run on its registers with `__shfl_down_sync` (lane t taking lane t + s: the same
pairs in the same order; the CPU twin keeps the shared steps, `_GpuOnly`). Where each thread
runs several elements and a value is in registers, the steps whose pairs are one thread's
own elements run on a copy of its rows first (`tree_on_rows`), again the same pairs in order.
`combine_kernel` combines those partials: 8192 lanes per word, each a fixed stride of
them, then a fixed tree over the lanes (on the GPU eight blocks per word, a thread block
cluster from sm_90 whose first block reads the others' lanes from their shared memory;
the tree's last five steps on one warp): the same partials give the same bits on the GPU
and on the CPU, run after run. Neither uses atomics.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from irfuse.kernel.model import copy_pattern, register_pattern
from irfuse.kernel.policies import launch_min_blocks, staged_run_loads
from irfuse.kernel.bridge import model_from_kernel
from irfuse.analysis.shared_accesses import WARP, tree_half, tree_reads_in_place
from irfuse.diagnostics import CompileError
from irfuse.dialects import fuse
from irfuse.dialects.access_pattern import AccessPattern, compile_start
from irfuse.dialects.element_types import ElementType
from irfuse.dialects.kas import ProgramOp
from irfuse.dialects.layouts import OUTPUT_PREFIX, module_strides
from irfuse.library.catalogue import Library, find_implementation
from irfuse.library.implementations import Implementation

STATIC_SHARED_LIMIT = 48 * 1024  # bytes a kernel may declare statically

PRELUDE = r"""// Generated by irfuse. Compiles with NVRTC, or as host C++ with irfuse_host.h.
#ifndef IRFUSE_REAL
#define IRFUSE_REAL float
#endif
typedef IRFUSE_REAL real_t;
#ifndef IRFUSE_HOST
#define IRFUSE_SHARED_STATIC(T, name, words) __shared__ __align__(16) T name[words]
#define IRFUSE_SHARED_DYNAMIC(T, name) extern __shared__ __align__(16) unsigned char irf_dynamic_smem[]; T* name = reinterpret_cast<T*>(irf_dynamic_smem)
// A loop over a thread's elements, unrolled: its register rows are then indexed by constants.
#define IRF_UNROLL _Pragma("unroll")
#else
#define IRF_UNROLL
#endif

// How reductions combine two values: NaN wins, whichever side it is on (as numpy's max).
__device__ __forceinline__ real_t irf_max(real_t a, real_t b) { return a != a ? a : (b != b ? b : (a > b ? a : b)); }
__device__ __forceinline__ real_t irf_min(real_t a, real_t b) { return a != a ? a : (b != b ? b : (a < b ? a : b)); }

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
// A thread block cluster (sm_90): the block's rank in it, a barrier of all its blocks (their
// shared memory writes seen by every block after it), and a word of another block's shared array.
__device__ __forceinline__ unsigned irf_cluster_rank()
{
  unsigned r;
  asm volatile("mov.u32 %0, %%cluster_ctarank;" : "=r"(r));
  return r;
}
__device__ __forceinline__ void irf_cluster_sync()
{
  asm volatile("barrier.cluster.arrive.release;\n\tbarrier.cluster.wait.acquire;" ::: "memory");
}
__device__ __forceinline__ unsigned irf_cluster_address(const void* p, unsigned rank)
{
  unsigned a;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(a) : "r"((unsigned)__cvta_generic_to_shared(p)), "r"(rank));
  return a;
}
__device__ __forceinline__ float irf_cluster_load(const float* p, unsigned rank)
{
  float v;
  asm volatile("ld.shared::cluster.f32 %0, [%1];" : "=f"(v) : "r"(irf_cluster_address(p, rank)) : "memory");
  return v;
}
__device__ __forceinline__ double irf_cluster_load(const double* p, unsigned rank)
{
  double v;
  asm volatile("ld.shared::cluster.f64 %0, [%1];" : "=d"(v) : "r"(irf_cluster_address(p, rank)) : "memory");
  return v;
}
#endif

// Contiguous copy of `count` words by all `nthreads` threads of the block (coalesced).
__device__ __forceinline__ void irf_copy(real_t* __restrict__ dst, const real_t* __restrict__ src,
                                         int count, int tid, int nthreads)
{
  for (int i = tid; i < count; i += nthreads) dst[i] = src[i];
}

// The same with 16-byte accesses; both pointers must be 16-byte aligned.
__device__ __forceinline__ void irf_copy16(real_t* __restrict__ dst, const real_t* __restrict__ src,
                                           int count, int tid, int nthreads)
{
  const int per = 16 / (int)sizeof(real_t);
  const int nvec = count / per;
  for (int i = tid; i < nvec; i += nthreads)
    reinterpret_cast<float4*>(dst)[i] = reinterpret_cast<const float4*>(src)[i];
  for (int i = nvec * per + tid; i < count; i += nthreads) dst[i] = src[i];
}

// Global -> shared with asynchronous 16-byte copies (cp.async, sm_80 and newer): every
// thread issues all its copies before waiting, so the whole block's chunk is in flight at
// once. Both pointers 16-byte aligned. irf_async_wait() completes them (then a barrier).
__device__ __forceinline__ void irf_load_async16(real_t* __restrict__ dst, const real_t* __restrict__ src,
                                                 int count, int tid, int nthreads)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  const int per = 16 / (int)sizeof(real_t);
  const int nvec = count / per;
  for (int i = tid; i < nvec; i += nthreads) {
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst + i * per);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src + i * per) : "memory");
  }
  for (int i = nvec * per + tid; i < count; i += nthreads) dst[i] = src[i];
#else
  irf_copy16(dst, src, count, tid, nthreads);
#endif
}

// Copies of a padded shared value (element e of SIZE words at e*PITCH): the global side is
// read or written contiguously by consecutive threads, the shared side element by element.
template <int SIZE, int PITCH>
__device__ __forceinline__ void irf_load_pitched(real_t* __restrict__ dst, const real_t* __restrict__ src,
                                                 int count, int tid, int nthreads)
{
  for (int i = tid; i < count; i += nthreads) {
    real_t* d = dst + (i / SIZE) * PITCH + i % SIZE;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(d);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" :: "r"(s), "l"(src + i), "n"((int)sizeof(real_t)) : "memory");
#else
    *d = src[i];
#endif
  }
}

template <int SIZE, int PITCH>
__device__ __forceinline__ void irf_store_pitched(real_t* __restrict__ dst, const real_t* __restrict__ src,
                                                  int count, int tid, int nthreads)
{
  for (int i = tid; i < count; i += nthreads) dst[i] = src[(i / SIZE) * PITCH + i % SIZE];
}

// Structure-of-arrays copies between global memory (word k of element e at g[k*n + e], from
// the block's first element) and a shared value (element e at e*SPAN): consecutive threads
// take consecutive elements of one word, so the global side is coalesced.
template <int SIZE, int SPAN, int BY>
__device__ __forceinline__ void irf_load_soa(real_t* __restrict__ dst, const real_t* __restrict__ src,
                                             long long n, int count, int tid, int nthreads)
{
  for (int i = tid; i < SIZE * BY; i += nthreads) {
    const int k = i / BY, e = i % BY;
    if (e >= count) continue;
    real_t* d = dst + e * SPAN + k;
    const real_t* s = src + k * n + e;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned a = (unsigned)__cvta_generic_to_shared(d);
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;\n" :: "r"(a), "l"(s), "n"((int)sizeof(real_t)) : "memory");
#else
    *d = *s;
#endif
  }
}

template <int SIZE, int SPAN, int BY>
__device__ __forceinline__ void irf_store_soa(real_t* __restrict__ dst, const real_t* __restrict__ src,
                                              long long n, int count, int tid, int nthreads)
{
  for (int i = tid; i < SIZE * BY; i += nthreads) {
    const int k = i / BY, e = i % BY;
    if (e < count) dst[k * n + e] = src[e * SPAN + k];
  }
}

// A structure-of-arrays value's runs for the block (word k of its BY elements at src[k*n],
// from the block's first) into dst[k*BY + e], 16 bytes at a time, asynchronously from sm_80
// (irf_async_wait() completes them, then a barrier). Every run whole and 16-byte aligned.
template <int SIZE, int BY>
__device__ __forceinline__ void irf_load_runs16(real_t* __restrict__ dst, const real_t* __restrict__ src,
                                                long long n, int tid, int nthreads)
{
  constexpr int per = 16 / (int)sizeof(real_t), pieces = BY / per;
  for (int i = tid; i < SIZE * pieces; i += nthreads) {
    const int k = i / pieces, j = (i % pieces) * per;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    const unsigned s = (unsigned)__cvta_generic_to_shared(dst + k * BY + j);
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src + k * n + j) : "memory");
#else
    *reinterpret_cast<float4*>(dst + k * BY + j) = *reinterpret_cast<const float4*>(src + k * n + j);
#endif
  }
}

__device__ __forceinline__ void irf_async_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_all;\n" ::: "memory");
#endif
}

// Programmatic dependent launch (sm_90 and newer): a kernel launched with programmatic stream
// serialization may be scheduled while the kernel before it on its stream is finishing. It
// first waits until that kernel has completed and its writes are visible, then lets the next
// such kernel be scheduled in turn. A kernel launched normally passes both at once.
__device__ __forceinline__ void irf_after_previous_grid()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}
"""


@dataclass
class KernelInfo:
    """What a launcher needs to know about one emitted kernel."""

    name: str
    bx: int
    by: int
    shared_words: int
    inputs: list[str]
    outputs: list[str]
    input_sizes: list[int]
    output_sizes: list[int]
    calls: list[str] = field(default_factory=list)
    barriers: int = 0
    register_values: int = 0
    shared_values: int = 0
    barriers_before: int | None = None  # before fuse-place-barriers, when it ran
    dynamic_shared: bool = False  # shared memory taken at launch (over the static limit)
    min_blocks: int = 1  # __launch_bounds__ minimum resident blocks: caps registers per thread
    once: bool = False  # runs over one element (uniform values from uniform values)
    reduced: list[str] = field(default_factory=list)  # per output: the reduction its partials are for, or ""
    arrays: list[int] = field(default_factory=list)  # words of each shared array apart from the planned buffer
    fixed_grid: int = 0  # blocks of every launch (a combine kernel's: one per word); 0: one per `by` elements
    per_thread: int = 1  # elements each thread runs: the block has by / per_thread thread rows
    # Starts with irf_after_previous_grid(): may be launched as a programmatic dependent launch.
    after_previous_grid: bool = False

    @property
    def threads(self) -> int:
        return self.bx * self.by // self.per_thread

    @property
    def block_dims(self) -> tuple[int, int, int]:
        """The launch's block: bx threads per element, one row per `per_thread` elements."""
        return (self.bx, self.by // self.per_thread, 1)

    def shared_bytes(self, itemsize: int) -> int:
        return self.shared_words * itemsize

    def to_json(self) -> dict:
        return {k: getattr(self, k) for k in (
            "name", "bx", "by", "shared_words", "inputs", "outputs", "input_sizes", "output_sizes",
            "calls", "barriers", "barriers_before", "register_values", "shared_values", "dynamic_shared",
            "min_blocks", "once", "reduced", "arrays", "fixed_grid", "per_thread", "after_previous_grid")}

    def array_offsets(self, itemsize: int) -> list[int]:
        """Where the arrays apart from the planned buffer start, in words from its start: after
        it, each 16-byte aligned (as the compiler lays out static arrays, and as they sit in
        the one dynamic buffer of a kernel over the static limit)."""
        align = max(1, 16 // itemsize)
        offsets, end = [], self.shared_words
        for words in self.arrays:
            offsets.append(-(-end // align) * align)
            end = offsets[-1] + words
        return offsets

    def total_shared_bytes(self, itemsize: int) -> int:
        """Bytes of shared memory a block takes: the planned buffer and the arrays after it."""
        offsets = self.array_offsets(itemsize)
        return (offsets[-1] + self.arrays[-1] if self.arrays else self.shared_words) * itemsize

    def static_shared_bytes(self, itemsize: int) -> int:
        """Bytes of static shared memory (what ptxas reports): all of it, or none for a kernel
        over the static limit, which takes all of it at launch."""
        return 0 if self.dynamic_shared else self.total_shared_bytes(itemsize)

    def dynamic_shared_bytes(self, itemsize: int) -> int:
        """Bytes of shared memory a launch must ask for (0 below the static limit)."""
        return self.total_shared_bytes(itemsize) if self.dynamic_shared else 0

    def blocks(self, n: int) -> int:
        """Blocks of a launch over n elements (a kernel that runs once: one)."""
        return self.fixed_grid or (1 if self.once else -(-n // self.by))

    @staticmethod
    def from_json(d: dict) -> "KernelInfo":
        return KernelInfo(**d)


@dataclass
class EmittedModule:
    source: str
    kernels: list[KernelInfo]


class _Names:
    """C identifiers for the SSA values of one kernel."""

    def __init__(self) -> None:
        self.names: dict[SSAValue, str] = {}
        self.used: set[str] = set()

    def get(self, v: SSAValue, prefix: str) -> str:
        if v not in self.names:
            base = prefix + "".join(c if c.isalnum() else "_" for c in (v.name_hint or "v"))
            name, k = base, 1
            while name in self.used:
                name, k = f"{base}_{k}", k + 1
            self.used.add(name)
            self.names[v] = name
        return self.names[v]


def shared_words(kernel: fuse.KernelOp, library: Library | None = None) -> int:
    """Words of shared memory the kernel's places need (0 if all values are in registers)."""
    return model_from_kernel(kernel, library=library)[0].shared_words()


def c_start(ap: AccessPattern, bx: int) -> str:
    """An AP start expression as C text inside a kernel or device function."""
    if re.search(r"\bBY\b", ap.start):
        raise CompileError(f"access-pattern start '{ap.start}': BY is not available in generated code")
    return re.sub(r"\bBX\b", str(bx), ap.start)


def call_impl(op: fuse.CallOp, library: Library | None = None) -> Implementation:
    return find_implementation(op.op_name, op.impl.data, library)


def variant_of(op: fuse.CallOp) -> str:
    """One letter per operand and the result: 's' shared, 'r' registers, 'u' the block's copy
    of a uniform input."""
    def letter(v: SSAValue) -> str:
        place = fuse.place_of(v)
        assert place is not None
        return "s" if place.is_shared else "u" if place.is_uniform else "r"
    return "".join(letter(a) for a in op.args) + ("s" if op.get_place().is_shared else "r")


class _Loop:
    """A `fuse.loop` in the emitted body: its header and its statements (see `_KernelEmitter`)."""

    def __init__(self, header: str) -> None:
        self.header = header
        self.children: list = []


_BARRIER = object()  # a barrier in the emitted body
# A barrier among the first warp's threads only (`__syncwarp()`: the warp's shared-memory
# writes are seen by its threads after it), for steps no other thread takes part in; on the
# CPU it ends a region as `_BARRIER` does.
_WARP_BARRIER = object()

# How a reduction combines two values a and b (C expressions); NaN propagates in max and min
# as in the reference (numpy.max), whichever side it is on.
_COMBINE = {
    "sum": "{a} + {b}",
    "max": "irf_max({a}, {b})",
    "min": "irf_min({a}, {b})",
}



@dataclass
class _GpuOnly:
    """Statements the GPU runs (`gpu`, lines) in place of body nodes the CPU runs (`cpu`:
    statement lists and barriers), with the same operations in the same order: warp
    shuffles where the CPU, whose regions are loops over threads, goes through shared memory."""
    gpu: list[str]
    cpu: list


def _is_barrier(n) -> bool:
    return n is _BARRIER or n is _WARP_BARRIER


def _has_barrier(nodes: list) -> bool:
    return any(_is_barrier(n) or (isinstance(n, _Loop) and _has_barrier(n.children))
               or (isinstance(n, _GpuOnly) and _has_barrier(n.cpu)) for n in nodes)


def _gpu_text(nodes: list, indent: str = "") -> list[str]:
    """The statements of a body for the GPU: barriers as __syncthreads(), loops as `for`."""
    out: list[str] = []
    for n in nodes:
        if n is _BARRIER:
            out.append(indent + "  __syncthreads();")
        elif n is _WARP_BARRIER:
            out.append(indent + "  __syncwarp();")
        elif isinstance(n, _Loop):
            out += [indent + n.header, *_gpu_text(n.children, indent + "  "), indent + "  }"]
        elif isinstance(n, _GpuOnly):
            out += [indent + line for line in n.gpu]
        else:
            out += [indent + line for line in n]
    return out


def _cpu_items(nodes: list) -> list:
    """The body for the CPU: regions (lists of statements; a loop without barriers inside
    stays in its region) and block-level loops `(_Loop, items)`."""
    items: list = []
    region: list[str] = []
    nodes = [c for n in nodes for c in (n.cpu if isinstance(n, _GpuOnly) else [n])]
    for n in nodes:
        if _is_barrier(n) or (isinstance(n, _Loop) and _has_barrier(n.children)):
            if region:
                items.append(region)
            region = []
            if isinstance(n, _Loop):
                items.append((n, _cpu_items(n.children)))
        elif isinstance(n, _Loop):
            region += _gpu_text([n])
        else:
            region += n
    if region:
        items.append(region)
    return items


def _regions(items: list, in_loop: bool = False):
    """(region, inside a block-level loop) for every region of `_cpu_items`."""
    for item in items:
        if isinstance(item, tuple):
            yield from _regions(item[1], True)
        else:
            yield item, in_loop


def thread_scope(bx_call: int, bx_kernel: int, remap: bool) -> tuple[str, str, str]:
    """(prefix, x, y): C to open a scope where a call's thread coordinates are x, y, and its guard."""
    if remap:
        return (f"{{ const int tx_c = tid % {bx_call}, ty_c = tid / {bx_call}; ", "tx_c", "ty_c")
    return ("{ ", "tx", "ty")


def _check_element_major(ap: AccessPattern, bx: int, by: int, size: int) -> None:
    """A register value's words are found in a structure of arrays from the word a thread
    starts at within its element: the AP's start must be `ty*size` plus a part without ty."""
    start = compile_start(ap.start)
    for tx in range(bx):
        base = start(tx, 0, bx, by)
        for ty in range(1, min(by, 4)):
            if start(tx, ty, bx, by) - base != ty * size:
                raise CompileError(f"access-pattern start '{ap.start}' does not place element ty at ty*{size}: "
                                   "its words cannot be found in a structure-of-arrays batch")


def strided_index(element: str, word: str, strides: tuple[int, ...], shape: tuple[int, ...]) -> str:
    """The index in a strided view (`strides` in words, batch axis first) of word `word` (a C
    expression: the word's position in the value, row-major) of element `element`."""
    terms = [f"(long long)({element}) * {strides[0]}"]
    inner = 1
    for dim, stride in reversed(list(zip(shape, strides[1:]))):
        if stride:
            axis = f"({word})" if inner == 1 else f"(({word}) / {inner})"
            terms.append(f"(long long)({axis} % {dim}) * {stride}" if dim * inner < math.prod(shape)
                         else f"(long long){axis} * {stride}")
        inner *= dim
    return " + ".join(terms)


def strided_arguments(module: ModuleOp) -> dict[str, dict[int, tuple[int, ...]]]:
    """Kernel name -> {global argument position: strides} for the program inputs and outputs
    the module's `kas.strides` names, as the host program binds them to its launches."""
    strides = module_strides(module)
    if not strides:
        return {}
    program = next((op for op in module.ops if isinstance(op, ProgramOp)), None)
    if program is None:
        return {}
    def top_level_launch(op) -> bool:
        return isinstance(op, fuse.LaunchOp) and op.parent_op() is program

    # The host values that live in a strided view: inputs, and returned values (which the
    # launches after the one that writes them read from the same view).
    by_value = {arg: strides[name] for arg, name in zip(program.body.block.args, program.inputs) if name in strides}
    for arg, name in zip(program.body.block.args, program.inputs):
        if arg in by_value and not all(top_level_launch(u.operation) for u in arg.uses):
            raise CompileError(f"input '{name}' is read by a loop run from the host, which takes contiguous arrays: "
                               "a strided view cannot be given for it")
    for v, name in zip(program.return_op.operands, program.outputs):
        if OUTPUT_PREFIX + name not in strides:
            continue
        if not top_level_launch(v.owner):
            raise CompileError(f"output '{name}' is not written by a kernel (an input returned as it is, or the "
                               "result of a loop run from the host): a strided view cannot be given for it")
        if by_value.get(v, strides[OUTPUT_PREFIX + name]) != strides[OUTPUT_PREFIX + name]:
            raise CompileError(f"output '{name}' is returned twice with different strides")
        by_value[v] = strides[OUTPUT_PREFIX + name]
    out: dict[str, dict[int, tuple[int, ...]]] = {}
    for op in program.walk():
        if not isinstance(op, fuse.LaunchOp):
            continue
        values = [*op.args, *op.res]
        bound = {i: by_value[v] for i, v in enumerate(values) if v in by_value}
        if not bound:
            continue
        name = op.kernel_name
        if name in out or not isinstance(op.parent_op(), ProgramOp):
            raise CompileError(f"kernel @{name} reads or writes a strided argument and is launched more than once "
                               "(a loop on the host): such programs take contiguous arrays")
        out[name] = bound
    return out


def _vector_ok(by: int, size: int, offset: int, itemsize: int) -> bool:
    """16-byte copies need the block's chunk in global and shared memory 16-byte aligned."""
    per = 16 // itemsize
    return (by * size) % per == 0 and offset % per == 0


class _KernelEmitter:
    """The CUDA C of one `fuse.kernel`: declarations, then one statement group per op."""

    def __init__(self, kernel: fuse.KernelOp, itemsize: int, min_blocks: int | None, library: Library | None = None,
                 strided: dict[int, tuple[int, ...]] | None = None):
        self.kernel = kernel
        # Global arguments (by position: inputs, then outputs) that are strided views.
        args = (*kernel.input_args, *kernel.output_args)
        self.strided: dict[SSAValue, tuple[int, ...]] = {args[i]: s for i, s in (strided or {}).items()}
        self.library = library
        self.itemsize = itemsize
        self.bx, self.by = kernel.bx.data, kernel.by.data
        self.elements_per_thread = kernel.per_thread
        self.rows = self.by // self.elements_per_thread  # thread rows: element y runs on row y % rows
        self.nthreads = self.bx * self.rows
        self.names = _Names()
        self.model, mapping = model_from_kernel(kernel, itemsize, library)
        self.min_blocks = min_blocks or launch_min_blocks(self.model)
        self.vids: dict[SSAValue, int] = mapping["ids"]
        self.mops = {id(mapping["ops"][m.origin]): m for m in self.model.ops if m.origin >= 0}
        # Register loads staged through shared memory on the GPU, all or none (a strided view's
        # words are not runs), and the reads of their words once the leading loads are issued.
        staged = [mapping["ops"][self.model.ops[i].origin] for i in staged_run_loads(self.model)]
        self.staged_ops = ({id(op) for op in staged} if not any(op.source in self.strided for op in staged)
                           else set())
        self.staged_sources: list[str] = []  # their global arrays' C names
        self.staged_arrays: set[str] = set()  # their shared arrays (the CPU twin has none)
        self.staged_reads: list[str] = []
        self.rep: dict[int, SSAValue] = {}  # one C name per model value (a carried value has several SSA values)
        self.declared: set[int] = set()
        self.loops = 0
        self.in_guarded_loop = False  # emitting the body of a loop only present elements' threads run
        self.words = self.model.shared_words()
        self.info = KernelInfo(kernel.sym_name.data, self.bx, self.by, self.words,
                               [a.name_hint or f"in{i}" for i, a in enumerate(kernel.input_args)],
                               [a.name_hint or f"out{i}" for i, a in enumerate(kernel.output_args)],
                               [a.type.size for a in kernel.input_args],  # type: ignore[attr-defined]
                               [a.type.size for a in kernel.output_args])  # type: ignore[attr-defined]
        self.info.min_blocks = self.min_blocks
        self.info.per_thread = self.elements_per_thread
        if kernel.barriers_before is not None:
            self.info.barriers_before = kernel.barriers_before.data
        # The body: lists of statements, barriers and loops (`_Loop`), nested as the kernel's ops.
        self.body: list = []
        self.open: list[list] = [self.body]
        self.regs: list[tuple[str, int]] = []  # register values: C name, words per thread
        self.reg_words: dict[str, int] = {}  # register values: words per element (a row)
        self.used: set[tuple[Implementation, str]] = set()
        self.pending_async = False  # loads issued with cp.async and not yet waited for
        self.soa = kernel.global_layout == "soa"
        # Shared arrays outside the planned buffer: uniform inputs' block copies, reductions' staging.
        self.block_arrays: list[tuple[str, int]] = []
        self.uniform_copies: dict[SSAValue, str] = {}
        self.pending_uniform: list[str] = []  # lines copying them, not yet emitted
        self.info.once = kernel.runs_once
        self.info.reduced = [""] * len(kernel.output_args)

    def base(self, v: SSAValue, y: str) -> str:
        """The pointer a device function indexes for value v, run as element y: a padded
        value's element y is moved by y*(pitch - size) words (see analysis.bank_conflicts)."""
        place = fuse.place_of(v)
        assert place is not None
        if place.is_uniform:
            return self.uniform_copies[v.owner.source]  # type: ignore[union-attr]
        if not place.is_shared:
            return self.reg_ref(v)
        extra = place.pitch.data - v.type.size if place.pitch.data else 0  # type: ignore[attr-defined]
        return f"smem + {place.offset.data}" + (f" + {y}*{extra}" if extra else "")

    def reg_name(self, v: SSAValue) -> str:
        return self.names.get(self.rep.setdefault(self.vids[v], v), "r_")

    def reg_ref(self, v: SSAValue) -> str:
        """The words of register value v for the element a statement runs: the thread's
        array, or its row `irf_e` where each thread runs several elements."""
        name = self.reg_name(v)
        return name if self.elements_per_thread == 1 else f"({name} + irf_e * {self.reg_words[name]})"

    def element(self, y: str) -> str:
        """The C name of a statement's element within the block: `y` (from `thread_scope`),
        or `irf_y`, the loop variable of `each_element`."""
        return y if self.elements_per_thread == 1 else "irf_y"

    def each_element(self, statement: str) -> str:
        """`statement` (guarded) for each element the thread runs: itself with one element a
        thread, else in a loop over elements ty, ty + rows, ... (`irf_e`-th: `irf_y`)."""
        if self.elements_per_thread == 1:
            return statement
        return (f"IRF_UNROLL for (int irf_e = 0; irf_e < {self.elements_per_thread}; ++irf_e) "
                f"{{ const int irf_y = ty + irf_e * {self.rows}; {statement} }}")

    def pattern(self, v: SSAValue) -> tuple[AccessPattern, int, bool]:
        """The AP, implementation bx and remapping through which a register value's threads hold it."""
        return register_pattern(self.model, self.vids[v])

    def declare_register(self, v: SSAValue) -> None:
        if self.vids[v] in self.declared:
            return  # a carried value: declared where it is first copied into
        self.declared.add(self.vids[v])
        ap, _, _ = self.pattern(v)
        words = max(ap.relative()) + 1
        self.reg_words[self.reg_name(v)] = words
        self.regs.append((self.reg_name(v), words * self.elements_per_thread))
        self.info.register_values += 1

    def guard(self, bx_call: int, y: str, remap: bool) -> str:
        if remap:
            return f"{y} < count"
        present = "active" if self.elements_per_thread == 1 else f"{y} < count"
        return present if bx_call == self.bx else f"{present} && tx < {bx_call}"

    def guarded(self, bx_call: int, y: str, remap: bool, statement: str) -> str:
        """`statement` for the threads of present elements (all of them inside a loop that only
        such threads enter)."""
        if self.in_guarded_loop:
            return statement
        return f"if ({self.guard(bx_call, y, remap)}) {statement}"

    def _whole_threads_only(self, loop: fuse.LoopOp) -> bool:
        """Whether every op of a loop runs on every thread of its element and no barrier is in
        it: then only the threads of present elements need to run the loop at all."""
        for op in loop.body.walk():
            if isinstance(op, fuse.BarrierOp):
                return False
            if isinstance(op, fuse.CallOp) and (op.remapped or call_impl(op, self.library).bx != self.bx):
                return False
            if isinstance(op, fuse.CopyOp):
                _, bx, remap = copy_pattern(self.model, self.mops[id(op)])
                if remap or bx != self.bx:
                    return False
        return True

    def per_thread(self, v: SSAValue, statement: Callable[[str, str, str], str], global_value: SSAValue | None) -> str:
        """A statement run by each thread holding its part of register value v, given the
        global index (in `global_value`) of word k of the thread's element, the register array
        and k."""
        ap, ap_bx, remap = self.pattern(v)
        scope, x, y = thread_scope(ap_bx, self.bx, remap)
        y = self.element(y)
        size = v.type.size  # type: ignore[attr-defined]
        start = c_start(ap, ap_bx).replace("tx", "\0TX").replace("ty", "\0TY")
        if global_value is None:
            # A reduction's staging array: element y at y*size.
            _check_element_major(ap, ap_bx, self.by, size)
            word = start.replace("\0TX", x).replace("\0TY", "0")
            index = lambda k: f"{y} * {size} + ({word}) + {k}"  # noqa: E731
        elif global_value in self.strided:
            _check_element_major(ap, ap_bx, self.by, size)
            word = start.replace("\0TX", x).replace("\0TY", "0")
            strides, shape = self.strided[global_value], v.type.shape  # type: ignore[attr-defined]
            index = lambda k: strided_index(f"first + {y}", f"({word}) + {k}", strides, shape)  # noqa: E731
        elif self.soa:
            # The AP's start is the element's base (y*size) plus the word the thread starts at.
            _check_element_major(ap, ap_bx, self.by, size)
            word = start.replace("\0TX", x).replace("\0TY", "0")
            index = lambda k: f"(long long)(({word}) + {k}) * n + first + {y}"  # noqa: E731
        else:
            start = start.replace("\0TX", x).replace("\0TY", y)
            index = lambda k: f"first * {size} + ({start}) + {k}"  # noqa: E731
        body = " ".join(statement(index(k), self.reg_ref(v), str(k)) for k in sorted(ap.relative()))
        return f"  {scope}{self.each_element(self.guarded(ap_bx, y, remap, '{ ' + body + ' }'))} }}"

    def copy(self, dst: str, src: str, count: str, size: int, place: fuse.PlaceAttr, load: bool = False) -> str:
        """A block-wide copy between global and shared memory: element-wise for a padded value,
        16 bytes at a time where the block's chunk is aligned (asynchronous for loads)."""
        offset, pitch = place.offset.data, place.pitch.data
        if pitch:
            fn = f"irf_{'load' if load else 'store'}_pitched<{size}, {pitch}>"
            self.pending_async |= load
        else:
            fn = "irf_copy16" if _vector_ok(self.by, size, offset, self.itemsize) else "irf_copy"
            if load and fn == "irf_copy16":
                fn = "irf_load_async16"
                self.pending_async = True
        return f"  {fn}({dst}, {src}, {count}, tid, {self.nthreads});"

    def strided_copy(self, g: SSAValue, type_, place: fuse.PlaceAttr, load: bool) -> str:
        """A block-wide copy between a strided view and a shared value (element e at e*SPAN),
        word by word: consecutive threads take consecutive elements of one word where the
        view's elements lie closer together than an element's words (a structure of arrays),
        else consecutive words of an element."""
        size, shape, strides = type_.size, type_.shape, self.strided[g]
        span, off, name = place.pitch.data or size, place.offset.data, self.names.get(g, "g_")
        word_major = len(strides) > 1 and abs(strides[0]) < min(abs(s) for s in strides[1:])
        split = (f"const int k = irf_i / {self.by}, e = irf_i % {self.by}; if (e >= count) continue;" if word_major
                 else f"const int e = irf_i / {size}, k = irf_i % {size};")
        bound = f"{size * self.by}" if word_major else f"count * {size}"
        shared = f"smem[{off} + e * {span} + k]"
        glob = f"{name}[{strided_index('first + e', 'k', strides, shape)}]"
        move = f"{shared} = {glob};" if load else f"{glob} = {shared};"
        return f"  for (int irf_i = tid; irf_i < {bound}; irf_i += {self.nthreads}) {{ {split} {move} }}"

    def soa_copy(self, fn: str, dst: str, src: str, size: int, place: fuse.PlaceAttr) -> str:
        span = place.pitch.data or size
        return f"  irf_{fn}_soa<{size}, {span}, {self.by}>({dst}, {src}, n, count, tid, {self.nthreads});"

    def stage_uniform_inputs(self) -> None:
        """Copies each uniform input into a shared array of its own, once per block. Where
        the kernel's first loads are followed by a planned barrier, the copies go just before
        it (`flush_uniform_copies`): the block asks for its elements first, and the copies'
        latency overlaps theirs (ahead of the loads with a barrier of their own, as
        elsewhere, every block waited for its uniform words before asking for anything)."""
        lines = []
        for i in self.kernel.uniform_positions:
            g = self.kernel.input_args[i]
            size = g.type.size  # type: ignore[attr-defined]
            name = f"irf_u{len(self.uniform_copies)}"
            self.uniform_copies[g] = name
            self.block_arrays.append((name, size))
            lines += [f"  // {name}: the block's copy of uniform input {g.name_hint or self.names.get(g, 'g_')}",
                      f"  for (int irf_i = tid; irf_i < {size}; irf_i += {self.nthreads}) "
                      f"{name}[irf_i] = {self.names.get(g, 'g_')}[irf_i];"]
        first = next((op for op in self.kernel.body.block.ops if not isinstance(op, fuse.LoadOp)), None)
        if isinstance(first, fuse.BarrierOp):
            self.pending_uniform = lines
            return
        for text in lines:
            self.line(text)
        if lines:
            self.open[-1].append(_BARRIER)

    def flush_uniform_copies(self) -> None:
        """The deferred uniform copies, where the loads before the first barrier are issued."""
        for text in self.pending_uniform:
            self.line(text)
        self.pending_uniform = []

    def emit_load(self, op: fuse.LoadOp) -> None:
        if op.place.is_uniform:  # (the verifier keeps every uniform input there)
            source = op.source.name_hint or self.names.get(op.source, "g_")
            self.line(f"  // {self.names.get(op.res, 'v_')}: uniform {source}, read from "
                      f"{self.uniform_copies[op.source]} by every element")
            return
        size = op.res.type.size
        src = self.names.get(op.source, "g_")
        self.line(f"  // {self.names.get(op.res, 'v_')}: load {op.source.name_hint} into {op.place.text()}")
        if op.place.is_shared:
            off = op.place.offset.data
            if op.source in self.strided:
                self.line(self.strided_copy(op.source, op.res.type, op.place, load=True))  # type: ignore[arg-type]
            elif self.soa:
                self.line(self.soa_copy("load", f"smem + {off}", f"{src} + first", size, op.place))
                self.pending_async = True
            else:
                self.line(self.copy(f"smem + {off}", f"{src} + first * {size}", f"count * {size}", size,
                                    op.place, load=True))
            self.info.shared_values += 1
        else:
            self.declare_register(op.res)
            direct = self.per_thread(op.res, lambda index, r, k: f"{r}[{k}] = {src}[{index}];", op.source)
            if id(op) in self.staged_ops:
                self.stage_runs(op, src, direct)
            else:
                self.line(direct)

    def stage_runs(self, op: fuse.LoadOp, src: str, direct: str) -> None:
        """A register load staged through a shared array of its own (`staged_run_loads`): on the
        GPU the block copies the value's runs when they are whole and aligned (`irf_runs16`),
        each thread reading its words after the leading loads (`finish_staged_loads`); else,
        and on the CPU, each thread loads its words directly."""
        size = op.res.type.size  # type: ignore[attr-defined]
        name = f"irf_s{len(self.staged_reads)}"
        self.block_arrays.append((name, self.by * size))
        self.staged_arrays.add(name)
        self.staged_sources.append(src)
        reg = self.reg_ref(op.res)
        self.staged_reads.append(" ".join(f"{reg}[{k}] = {name}[{k * self.by} + ty];" for k in range(size)))
        gpu = [f"  // staged: its {size} runs through {name} where whole and aligned",
               f"  if (irf_runs16) irf_load_runs16<{size}, {self.by}>({name}, {src} + first, n, tid, {self.nthreads});",
               f"  else{direct[1:]}"]
        self.open[-1].append(_GpuOnly(gpu, [[direct]]))

    def finish_staged_loads(self) -> None:
        """Each thread's words of the staged loads, once the block's copies have landed (GPU only)."""
        reads = " ".join(self.staged_reads)
        self.open[-1].append(_GpuOnly([f"  if (irf_runs16) {{ irf_async_wait(); __syncthreads(); if (active) {{ {reads} }} }}"], []))
        self.staged_reads = []

    def emit_call(self, op: fuse.CallOp) -> None:
        impl = call_impl(op, self.library)
        variant = variant_of(op)
        self.used.add((impl, variant))
        if op.place.is_shared:
            self.info.shared_values += 1
        else:
            self.declare_register(op.res)
        remap = op.remapped
        for k, a in enumerate(op.args):
            if variant[k] == "u":  # read at the AP's start within one element
                _check_element_major(impl.operand_aps[k], impl.bx, self.by, a.type.size)  # type: ignore[attr-defined]
        scope, x, y = thread_scope(impl.bx, self.bx, remap)
        y = self.element(y)
        args = [x, y] + [self.base(a, y) for a in op.args] + [self.base(op.res, y)]
        self.line(f"  // {op.op_name}[{impl.name}] into {op.place.text()}"
                         + (", threads remapped" if remap else ""))
        call = self.guarded(impl.bx, y, remap, f"{impl.variant_name(variant)}({', '.join(args)});")
        self.line(f"  {scope}{call} }}" if remap else f"  {self.each_element(call)}")
        self.info.calls.append(f"{op.op_name}[{impl.name}]")

    def emit_copy(self, op: fuse.CopyOp) -> None:
        ap, bx, remap = copy_pattern(self.model, self.mops[id(op)])
        if op.place.is_shared:
            self.info.shared_values += 1
        else:
            self.declare_register(op.res)
        scope, x, y = thread_scope(bx, self.bx, remap)
        y = self.element(y)
        start = c_start(ap, bx).replace("tx", "\0TX").replace("ty", "\0TY").replace("\0TX", x).replace("\0TY", y)

        if fuse.place_of(op.source).is_uniform:  # type: ignore[union-attr]
            raise CompileError(f"kernel @{self.info.name}: a fuse.copy of the uniform value "
                               f"{op.source.name_hint}: read it where it is")

        def word(v: SSAValue, k: int) -> str:
            place = fuse.place_of(v)
            return f"{self.reg_ref(v)}[{k}]" if not place.is_shared else f"({self.base(v, y)})[({start}) + {k}]"
        body = " ".join(f"{word(op.res, k)} = {word(op.source, k)};" for k in sorted(ap.relative()))
        self.line(f"  // {self.names.get(op.res, 'v_')}: copy of {op.source.name_hint} into {op.place.text()}")
        self.line(f"  {scope}{self.each_element(self.guarded(bx, y, remap, '{ ' + body + ' }'))} }}")

    def emit_loop(self, op: fuse.LoopOp) -> None:
        var = f"irf_i{self.loops}"
        self.loops += 1
        # A loop that only the threads of present elements need runs under one guard (none
        # inside): a loop of calls each behind its own branch compiles to slower code.
        guard = not self.in_guarded_loop and self._whole_threads_only(op)
        loop = _Loop(f"  {'if (active) ' if guard else ''}for (int {var} = 0; {var} < {op.trip_count.data}; ++{var}) "
                     "{  // fuse.loop")
        self.open[-1].append(loop)
        self.open.append(loop.children)
        self.in_guarded_loop |= guard
        self.emit_ops(op.body.block)
        self.in_guarded_loop &= not guard

    def emit_yield(self, op: fuse.YieldOp) -> None:
        self.open.pop()

    def emit_reduce(self, op: fuse.StoreOp) -> None:
        """The block's partial of a reduction: its elements staged in a shared array, combined
        by a fixed tree, word k written at k * blocks + block (see the module's docstring)."""
        place = fuse.place_of(op.value)
        assert place is not None and op.reduce_kind is not None
        kind = op.reduce_kind.value
        size = op.value.type.size  # type: ignore[attr-defined]
        red = f"irf_red{sum(1 for name, _ in self.block_arrays if name.startswith('irf_red'))}"
        self.block_arrays.append((red, self.by * size))
        nt = self.nthreads
        self.info.reduced[list(self.kernel.output_args).index(op.dest)] = kind
        # No barrier first: the planned ones order a shared value's producers before this
        # store (which reads it with any thread), and the staging array is this reduction's own.
        self.line(f"  // {kind} of {op.value.name_hint} over the block's elements into {op.dest.name_hint}'s partials")
        half = tree_half(self.by)
        if place.is_shared and tree_reads_in_place(size, place.pitch.data, self.by):
            # The first step reads the value where it is and writes the staging array: the
            # same operations as copying it there first, one pass and one barrier fewer.
            off = place.offset.data
            both = _COMBINE[kind].format(a=f"smem[{off} + irf_i]", b=f"smem[{off + half} + irf_i]")
            self.line(f"  for (int irf_i = tid; irf_i < {half}; irf_i += {nt}) "
                      f"{red}[irf_i] = irf_i + {half} < count ? {both} : smem[{off} + irf_i];")
            half //= 2
        elif place.is_shared:  # as a store copies it out (the staging array is aligned as global chunks are)
            self.line(self.copy(red, f"smem + {place.offset.data}", f"count * {size}", size, place))
        elif self.rows_combinable(op.value, half):
            half = self.tree_on_rows(op.value, red, kind, half)
        else:
            self.line(self.per_thread(op.value, lambda index, r, k: f"{red}[{index}] = {r}[{k}];", None))
        self.open[-1].append(_BARRIER)
        # A scalar's last steps (those within the first warp) run on that warp's registers on
        # the GPU, as shuffles: no shared round trip and no barrier per step.
        shuffled = size == 1 and nt >= WARP and self.by > 1
        warp_steps: list = []  # those steps as the CPU runs them
        first_warp_step = 0
        while self.by > 1 and half >= 1:
            step = (f"  for (int irf_i = tid; irf_i < {half * size}; irf_i += {nt}) "
                    f"if (irf_i / {size} + {half} < count) "
                    f"{red}[irf_i] = {_COMBINE[kind].format(a=f'{red}[irf_i]', b=f'{red}[irf_i + {half * size}]')};")
            # Once a step's words fit the first warp, it and every later step (and the write
            # of the partial, `size` words) run on that warp's threads alone: a warp barrier
            # orders them, the same operations in the same order as with block barriers.
            barrier = _WARP_BARRIER if half * size <= WARP else _BARRIER
            if shuffled and half <= WARP:
                first_warp_step = first_warp_step or half
                warp_steps += [[step], barrier]
            else:
                self.line(step)
                self.open[-1].append(barrier)
            half //= 2
        dst = self.names.get(op.dest, "g_")
        write = (f"  for (int irf_k = tid; irf_k < {size}; irf_k += {nt}) "
                 f"{dst}[(long long)irf_k * ((n + {self.by - 1}) / {self.by}) + first / {self.by}] = {red}[irf_k];")
        if warp_steps:
            self.open[-1].append(_GpuOnly(self.warp_tree(red, kind, first_warp_step, f"{dst}[first / {self.by}]"),
                                          [*warp_steps, [write]]))
        else:
            self.line(write)

    def rows_combinable(self, v: SSAValue, half: int) -> bool:
        """Whether the tree's first steps over register value v pair elements of one thread:
        its threads run several elements each, one thread per element holding all its words,
        and the first step's stride is a multiple of the thread rows (then so is every step
        down to the rows: elements i and i + s are thread i % rows's rows a and a + s/rows)."""
        if self.elements_per_thread == 1 or self.bx != 1:
            return False
        ap, ap_bx, remap = self.pattern(v)
        size = v.type.size  # type: ignore[attr-defined]
        return (ap_bx == 1 and not remap and self.reg_words[self.reg_name(v)] == size
                and half >= self.rows and half % self.rows == 0)

    def tree_on_rows(self, v: SSAValue, red: str, kind: str, half: int) -> int:
        """The tree's steps of stride `half` down to the thread rows, on each thread's own
        rows of register value v (a copy: v may be reduced again or read later), the same
        pairs in the same order as in shared memory; then each thread's first row (its
        element ty, combined) staged for the steps left. Returns the next step's stride."""
        size = v.type.size  # type: ignore[attr-defined]
        name, rows, per = self.reg_name(v), self.rows, self.elements_per_thread
        lines = [f"real_t irf_v[{per * size}];",
                 f"for (int irf_j = 0; irf_j < {per * size}; ++irf_j) irf_v[irf_j] = {name}[irf_j];"]
        s = half
        while s >= rows:
            for a in range(s // rows):
                pairs = " ".join(f"irf_v[{a * size + k}] = "
                                 + _COMBINE[kind].format(a=f"irf_v[{a * size + k}]", b=f"irf_v[{(a + s // rows) * size + k}]")
                                 + ";" for k in range(size))
                lines.append(f"if (ty + {a * rows + s} < count) {{ {pairs} }}")
            s //= 2
        lines.append(f"if (ty < count) {{ {' '.join(f'{red}[ty * {size} + {k}] = irf_v[{k}];' for k in range(size))} }}")
        self.line("  { // the steps of strides " + f"{half} to {rows} on the thread's own rows")
        for text in lines:
            self.line("    " + text)
        self.line("  }")
        return s

    def warp_tree(self, red: str, kind: str, first: int, dst: str) -> list[str]:
        """A scalar reduction's tree steps from `first` (<= 32) down to 1 and the write of the
        block's partial, on the first warp: lane t holds word t, and a step s combines it
        with lane t + s's where t < s and t + s < count, as the shared steps do."""
        step = _COMBINE[kind].format(a="irf_x", b="irf_y")
        return ["  if (tid < 32) {  // the tree's last steps on the first warp's registers",
                f"    real_t irf_x = tid < {self.by} ? {red}[tid] : {red}[0];",
                f"    if (tid < {first} && tid + {first} < count) {{ const real_t irf_y = {red}[tid + {first}]; "
                f"irf_x = {step}; }}",
                *[f"    {{ const real_t irf_y = __shfl_down_sync(0xffffffffu, irf_x, {s}); "
                  f"if (tid < {s} && tid + {s} < count) irf_x = {step}; }}"
                  for s in (first >> k for k in range(1, first.bit_length()))],
                f"    if (tid == 0) {dst} = irf_x;",
                "  }"]

    def emit_store(self, op: fuse.StoreOp) -> None:
        if op.reduce_kind is not None:
            self.emit_reduce(op)
            return
        place = fuse.place_of(op.value)
        assert place is not None
        size = op.value.type.size  # type: ignore[attr-defined]
        dst = self.names.get(op.dest, "g_")
        self.line(f"  // store into {op.dest.name_hint}")
        if place.is_shared:
            off = place.offset.data
            if op.dest in self.strided:
                self.line(self.strided_copy(op.dest, op.value.type, place, load=False))  # type: ignore[arg-type]
            elif self.soa:
                self.line(self.soa_copy("store", f"{dst} + first", f"smem + {off}", size, place))
            else:
                self.line(self.copy(f"{dst} + first * {size}", f"smem + {off}", f"count * {size}", size, place))
        else:
            self.line(self.per_thread(op.value, lambda index, r, k: f"{dst}[{index}] = {r}[{k}];", op.dest))

    def line(self, text: str) -> None:
        current = self.open[-1]
        if not current or not isinstance(current[-1], list):
            current.append([])
        current[-1].append(text)

    def emit_barrier(self, op: fuse.BarrierOp) -> None:
        self.open[-1].append(_BARRIER)
        self.info.barriers += 1

    def emit_ops(self, block) -> None:
        handlers = {fuse.LoadOp: self.emit_load, fuse.CallOp: self.emit_call, fuse.StoreOp: self.emit_store,
                    fuse.BarrierOp: self.emit_barrier, fuse.CopyOp: self.emit_copy, fuse.LoopOp: self.emit_loop,
                    fuse.YieldOp: self.emit_yield}
        for op in block.ops:
            if self.staged_reads and not isinstance(op, fuse.LoadOp):
                self.finish_staged_loads()
            if self.pending_uniform and not isinstance(op, fuse.LoadOp):
                self.flush_uniform_copies()
            if self.pending_async and not isinstance(op, fuse.LoadOp):
                self.line("  irf_async_wait();")
                self.pending_async = False
            handler = handlers.get(type(op))
            if handler is None:
                raise CompileError(f"the CUDA emitter does not handle '{op.name}'")
            handler(op)  # type: ignore[operator]

    def emit(self) -> str:
        self.stage_uniform_inputs()
        self.emit_ops(self.kernel.body.block)
        self.info.arrays = [words for _, words in self.block_arrays]
        body = _gpu_text(self.body)
        regs = [f"  real_t {name}[{words}];" for name, words in self.regs]
        gpu = [*self.signature(), *self.prologue(), *regs, *body, "}"]
        return "\n".join(["#ifndef IRFUSE_HOST", *gpu, "#else", *self.host_function(), "#endif"])

    def signature(self) -> list[str]:
        params = [f"const real_t* __restrict__ {self.names.get(a, 'g_')}" for a in self.kernel.input_args]
        params += [f"real_t* __restrict__ {self.names.get(a, 'g_')}" for a in self.kernel.output_args]
        params.append("const long long n")
        layout = ", structure of arrays" if self.soa else ""
        per = f", elements_per_thread = {self.elements_per_thread}" if self.elements_per_thread != 1 else ""
        return [f"// fuse.kernel @{self.info.name}: block(bx = {self.bx}, by = {self.by}{per}), {self.words} shared words"
                + layout,
                f'extern "C" __global__ void __launch_bounds__({self.nthreads}, {self.min_blocks}) '
                f'{self.info.name}({", ".join(params)})',
                "{"]

    def host_function(self) -> list[str]:
        """The kernel for the CPU: blocks `block_begin` to `block_end`, each region a loop over
        the block's threads, `reverse` running them last to first (see the module's docstring)."""
        params = [f"const real_t* __restrict__ {self.names.get(a, 'g_')}" for a in self.kernel.input_args]
        params += [f"real_t* __restrict__ {self.names.get(a, 'g_')}" for a in self.kernel.output_args]
        params += ["const long long n", "const long long block_begin", "const long long block_end",
                   "const bool reverse"]
        items = _cpu_items(self.body)
        regions = list(_regions(items))

        def uses(name: str, in_loop_only: bool = False) -> int:
            return sum(bool(re.search(rf"\b{name}\b", "\n".join(r))) for r, in_loop in regions
                       if in_loop or not in_loop_only)
        # Kept per thread: used in two regions, or in a block-level loop's body (the next
        # iteration's region reads what this one's wrote).
        kept = [(name, words) for name, words in self.regs if uses(name) > 1 or uses(name, True)]
        smem_words = -(-max(self.words, 1) // 4) * 4  # the kept values start 16-byte aligned
        block_arrays = [(name, words) for name, words in self.block_arrays if name not in self.staged_arrays]
        arrays = sum(-(-words // 4) * 4 for _, words in block_arrays)
        scratch = smem_words + arrays + sum(self.nthreads * words for _, words in kept)
        nt = self.nthreads
        lines = [f"// fuse.kernel @{self.info.name} on the CPU: {len(regions)} regions of {nt} threads",
                 f"static void {self.info.name}({', '.join(params)})",
                 "{",
                 f"  const std::unique_ptr<real_t[]> irf_scratch(new real_t[{scratch}]);",
                 "  real_t* const smem = irf_scratch.get();"]
        offset = smem_words
        for name, words in block_arrays:
            lines.append(f"  real_t* const {name} = smem + {offset};  // a shared array of its own")
            offset += -(-words // 4) * 4
        for name, words in kept:
            lines.append(f"  real_t* const irf_kept_{name} = smem + {offset};  // {words} words per thread")
            offset += nt * words
        lines += ["  for (long long irf_block = block_begin; irf_block < block_end; ++irf_block) {",
                  f"    irf::poison(smem, {smem_words + arrays});",
                  f"    const long long first = irf_block * {self.by};",
                  f"    const int count = n - first < {self.by} ? (int)(n - first) : {self.by};"]
        lines += self.cpu_body(items, "    ", kept)
        return lines + ["  }", "}"]

    def cpu_body(self, items: list, indent: str, kept: list[tuple[str, int]]) -> list[str]:
        """Each region a loop over the block's threads; block-level loops around theirs."""
        nt = self.nthreads
        lines: list[str] = []
        for item in items:
            if isinstance(item, tuple):
                loop, inner = item
                lines += [indent + loop.header.strip(), *self.cpu_body(inner, indent + "  ", kept), indent + "}"]
                continue
            text = "\n".join(item)
            lines += [f"{indent}for (int irf_t = 0; irf_t < {nt}; ++irf_t) {{",
                      f"{indent}  const int tid = reverse ? {nt - 1} - irf_t : irf_t;",
                      f"{indent}  const int tx = tid % {self.bx}, ty = tid / {self.bx};",
                      f"{indent}  const bool active = ty < count;",
                      f"{indent}  (void)tx; (void)ty; (void)active;"]
            for name, words in self.regs:
                if not re.search(rf"\b{name}\b", text):
                    continue
                if (name, words) in kept:
                    lines.append(f"{indent}  real_t* const {name} = irf_kept_{name} + tid * {words};")
                else:
                    lines.append(f"{indent}  real_t {name}[{words}];")
            lines += [indent + line for line in item] + [f"{indent}}}"]
        return lines

    def prologue(self) -> list[str]:
        """Shared memory: the planned buffer and the arrays apart from it, declared statically
        while they fit the static limit together, else all in one buffer taken at launch."""
        lines = []
        total = self.info.total_shared_bytes(self.itemsize)
        if total <= STATIC_SHARED_LIMIT:
            if self.words:
                lines.append(f"  IRFUSE_SHARED_STATIC(real_t, smem, {self.words});")
            for name, words in self.block_arrays:
                lines.append(f"  __shared__ __align__(16) real_t {name}[{words}];")
        else:
            if total > fuse.MAX_SHARED_BYTES_PER_BLOCK:
                raise CompileError(f"kernel @{self.info.name} needs {total} bytes of shared memory, its arrays apart "
                                   f"from the planned buffer included: a block has at most "
                                   f"{fuse.MAX_SHARED_BYTES_PER_BLOCK}; use fewer elements per block")
            lines.append("  IRFUSE_SHARED_DYNAMIC(real_t, smem);")
            self.info.dynamic_shared = True
            for (name, words), offset in zip(self.block_arrays, self.info.array_offsets(self.itemsize)):
                lines.append(f"  real_t* const {name} = smem + {offset};  // {words} words of the dynamic buffer")
        # Before any global access: what the previous kernel on the stream writes is visible.
        lines.append("  irf_after_previous_grid();")
        self.info.after_previous_grid = True
        lines += [
            "  const int tx = threadIdx.x, ty = threadIdx.y;",
            f"  const int tid = ty * {self.bx} + tx;",
            f"  const long long first = (long long)blockIdx.x * {self.by};",
            f"  const int count = n - first < {self.by} ? (int)(n - first) : {self.by};",
            "  const bool active = ty < count;",
            "  (void)tid; (void)active;",
        ]
        if self.staged_sources:
            # The same for the whole block: its staged copies and their barrier are taken by all
            # of its threads or by none (a partial last block, an odd n, an unaligned array).
            aligned = " && ".join(f"((unsigned long long){g} & 15) == 0" for g in self.staged_sources)
            lines.append(f"  const bool irf_runs16 = count == {self.by} && n % {16 // self.itemsize} == 0 && {aligned};")
        return lines


def emit_kernel(kernel: fuse.KernelOp, itemsize: int = 4, min_blocks: int | None = None,
                library: Library | None = None, strided: dict[int, tuple[int, ...]] | None = None
                ) -> tuple[str, KernelInfo, set[tuple[Implementation, str]]]:
    """The kernel's CUDA C, what a launcher needs to know of it, and the device-function
    variants it calls (looked up in `library`, the default library when None); `strided`:
    its global arguments (by position) that are strided views, with their strides."""
    emitter = _KernelEmitter(kernel, itemsize, min_blocks, library, strided)
    text = emitter.emit()
    return text, emitter.info, emitter.used


def combine_kernel(kind: str, size: int) -> tuple[str, KernelInfo]:
    """The kernel that combines a reduction's partials (word k of part p at k * n + p, n
    parts) into its `size` words, in one order wherever it runs: lane l < m = min(n, L) of
    the L = COMBINE_LANES lanes combines parts l, l + L, ... in turn, then a fixed tree over
    the lanes halves them (s = L/2, ..., 1: lane l takes lane l + s where that lane exists).
    On the GPU each word has COMBINE_BLOCKS blocks of COMBINE_THREADS threads, a thread per
    lane: from sm_90 they form a thread block cluster (on as many SMs, whose reads together
    outrun one SM's), and the first block reads the others' lanes from their shared arrays
    for the tree's first steps; before sm_90 the word's first block runs its eight blocks'
    lanes itself. The host version runs the same operations in the same order, so all give
    the same bits."""
    name, t, c = fuse.combine_kernel_name(kind, size), fuse.COMBINE_THREADS, fuse.COMBINE_BLOCKS
    lanes = fuse.COMBINE_LANES
    op = _COMBINE[kind]
    params = "const real_t* __restrict__ parts, real_t* __restrict__ out, const long long n"

    def chain(acc: str, lane: str, indent: str) -> list[str]:
        """Lane `lane` (< m)'s partials combined in turn into `acc`, eight loads issued before
        their eight combining steps (which keep their order): a plain loop, even unrolled,
        waits for each load in turn whenever fewer than its unroll factor remain, as eight
        partials a lane do (65,536 over 8,192 lanes)."""
        def batch(first: str) -> list[str]:
            return [f"{indent}  real_t v[8];",
                    "#pragma unroll",
                    f"{indent}  for (int j = 0; j < 8; ++j) if ({first} + j * {lanes} < n) "
                    f"v[j] = parts[k * n + {first} + j * {lanes}];"]
        step = f"if ({{p}} + j * {lanes} < n) {acc} = {op.format(a=acc, b='v[j]')};"
        return [f"{indent}{{",
                *batch(lane),
                f"{indent}  {acc} = v[0];",
                "#pragma unroll",
                f"{indent}  for (int j = 1; j < 8; ++j) {step.format(p=lane)}",
                f"{indent}}}",
                f"{indent}for (long long p = {lane} + {8 * lanes}; p < n; p += {8 * lanes}) {{",
                *batch("p"),
                "#pragma unroll",
                f"{indent}  for (int j = 0; j < 8; ++j) {step.format(p='p')}",
                f"{indent}}}"]

    head = ["{",
            f"  __shared__ real_t acc[{t}];",
            "  const int t = threadIdx.x;",
            f"  const long long k = blockIdx.x / {c};",
            f"  const long long m = n < {lanes} ? n : {lanes};"]
    # The tree's first steps (s >= COMBINE_THREADS), on lanes t + r * COMBINE_THREADS held as
    # a[r] by thread t of the word's first block.
    across = ["#pragma unroll",  # (a[] stays in registers when every index is known)
              f"  for (int s = {lanes // 2}; s >= {t}; s >>= 1)",
              "#pragma unroll",
              f"    for (int r = 0; r < s / {t}; ++r)",
              f"      if ((long long)r * {t} + t + s < m) a[r] = {op.format(a='a[r]', b=f'a[r + s / {t}]')};",
              "  if (t < m) acc[t] = a[0];"]
    # The tree's steps within one block's lanes (s < COMBINE_THREADS), on the word's first block.
    tail = [f"  for (int s = {t // 2}; s > {WARP // 2}; s >>= 1) {{",
            f"    if (t < s && t + s < m) acc[t] = {op.format(a='acc[t]', b='acc[t + s]')};",
            "    __syncthreads();",
            "  }",
            "  // The last steps involve the first warp's threads only: a warp barrier orders them.",
            f"  if (t < {WARP}) {{",
            f"    for (int s = {WARP // 2}; s > 0; s >>= 1) {{",
            f"      if (t < s && t + s < m) acc[t] = {op.format(a='acc[t]', b='acc[t + s]')};",
            "      __syncwarp();",
            "    }",
            "  }",
            "  if (t == 0) out[k] = acc[0];",
            "}"]
    cluster = [f"// fuse.combine {kind} of {size}-word partials: a cluster of {c} blocks per word",
               f'extern "C" __global__ void __cluster_dims__({c}, 1, 1) __launch_bounds__({t}) {name}({params})',
               *head,
               "  const int r0 = (int)irf_cluster_rank();  // blockIdx.x % COMBINE_BLOCKS",
               f"  const long long l = (long long)r0 * {t} + t;",
               "  if (l < m) {",
               "    real_t a;",
               *chain("a", "l", "    "),
               "    acc[t] = a;",
               "  }",
               "  irf_cluster_sync();",
               "  if (r0 == 0) {",
               "    // The other blocks' lanes, all read at once from their shared arrays.",
               f"    real_t a[{c}];",
               "#pragma unroll",
               f"    for (int r = 0; r < {c}; ++r)",
               f"      if ((long long)r * {t} + t < m) a[r] = r == 0 ? acc[t] : irf_cluster_load(acc + t, (unsigned)r);",
               *["  " + x for x in across],
               "  }",
               "  // Every block stays until the first has read its array; the first's writes are seen.",
               "  irf_cluster_sync();",
               "  if (r0 != 0) return;",
               *tail]
    single = [f"// fuse.combine {kind} of {size}-word partials: the first of {c} blocks per word runs their lanes",
              f'extern "C" __global__ void __launch_bounds__({t}) {name}({params})',
              *head,
              f"  if (blockIdx.x % {c} != 0) return;",
              f"  real_t a[{c}];",
              "#pragma unroll",
              f"  for (int r = 0; r < {c}; ++r) {{",
              f"    const long long l = (long long)r * {t} + t;",
              "    if (l < m) {",
              *chain("a[r]", "l", "      "),
              "    }",
              "  }",
              *across,
              "  __syncthreads();",
              *tail]
    host = [f"// fuse.combine {kind} on the CPU: the GPU's operations in the GPU's order",
            f"static void {name}({params}, const long long block_begin, const long long block_end, "
            "const bool reverse)",
            "{",
            "  (void)reverse;",
            f"  const std::unique_ptr<real_t[]> acc(new real_t[{lanes}]);",
            f"  const long long m = n < {lanes} ? n : {lanes};",
            "  for (long long b = block_begin; b < block_end; ++b) {",
            f"    if (b % {c} != 0) continue;  // a word's first block runs all its lanes",
            f"    const long long k = b / {c};",
            "    for (long long l = 0; l < m; ++l) {",
            "      acc[l] = parts[k * n + l];",
            f"      for (long long p = l + {lanes}; p < n; p += {lanes}) acc[l] = {op.format(a='acc[l]', b='parts[k * n + p]')};",
            "    }",
            f"    for (long long s = {lanes // 2}; s > 0; s >>= 1)",
            f"      for (long long l = 0; l < s && l + s < m; ++l) acc[l] = {op.format(a='acc[l]', b='acc[l + s]')};",
            "    out[k] = acc[0];",
            "  }",
            "}"]
    info = KernelInfo(name, t, 1, 0, ["partials"], ["out"], [size], [size], arrays=[t], fixed_grid=size * c)
    return "\n".join(["#ifndef IRFUSE_HOST", "#if __CUDA_ARCH__ >= 900", *cluster, "#else", *single, "#endif",
                      "#else", *host, "#endif"]), info


def kernels_of(module: ModuleOp) -> list[fuse.KernelOp]:
    return [op for op in module.ops if isinstance(op, fuse.KernelOp)]


def emit_module(module: ModuleOp, element: ElementType, min_blocks: dict[str, int] | None = None,
                library: Library | None = None) -> EmittedModule:
    """The complete CUDA C of every kernel for one element type; `min_blocks` overrides the
    launch-bounds minimum per kernel name."""
    min_blocks = min_blocks or {}
    kernels = kernels_of(module)
    if not kernels and any(op.name == "kas.call" for op in module.walk()):
        raise CompileError("no fuse.kernel to emit: run a lowering pass first (e.g. -p fuse-each)")
    # A program without calls (it returns its inputs) has no kernel: its source is the prelude.
    texts, infos = [], []
    functions: dict[str, str] = {}
    strided = strided_arguments(module)
    for k in kernels:
        text, info, used = emit_kernel(k, element.itemsize, min_blocks.get(k.sym_name.data), library,
                                       strided.get(k.sym_name.data))
        texts.append(text)
        infos.append(info)
        for impl, variant in sorted(used, key=lambda p: p[0].variant_name(p[1])):
            name = impl.variant_name(variant)
            if name not in functions:
                src = impl.device_source(variant)
                for ap in impl.aps:
                    c_start(ap, impl.bx)  # refuses BY, which generated code cannot see
                functions[name] = re.sub(r"\bBX\b", str(impl.bx), src)
    combines = sorted({(op.reduce_kind.value, op.res.type.size) for op in module.walk()  # type: ignore[attr-defined]
                       if isinstance(op, fuse.CombineOp)})
    for kind, size in combines:
        text, info = combine_kernel(kind, size)
        texts.append(text)
        infos.append(info)
    source = element.c_prelude + "\n\n".join([PRELUDE, *functions.values(), *texts]) + "\n"
    return EmittedModule(source, infos)
