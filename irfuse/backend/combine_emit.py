"""The combine kernel of a reduction: a reduction's per-block partials combined into its
value in one fixed order wherever it runs (see `combine_kernel`). Emitted once per kind and
size of the program's `fuse.combine`s, GPU kernel and CPU twin together."""

from __future__ import annotations

from irfuse.analysis.shared_accesses import WARP
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.backend.kernel_body import COMBINE
from irfuse.dialects import fuse


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
    op = COMBINE[kind]
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
            "  irf_after_previous_grid();  // (launched as a dependent launch: the partials are written)",
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
            f"static int {name}({params}, const long long block_begin, const long long block_end, "
            "const bool reverse)",
            "{",
            "  (void)reverse;",
            f"  const irf::Scratch<real_t> irf_scratch({lanes});",
            "  real_t* const acc = irf_scratch.get();",
            "  if (acc == nullptr) return 1;  // no memory for the lanes: no block runs",
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
            "  return 0;",
            "}"]
    info = KernelInfo(name, t, 1, 0, ["partials"], ["out"], [size], [size], arrays=[t], fixed_grid=size * c,
                      after_previous_grid=True)
    return "\n".join(["#ifndef IRFUSE_HOST", "#if __CUDA_ARCH__ >= 900", *cluster, "#else", *single, "#endif",
                      "#else", *host, "#endif"]), info


def finish_in_last_block(reductions: list[tuple[str, str, str, int]], threads: int, staging: str) -> list[str]:
    """The end of a reducing kernel (GPU only) whose last block to finish combines every block's
    partials, in `combine_kernel`'s order, so into the same bits: `reductions` are (partials
    array, result array, kind, words) in the kernel's output order; `staging` a shared array of
    `fuse.finish_threads(threads)` words. For launches of at most COMBINE_LANES blocks (a lane
    a partial: `fuse.kernel` finish_parts is held to it), which the runtime alone launches so.

    Each block, after writing its partials, counts itself finished (an integer atomic on
    `irf_done`, after a fence that makes its partials seen); the block that counts last reads
    them all (through L2) and writes each word's combination, then sets the counter back to 0
    for the next launch. Its first T = `fuse.finish_threads` threads stand for the combine's lanes:
    thread t holds lanes t, t + T, ... (L / T of them, L = COMBINE_LANES), so the tree's steps of
    stride T and more pair a thread's own lanes (run on its registers, FINISH_BATCH lanes
    loaded together, their subtrees combined in the tree's order), and the steps below T run
    on the shared array as the combine kernel's last block runs them. A launch that passes a
    null counter (a run in chunks; the CPU) leaves the partials to the combine kernels."""
    lanes, t2 = fuse.COMBINE_LANES, fuse.finish_threads(threads)
    per = lanes // t2
    batch = min(fuse.FINISH_BATCH, per)
    bits = per.bit_length() - 1
    # The lanes of thread t in the order a left-to-right tree over them is the halving tree's
    # (steps of stride per/2, ..., 1 over r pair r with r + s: the bit-reversed order).
    order = [int(format(i, f"0{bits}b")[::-1], 2) if bits else 0 for i in range(per)]
    lines = ["  // The last block to finish combines every block's partials, in fuse.combine's order",
             "  // (combine_emit), where the launch asks for it: a run in one call on the GPU.",
             "  if (irf_done != nullptr) {",
             "    __threadfence();  // this block's partials are seen before it counts itself finished",
             "    __syncthreads();",
             f"    if (tid == 0) {staging}[0] = atomicAdd(irf_done, 1u) == gridDim.x - 1 ? (real_t)1 : (real_t)0;",
             "    __syncthreads();",
             f"    const bool irf_last = {staging}[0] != (real_t)0;",
             "    __syncthreads();",
             "    if (irf_last) {",
             "      __threadfence();",
             "      const long long irf_n = gridDim.x;  // partials of each word",
             f"      const long long irf_m = irf_n < {lanes} ? irf_n : {lanes};  // lanes"]
    for j, (parts, result, kind, size) in enumerate(reductions):
        op = COMBINE[kind]
        body: list[str] = []
        stack: list[tuple[int, int]] = []  # (first lane's r, subtrees of the batch it covers)

        def merge(into: str, other: str, r: int) -> str:
            return f"if ({r * t2} + tid < irf_m) {into} = {op.format(a=into, b=other)};"
        for c in range(per // batch):
            rs = order[c * batch:(c + 1) * batch]
            body.append("{")
            body += [f"  real_t irf_v{i} = {r * t2} + tid < irf_m ? __ldcg(irf_pt + {r * t2}) : (real_t)0;"
                     for i, r in enumerate(rs)]
            width = 1
            while width < batch:  # the batch's subtree (the batch is an aligned run of the order)
                for i in range(0, batch, 2 * width):
                    body.append("  " + merge(f"irf_v{i}", f"irf_v{i + width}", rs[i + width]))
                width *= 2
            depth = len(stack)
            body.append(f"  irf_s{depth} = irf_v0;")
            # The next batch's loads stay after this one's combining: hoisted, they would take
            # registers the kernel's body does not need (its occupancy).
            body.append('  asm volatile("" ::: "memory");')
            body.append("}")
            stack.append((rs[0], 1))
            while len(stack) >= 2 and stack[-1][1] == stack[-2][1]:  # two subtrees of a size: their parent
                (r_left, size_left), (r_right, _) = stack[-2], stack[-1]
                body.append(merge(f"irf_s{len(stack) - 2}", f"irf_s{len(stack) - 1}", r_right))
                stack[-2:] = [(r_left, 2 * size_left)]
        slots = max(1, (per // batch).bit_length())
        lines += [f"      for (int irf_k = 0; irf_k < {size}; ++irf_k) {{  // {kind} into {result}",
                  f"        const real_t* const irf_pt = {parts} + irf_k * irf_n + tid;  // lane tid's first partial",
                  f"        if (tid < {t2} && tid < irf_m) {{",
                  f"          real_t {', '.join(f'irf_s{i}' for i in range(slots))};",
                  *["          " + x for x in body],
                  f"          {staging}[tid] = irf_s0;",
                  "        }",
                  "        __syncthreads();",
                  f"        for (int irf_s = {t2 // 2}; irf_s > 0; irf_s >>= 1) {{",
                  f"          if (tid < irf_s && tid + irf_s < irf_m) "
                  f"{staging}[tid] = {op.format(a=f'{staging}[tid]', b=f'{staging}[tid + irf_s]')};",
                  "          __syncthreads();",
                  "        }",
                  f"        if (tid == 0) {result}[irf_k] = {staging}[0];",
                  "        __syncthreads();",
                  "      }"]
    lines += ["      if (tid == 0) *irf_done = 0u;  // ready for the next launch",
              "    }",
              "  }"]
    return lines

