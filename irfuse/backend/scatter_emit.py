"""The scatter kernel of a `kas.scatter`: per-element rows added into nodes in the scatter
order (`irfuse.mesh.scatter`), one fixed order wherever it runs. Emitted once per row size
of the program's scatters, GPU kernel and CPU twin together.

The element kernel sums its rows in the connectivity's groups and writes the partials
(`values`, partial p at row p; rows no element kernel summed, an input's, go through
`scatter_groups_kernel` first); node n's partials are `slots[starts[n]:starts[n + 1]]` in
ascending order (the scatter order the runtime makes once per connectivity,
`irfuse.mesh.inverse_connectivity`). One thread per node adds them one after another into a
running sum that starts at 0, so every run, the GPU's and the CPU's, gives the bits of
`irfuse.mesh.scatter_add`: no atomics, no order that depends on scheduling. A node no
element names gets 0.

On the GPU, LANES threads serve each node: in turn, lane l loads the row of the node's
partial j0 + l, and the first lane adds the LANES rows, taken by warp shuffles, in order;
the sum is the one above, while a node's loads no longer wait on one another. Measured on an
H200 for the 50 M rows of the P1 residual on 12.6 M Morton-ordered tetrahedra, when every
row was added (before the groups): 0.57 ms with one thread a node, 0.45 with 2 lanes, 0.31
with 4, 0.36 with 8 (and 0.64 for a variant that copied a block's rows into shared tiles
first). With the groups (256 slots: 3.6 partials a node), whole runs of the mesh energy's
gradient took 0.619 ms with one thread a node, 0.622 with 2 lanes, 0.636 with 4, 0.687 with 8:
one thread a node now (`benchmarks/NOTES.md`). Its partials' loads wait on one another no
more: a thread loads the rows of up to four trips (`TRIPS_AHEAD`, fewer for wide rows) before it
adds them, in order: the P1 and Neo-Hookean residuals on 12.6 M tets 2.5-3% faster, the same
bits (2026-12-04, H200).
"""

from __future__ import annotations

from irfuse.artifact.scatter_groups import group_elements, slot_ctype
from irfuse.artifact.kernel_info import (CHECK_INDEX64_KERNEL, CHECK_INDEX_KERNEL, COLUMNS_OF_ROWS_KERNEL,
                                         ROWS_OF_COLUMNS_KERNEL, KernelInfo)
from irfuse.dialects import fuse

LANES = 1  # GPU threads per node (see the module: 4 when every row was added)
NODES = 128  # nodes per block (a block of LANES x NODES threads)
TRIPS_AHEAD = 4  # a node's trips whose rows a thread loads before it adds them (see the module)
TRIPS_AHEAD_WORDS = 16  # at most this many words of rows so held a thread


