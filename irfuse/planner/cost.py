"""The analytical cost model of one kernel, and the device profiles it reads.

For a kernel over n elements, block (BX, BY), T = BX*BY threads, B = ceil(n / BY) blocks:

    resident  = min(threads/SM / T, blocks/SM, shared/SM / (smem + 1 KB), regs/SM / (regs * T))
    occupancy = resident * ceil(T / 32) / (threads/SM / 32)                  (warps in use / max)
    sectors   = sum over global arrays of B * ceil(BY * size * itemsize / 32)   (32-byte sectors;
                structure of arrays: B * size * ceil(BY * itemsize / 32), one run per word;
                a gathered value: its node numbers so, and its rows as `gathered_sectors` of
                the BY * resident elements an SM holds; a value scatters alone add: the partial
                rows of its groups, `scattered_words`)
    in_flight = resident * BY * (words loaded per element) * itemsize      (bytes per SM)
    t_mem     = 32 * sectors / (bandwidth * min(1, in_flight / (bandwidth / SMs * turnaround)))
    t_compute = sum over calls of runs * n * flops * (BX / bx_call unless remapped) / flop rate
                + remapped calls * runs * n * remap_ops / flop rate
                (flops: a division, reciprocal or square root counts slow_op_flops;
                 runs: the trip counts of the loops around the call, 1 outside loops),
                over min(1, occupancy * COMPUTE_WARPS), for BX = 1 times float32's rate / flop rate
    t_shared  = B * wavefronts per block / (SMs * shared_wavefront_rate)    (bank conflicts counted)
    t_gather  = max(n * (rows each element gathers) * (row bytes + 32 * GATHER_ROW_COST) / gather_rate,
                    n / (SMs * gathered_element_rate))
                (every element's own rows, through the caches, however few distinct ones
                the SM takes from memory), over (1 - BLOCK_TAIL / resident):
                a block's warps wait for its slowest
    t_sync    = barrier runs * ceil(B / (SMs * resident)) * barrier_cost
    t_blocks  = ceil(B / SMs) * block_cost
    time      = launch_overhead + max(t_mem, t_gather, t_compute + t_sync, t_shared, t_blocks)

`bandwidth` is the device-to-device copy rate (bytes read + written per
second) measured on the device.  A block issues all of its loads at once
(asynchronous copies into shared memory, then one wait), so an SM has the
loads of its resident blocks in flight; by Little's law it reaches the copy
bandwidth only when that is at least the bandwidth per SM times `turnaround`,
the time from a block issuing its loads until its SM issues the next block's.
A block waiting at a barrier holds up its own instructions, not the memory
system, so barrier time adds to the compute path, not to the transfer time.
`launch_overhead` is what each further kernel adds to a run submitted as one
CUDA graph. An SM starts its blocks one after another at a cost of its own
(`block_cost`, measured by `irfuse calibrate`: about 166 ns on an H100 or H200),
so a kernel of many small blocks (64 elements of a few words each) is bound by
starting them, not by its bytes: larger blocks, or several elements a thread,
move the same bytes in fewer blocks. A kernel that runs a loop inside reads and writes global memory once
and repeats its body's arithmetic, shared accesses and barriers `trip` times:
such kernels are usually bound by `t_compute`, which is what ranks them against
the same loop run from the host (every iteration's kernels moving the carried
values through global memory) and picks their thread mapping. Built-in profiles for the H100 and H200 come from measurements on
the GPU machine; `irfuse calibrate` measures the GPU present and saves a
profile that later runs prefer. The measurements behind the turnaround, the
barrier term and the profiles are in `benchmarks/NOTES.md` ("Cost model: what
its terms were fitted on").
"""

from __future__ import annotations

import dataclasses
import itertools
import math

from irfuse.analysis.bank_conflicts import kernel_wavefronts
from irfuse.artifact.host_plan import Combine, Launch, Scatter, walk_steps
from irfuse.artifact.records import record
from irfuse.artifact.scatter_groups import group_elements
from irfuse.dialects.fuse import FINISH_BATCH, finish_threads
from irfuse.kernel.model import Gathered, KernelModel, OpKind, Patterns, op_weights
from irfuse.kernel.policies import REGISTER_WORDS, array_words, launch_min_blocks
from irfuse.analysis.placements import Placements
from irfuse.analysis.shared_lifetimes import lifetimes
from irfuse.planner.profiles import (BUILTIN, DEFAULT_BATCH, H100, H200, DeviceProfile, load_profile,  # noqa: F401
                                     profile_path, save_profile)



