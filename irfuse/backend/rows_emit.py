"""The owner-computes assembly kernel of a mesh program's tangent: each CSR row summed by
the one thread that owns it, straight into the matrix's values, with no per-element blocks,
no per-slot map and no scatter order in memory.

Its input is the per-element Jacobian (`driver.front.element_jacobian`: a program of
`kas.call`s and literals from the element's gathered rows, uniform values and per-element
values to the block (K, D, K, D)). One thread owns node n's D rows of the matrix. It sets
them to 0, then walks n's (element, local node) slots in ascending element order (the lists
`irfuse.mesh.assembly.node_slots` makes once per connectivity): for slot (e, a) it gathers
e's rows through the connectivity, runs the Jacobian's calls in registers (each library op's
one-thread implementation, operands and result in registers), finds each node b of e among
row n's blocks by a search of the CSR column indices in fixed steps (as many as the
pattern's widest row needs: unrolled, no branch), and adds the block row (a, :, b, :) there.
On the GPU, where the element part's vector-Jacobian product is given
(`transforms.element_blocks.element_rows_program`), a slot runs that instead: what does not
depend on the cotangent, then a reverse sweep with the cotangent 1 at row (a, i) and 0
elsewhere, which gives block row (a, i) alone (the Jacobian's forward mode takes K x D
directions for the whole block, of which the slot adds one K-th). Each sweep is written out
entry by entry with the cotangent's words of rows other than i the literal 0, known when
emitting, so that its products with them are gone (`_folded_entries`; the P1 tangent on 12.6 M
tets, H200: 2.75-2.94 -> 2.45-2.48 ms, the same bits; the Neo-Hookean tangent 7.37-7.43 ->
3.36-3.58 ms, 254 -> 96 registers); so is any op reading a table's words (a uniform input
fixed when compiling, `constants=`), whose 0 and 1 fold alike. Where a block's rows and a
round of staged slots fit its shared memory (`rounds_nodes`), each slot is computed once
(`_rounds_kernel`): thread (x, y) of a block runs slot r D + x of node y in round r (the
element's geometry and its D reverse sweeps, its K nodes' places in the row read from
`places`, found once a connectivity by `PLACES_KERNEL`), stages its D block rows and positions
in shared memory, and after a barrier adds row x of its node's slots of the
round in order (the P1 tangent on 12.6 M tets, H200: 4.46 -> 3.51 ms; on 1.57 M, 0.74 -> 0.63).
Elsewhere a node's D rows are summed by D threads, one row each (`SPLIT_ROWS`; threadIdx.x the
row), each running the element for its row: the P1 tangent's kernel so takes 64 registers in
float32 where the whole block took 235 (NVRTC, sm_90). Every entry is summed by one thread in
one order (ascending elements, then ascending b within an element), so every run gives the
same bits on its device; the CPU twin adds in the same order.

On the GPU the thread's rows are added in shared memory where a block's nodes' rows fit
(`shared_nodes`: the widest row of the pattern decides), then written once, coalesced over
the block's stretch of the values, and the row's column blocks are copied beside them first,
so the searches read shared memory (a hand-written kernel went from 7.7 to 5.4 ms so, on
12.6 M tets); else the rows are added in the values themselves and searched in the indices.
The element's calls are recomputed for each of its K nodes: the price of keeping nothing per
slot (measured against the scatter of per-slot blocks in `benchmarks/NOTES.md`, issue 73).
The CPU twin keeps the blocks of the last elements a worker computed (`cached_blocks`, in
CACHE_BYTES, direct-mapped by element number): nodes walked in order share most of their
elements (Morton numbering), so there an element's calls mostly run once; a kept block holds
the very words the calls give, so the bits do not change.

`rows_module` writes the source (GPU kernel and CPU twin under IRFUSE_HOST) or raises
`NotRowsForm` for a program this kernel cannot run (an op other than a call, a finite
literal or a table of them, a call without a one-thread implementation): the caller then
assembles through the scatter of per-slot blocks.
"""

from __future__ import annotations

import functools
import math
import re

from irfuse.artifact.arrays import ElementType
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.backend.cuda_emit import EmittedModule, c_literal, prelude
from irfuse.dialects import kas
from irfuse.library.catalogue import Library
from irfuse.library.implementations import c_function
from irfuse.library.indexexpr import Const, Leaf, SBin, SCall, SUn

KERNEL = "irf_tangent_rows"
NODES = 64  # threads (nodes) a block: the hand-written kernels' best (benchmarks/NOTES.md, issue 73)
SHARED_LIMIT = 48 * 1024 - 1024  # bytes of static shared memory a block's rows may take on the GPU
CACHE_BYTES = 2 << 20  # what a CPU worker's kept element blocks may take (see the module)
# On the GPU, with a vector-Jacobian product: D threads a node, each summing one of its rows
# (one reverse sweep a slot; the element's geometry computed by each). The P1 tangent on 12.6 M
# tets, H200: 6.83 -> 6.31 ms (1.57 M: 1.22 -> 0.98), 115 -> 76 registers, 10 -> 24 resident
# warps an SM; with the search of fixed steps, 4.61 ms at 30 warps (benchmarks/NOTES.md, issue 73).
SPLIT_ROWS = True
# On the GPU, with a vector-Jacobian product and rows that fit: each slot's D block rows computed
# once, by one thread, in rounds of D slots a node, then added by a thread a (node, row): the
# element's geometry and the searches run once a slot instead of D times (`_rounds_kernel`;
# the P1 tangent on 12.6 M tets, H200: 4.46 -> 3.51 ms). SLOT_NODES nodes a block, fewer
# where their rows and a round do not fit.
# Its shared memory is laid out so that a warp's accesses touch a bank once (`staging_layout`;
# each thread's row at stride D x nodes): 3.17-3.19 -> 2.85 ms there, the kernel's shared-memory
# wavefronts 487 M -> 331 M (benchmarks/NOTES.md, issue 73).
SLOT_ROUNDS = True
SLOT_NODES = (32, 16)
# The rounds kernel reads where each of a slot's K nodes lies in its node's row (a byte each, the
# block's index in the row: rows of at most PLACES_WIDEST blocks) from `places`, which `PLACES_KERNEL`
# finds once per connectivity by the search of fixed steps and `irfuse.api.tangents` keeps:
# searching at every call took 15-17% of the P1 tangent's time (12.6 M tets, H200: 3.44-3.67 ms
# with the searches, 2.85-3.00 without; benchmarks/NOTES.md, issue 73).
PLACES_KERNEL = "irf_tangent_places"
PLACES_NODES = 128  # nodes (threads) a block of PLACES_KERNEL
PLACES_WIDEST = 255  # the most blocks a row may hold for its places to fit a byte


