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
    info = KernelInfo(name, t, 1, 0, ["partials"], ["out"], [size], [size], arrays=[t], fixed_grid=size * c)
    return "\n".join(["#ifndef IRFUSE_HOST", "#if __CUDA_ARCH__ >= 900", *cluster, "#else", *single, "#endif",
                      "#else", *host, "#endif"]), info