def _call_words(model: KernelModel, placed: Placements | None = None) -> int:
    """The most words one call holds in registers at once: its register operands' and its result's."""
    need = 0
    placed = placed or Placements(model)
    for op in model.calls():
        if placed.is_moved(op):
            continue  # (it runs nowhere: `analysis.placements`)
        impl = op.impl
        held = sum(impl.operand_aps[k].words()
                   for k, a in enumerate(op.args) if not model.values[a].shared and not model.values[a].uniform)
        held += impl.result_ap.words()  # outputs are computed before they are written
        need = max(need, held)
    return need


def thread_words(model: KernelModel, placed: Placements | None = None) -> dict[int, int]:
    """Each register value's words one thread holds (of one element): those its register
    pattern touches. A value spread over several threads of an element (a row or a line of
    it each) holds only its part in a thread; the emitted array may be declared longer, but
    ptxas keeps only the words a thread touches."""
    patterns, moved = Patterns(model), (placed or Placements(model)).moved
    return {vid: patterns(vid)[0].words() for vid, v in model.values.items()
            if not v.shared and not v.uniform and vid not in moved}


def _peak_live_words(model: KernelModel, per_thread: int = 1, placed: Placements | None = None) -> int:
    """The most words of register values live at once in the kernel's op order (each from its
    first op to its last), `per_thread` rows of each."""
    ops = model.without_barriers()
    placed = placed or Placements(model)
    first, last = lifetimes(model, ops, placed)
    # (each register value adds its words from its first op to its last: one sweep)
    steps = [0] * (len(ops) + 1)
    for vid, words in thread_words(model, placed).items():
        if vid in first:
            lo, hi = max(first[vid], 0), min(last[vid], len(ops) - 1)
            if lo <= hi:
                steps[lo] += words * per_thread
                steps[hi + 1] -= words * per_thread
    return max(itertools.accumulate(steps[:-1]), default=0)