def trips_ahead(size: int) -> int:
    """How many of a node's partials of `size`-word rows a thread loads before it adds them
    (here and where a node kernel adds a scatter's partials itself, `cuda_emit.emit_sums`)."""
    return max(1, min(TRIPS_AHEAD, TRIPS_AHEAD_WORDS // size))


def scatter_kernel(size: int, onto: bool = False) -> tuple[str, KernelInfo]:
    """The CUDA C (GPU kernel, and its CPU twin under IRFUSE_HOST) and launch interface of the
    kernel adding rows of `size` words into nodes; launched over the nodes (its `n`). `onto`:
    each node's sum starts from what the output holds (a chunk of elements continuing the sum
    of the chunks before it: the additions of one call, in its order), not from 0."""
    name = fuse.scatter_onto_kernel_name(size) if onto else fuse.scatter_kernel_name(size)
    ahead = trips_ahead(size)
    start = "out[node * %d + w]" % size if onto else "0"
    params = ("const real_t* __restrict__ values, const long long* __restrict__ starts, "
              "const int* __restrict__ slots, real_t* __restrict__ out, const long long n")
    gpu = [f"// kas.scatter of {size}-word rows{' onto the sums so far' if onto else ''}: each node's slots added in "
           f"ascending order; {LANES} lanes load",
           "// a node's rows side by side and the first adds them in order (shuffles)",
           f'extern "C" __global__ void __launch_bounds__({LANES * NODES}) {name}({params})',
           "{",
           "  const unsigned mask = 0xffffffffu;",
           # (the launch's block is (LANES, NODES): threadIdx.x is the lane, threadIdx.y the node)
           "  const int lane = threadIdx.x;",
           f"  const long long node = (long long)blockIdx.x * {NODES} + threadIdx.y;",
           "  const long long begin = node < n ? starts[node] : 0, end = node < n ? starts[node + 1] : 0;",
           f"  int trips = (int)((end - begin + {LANES - 1}) / {LANES});",
           "  // every lane of the warp takes the same trips (its nodes' most), so that all shuffle",
           f"  for (int o = {LANES}; o < 32; o *= 2) trips = max(trips, __shfl_xor_sync(mask, trips, o));",
           f"  real_t acc[{size}];",
           f"  IRF_UNROLL for (int w = 0; w < {size}; ++w) acc[w] = {'node < n ? ' + start + ' : 0' if onto else '0'};",
           f"  for (int t = 0; t < trips; t += {ahead}) {{",
           f"    real_t mine[{ahead}][{size}];",
           f"    IRF_UNROLL for (int u = 0; u < {ahead}; ++u) {{  // (the loads of {ahead} trips issued before their adds)",
           f"      const long long j = begin + (long long)(t + u) * {LANES} + lane;",
           "      if (j < end) {",
           f"        const real_t* const row = values + (long long)slots[j] * {size};",
           f"        IRF_UNROLL for (int w = 0; w < {size}; ++w) mine[u][w] = row[w];",
           f"      }} else {{ IRF_UNROLL for (int w = 0; w < {size}; ++w) mine[u][w] = 0; }}",
           "    }",
           f"    IRF_UNROLL for (int u = 0; u < {ahead}; ++u) {{",
           f"      const long long j0 = begin + (long long)(t + u) * {LANES};",
           f"      IRF_UNROLL for (int l = 0; l < {LANES}; ++l) {{",
           "        const bool present = j0 + l < end;  // (adding a 0 would turn a -0 sum into +0)",
           f"        IRF_UNROLL for (int w = 0; w < {size}; ++w) {{",
           f"          const real_t x = __shfl_sync(mask, mine[u][w], l, {LANES});",
           "          if (present) acc[w] += x;",
           "        }",
           "      }",
           "    }",
           "  }",
           f"  if (node < n && lane == 0) {{ for (int w = 0; w < {size}; ++w) out[node * {size} + w] = acc[w]; }}",
           "}"]
    host = ["// kas.scatter on the CPU: the GPU's additions in the GPU's order",
            f"static int {name}({params}, const long long block_begin, const long long block_end, "
            "const bool reverse)",
            "{",
            "  (void)reverse;",
            f"  const long long last = block_end * {NODES} < n ? block_end * {NODES} : n;",
            f"  for (long long node = block_begin * {NODES}; node < last; ++node) {{",
            f"    real_t acc[{size}];",
            f"    for (int w = 0; w < {size}; ++w) acc[w] = {start};",
            "    const long long end = starts[node + 1];",
            "    for (long long j = starts[node]; j < end; ++j) {",
            f"      const real_t* const row = values + (long long)slots[j] * {size};",
            f"      for (int w = 0; w < {size}; ++w) acc[w] += row[w];",
            "    }",
            f"    for (int w = 0; w < {size}; ++w) out[node * {size} + w] = acc[w];",
            "  }",
            "  return 0;",
            "}"]
    info = KernelInfo(name, LANES, NODES, 0, ["values", "starts", "slots"], ["out"], [size, 1, 1], [size],
                      input_types=["", "long long", "int"])
    return "\n".join(["#ifndef IRFUSE_HOST", *gpu, "#else", *host, "#endif"]), info


ROWS = 128  # rows (or nodes) per block of the atomic scatter's kernels


def _row_kernel(name: str, params: str, index: str, body: list[str], gpu_body: list[str] | None = None,
                comment: str | None = None) -> str:
    """A kernel of one thread an index `index` in [0, n), ROWS of them a block, running `body`
    (C lines, each indented as inside the kernel), and its CPU twin looping over the indices of
    its blocks; `gpu_body`: the GPU's own body where the two differ."""
    inner = ["  " + line for line in (gpu_body if gpu_body is not None else body)]
    gpu = [*([comment] if comment else []),
           f'extern "C" __global__ void __launch_bounds__({ROWS}) {name}({params})',
           "{",
           f"  const long long {index} = (long long)blockIdx.x * {ROWS} + threadIdx.y;",
           f"  if ({index} < n) {{",
           *inner,
           "  }",
           "}"]
    host = [f"static int {name}({params}, const long long block_begin, const long long block_end, const bool reverse)",
            "{",
            "  (void)reverse;",
            f"  const long long last = block_end * {ROWS} < n ? block_end * {ROWS} : n;",
            f"  for (long long {index} = block_begin * {ROWS}; {index} < last; ++{index}) {{",
            *["  " + line for line in body],
            "  }",
            "  return 0;",
            "}"]
    return "\n".join(["#ifndef IRFUSE_HOST", *gpu, "#else", *host, "#endif"])


def zero_kernel(size: int) -> tuple[str, KernelInfo]:
    """`irf_zero_*`: nodes of `size` words set to 0, over the nodes (what the atomic scatter
    adds onto)."""
    zero, _ = fuse.scatter_atomic_kernel_names(size, 1)
    text = _row_kernel(zero, "real_t* __restrict__ out, const long long n", "node",
                       [f"  for (int w = 0; w < {size}; ++w) out[node * {size} + w] = 0;"],
                       comment=f"// kas.scatter with atomics, {size}-word rows: the nodes set to 0 first")
    return text, KernelInfo(zero, 1, ROWS, 0, [], ["out"], [], [size])


def scatter_atomic_kernel(size: int, k: int) -> tuple[str, KernelInfo]:
    """The kernel of a scatter run with atomics (`scatter="atomic"` on a call), after
    `zero_kernel`: over the element rows (E x K, row r of element r / K at slot r, its node
    conn[r]), each row added into its node with atomicAdd: no scatter order is needed, and the
    order of the additions, hence the bits, changes from run to run on the GPU. The CPU twin
    runs every row in block 0's call (so that threads running blocks side by side cannot race)
    and adds them in the scatter order (`artifact.scatter_groups`: each group's rows of a node,
    found by a scan of the group, then onto the node): there it gives the ordered scatter's
    bits."""
    _, atomic = fuse.scatter_atomic_kernel_names(size, k)
    per_group = group_elements(k) * k
    params = ("const real_t* __restrict__ values, const int* __restrict__ conn, real_t* __restrict__ out, "
              "const long long n")
    gpu = [f"// kas.scatter with atomics, {size}-word rows: one thread a row, atomicAdd into its node",
           f'extern "C" __global__ void __launch_bounds__({ROWS}) {atomic}({params})',
           "{",
           f"  const long long row = (long long)blockIdx.x * {ROWS} + threadIdx.y;",
           "  if (row < n) {",
           f"    real_t* const node = out + (long long)conn[row] * {size};",
           f"    IRF_UNROLL for (int w = 0; w < {size}; ++w) atomicAdd(node + w, values[row * {size} + w]);",
           "  }",
           "}"]
    host = [f"static int {atomic}({params}, const long long block_begin, const long long block_end, "
            "const bool reverse)",
            "{",
            "  (void)reverse; (void)block_end;",
            "  if (block_begin != 0) return 0;  // every row in block 0's call: no two threads add at once",
            f"  for (long long g0 = 0; g0 < n; g0 += {per_group}) {{",
            f"    const long long g1 = n < g0 + {per_group} ? n : g0 + {per_group};",
            "    for (long long s = g0; s < g1; ++s) {",
            "      bool head = true;  // the group's first row of its node",
            "      for (long long t = g0; t < s && head; ++t) head = conn[t] != conn[s];",
            "      if (!head) continue;",
            f"      real_t acc[{size}];",
            f"      for (int w = 0; w < {size}; ++w) acc[w] = values[s * {size} + w];",
            "      for (long long t = s + 1; t < g1; ++t)",
            f"        if (conn[t] == conn[s]) for (int w = 0; w < {size}; ++w) acc[w] += values[t * {size} + w];",
            f"      for (int w = 0; w < {size}; ++w) out[(long long)conn[s] * {size} + w] += acc[w];",
            "    }",
            "  }",
            "  return 0;",
            "}"]
    return ("\n".join(["#ifndef IRFUSE_HOST", *gpu, "#else", *host, "#endif"]),
            KernelInfo(atomic, 1, ROWS, 0, ["values", "conn"], ["out"], [size, 1], [size], input_types=["", "int"]))


def scatter_groups_kernel(size: int, k: int) -> tuple[str, KernelInfo]:
    """The kernel summing rows of `size` words that no element kernel summed (an input's) into
    their groups' partials (`artifact.scatter_groups`), as an element kernel does on chip:
    launched over the E x K slots, the thread of a group's q-th slot makes the group's q-th
    partial (where it has one), adding its rows in slot order. (One thread a group making
    them all, as before, took 34 ms for the 604 M slots of a tangent matrix on 12.6 M
    tetrahedra, H200: a group's partials one after another.)"""
    name = fuse.scatter_groups_kernel_name(size, k)
    per_group = group_elements(k) * k
    slot = slot_ctype(k)  # (a slot's number in its group: one byte, or two past 256 slots a group)
    params = (f"const real_t* __restrict__ values, const {slot}* __restrict__ members, "
              f"const {slot}* __restrict__ firsts, const int* __restrict__ bases, real_t* __restrict__ out, "
              "const long long n")
    each = f"for (int c = 0; c < {size}; ++c)"
    text = _row_kernel(name, params, "slot", [
        f"  const long long group = slot / {per_group}, base = slot - slot % {per_group};",
        f"  const long long p = bases[group] + slot % {per_group}, p1 = bases[group + 1];",
        "  if (p < p1) {",
        f"    const int slots = n - base < {per_group} ? (int)(n - base) : {per_group};",
        f"    const {slot}* const m = members + base;",
        "    const int m1 = p + 1 < p1 ? firsts[p + 1] : slots;",
        f"    real_t acc[{size}];",
        f"    {each} acc[c] = values[(base + m[firsts[p]]) * {size} + c];",
        "    for (int q = firsts[p] + 1; q < m1; ++q) {",
        f"      {each} acc[c] += values[(base + m[q]) * {size} + c];",
        "    }",
        f"    {each} out[p * {size} + c] = acc[c];",
        "  }"], comment=f"// kas.scatter of {size}-word rows of {k}-node elements: a group's partials, one a thread")
    info = KernelInfo(name, 1, ROWS, 0, ["values", "members", "firsts", "bases"], ["out"], [size, 1, 1, 1], [size],
                      input_types=["", slot, slot, "int"])
    return text, info

def index_check_kernel(wide: bool = False) -> tuple[str, KernelInfo]:
    """The kernel a call on GPU arrays checks a connectivity with before anything reads through
    it: over its E x K entries, the first (lowest) slot whose node number is outside
    [0, nodes) goes into `first_bad` (which the call sets to LLONG_MAX before, and reads
    after); `nodes` is a one-word array. The CPU twin does the same in slot order. `wide`:
    the connectivity's node numbers are int64, each also written, narrowed, into `narrowed`
    (int32: what the kernels read; a number outside [0, nodes) is flagged before any is read)."""
    name = CHECK_INDEX64_KERNEL if wide else CHECK_INDEX_KERNEL
    index = "long long" if wide else "int"
    params = (f"const {index}* __restrict__ conn, const long long* __restrict__ nodes, "
              "long long* __restrict__ first_bad, " + ("int* __restrict__ narrowed, " if wide else "")
              + "const long long n")
    read = [f"  const {index} v = conn[slot];", *(["  narrowed[slot] = (int)v;"] if wide else [])]
    text = _row_kernel(name, params, "slot", [
        *read,
        "  if (v < 0 || v >= nodes[0]) {  // the least slot, as blocks running side by side find them",
        "    long long seen = __atomic_load_n(first_bad, __ATOMIC_RELAXED);",
        "    while (slot < seen && !__atomic_compare_exchange_n(first_bad, &seen, slot, false, __ATOMIC_RELAXED,",
        "                                                       __ATOMIC_RELAXED)) {}",
        "  }"], gpu_body=[
        *read,
        "  if (v < 0 || v >= nodes[0]) atomicMin((unsigned long long*)first_bad, (unsigned long long)slot);"],
        comment="// a connectivity checked on the GPU: the first entry outside [0, nodes)")
    info = KernelInfo(name, 1, ROWS, 0, ["conn", "nodes"], ["first_bad", *(["narrowed"] if wide else [])], [1, 1],
                      [1, 1] if wide else [1], input_types=[index, "long long"],
                      output_types=["long long", "int"] if wide else ["long long"])
    return text, info


def transpose_kernels() -> list[tuple[str, KernelInfo]]:
    """`irf_rows_of_columns` and `irf_columns_of_rows`: n words of `count = n / words` values of
    `words` words each, from a structure of arrays (word c of value i at c * count + i) into an
    array of structures (at i * words + c), and back; `words` is a one-word array. One thread a
    word of the array of structures (its side reads or writes contiguously)."""
    out = []
    for name, read, write in ((ROWS_OF_COLUMNS_KERNEL, "(slot % w) * count + slot / w", "slot"),
                              (COLUMNS_OF_ROWS_KERNEL, "slot", "(slot % w) * count + slot / w")):
        params = "const real_t* __restrict__ in, const long long* __restrict__ words, real_t* __restrict__ out, " \
                 "const long long n"
        text = _row_kernel(name, params, "slot", ["  const long long w = words[0], count = n / w;",
                                                  f"  out[{write}] = in[{read}];"])
        info = KernelInfo(name, 1, ROWS, 0, ["in", "words"], ["out"], [1, 1], [1],
                          input_types=["", "long long"], output_types=[""])
        out.append((text, info))
    return out