def cached_blocks(k: int, d: int, itemsize: int) -> int:
    """Element blocks a CPU worker keeps: a power of two of them in CACHE_BYTES, at least 16.
    On 82,944 Morton-ordered tets (the P1 tangent, float32, 2 cores) 64 blocks kept 27% of
    the slots from computing their element again and the call took 31 ms, 1,024 blocks 63%
    (of at most 75%: four slots an element) and 18.4 ms, 4,096 blocks 17.7 ms; the scatter of
    per-slot blocks took 29-31 ms (benchmarks/NOTES.md, issue 73)."""
    fits = max(CACHE_BYTES // ((k * d) ** 2 * itemsize), 16)
    return 1 << (fits.bit_length() - 1)


class NotRowsForm(Exception):
    """The program has something the owner-computes kernel does not run (the message says
    what); the tangent is assembled by the scatter of per-element blocks instead."""


def rounds_nodes(widest: int, k: int, d: int, itemsize: int, index_size: int) -> int:
    """Nodes a block of `_rounds_kernel` takes: the first of SLOT_NODES whose rows, column
    blocks, slot offsets and a round's staged block rows and positions fit in SHARED_LIMIT;
    0 where none does. (The kernel no longer stages the column blocks, which `places` replace;
    their room is still counted, so that the rows that take these kernels and their blocks
    are those measured.)"""
    for nodes in SLOT_NODES:
        slots = nodes * d  # (a round: a slot a thread)
        stride, _ = staging_layout(k, d, slots, itemsize)
        need = (nodes * widest * (d * d * itemsize + index_size) + (nodes + 1) * 16
                + slots * (stride * itemsize + k * 4))
        if need <= SHARED_LIMIT:
            return nodes
    return 0


@functools.lru_cache(maxsize=None)
def staging_layout(k: int, d: int, threads: int, itemsize: int) -> tuple[int, int]:
    """(S, R): where `_rounds_kernel` stages word m (= b D + j) of block row i of the slot run
    by thread t: `irf_part[t S + i R + m]`. Chosen so that no two threads of a warp touch two
    words of one shared-memory bank in either direction: each thread storing the same word of
    its slot (S odd), and thread (x, y) reading word m of row x of node y's q-th slot of the
    round (slot t = y D + q). The first such (S, R) with the rows apart (R >= K D) and S <= 4 K D D;
    else the plain layout, rows side by side at an odd stride (S = D K D | 1, R = K D). The P1
    tangent's reads of that layout took 1.9 wavefronts an access on a Morton mesh, the rows'
    adds 2.2 with the rows laid out as in the values (a model of the banks; Nsight Compute
    counted 130 M conflicts of its shared loads at 12.6 M tets, 4.9 M since: benchmarks/NOTES.md,
    issue 73)."""
    return next(((s, r) for s in range((d * k * d) | 1, 4 * k * d * d + 1, 2)
                 for r in ([k * d] if d == 1 else range(k * d, (s - k * d) // (d - 1) + 1))
                 if _conflict_free(s, r, k, d, threads, itemsize)), ((d * k * d) | 1, k * d))


def _conflict_free(s: int, r: int, k: int, d: int, threads: int, itemsize: int) -> bool:
    """Whether the staging layout (s, r) (see `staging_layout`) keeps every warp's reads of a
    round's staged rows to one wavefront: distinct banks for distinct words among the lanes
    served together (a warp for 4-byte words, a half warp for 8-byte)."""
    if (d - 1) * r + k * d > s:
        return False
    lanes = 32 // max(itemsize // 4, 1)  # (and as many banks of the word's size)
    for w0 in range(0, threads, lanes):
        for q in range(d):
            for m in range(k * d):
                seen = {}
                for tid in range(w0, min(w0 + lanes, threads)):
                    y, x = divmod(tid, d)
                    a = (d * y + q) * s + x * r + m
                    if seen.setdefault(a % lanes, a) != a:
                        return False
    return True


def shared_nodes(widest: int, d: int, itemsize: int, index_size: int = 8) -> int:
    """Nodes whose rows a GPU block adds in shared memory: NODES where their rows (`widest`
    blocks of d x d a node, the pattern's widest) and their column blocks fit in
    SHARED_LIMIT, else 0 (in global memory)."""
    return NODES if NODES * widest * (d * d * itemsize + index_size) <= SHARED_LIMIT else 0


def rows_module(program: kas.ProgramOp, gathered: tuple[str, ...], out: str, library: Library, element: ElementType,
                k: int, d: int, wide: bool, widest: int, rows: tuple | None = None) -> EmittedModule:
    """The source of `KERNEL` for the per-element Jacobian `program` (output `out`, shaped
    (K, D, K, D)); `gathered`: its inputs that are rows gathered through the connectivity
    (K rows of a nodal value's words); `wide`: int64 CSR indices (else int32);
    `widest`: the most blocks a node row of the pattern holds; `rows`: where given, the
    element part's vector-Jacobian product, its cotangent input and its output
    (`transforms.element_blocks.element_rows_program`), from which the GPU's slots compute
    their D block rows (see the module). Its parameters, in order:
    each program input (a gathered one as the nodal array, a uniform one as its words, any
    other as per-element rows), the connectivity (int), each node's first slot (long long,
    N + 1), the slots (int: element * K + local node), the CSR indptr and indices, the values
    (output), the node count."""
    names = list(program.inputs)
    uniform = set(program.uniform)
    widest = max(widest, 1)  # (a pattern of no nodes: its arrays sized for one block, never read)
    if out not in program.outputs:
        raise NotRowsForm(f"the Jacobian has no output {out}")
    result = program.return_op.values[list(program.outputs).index(out)]
    if result.type.size != (k * d) ** 2:
        raise NotRowsForm(f"the Jacobian's blocks hold {result.type.size} words, not {(k * d) ** 2}")
    body, used, name = _element_code(program, gathered, uniform, library, k, d)
    gpu_body, gpu_rows, split = body, None, False
    idx = "long long" if wide else "int"
    rounds = 0  # (nodes a block of `_rounds_kernel`, where it runs)
    if rows is not None and set(rows[0].inputs) - {rows[1]} <= set(names):
        vjp, seed, bar = rows
        rounds = rounds_nodes(widest, k, d, element.itemsize, 8 if wide else 4) \
            if SLOT_ROUNDS and widest <= PLACES_WIDEST else 0
        split = SPLIT_ROWS and d > 1 and not rounds
        gpu_body, more, gpu_name = _element_code(vjp, gathered, set(vjp.uniform), library, k, d, seed, split)
        used += [impl for impl in more if impl not in used]
        gpu_rows = [gpu_name(vjp.return_op.values[list(vjp.outputs).index(bar)], i) for i in range(1 if split else d)]
    threads = d if split or rounds else 1  # (threads a node: threadIdx.x its row where split)
    nodes_a_block = rounds or NODES
    params = [f"const real_t* __restrict__ in_{n}" for n in names] + [
        "const int* __restrict__ conn", "const long long* __restrict__ starts", "const int* __restrict__ slots",
        f"const {idx}* __restrict__ indptr", f"const {idx}* __restrict__ indices", "real_t* __restrict__ values",
        "const long long n"]
    args = [f"in_{n}" for n in names] + ["conn", "starts", "slots", "indptr", "indices"]
    words = element.itemsize
    per_block = shared_nodes(widest, d, words, 8 if wide else 4)
    jac = name(result)
    head = f"{', '.join(params[:-2])}, real_t* __restrict__ rows, const {idx}* __restrict__ cols, const int step"
    cached = cached_blocks(k, d, element.itemsize)
    row_cached = _node_function(head, idx, k, d, widest, body, jac, cached=cached)
    if rounds:
        assert gpu_rows is not None
        # (the kernel's parameters take the places of each slot's nodes in its row, found once)
        params = [*params[:-2], "const unsigned char* __restrict__ places", *params[-2:]]
        gpu = ["#ifndef IRFUSE_HOST", *_places_kernel(idx, k, d, widest, gpu=True),
               *_rounds_kernel(params, k, d, widest, gpu_body, gpu_rows, rounds, element.itemsize), "#else",
               *_places_kernel(idx, k, d, widest, gpu=False)]
    else:
        row = _node_function(head + (", const int row" if split else ""), idx, k, d, widest, gpu_body, jac, cached=0,
                             block_rows=gpu_rows, split=split)
        gpu = _node_kernel(params, args, idx, k, d, widest, row, threads, per_block, split)
    jw = (k * d) ** 2
    host = [*row_cached, "",
            f"static int {KERNEL}({', '.join(params)}, const long long block_begin, const long long block_end, "
            "const bool reverse)",
            "{",
            "  (void)reverse;",
            f"  const irf::Scratch<real_t> cache({cached * jw});  // the last elements' blocks (see the module)",
            f"  const irf::Scratch<long long> tags({cached});",
            "  if (cache.get() == nullptr || tags.get() == nullptr) return 1;  // no memory for them: no node runs",
            f"  for (int c = 0; c < {cached}; ++c) tags.get()[c] = -1;",
            f"  const long long last = block_end * {nodes_a_block} < n ? block_end * {nodes_a_block} : n;",
            f"  for (long long node = block_begin * {nodes_a_block}; node < last; ++node)",
            f"    irf_tangent_node_cached({', '.join(args)}, values + indptr[node * {d}], indices + indptr[node * {d}], "
            f"{d}, node, cache.get(), tags.get());",
            "  return 0;",
            "}",
            "#endif"]
    functions = []
    for impl in used:
        functions.append(impl.device_source(whole_values_variant(impl)).replace("BX", "1"))
    lists, list_types = ["conn", "starts", "slots", "indptr", "indices"], ["int", "long long", "int", idx, idx]
    places, place_types = (["places"], ["unsigned char"]) if rounds else ([], [])
    kernels = [KernelInfo(KERNEL, threads, nodes_a_block, 0, [*names, *lists, *places], ["values"],
                          [1] * (len(names) + len(lists) + len(places)), [1],
                          input_types=[""] * len(names) + list_types + place_types)]
    if rounds:
        kernels.append(KernelInfo(PLACES_KERNEL, 1, PLACES_NODES, 0, lists, places, [1] * len(lists), [k],
                                  input_types=list_types, output_types=place_types))
    source = element.c_prelude + "\n\n".join([prelude(), *functions, "\n".join(gpu + host)]) + "\n"
    return EmittedModule(source, kernels)


def _places_kernel(idx: str, k: int, d: int, widest: int, gpu: bool) -> list[str]:
    """`PLACES_KERNEL`: for each node's slots in order, where each of the slot's element's K nodes
    lies in the node's row: the index of its block among the row's column blocks (a byte,
    `places[s * K + b]` for slot s and local node b), found by the search of fixed steps the
    kernels ran at every call before (`_column_search`). A thread a node (threadIdx.y, blocks of
    PLACES_NODES); the CPU twin loops over its share of the nodes alike."""
    params = (f"const int* __restrict__ conn, const long long* __restrict__ starts, const int* __restrict__ slots, "
              f"const {idx}* __restrict__ indptr, const {idx}* __restrict__ indices, "
              f"unsigned char* __restrict__ places, const long long n")
    body = [f"  const {idx} base = indptr[node * {d}];",
            f"  const int blocks = (int)((indptr[node * {d} + 1] - base) / {d});",
            f"  const {idx}* const cols = indices + base;",
            "  for (long long s = starts[node]; s < starts[node + 1]; ++s) {",
            "    const int slot = slots[s];",
            f"    const int* const nodes = conn + (slot - slot % {k});",
            *_column_search(idx, k, d, widest, f"cols[(lo + half - 1) * {d}]", f"places[s * {k} + b]", "    ",
                            scale=False),
            "  }"]
    if gpu:
        return [f'extern "C" __global__ void __launch_bounds__({PLACES_NODES}) {PLACES_KERNEL}({params})',
                "{",
                f"  const long long node = (long long)blockIdx.x * {PLACES_NODES} + threadIdx.y;",
                "  if (node >= n) return;",
                *body,
                "}", ""]
    return [f"static int {PLACES_KERNEL}({params}, const long long block_begin, const long long block_end, "
            "const bool reverse)",
            "{",
            "  (void)reverse;",
            f"  const long long last = block_end * {PLACES_NODES} < n ? block_end * {PLACES_NODES} : n;",
            f"  for (long long node = block_begin * {PLACES_NODES}; node < last; ++node) {{",
            *["  " + line for line in body],
            "  }",
            "  return 0;",
            "}", ""]


def _node_kernel(params: list[str], args: list[str], idx: str, k: int, d: int, widest: int, row: list[str],
                 threads: int, per_block: int, split: bool) -> list[str]:
    """The GPU kernel of a thread a node (or D, `split`) running `irf_tangent_node` (`row`):
    the rows of a block's NODES nodes in shared memory where `per_block`, else in the values."""
    shared_rows = per_block * widest * d * d
    # (a launch's block is (threads, NODES): threadIdx.y is the node, as the runtime launches kernels)
    own = ", threadIdx.x" if split else ""
    first_thread = "threadIdx.x == 0 && " if split else ""
    gpu = ["#ifndef IRFUSE_HOST", *row, "",
           f'extern "C" __global__ void __launch_bounds__({NODES * threads}) {KERNEL}({", ".join(params)})',
           "{",
           f"  const long long first = (long long)blockIdx.x * {NODES};",
           "  const long long node = first + threadIdx.y;"]
    if per_block:
        gpu += [f"  __shared__ __align__(16) real_t irf_rows[{shared_rows}];",
                f"  __shared__ {idx} irf_cols[{per_block * widest}];  // each node's column blocks, staged for the searches",
                f"  __shared__ long long irf_from[{NODES + 1}];  // each node's stretch, from the block's start",
                f"  const long long end = first + {NODES} < n ? first + {NODES} : n;",
                f"  const long long begin_at = indptr[first * {d}];",
                f"  if ({first_thread}first + threadIdx.y <= end) irf_from[threadIdx.y] = (long long)indptr[(first + threadIdx.y) * {d}] - begin_at;",
                f"  if ({first_thread}threadIdx.y == 0 && end - first == {NODES}) irf_from[{NODES}] = (long long)indptr[end * {d}] - begin_at;",
                f"  real_t* const mine = irf_rows + threadIdx.y * {widest * d * d};",
                f"  {idx}* const cols = irf_cols + threadIdx.y * {widest};",
                f"  if ({first_thread}node < n) {{",
                f"    const {idx} base = indptr[node * {d}];",
                f"    const long long blocks = (long long)(indptr[node * {d} + 1] - base) / {d};",
                f"    for (long long p = 0; p < blocks; ++p) cols[p] = indices[base + p * {d}];",
                *([] if split else [f"    irf_tangent_node({', '.join(args)}, mine, cols, 1, node);"]),
                "  }",
                *(["  __syncthreads();  // (the node's columns staged by its first thread)",
                   f"  if (node < n) irf_tangent_node({', '.join(args)}, mine, cols, 1{own}, node);"] if split else []),
                "  __syncthreads();",
                "  // The block's nodes' rows are one stretch of the values: written once, coalesced.",
                "  const long long span = irf_from[end - first];",
                f"  for (long long w = threadIdx.y * {threads} + threadIdx.x; w < span; w += {NODES * threads}) {{",
                "    int lo = 0, hi = (int)(end - first) - 1;  // the node whose stretch holds entry w",
                "    while (lo < hi) {",
                "      const int mid = (lo + hi + 1) / 2;",
                "      if (irf_from[mid] <= w) lo = mid; else hi = mid - 1;",
                "    }",
                f"    values[begin_at + w] = irf_rows[lo * {widest * d * d} + (w - irf_from[lo])];",
                "  }"]
    else:
        gpu += [f"  if (node < n) irf_tangent_node({', '.join(args)}, values + indptr[node * {d}], indices + indptr[node * {d}], "
                f"{d}{own}, node);"]
    gpu += ["}", "#else"]
    return gpu


def _rounds_kernel(params: list[str], k: int, d: int, widest: int, body: list[str],
                   block_rows: list[str], nodes: int, itemsize: int) -> list[str]:
    """The GPU kernel where each slot's block rows are computed once: a block of D x `nodes`
    threads takes `nodes` nodes, thread (x, y) node y, in rounds of D slots a node: in round
    r it runs node y's slot r D + x (where the node has it) once, the element code with its D
    reverse sweeps (`body`, its rows `block_rows`), reads where the element's K nodes lie in
    node y's row (`places`, found once by `PLACES_KERNEL`) and stages the D x K x D words and
    the K positions in shared memory; after a barrier, thread (x, y) adds row x of each of
    the round's slots of node y, in order, block b after block b (an element may name a node
    twice: two of its blocks then land on the same words), each block's D words together. Each entry of the
    matrix is so summed by one thread, slots ascending then b ascending: the order of
    `irf_tangent_node`.

    Shared memory is laid out so that a warp's accesses touch each bank once: thread t's row
    sums lie at stride D x `nodes` (word w of its row at `w * threads + t`: the adds of a warp,
    at places that differ thread by thread, each in the thread's own bank), a round's staged
    rows as `staging_layout` says, each staged position at stride `threads`. At the end the
    rows go out laid out as in the values (the block's nodes' rows one stretch), written once
    and coalesced, through the staging's room a window of the stretch at a time. The rounds a
    block runs (the most slots a node of it has) come from a max in shared memory, each node's
    count taken by one thread: a loop over the block's nodes in every thread took 4% of the
    instructions the P1 tangent's kernel executes (1-3% of its time on an H100:
    benchmarks/NOTES.md, issue 73)."""
    nt = d * nodes  # threads a block, and slots a round
    stride, apart = staging_layout(k, d, nt, itemsize)
    room = nt * stride  # (the staging's words: a round's staged rows, then a window of the rows as in the values)
    return [f'extern "C" __global__ void __launch_bounds__({nt}) {KERNEL}({", ".join(params)})',
            "{",
            f"  __shared__ __align__(16) real_t irf_rows[{nodes * widest * d * d}];  // row t's word w at w * {nt} + t",
            f"  __shared__ __align__(16) real_t irf_part[{room}];  // a round's slots' block rows; at the end the rows",
            f"  __shared__ long long irf_from[{nodes + 1}];  // each node's stretch of the values, from the block's",
            f"  __shared__ long long irf_first[{nodes + 1}];  // each node's first slot",
            (f"  __shared__ __align__(16) int irf_at[{nt * 4}];  // where node b of slot t lies in its node's row, "
             f"times {nt}: t * 4 + b" if k == 4 else
             f"  __shared__ int irf_at[{nt * k}];  // where node b of slot t lies in its node's row: b * {nt} + t"),
            "  __shared__ unsigned long long irf_most;  // the most slots a node of the block has",
            f"  const int tid = threadIdx.y * {d} + threadIdx.x;",
            f"  const long long first = (long long)blockIdx.x * {nodes};",
            f"  const int count = (int)(first + {nodes} < n ? {nodes} : n - first);",
            f"  const long long begin_at = indptr[first * {d}];",
            *(["  const bool irf_aligned = (reinterpret_cast<unsigned long long>(conn) & 15) == 0;"] if k == 4 else []),
            f"  for (int y = tid; y <= count; y += {nt}) {{",
            f"    irf_from[y] = (long long)indptr[(first + y) * {d}] - begin_at;",
            "    irf_first[y] = starts[first + y];",
            "  }",
            "  if (tid == 0) irf_most = 0;",
            f"  for (int w = tid; w < {nodes * widest * d * d}; w += {nt}) irf_rows[w] = 0;",
            "  __syncthreads();",
            "  // (a node's slots each by its own thread; a max, so in any order)",
            "  if (tid < count) atomicMax(&irf_most, (unsigned long long)(irf_first[tid + 1] - irf_first[tid]));",
            "  // The block's stretch of the values fits its shared memory: offsets in it are ints.",
            "  const int span = (int)irf_from[count];",
            "  __syncthreads();",
            "  const long long most = (long long)irf_most;",
            "  const int y = threadIdx.y;",
            f"  const int width = y < count ? (int)((irf_from[y + 1] - irf_from[y]) / {d}) : 0;  // a row's entries",
            "  real_t* const row = irf_rows + tid;  // (row x of node y: this thread's alone)",
            *_reads_ahead_first(k, d),
            f"  for (long long r0 = 0; r0 < most; r0 += {d}) {{",
            "    const long long s = y < count ? irf_first[y] + r0 + threadIdx.x : 0;",
            *_reads_ahead(k, d),
            "    if (s < irf_end) {",
            f"      const long long e = slot / {k};",
            f"      const int a = slot % {k};",
            *([] if k == 4 else ["      const int* const nodes = conn + (slot - a);"]),
            *["      " + line for line in body],
            *_slot_places(k, nt, d),
            *[f"      IRF_UNROLL for (int w = 0; w < {k * d}; ++w) irf_part[tid * {stride} + {i * apart} + w] = {r}[w];"
              for i, r in enumerate(block_rows)],
            "    }",
            "    __syncthreads();",
            "    if (y < count) {  // row x of node y: the round's slots of y in order, each one's K x D words",
            "      const long long left = irf_first[y + 1] - irf_first[y] - r0;",
            f"      const int here = left < {d} ? (int)left : {d};",
            "      for (int q = 0; q < here; ++q) {",
            f"        const int t = y * {d} + q;",
            f"        const real_t* const part = irf_part + t * {stride} + threadIdx.x * {apart};",
            *(["        const int4 irf_q = reinterpret_cast<const int4*>(irf_at)[t];  // (the slot's four places at once)",
               "        const int irf_places[4] = {irf_q.x, irf_q.y, irf_q.z, irf_q.w};"] if k == 4 else []),
            f"        IRF_UNROLL for (int b = 0; b < {k}; ++b) {{  // (b after b: an element may name a node twice)",
            ("          real_t* const at = row + irf_places[b];" if k == 4 else
             f"          real_t* const at = row + irf_at[b * {nt} + t] * {nt};"),
            f"          real_t sums[{d}];  // (a block's D words read, added, written: distinct words)",
            f"          IRF_UNROLL for (int j = 0; j < {d}; ++j) sums[j] = at[j * {nt}] + part[b * {d} + j];",
            f"          IRF_UNROLL for (int j = 0; j < {d}; ++j) at[j * {nt}] = sums[j];",
            "        }",
            "      }",
            "    }",
            "    __syncthreads();",
            "  }",
            "  // The rows, laid out as in the values (the block's nodes' rows one stretch), written once,",
            "  // coalesced: each thread copies its row's words that fall in a window of the stretch as",
            "  // long as the staging's room, which the block then writes, window after window.",
            f"  for (int base = 0; base < span; base += {room}) {{",
            "    if (y < count) {",
            "      const int at0 = (int)irf_from[y] + threadIdx.x * width - base;  // (the row's first word)",
            "      const int lo = at0 < 0 ? -at0 : 0;",
            f"      const int hi = {room} - at0 < width ? {room} - at0 : width;",
            f"      for (int w = lo; w < hi; ++w) irf_part[at0 + w] = row[w * {nt}];",
            "    }",
            "    __syncthreads();",
            f"    const int here = span - base < {room} ? span - base : {room};",
            "    real_t* const out = values + begin_at + base;",
            f"    for (int w = tid; w < here; w += {nt}) out[w] = irf_part[w];",
            "    __syncthreads();",
            "  }",
            "}"]


def _reads_ahead_first(k: int, d: int) -> list[str]:
    """Before `_rounds_kernel`'s rounds: where the thread's slots end (`irf_end`; none where its
    node is past the block's), the slots of its first two rounds and, for a tetrahedron, the
    first one's K node numbers (`_reads_ahead`)."""
    return ["  const long long irf_end = y < count ? irf_first[y + 1] : 0;  // (past this thread's slots)",
            "  const long long irf_s0 = y < count ? irf_first[y] + threadIdx.x : 0;",
            "  int irf_slot_at[2];  // the slots of this round and the next, each read two rounds ahead",
            "  irf_slot_at[0] = irf_s0 < irf_end ? slots[irf_s0] : 0;",
            f"  irf_slot_at[1] = irf_s0 + {d} < irf_end ? slots[irf_s0 + {d}] : 0;",
            *([] if k != 4 else ["  int irf_nodes_at[4] = {0, 0, 0, 0};  // this round's slot's element's nodes, read a round ahead",
                                 *_element_nodes("irf_nodes_at", "irf_slot_at[0]", "irf_s0 < irf_end", "  ")])]


def _reads_ahead(k: int, d: int) -> list[str]:
    """In each round of `_rounds_kernel`: the round's slot, read two rounds before, and for a
    tetrahedron its element's nodes, read one round before (`_reads_ahead_first` for the first
    rounds); then those of the rounds after it: the next round's nodes, the slot of the round
    after that. A slot's element code
    waits on its gathers of the nodes' values, which wait on the nodes, which wait on the slot:
    read ahead, the three loads' latencies are not in one chain within a round. The P1 tangent
    on 12.6 M tets, H100: 2.36-2.40 -> 2.24-2.29 ms, the Neo-Hookean 3.26-3.50 -> 3.13-3.19, the
    warps' waits on global loads 27% -> 19% of their time, 8 more registers at the same resident
    blocks (benchmarks/NOTES.md, issue 73)."""
    lines = ["    const int slot = irf_slot_at[0];"]
    if k == 4:
        lines += ["    int nodes[4];",
                  "    IRF_UNROLL for (int b = 0; b < 4; ++b) nodes[b] = irf_nodes_at[b];",
                  *_element_nodes("irf_nodes_at", "irf_slot_at[1]", f"s + {d} < irf_end", "    ")]
    return lines + ["    irf_slot_at[0] = irf_slot_at[1];",
                    f"    irf_slot_at[1] = s + {2 * d} < irf_end ? slots[s + {2 * d}] : 0;"]


def _element_nodes(into: str, slot: str, valid: str, indent: str) -> list[str]:
    """`into`, the 4 node numbers of the tetrahedron of `slot` (where `valid`): read as one
    16-byte load where the connectivity lies at a 16-byte boundary (else word by word: a view
    of another's array). The same numbers either way: the same bits. The P1 tangent on 12.6 M
    tets, H200, with `_slot_places`' load: 2.88-2.94 -> 2.82-2.87 ms (benchmarks/NOTES.md,
    issue 73)."""
    return [f"{indent}if ({valid}) {{",
            f"{indent}  const int* const irf_element = conn + ({slot} - {slot} % 4);",
            f"{indent}  if (irf_aligned) {{",
            f"{indent}    const int4 irf_n4 = *reinterpret_cast<const int4*>(irf_element);",
            f"{indent}    {into}[0] = irf_n4.x; {into}[1] = irf_n4.y; {into}[2] = irf_n4.z; {into}[3] = irf_n4.w;",
            f"{indent}  }} else {{",
            f"{indent}    IRF_UNROLL for (int b = 0; b < 4; ++b) {into}[b] = irf_element[b];",
            f"{indent}  }}",
            f"{indent}}}"]


def _slot_places(k: int, nt: int, d: int) -> list[str]:
    """The slot's K places in its node's row staged for the round: `irf_at[b * nt + t]`, the
    block's first word in the row, or for a tetrahedron its four read as one 4-byte load
    (`places` is irfuse's own array, aligned) and staged as one 16-byte word, `irf_at[t * 4 +
    b]`, already times the row's stride (D x nt), which the adds then read as one load a slot
    (`_rounds_kernel`; 4-8% of the P1 tangent's time on an H100: benchmarks/NOTES.md, issue 73)."""
    if k != 4:
        return [f"      IRF_UNROLL for (int b = 0; b < {k}; ++b) irf_at[b * {nt} + tid] = places[s * {k} + b] * {d};"]
    return ["      const uchar4 irf_p4 = *reinterpret_cast<const uchar4*>(places + s * 4);  // (places: irfuse's own)",
            f"      reinterpret_cast<int4*>(irf_at)[tid] = int4{{irf_p4.x * {d * nt}, irf_p4.y * {d * nt}, "
            f"irf_p4.z * {d * nt}, irf_p4.w * {d * nt}}};"]


def _column_search(idx: str, k: int, d: int, widest: int, column: str, store: str, indent: str,
                   scale: bool = True) -> list[str]:
    """For each node b of the slot's element, its block's first entry in the node's row (or,
    not `scale`, the block's index among the row's), stored at `store`: a search of fixed steps
    over the row's column blocks (`column`, the block at `lo + half - 1`), as many as the
    pattern's widest row needs (unrolled, each a predicated compare, no branch)."""
    top = 1 << (max(widest, 1).bit_length() - 1)  # (the first step: a row holds at most `widest` blocks)
    return [f"{indent}IRF_UNROLL for (int b = 0; b < {k}; ++b) {{",
            f"{indent}  const {idx} key = ({idx})nodes[b] * {d};",
            f"{indent}  int lo = 0;  // the blocks before key's: a search of fixed steps, no branch",
            f"{indent}  IRF_UNROLL for (int half = {top}; half > 0; half >>= 1)",
            f"{indent}    if (lo + half <= blocks && {column} < key) lo += half;",
            f"{indent}  {store} = {'lo * ' + str(d) if scale else '(unsigned char)lo'};",
            f"{indent}}}"]


def _node_function(head: str, idx: str, k: int, d: int, widest: int, body: list[str], jac: str, cached: int,
                   block_rows: list[str] | None = None, split: bool = False) -> list[str]:
    """`irf_tangent_node` (the GPU's, `cached` 0: the element's calls in registers for every
    slot) or `irf_tangent_node_cached` (the CPU's: an element's block computed once while it
    stays among the worker's `cached` blocks, direct-mapped by element; the same statements
    give the same bits either way): node `node`'s D rows summed into `rows`, its slots in
    ascending element order, each node of a slot's element found among `cols` (the row's
    column blocks, `step` apart). `block_rows`: the names of the slot's D block rows (K x D
    words each) where `body` computes those (the reverse sweeps) rather than the element's
    whole block `jac`; `split`: the thread sums row `row` of the node alone (`block_rows`
    then names that row's)."""
    name = "irf_tangent_node_cached" if cached else "irf_tangent_node"
    extra = ", real_t* __restrict__ cache, long long* __restrict__ tags" if cached else ""
    lines = ["// Node `node`'s D rows of the tangent, summed into `rows` (its own stretch of the values, or",
             "// of shared memory laid out alike): its slots in ascending element order.",
             f"__device__ __forceinline__ void {name}({head},",
             f"                                                 const long long node{extra})",
             "{",
             f"  const {idx} base = indptr[node * {d}];",
             f"  const int width = (int)(indptr[node * {d} + 1] - base);  // a row's entries (32 bits: within a row)",
             f"  const int blocks = width / {d};",
             "  for (int w = 0; w < width; ++w) rows[row * width + w] = 0;" if split else
             f"  for (int w = 0; w < {d} * width; ++w) rows[w] = 0;",
             "  const long long last = starts[node + 1];",
             "  for (long long s = starts[node]; s < last; ++s) {",
             "    const int slot = slots[s];",
             f"    const long long e = slot / {k};",
             f"    const int a = slot % {k};",
             "    const int* const nodes = conn + (slot - a);"]
    if cached:
        jw = (k * d) ** 2
        lines += [f"    real_t* const block = cache + (e % {cached}) * {jw};",
                  f"    if (tags[e % {cached}] != e) {{",
                  *["      " + line for line in body],
                  f"      for (int w = 0; w < {jw}; ++w) block[w] = {jac}[w];",
                  f"      tags[e % {cached}] = e;",
                  "    }"]
        jac = "block"
    else:
        lines += ["    " + line for line in body]
    lines += [f"    int at[{k}];  // each node of e: its block's first entry in the rows",
              *_column_search(idx, k, d, widest, "cols[(lo + half - 1) * step]", "at[b]", "    ")]
    if block_rows is not None:  # (entry (i, b, j) of row i: its terms in the order the switch below adds them)
        lines += [f"    IRF_UNROLL for (int b = 0; b < {k}; ++b)",
                  f"      IRF_UNROLL for (int j = 0; j < {d}; ++j) {{",
                  *[f"        rows[{'row' if split else i} * width + at[b] + j] += {r}[b * {d} + j];"
                    for i, r in enumerate(block_rows)],
                  "      }",
                  "  }",
                  "}"]
        return lines
    lines += ["    switch (a) {",
              *[line for a in range(k) for line in _add_row(a, k, d, jac)],
              "    }",
              "  }",
              "}"]
    return lines


def _add_row(a: int, k: int, d: int, jac: str) -> list[str]:
    """The switch case adding block row a of the element's Jacobian `jac` into the rows:
    entry (a, i, b, j) at row i, block at[b], column j (loops unrolled: constant indices
    into the registers)."""
    return [f"    case {a}:",
            f"      IRF_UNROLL for (int b = 0; b < {k}; ++b)",
            f"        IRF_UNROLL for (int i = 0; i < {d}; ++i)",
            f"          IRF_UNROLL for (int j = 0; j < {d}; ++j)",
            f"            rows[i * width + at[b] + j] += {jac}[(({a} * {d} + i) * {k} + b) * {d} + j];",
            "      break;"]


def _element_code(program: kas.ProgramOp, gathered: tuple[str, ...], uniform: set, library: Library, k: int,
                  d: int, seed: str | None = None, split: bool = False) -> tuple[list[str], list, object]:
    """The C statements computing the Jacobian of element e in registers (inputs gathered or
    read at e), the implementations they call (in first use), and `name(value, i)`, each
    value's C name. With `seed` (a vector-Jacobian product's cotangent input, K x D words),
    the statements that read it are written D times, copy i with the cotangent 1 at row
    (a, i) of the slot's local node a and 0 elsewhere, and `name` names copy i's values (once
    where `split`: the cotangent 1 at row (a, row), `row` the thread's); the rest are written
    once.

    Copy i's statements are its ops' entries written out (`_folded_entries`), not calls: the
    cotangent's words of rows other than i are the literal 0, known when emitting, and every
    entry a product with a structural 0 makes is 0 whatever its other factor (the op library's
    semantics of 0, `indexexpr.fold_bin`), so a reverse sweep keeps only the arithmetic of the
    words it can reach. NVRTC cannot fold those products itself (0 * x is not 0 in IEEE
    arithmetic where x is infinite or NaN). So is any op reading a literal word of a table
    (`kas.table`: a uniform input fixed when compiling), seeded or not. (Where `split`, every
    word of the cotangent is known only at run time, and the calls are kept.)"""
    names: dict = {}
    seeded: set = set()
    lines: list[str] = []
    used: list = []
    entries: dict = {}  # (value, copy: 0 where not seeded) -> each word: a literal (Const) or the C reading it

    def name(v, copy: int = 0) -> str:
        if v not in names:
            names[v] = f"v{len(names)}"
        return f"{names[v]}_{copy}" if v in seeded else names[v]

    def words(v, copy: int) -> list:
        key = (v, copy if v in seeded else 0)
        if key in entries:
            return entries[key]
        return [f"{name(v, copy)}[{w}]" for w in range(v.type.size)]

    fold = seed is not None and not split
    for input_name, arg in zip(program.inputs, program.body.block.args):
        v, size = name(arg), arg.type.size
        if input_name == seed:
            if size != k * d:
                raise NotRowsForm(f"the cotangent {seed} holds {size} words, not {k * d}")
            seeded.add(arg)
            for i in range(1 if split else d):
                # (w == a * d + i written as its two halves: w is a constant once the loop is
                # unrolled, so w % d == i folds and w / d == a compares a with a constant, the same
                # k comparisons for every copy; NVRTC then drops more of the seed's products: the
                # P1 tangent's rows kernel 1,416 -> 1,360 instructions, the same words.
                # benchmarks/NOTES.md, Matrices and solves, 2026-12-05)
                one = "w == a" if d == 1 else f"w % {d} == {'row' if split else i} && w / {d} == a"
                lines += [f"real_t {name(arg, i)}[{size}];",
                          f"for (int w = 0; w < {size}; ++w) {name(arg, i)}[w] = {one} ? (real_t)1 : (real_t)0;"]
                if fold:
                    entries[(arg, i)] = [f"{name(arg, i)}[{w}]" if w % d == i else Const(0.0) for w in range(size)]
        elif input_name in gathered:  # (K rows of the nodal value's words, w of them a node)
            if size % k:
                raise NotRowsForm(f"gathered input {input_name} holds {size} words, not {k} rows")
            w = size // k
            lines += [f"real_t {v}[{size}];",
                      f"for (int b = 0; b < {k}; ++b) for (int j = 0; j < {w}; ++j) "
                      f"{v}[b * {w} + j] = in_{input_name}[(long long)nodes[b] * {w} + j];"]
        elif input_name in uniform:
            lines.append(f"const real_t* const {v} = in_{input_name};")
        else:
            lines.append(f"const real_t* const {v} = in_{input_name} + e * {size};")
    for op in program.body.block.ops:
        if isinstance(op, kas.ReturnOp):
            continue
        if isinstance(op, (kas.ConstantOp, kas.TableOp)):
            numbers = [op.value.value.data] if isinstance(op, kas.ConstantOp) else list(op.numbers)
            if not all(math.isfinite(x) for x in numbers):
                raise NotRowsForm(f"the literal {next(x for x in numbers if not math.isfinite(x))} is not finite")
            text = ", ".join(c_literal(float(x)) for x in numbers)
            lines.append(f"const real_t {name(op.res)}[{len(numbers)}] = {{{text}}};")
            if fold and isinstance(op, kas.TableOp):  # (a table's words fold; a scalar literal stays a word)
                entries[(op.res, 0)] = [Const(float(x)) for x in numbers]
            continue
        if not isinstance(op, kas.CallOp):
            raise NotRowsForm(f"{op.name} is not a call")
        definition = library.get(op.op_name)
        impl = next((i for i in library.implementations(definition) if i.bx == 1), None) if definition else None
        if impl is None:
            raise NotRowsForm(f"{op.op_name} has no implementation of one thread an element")
        copies = 1
        if any(a in seeded for a in op.args):
            seeded.add(op.res)
            copies = 1 if split else d
        if fold and (op.res in seeded or any(isinstance(w, Const) for a in op.args for w in words(a, 0))):
            for i in range(copies):
                res = name(op.res, i)
                lines.append(f"real_t {res}[{op.res.type.size}];")
                entries[(op.res, i)] = []
                for w, entry in enumerate(_folded_entries(definition.trees, [words(a, i) for a in op.args])):
                    lines.append(f"{res}[{w}] = {entry if isinstance(entry, str) else c_literal(entry.value)};")
                    # (a word another value's word or a literal: read where it is)
                    kept = isinstance(entry, Const) or _WORD.fullmatch(entry)
                    entries[(op.res, i)].append(entry if kept else f"{res}[{w}]")
            continue
        if impl not in used:
            used.append(impl)
        for i in range(copies):
            args = ", ".join(name(a, i) for a in op.args)
            lines += [f"real_t {name(op.res, i)}[{op.res.type.size}];",
                      f"{impl.variant_name(whole_values_variant(impl))}(0, 0, {args}, {name(op.res, i)});"]
    return lines, used, name


def whole_values_variant(impl) -> str:
    """The variant of an implementation of one thread an element that `_element_code` calls,
    each operand a pointer to its whole value (its words in registers, or a uniform input's):
    the register variant 'r' for an operand whose access pattern starts at its first word,
    else 'u', which reads it from the pattern's start within the value; the result in
    registers. (The register variant reads an operand from its pattern's first word on, a
    window the kernel emitter loads: an op reading words 3-5 of a 3x3 matrix, `item_1_3x3`,
    read words 0-2 of the whole value here, and the tangent of a program reading a row of a
    gathered matrix was wrong on both backends.)"""
    return "".join("r" if ap.start_of(0, 0, 1, 1) == 0 else "u" for ap in impl.operand_aps) + "r"


_WORD = re.compile(r"v\d+(_\d+)?\[\d+\]")  # (a word of a value in registers, as `_element_code` names it)


def _folded_entries(trees: list, operands: list[list]) -> list:
    """Each entry of an op's result (`trees`: its definition's scalar trees, `OpDef.trees`) on
    operands whose words are literals (Const) or C reading them: a literal where the tree folds
    to one (a product with a literal 0 is 0, a literal 1 or -1 leaves the other factor or its
    negation, a sum with 0 is its other term), else its C. Other literals fold only where the
    result is exact in either real type (integers); any other arithmetic is left to the
    compiler."""
    def walk(t):
        if isinstance(t, Leaf):
            return operands[t.operand][t.offset]
        if isinstance(t, Const):
            return t
        if isinstance(t, SBin):
            return _bin(t.op, walk(t.lhs), walk(t.rhs))
        if isinstance(t, SUn):
            arg = walk(t.arg)
            if t.fn == "neg" and isinstance(arg, Const):
                return Const(-arg.value)
            return c_function(t.fn, [_text(arg)])
        if isinstance(t, SCall):
            return c_function(t.fn, [_text(walk(a)) for a in t.args])
        raise ValueError(t)
    return [walk(t) for t in trees]


def _text(x) -> str:
    return c_literal(x.value) if isinstance(x, Const) else x


def _exact(value: float) -> bool:
    return float(value).is_integer() and abs(value) < 2 ** 24


def _bin(op: str, a, b):
    """`a op b` on two words (Const or C), folded where `_folded_entries` says."""
    ca, cb = isinstance(a, Const), isinstance(b, Const)
    if op == "*":
        if (ca and a.value == 0) or (cb and b.value == 0):
            return Const(0.0)
        for one, other, known in ((a, b, cb), (b, a, ca)):  # (x 1 is x, x -1 is -x: exact)
            if isinstance(one, Const) and one.value in (1, -1):
                if one.value == 1:
                    return other
                return Const(-other.value) if known else f"(-{other})"
    elif op == "+":
        if ca and a.value == 0:
            return b
        if cb and b.value == 0:
            return a
    elif op == "-":
        if cb and b.value == 0:
            return a
        if ca and a.value == 0:
            return Const(-b.value) if cb else f"(-{b})"
    elif op == "/" and cb and b.value == 1:
        return a
    if ca and cb and op in "+-*" and _exact(a.value) and _exact(b.value):
        value = {"+": a.value + b.value, "-": a.value - b.value, "*": a.value * b.value}[op]
        if _exact(value):
            return Const(value)
    return f"({_text(a)} {op} {_text(b)})"