def peak_register_words(model: KernelModel) -> int:
    """Registers per thread the kernel would need to keep its register values unspilled:
    addressing and loop state, the largest call's operands and result, and half the most words
    live at once (halved as `estimate_registers` halves straight code's values, a fit to ptxas's
    counts of kernels that do not spill), a row per element the thread runs, two registers a
    float64 word. Unlike that estimate it is not capped, and counts straight code's values at
    their peak, not their sum: unrolled reverse-mode code keeps each iteration's values until
    the adjoint sweep reads them, and past the registers a thread may have, ptxas spills them
    (`planner.loop_forms`, and the elements a thread runs, `search.group_configs`)."""
    placed = Placements(model)
    words = _call_words(model, placed) + _peak_live_words(model, model.per_thread, placed) // 2
    return 24 + words * max(1, model.itemsize // 4)


def estimate_registers(model: KernelModel) -> int:
    """Registers per thread when no ptxas report is known: addressing and loop state,
    plus the words a thread keeps in registers and computes at once. In a kernel with a
    loop, where many values are made and die in each iteration, the register values counted
    are those live at once (their peak), not all of them. A thread that runs several elements
    keeps a row of each register value per element."""
    placed = Placements(model)
    need = _call_words(model, placed)
    if model.has_loops():
        return min(REGISTER_WORDS, 24 + need + _peak_live_words(model, placed=placed))
    live_regs = sum(max(16, w) + (model.per_thread - 1) * w for w in thread_words(model, placed).values())
    return min(REGISTER_WORDS, 24 + need + live_regs // 2)


@record
class KernelCost:
    time: float
    t_mem: float
    t_compute: float
    t_sync: float
    resident_blocks: int
    occupancy: float
    registers: int
    shared_bytes: int
    bytes: int
    feasible: bool
    reason: str = ""
    t_shared: float = 0.0
    in_flight: int = 0  # bytes of loads the resident blocks of one SM have in flight
    t_blocks: float = 0.0  # the SMs' time starting the kernel's blocks
    t_spill: float = 0.0  # local-memory traffic of what ptxas spilled (from a register table)
    t_gather: float = 0.0  # the gathered rows through the caches
    warps: int = 0  # warps the resident blocks give an SM (a GPU's)


def resident_blocks(p: DeviceProfile, threads: int, smem: int, regs: int) -> int:
    by_threads = p.max_threads_per_sm // threads
    by_smem = p.shared_per_sm // (smem + 1024) if smem else p.max_blocks_per_sm
    regs_per_block = math.ceil(regs * 32 / 256) * 256 * math.ceil(threads / 32)  # allocated per warp
    by_regs = p.regs_per_sm // max(regs_per_block, 1)
    return max(0, min(by_threads, by_smem, by_regs, p.max_blocks_per_sm))


def peak_flops(p: DeviceProfile, itemsize: int) -> float:
    """The profile's arithmetic rate (flop-equivalents a second) in the element type's precision."""
    return p.fp64_flops if itemsize == 8 else p.fp32_flops


def op_flops(op, p: DeviceProfile, itemsize: int = 4) -> float:
    """An op's arithmetic per element in flop-equivalents of its precision: slow operations
    weigh what `irfuse calibrate` measured them to cost against a multiply-add."""
    slow = p.slow_op_flops_f64 if itemsize == 8 else p.slow_op_flops
    return op.flops + op.slow_ops * (slow - 1)


# The rows a block's elements gather are those of the nodes they name. In a mesh numbered for
# locality (`irfuse.mesh.reorder`) neighbouring elements share nodes, so a block of `by`
# elements gathering K rows each names about
#     by * (SHARED_NODES + (K - SHARED_NODES) / (1 + NODE_REUSE * sqrt(by - 1)))
# distinct nodes: K for one element, tending to the mesh's nodes per element in large blocks.
# Fitted on the 384,000-tetrahedron cube in Morton order (K = 4): 4, 2.5, 1.96, 1.49, 1.12,
# 0.85, 0.65, 0.52, 0.43 and 0.36 distinct nodes per element in blocks of 1 to 512, the fit
# within 8% of each (with a random numbering all four rows are distinct in any block). Node rows
# lie packed, unaligned, so a distinct row touches its bytes' share of 32-byte sectors and about
# a quarter sector more (measured: 0.33 sectors of 12-byte rows per element in blocks of 128).
# The model assumes such a mesh for every connectivity: the plan is made before the mesh is seen.
# From memory a kernel takes the distinct rows of what an SM's caches serve together, the
# elements of its resident blocks (`global_sectors`' window; the mesh gradient's element kernel
# read about 0.23 rows an element from DRAM on the H200, at 20 bytes a row, and the count gives
# 0.28 for 20 blocks of 64), not of each block alone (0.70), which priced the mesh kernels'
# memory above their time and made larger blocks look cheaper than they ran
# (benchmarks/NOTES.md, The planner, 2026-12-06, 16:30 UTC). The counts were fitted on
# tetrahedra: elements of more nodes keep their blocks' own count.
SHARED_NODES = 0.14
TETRAHEDRON_NODES = 4  # (K of the mesh the counts were fitted on)
NODE_REUSE = 0.75
ROW_STRADDLE = 0.25
# What each row an element gathers costs through the caches beyond its bytes, in sectors
# (`gather_time`): fitted on the P1 residual's element kernel on the H100 in both types, whose
# float64 rows (24 bytes) took 1.78x its float32 rows' (12) time: (24 + 3.5) / (12 + 3.5).
GATHER_ROW_COST = 0.11
# Nodes per element of the mesh a plan is made for, where it weighs work per node against work
# per element (a program's passes over the nodes against recomputing their values where the
# elements gather them: `driver.compile.compile_stages`): a tetrahedral mesh's, 2,146,689 nodes
# for 12,582,912 tetrahedra in the benchmarks' box (about the distinct nodes per element of
# large blocks above).
NODES_PER_ELEMENT = 1 / 6


def fitted_elements(rows: int) -> bool:
    """Whether elements of `rows` nodes are of the kind the counts above were fitted on
    (tetrahedra): elements of more nodes keep a block's own count and every row written."""
    return rows <= TETRAHEDRON_NODES


def distinct_rows(by: int, rows: int) -> float:
    """Distinct nodes an element of a block of `by` elements names, of its `rows` (see above)."""
    return SHARED_NODES + (rows - SHARED_NODES) / (1 + NODE_REUSE * math.sqrt(by - 1))


def gathered_sectors(by: int, g: Gathered, itemsize: int) -> float:
    """32-byte sectors a block of `by` elements reads for the rows of a gather (see above)."""
    return by * distinct_rows(by, g.rows) * (g.row_words * itemsize / 32 + ROW_STRADDLE)


def scattered_words(words: int, rows: int) -> float:
    """Words an element writes, on average, of a value of `words` words that a scatter adds
    through a connectivity of `rows` nodes an element: its kernel sums the rows of each group of
    `artifact.scatter_groups.group_elements` elements and writes one partial row for each node
    the group names (about 0.7 an element for tetrahedra in groups of 64), not every element's
    rows. The count of distinct nodes was fitted on tetrahedra (above); elements of more nodes
    (the hexahedra of `irfuse.mesh.box_hexahedra`, whose groups' nodes it has not been measured
    on) keep every row counted."""
    if not fitted_elements(rows):
        return words
    return words / rows * distinct_rows(group_elements(rows), rows)


def gather_time(n: int, p: DeviceProfile, global_sizes: list, itemsize: int) -> float:
    """The gathered rows' part of `t_gather` of a GPU kernel over `n` elements moving global
    arrays of `global_sizes` (see above) that depends on the gathered values alone, not on the
    kernel's blocks or mapping: every kernel that reads those values pays at least this (the
    search's floors count it; `block_tail` is at least 1)."""
    gathered = [g for g in global_sizes if isinstance(g, Gathered)]
    rows = 32 * n * sum(g.rows * (g.row_words * itemsize / 32 + GATHER_ROW_COST) for g in gathered) / p.gather_rate
    chains = n / (p.sms * p.gathered_element_rate) if gathered and p.gathered_element_rate else 0.0
    return max(rows, chains)


# A block holds its share of an SM's warps until the slowest of them is done. In a kernel that
# gathers, each warp waits on its own rows' latencies (dependent loads, mostly from the caches),
# so a block's warps reach its barriers (the scatter's group sums) and its end unevenly and the
# SM's warps are not all at work while its blocks drain: the larger a block's share, the more. Measured on an H100 (benchmarks/NOTES.md, The planner, 2026-12-06,
# 11:50 UTC), the same element kernels at the same resident threads: the P1 and Neo-Hookean
# residuals and the lumped mass 2-3.5% faster in blocks of 64 (20 an SM) than of 128 (10) in
# float32, 2.9-5.5% in float64 (8 against 4); 6-9% slower in blocks of 256 (5) in float32,
# 24-27% in float64 (2). Priced as the gathered rows' time over (1 - BLOCK_TAIL / resident
# blocks); `gather_rate` was fitted on such a kernel at 10 blocks an SM and scaled so that it
# is priced as before there. Measured on kernels of one thread an element; those spreading an
# element over threads (the bake-off's) are priced so too, and none of their plans moved (their
# gathers do not bound them: NOTES, the same entry).
BLOCK_TAIL = 0.5


def block_tail(resident: int) -> float:
    """The factor over `gather_time` of a kernel's gathered rows at `resident` blocks an SM
    (see above): 1 / (1 - BLOCK_TAIL / resident), at least 1."""
    return 1 / (1 - BLOCK_TAIL / resident) if resident > 0 else 1.0


def global_sectors(n: int, by: int, sizes: list, itemsize: int, layout: str = "aos", window: int = 0) -> int:
    """32-byte sectors a kernel of `by` elements per block moves for global arrays of `sizes`
    words per element (or `Gathered` arrays): a block's chunk of an array of structures is
    one contiguous run, of a structure of arrays one run per word; a gathered array's node
    numbers are one run and its rows `gathered_sectors` of the `window` elements whose rows
    the caches serve together (an SM's resident blocks' elements, see above; `by` where 0), in
    proportion."""
    blocks = -(-n // by)
    window = max(window, by)
    total = 0.0
    for size in sizes:
        if isinstance(size, Gathered):
            seen = window if fitted_elements(size.rows) else by
            total += blocks * -(-by * size.index_words * itemsize // 32) + \
                blocks * by * gathered_sectors(seen, size, itemsize) / seen
        elif layout == "soa":
            total += blocks * size * -(-by * itemsize // 32)
        else:
            total += blocks * -(-by * size * itemsize // 32)
    return math.ceil(total)


def kernel_cost(model: KernelModel, n: int, p: DeviceProfile, global_sizes: list[int],
                registers: int | None = None, spill_bytes: int = 0) -> KernelCost:
    """Predicted time of one launch over n elements. `global_sizes`: words per element of
    every global array the kernel reads or writes; `registers` and `spill_bytes`: ptxas's
    figures for this kernel where a register table holds them (`planner.registers`), else the
    registers are estimated and nothing is spilled. A CPU profile's: `cpu_kernel_cost`."""
    gpu = _gpu_kernel_cost(model, n, p, global_sizes, registers, spill_bytes)
    return cpu_kernel_cost(model, n, p, global_sizes, gpu) if p.kind == "cpu" else gpu


def time_without_barriers(cost: KernelCost, p: DeviceProfile) -> float:
    """A lower bound of the predicted time of the kernel `cost` describes with any other set
    of barriers (its ops, places and offsets unchanged): barriers add only to the compute
    path (`t_sync`), and a CPU profile's cost has no barrier term."""
    if p.kind == "cpu" or not cost.feasible:
        return cost.time
    return p.launch_overhead + max(cost.t_mem, cost.t_compute, cost.t_shared, cost.t_blocks)


def call_flops(model: KernelModel, n: int, p: DeviceProfile) -> float:
    """The kernel's calls' arithmetic over n elements in flop-equivalents: each call's flops
    times its runs (its loops' trip counts), times the threads of an element it leaves idle
    (BX / its bx) unless remapped."""
    return sum(runs * n * op_flops(op.impl.op, p, model.itemsize) * (1.0 if op.remap else model.bx / op.impl.bx)
               for op, runs in zip(model.ops, op_weights(model.ops)) if op.kind == OpKind.CALL)


def renders_as_loop(model: KernelModel) -> bool:
    """Whether the CPU backend runs the kernel as a loop over its elements: one thread an
    element, arrays of structures (what `backend.render_cpu_loop` takes; tests/test_planner.py
    checks the two agree on every example's and mesh example's kernels). Elsewhere it runs the
    kernel's CPU twin."""
    return model.bx == 1 and model.layout == "aos" and all(c.impl.bx == 1 for c in model.calls())


def cpu_kernel_cost(model: KernelModel, n: int, p: DeviceProfile, global_sizes: list, gpu: KernelCost
                    ) -> KernelCost:
    """A launch on the CPU backend (profile `kind` "cpu"), given the kernel's GPU cost with the
    profile's GPU limits (`gpu`: a kernel the GPU cannot run is not planned for the CPU either,
    as the same source is both):

        t_mem     = global bytes / copy rate       (every core streaming its range of the batch)
        t_compute = flops / flop rate * (twin_factor where the kernel runs as its twin)
        scratch   = a block's shared memory (twin) or its reductions' staging (loop)
        t_spill   = 2 * blocks * scratch / copy rate   where scratch exceeds a core's L2
        busy      = min(1, blocks / cores)         (a launch of fewer blocks leaves cores idle)
        time      = launch_overhead + (max(t_mem, t_compute) + t_spill) / busy

    No barrier, occupancy or register term: a loop runs each element's steps in order with its
    values in the core's registers and L1, and the twin's regions are in `twin_factor`."""
    if not gpu.feasible:
        return gpu
    isz = model.itemsize
    blocks = math.ceil(n / model.by)
    sectors = global_sectors(n, model.by, global_sizes, isz, model.layout)
    t_mem = 32 * sectors / p.bandwidth
    rate = peak_flops(p, isz)
    loop = renders_as_loop(model)
    t_compute = call_flops(model, n, p) / rate * (1.0 if loop else p.twin_factor)
    if loop:
        scratch = model.by * isz * sum(model.values[op.value].size for op in model.ops
                                       if op.kind == OpKind.STORE and op.reduce)
    else:
        scratch = gpu.shared_bytes
    t_spill = 2 * blocks * scratch / p.bandwidth if p.l2_bytes and scratch > p.l2_bytes else 0.0
    busy = min(1.0, blocks / max(p.sms, 1))
    time = p.launch_overhead + (max(t_mem, t_compute) + t_spill) / busy
    return KernelCost(time, t_mem, t_compute, 0.0, 1, 1.0, gpu.registers, gpu.shared_bytes, gpu.bytes, True)


# How many times the registers ptxas gives a float64 kernel of one thread an element the planner's
# count of them (`peak_register_words`, two a word) runs, unspilled: hex8 440 counted, 202 held;
# the bake-off's one-thread kernels at orders 1-2 374-408, 218-244 held; a 60-statement random
# program 218, 126 held: 1.7-2.2 (benchmarks/NOTES.md, The planner, 2026-12-06). Such a kernel is
# priced as spilling only past this many times a thread's most. In float32 the count is closer
# (BP1's example at order 3: 399 counted, 255 held; hex8: 251, held in 128 at its launch bounds
# with 16 bytes spilled), and halving it moved BP1's example to one kernel of 255 registers at one
# block an SM, the kind of plan measured slower in float64 (BP1 at order 2) and not timed in
# float32: float32 keeps the count.
ONE_THREAD_COUNT_OVER_REGISTERS = 2
# Spilled registers for each of which every spilled register is loaded once more: ptxas's spill
# traffic grows faster than the registers spilled (it evicts and reloads the same values more
# often the more of them compete), fitted on the two block-per-element kernels of the bake-off
# that spill by estimate (benchmarks/NOTES.md, High-order elements).
SPILL_RELOAD_REGISTERS = 250


def estimated_spill_bytes(model: KernelModel, p: DeviceProfile) -> int:
    """Bytes a thread spills (stores and loads), estimated where no register table says, from
    the registers its values need at their peak (`peak_register_words`) past a thread's most:
    each stored once and loaded once, and, in a kernel spreading an element over several
    threads, loaded once more for every `SPILL_RELOAD_REGISTERS` spilled (4 bytes a register).
    Kernels of one thread an element keep the linear charge, on which their plans were measured,
    in float64 past `ONE_THREAD_COUNT_OVER_REGISTERS` times a thread's most (ptxas holds their
    values in about half the registers counted: priced at the count itself, hex8's element kernel
    in float64 was predicted 2.1x its time for 1,480 bytes a thread it never spilled).
    Plans keeping a contraction's rows in each thread (q*q to q**3 words a value) were priced with
    no spill and ptxas spilled up to 60 KB a thread of them; priced at one store and one load a
    register, the rows kernel of BP3 at order 6 (903 registers past 255) was estimated at 7.2
    KB, spilled 33-34 KB, and was chosen over kernels of lines that ran 2.5x faster
    (benchmarks/NOTES.md, High-order elements)."""
    over = ONE_THREAD_COUNT_OVER_REGISTERS if model.bx == 1 and model.itemsize == 8 else 1
    excess = max(0, -(-peak_register_words(model) // over) - p.max_regs_per_thread)
    reloads = excess * excess * 4 // SPILL_RELOAD_REGISTERS if model.bx > 1 else 0
    return excess * 8 + reloads


def estimated_kernel_registers(model: KernelModel, p: DeviceProfile) -> int:
    """Registers a thread, estimated where no register table says. ptxas holds a kernel to its
    launch bounds (spilling past them), so for a kernel of one thread an element an estimate
    above them would describe a kernel never emitted: the estimate up to what they allow. A
    kernel whose element spreads over several threads (BX > 1) is priced at the registers its
    values need, up to a thread's most: `driver.compile.build` compiles a kernel that spills
    at its launch bounds again at fewer resident blocks, and a mapping keeping a whole row a
    thread runs at 164-255 registers and a few warps an SM, where one keeping a line runs at
    48-128 (priced at the launch bounds' 64, the rows were chosen and ran up to 13x slower:
    benchmarks/NOTES.md, High-order elements)."""
    if model.bx > 1:
        return min(estimate_registers(model), p.max_regs_per_thread)
    return min(estimate_registers(model), p.regs_per_sm // (launch_min_blocks(model) * model.threads) // 8 * 8 or 8)


def spill_time(threads: int, spill_bytes: int, p: DeviceProfile) -> float:
    """ptxas's spill stores and loads (bytes a thread, counted once each as the straight-line
    element code runs them once) moved by `threads` threads at the copy rate: local memory
    lives in global memory, and the spills of a block-per-element kernel (kilobytes a thread,
    blocks of hundreds of threads) do not stay in L1 (benchmarks/NOTES.md, High-order elements:
    plans measured 1.3-13x slower for 1.4-17.9 KB spilled a thread)."""
    return threads * spill_bytes / p.bandwidth


# The arithmetic pipes run at their rate from half an SM's warps on (`occupancy * COMPUTE_WARPS`)
# at float32's rate. In a kernel of one thread an element (straight code, independent chains in
# each thread) a pipe of a lower rate is kept busy by proportionally fewer warps: hex8 in float64
# ran at 53% of the float64 rate with 10 warps an SM (16% occupancy, its blocks held by their
# shared memory; 1.665 ms on an H100) where `occupancy * 2` priced it at 31% (2.81 ms). A kernel
# spreading an element over threads waits at its barriers and keeps the float32 figure: with it
# lowered too, the bake-off's BK3 and BP3 at order 3 moved to blocks of more elements at fewer
# blocks an SM, 3-4% slower (benchmarks/NOTES.md, The planner, 2026-12-06).
COMPUTE_WARPS = 2


def _gpu_kernel_cost(model: KernelModel, n: int, p: DeviceProfile, global_sizes: list[int],
                     registers: int | None = None, spill_bytes: int = 0) -> KernelCost:
    threads = model.threads
    smem = model.shared_bytes() + array_words(model) * model.itemsize
    if registers is None:
        regs, spill_bytes = estimated_kernel_registers(model, p), estimated_spill_bytes(model, p)
    else:
        regs = registers
    isz = model.itemsize
    blocks = math.ceil(n / model.by)
    infeasible = ""
    if threads > p.max_threads_per_block:
        infeasible = f"{threads} threads per block"
    elif smem > p.shared_per_block:
        infeasible = f"{smem} bytes of shared memory per block (limit {p.shared_per_block})"
    elif regs > p.max_regs_per_thread:
        infeasible = f"{regs} registers per thread"
    resident = resident_blocks(p, threads, smem, regs)
    if resident == 0 and not infeasible:
        infeasible = "no block fits on a multiprocessor"
    if infeasible:
        return KernelCost(math.inf, math.inf, math.inf, 0.0, 0, 0.0, regs, smem, 0, False, infeasible)
    window = model.by * resident
    sectors = global_sectors(n, model.by, global_sizes, isz, model.layout, window)
    nbytes = n * isz * sum(s for s in global_sizes if not isinstance(s, Gathered)) + 32 * global_sectors(
        n, model.by, [s for s in global_sizes if isinstance(s, Gathered)], isz, model.layout, window)
    warps = resident * math.ceil(threads / 32)
    occupancy = warps / (p.max_threads_per_sm / 32)
    in_flight = resident * model.by * isz * model.batch_loads()
    eff = min(1.0, in_flight / (p.bandwidth / p.sms * p.turnaround)) if in_flight else 1.0
    t_mem = 32 * sectors / (p.bandwidth * eff)
    rate = peak_flops(p, isz)
    flops = call_flops(model, n, p)
    for op, runs in zip(model.ops, op_weights(model.ops)):
        if op.kind == OpKind.CALL and op.remap:
            flops += runs * n * op.impl.bx * p.remap_ops
    warps_for_rate = COMPUTE_WARPS * (p.fp32_flops / rate if model.bx == 1 else 1.0)
    t_compute = flops / (rate * min(1.0, occupancy * warps_for_rate))
    waves = math.ceil(blocks / (p.sms * resident))
    t_sync = barrier_runs(model) * waves * p.barrier_cost
    t_shared = blocks * kernel_wavefronts(model) / (p.sms * p.shared_wavefront_rate)
    t_gather = gather_time(n, p, global_sizes, isz) * block_tail(resident)
    t_blocks = math.ceil(blocks / p.sms) * p.block_cost
    t_spill = spill_time(blocks * threads, spill_bytes, p) if spill_bytes else 0.0
    time = p.launch_overhead + max(t_mem + t_spill, t_gather, t_compute + t_sync, t_shared, t_blocks)
    return KernelCost(time, t_mem, t_compute, t_sync, resident, occupancy, regs, smem, nbytes, True,
                      t_shared=t_shared, in_flight=in_flight, t_blocks=t_blocks, t_spill=t_spill, t_gather=t_gather,
                      warps=warps)


def barrier_runs(model: KernelModel) -> int:
    """The barriers a block of the kernel runs, each counted its loops' trip counts."""
    return sum(runs for op, runs in zip(model.ops, op_weights(model.ops)) if op.kind == OpKind.BARRIER)


def cost_with_barriers(cost: KernelCost, model: KernelModel, n: int, p: DeviceProfile) -> KernelCost:
    """What `kernel_cost` gives `model`, the kernel `cost` priced with its barriers put in
    (`transforms.barriers.place_barriers`) or changed, its ops, places and offsets otherwise the
    same, with the same register figures: barriers add only the barrier term (`t_sync`), every
    other term reading the kernel's calls, copies and values, and a CPU profile's cost has no
    barrier term (`time_without_barriers` is its lower bound). The search prices each analysed
    configuration this way once its barriers are placed, instead of walking the kernel again
    (a tenth of a search's time); `tests/test_planner.py` checks it against `kernel_cost`."""
    if p.kind == "cpu" or not cost.feasible:
        return cost
    waves = math.ceil(math.ceil(n / model.by) / (p.sms * cost.resident_blocks))
    t_sync = barrier_runs(model) * waves * p.barrier_cost
    time = p.launch_overhead + max(cost.t_mem + cost.t_spill, cost.t_gather, cost.t_compute + t_sync,
                                   cost.t_shared, cost.t_blocks)
    return dataclasses.replace(cost, time=time, t_sync=t_sync)


# The last block of a reducing kernel combining its partials (`combine_emit.finish_in_last_block`):
# its first `threads` threads (a power of two) each load `fuse.FINISH_BATCH` of a word's partials
# at a time from L2, one round trip of `L2_ROUND_TRIP` a round, word after word, after every
# block has fenced its partials and counted itself finished (FINISH_FIXED a launch). The combine
# kernels it replaces cost a launch each: the graph launches them as programmatic dependent
# launches, so their turnaround overlaps the reducing kernel's last blocks. Fitted on the H200
# (benchmarks/NOTES.md, Batch-wide values and reductions, 2026-11-26: the last block was 1.1-1.7 us
# slower than a combine kernel at one round, and 0.2-0.7 us more a round after).
L2_ROUND_TRIP = 6e-7
FINISH_FIXED = 1.5e-6
# What a GPU's combine of a reduction takes beyond what the choice between the two ways prices
# (a launch; the last block's rounds): the reducing grid's completion made visible, and the
# combine's own dependent round trips and tree, which the next kernel waits for in either way.
# Plan-invariant (every plan combines each reduction once), so the search leaves it out;
# `runtime_steps_time` counts it. Fitted on the H200 (benchmarks/NOTES.md, The planner,
# 2026-12-01: the combine kernels of StrainEnergy and CflStep, float32 and float64, 4.7-6.8 us
# of device time each under CUPTI against 0.5 predicted).
COMBINE_WAIT = 5.4e-6


def last_block_combine_time(p: DeviceProfile, parts: int, threads: int, words: int) -> float:
    """Seconds the last block of a kernel takes to combine `words` words of `parts` partials each."""
    rounds = math.ceil(parts / (threads * FINISH_BATCH))
    return FINISH_FIXED + words * (rounds * L2_ROUND_TRIP + math.log2(max(threads, 2)) * p.barrier_cost)


def combine_kernels_time(p: DeviceProfile, combines: int) -> float:
    """Seconds the combine kernels of `combines` reductions add to a run."""
    return combines * p.launch_overhead


def finish_parts(p: DeviceProfile, threads: int, words: int, combines: int) -> int:
    """The most partials (blocks of a launch) for which the kernel's last block combines them
    faster than the combine kernels: 0 where it never does (on the built-in GPU profiles, and
    on a CPU profile: the CPU backend runs the combine kernels)."""
    if p.kind == "cpu":
        return 0
    budget = combine_kernels_time(p, combines) - last_block_combine_time(p, 0, threads, words)
    return max(0, int(budget // (words * L2_ROUND_TRIP))) * threads * FINISH_BATCH


def runtime_steps_time(artifact, p: DeviceProfile, n: int, nodes: int = 0, partials: int = 0) -> float:
    """Seconds a run of `artifact` (`irfuse.artifact.Artifact`) spends in the steps its host
    plan adds beside the planned kernels, which no plan chooses between and the search does not
    price: each scatter's kernel adding every node's partials in order (over `nodes` nodes and
    `partials` partials: it reads each partial's slot and row and each node's start, and writes
    the node's sum), a launch and its bytes at the profile's `node_sum_rate` (the copy rate where
    it has none), and each combine of a reduction's partials: one that runs as a kernel of its
    own is a launch and its bytes at the copy rate (`benchmarks/cost_model.py` compares the sum
    with the clock); one that the reducing
    kernel's last block runs (on a GPU, where its blocks are few enough) is
    `last_block_combine_time`, which the kernel's planned time leaves out: the last block
    starts it once every other block has finished, so it adds to the kernel's time whatever
    its bytes; on a GPU either way also waits `COMBINE_WAIT`. Steps inside host loops count
    once a trip. A scatter whose
    sums a node launch adds itself (`host_plan.NodeLaunch`) runs no kernel: its reads of each
    node's start and each partial's slot and row are the node kernel's, counted here, its
    node rows neither written nor read again."""
    host, isz = artifact.host, artifact.itemsize
    infos = {k.name: k for k in artifact.kernels}
    in_node_kernels = host.summed_in_node_launches()
    finished = {r for step, _ in walk_steps(host.steps) if isinstance(step, Launch) and p.kind != "cpu"
                and infos[step.kernel].finishes_in_last_block(n)
                for r, kind in zip(step.results, infos[step.kernel].reduced) if kind}
    sum_rate = p.node_sum_rate or p.bandwidth
    total = 0.0
    for step, runs in walk_steps(host.steps):
        if isinstance(step, Scatter) and step.result in in_node_kernels:
            words = math.prod(host.values[step.result].shape)
            total += runs * (nodes * 8 + partials * (4 + words * isz)) / sum_rate
            continue
        if isinstance(step, Scatter):
            words = math.prod(host.values[step.result].shape)
            nbytes, rate = nodes * (8 + words * isz) + partials * (4 + words * isz), sum_rate
        elif isinstance(step, Combine):
            value = host.values[step.partials]
            info = infos[value.kernel]
            if p.kind != "cpu":
                total += runs * COMBINE_WAIT
            if step.partials in finished:
                threads = finish_threads(info.bx * info.by // max(info.per_thread, 1))
                total += runs * last_block_combine_time(p, info.blocks(n), threads, value.words)
                continue
            nbytes, rate = (value.words * info.blocks(n) + value.words) * isz, p.bandwidth
        else:
            continue
        total += runs * (p.launch_overhead + nbytes / rate)
    return total
