"""The fusion search: candidate kernels, their configurations and costs, the CP-SAT cover.

1. Candidates: the convex connected groups of at most `max_size` nodes of each
   block (`dag.convex_groups`): calls, and loops whose whole body can run inside a
   kernel (unless `loops="host"`); and each phase of a block whole, however many
   calls it holds (`dag.whole_phases`: an element routine's unrolled code). A uniform
   call read only inside a group over the batch may join it (computed by every
   thread). A block that is one phase whose one kernel is predicted at the floor of
   its bytes and arithmetic is offered that kernel and its single calls only: no
   other cover can be cheaper, and the enumeration of a long block is skipped.
2. Configurations of a group: for each thread count per element B offered by
   the group's implementations, every call takes its implementation with the
   most threads not above B (giving a call fewer threads than B leaves lanes
   idle for nothing, so those combinations are dominated); BY makes the block
   64, 128 or 256 threads. Each configuration becomes a `KernelModel` and goes
   through the same analyses as the emitted kernel (remap, register promotion,
   linearization, shared allocation, barriers) before it is costed.
   Pruning: the cost without barriers is a lower bound of the full cost, so
   configurations are fully analysed in increasing lower-bound order and the
   rest dropped once `keep` better ones are known; one whose cost without any
   barrier (barriers only add to it) already ranks after the kept ones gets no
   barrier placement (it counts against the budget all the same, so that a
   search stops where it did); infeasible ones (shared
   memory, threads, registers over the device's limits, once optimized) are
   dropped. (fuse-partition emits the unoptimized form, each value at its own
   shared offset; one larger than a block's shared memory is marked `unplaced`
   until fuse-allocate-shared overlaps its values.) For the best plan alone, a
   group of several calls whose floor, with that of the kernels its block's other
   calls then need (`_rest_floor`), passes the predicted time of a cover already
   known (each block's whole phases and single calls: `_cover_bound`) is not
   analysed at all: no cover holding it can be the best.
3. Cover: CP-SAT picks configurations so that every call is covered exactly once,
   by a kernel of its own block or by a kernel running one of the loops around it
   (then that loop runs inside the kernel, else from the host), with the least
   predicted total time; a cover whose kernels would depend on each
   other in a cycle is cut off and the model solved again; the next plans exclude
   the ones found.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import field

from xdsl.ir import Operation, SSAValue

from irfuse.artifact.records import record
from irfuse.artifact.scatter_groups import group_elements
from irfuse.kernel.model import Gathered, KernelModel, structure
from irfuse.kernel.policies import SCHEDULERS_PER_SM
from irfuse.diagnostics import CompileError, located
from irfuse.dialects import kas
from irfuse.library.catalogue import default_library
from irfuse.library.implementations import Implementation
from irfuse.planner.cost import (DeviceProfile, KernelCost, cost_with_barriers, gather_time, global_sectors, kernel_cost,
                                  op_flops, peak_flops, peak_register_words, scattered_words, time_without_barriers)
from irfuse.planner.cover_exact import unique_cover
from irfuse.planner.cover_model import CoverModel, statuses
from irfuse.planner.dag import BlockDAG, convex_groups, enclosing_loops, phase_levels, program_dags, whole_phases
from irfuse.planner.registers import CompiledFigures, signature
from irfuse.transforms.barriers import place_barriers
from irfuse.transforms.in_kernel import BARRIER_STEP, optimize
from irfuse.transforms.kernel_builder import build_kernel_model, flat_calls, global_words, runs_once

BLOCK_THREADS = (64, 128, 256)
# Elements each thread runs, offered for kernels that reduce over the batch: a block's
# reduction tree and its other fixed work then serve several elements a thread (measured on
# CflStep's reducing kernel: 48.7 -> 40.5 us on an H100, 44.7 -> 29.2 us on an H200 with 2-4
# elements a thread; a kernel without a reduction measured no gain: benchmarks/NOTES.md,
# Batch-wide values and reductions, 2026-11-24).
ELEMENTS_PER_THREAD = (2, 4)
# The search's budget, in units of work rather than seconds so that the same program gives
# the same plan on any machine: configurations analysed (1.2-1.6 ms each on a 2-core machine),
# and CP-SAT's deterministic time for the cover (summed over its solves). 1,000 configurations
# find the plans 3,500 found for every example and mesh example in float32 and float64 (the
# same CUDA source under the h100 profile, and under h200 and cpu for those the budget binds)
# but BP3 in float64 on the CPU profile (predicted 3.6% slower), and for the planner
# benchmark's random and derivative programs, in a fifth to a half of the time where the
# budget binds: hex8 in float64 plans in 1.2 s instead of 5.8 (benchmarks/NOTES.md,
# Compiling, 2026-11-30).
DEFAULT_CONFIG_BUDGET = 1000
DEFAULT_COVER_BUDGET = 2.0
LOOP_PLACEMENTS = ("auto", "host")  # where loops may run: inside kernels where cheaper, or on the host
# Elements a thread may run: "auto", several where `coarsening_offered` (the cost model decides),
# or "one" in every kernel.
PER_THREAD_CHOICES = ("auto", "one")


@record
class Config:
    """One candidate kernel: a group of calls with implementations and BY, analysed and costed."""

    dag: int  # index of the block DAG
    group: tuple[int, ...]  # node indices in the DAG, block order
    impls: tuple[Implementation, ...]
    by: int
    model: KernelModel
    cost: KernelCost
    inputs: list[SSAValue] = field(default_factory=list)
    outputs: list[SSAValue] = field(default_factory=list)
    weighted_time: float = 0.0

    def describe(self, dags: list[BlockDAG]) -> str:
        return describe_group([dags[self.dag].ops[i] for i in self.group], self.impls)


@record
class Plan:
    configs: list[Config]
    predicted_time: float
    notes: list[str] = field(default_factory=list)  # where the search stopped short of exhaustive
    # Per-element values a later pass over the batch reads: computed again there, or stored by
    # the pass that makes them (`fuse-partition`'s choice, `transforms.recompute`).
    recomputed: list[str] = field(default_factory=list)
    stored: list[str] = field(default_factory=list)

    def kernels(self) -> int:
        return len(self.configs)


def describe_group(ops: list[Operation], impls) -> str:
    """`op[impl]+...`, a loop as `loop N(...)` around its body's."""
    pending = iter(impls)

    def text(group: list[Operation]) -> str:
        parts = []
        for op in group:
            if isinstance(op, kas.LoopOp):
                parts.append(f"loop {op.trip_count.data}({text(op.body_ops)})")
            elif isinstance(op, kas.ReduceOp):
                parts.append(op.reduce_kind.value)
            else:
                parts.append(f"{op.op_name}[{next(pending).name}]")  # type: ignore[attr-defined]
        return "+".join(parts)
    return text(ops)


def external_values(dag: BlockDAG, group: tuple[int, ...]) -> tuple[list[SSAValue], list[SSAValue]]:
    """(inputs, outputs) of a group: values its ops (loop bodies included) read that are
    made outside it, and results of its ops read outside it."""
    top = [dag.ops[i] for i in group]
    members = set(top)
    bodies = set()
    for op in top:
        for inner in op.walk():
            members.add(inner)
            for region in inner.regions:
                bodies.update(region.blocks)
    inputs: list[SSAValue] = []
    outputs: list[SSAValue] = []
    for op in top:
        for inner in op.walk():  # calls, loops and their yields
            for a in inner.operands:
                inside = a.owner in members if isinstance(a.owner, Operation) else a.owner in bodies
                if not inside and a not in inputs:
                    inputs.append(a)
        for r in op.results:
            for use in r.uses:
                user = use.operation
                while user is not None and user.parent_block() is not dag.block:
                    user = user.parent_op()
                if user not in members:
                    outputs.append(r)
                    break
    return inputs, outputs


def _impl_choices(dag: BlockDAG, group: tuple[int, ...], known: dict | None = None
                  ) -> list[tuple[Implementation, ...]]:
    """The implementations of the group's calls at each width a call offers: every call takes
    its widest implementation no wider than that (the first of equal widths); a call whose
    operands smaller than its largest are all tables fixed when compiling (`kas.table`) takes
    the one offered for that (`Implementation.along_tables`) where it is no wider. `known`:
    what a search found before, by op name (a search asks this of every candidate group)."""
    known = {} if known is None else known
    rows = []
    calls = flat_calls([dag.ops[i] for i in group])
    for call in calls:
        row = known.get(call.op_name)
        if row is None:
            lib = default_library()
            options = lib.implementations(lib.get(call.op_name))
            row = known[call.op_name] = (options, {impl.bx for impl in options if not impl.along_tables}, {})
        rows.append(row)
    tabled = [_reads_tables(call) for call in calls]
    widths = sorted({b for _, offered, _ in rows for b in offered}) or [1]  # a reduction alone: no call
    out = []
    seen = set()
    for b in widths:
        pick = tuple(_along_tables(row, b) or _widest(row, b) if t else _widest(row, b) for row, t in zip(rows, tabled))
        key = tuple(id(i) for i in pick)
        if key not in seen:
            seen.add(key)
            out.append(pick)
    return out


def _reads_tables(call: kas.CallOp) -> bool:
    """Whether a call's operands smaller than its largest, one at least, are all `kas.table`s."""
    sizes = [a.type.size for a in call.args]  # type: ignore[attr-defined]
    smaller = [a for a, n in zip(call.args, sizes) if n < max(sizes)]
    return bool(smaller) and all(isinstance(a.owner, kas.TableOp) for a in smaller)


def _widest(row: tuple, b: int) -> Implementation:
    """A call's widest implementation no wider than `b` (`_impl_choices`' rows), of those
    not offered for tables alone."""
    options, _, picked = row
    impl = picked.get(b)
    if impl is None:
        impl = picked[b] = max((i for i in options if i.bx <= b and not i.along_tables), key=lambda i: i.bx)
    return impl


def _along_tables(row: tuple, b: int) -> Implementation | None:
    """The implementation a call reading tables takes at width `b`, if one is no wider."""
    return next((i for i in row[0] if i.along_tables and i.bx <= b), None)


def call_runs(ops: list[Operation]) -> list[int]:
    """For each call of `flat_calls(ops)`, how many times it runs: its loops' trip counts."""
    out: list[int] = []
    for op in ops:
        if isinstance(op, kas.CallOp):
            out.append(1)
        elif isinstance(op, kas.LoopOp):
            out += [op.trip_count.data * r for r in call_runs(op.body_ops)]
    return out


def tie_rank(elements: int, per_thread: int, reduces: bool, bx: int = 1, gathers: bool = False) -> int:
    """What decides between configurations of equal predicted time (0 first), from
    measurements the cost model does not reproduce: blocks of 128 elements (64 and 256 measured
    1-2% slower than 128 on kernels bound by their bytes, 512 7%); in a kernel that reduces over
    the batch two elements a thread (the tree's first step in registers: StrainEnergy 130
    against 147 us on the H200), elsewhere one (several 1-4% slower on SyncTest)
    (benchmarks/NOTES.md, "StrainEnergy and CflStep at larger blocks", "Experiment first: more
    elements a thread", the table of 2026-11-23 under Big batches), and one in a kernel that gathers, reduce
    or not (its loads wait on node numbers, and twice the threads keep twice as many in flight:
    the Neo-Hookean energy over a mesh 0.321 against 0.352 ms, with its gradient 0.773 against
    0.894 ms; NOTES, Meshes, 2026-11-27); then a thread an element (`bx` 1)."""
    want = 2 if reduces and not gathers else 1
    return 4 * abs(per_thread.bit_length() - want.bit_length()) + 2 * (elements != 128) + (bx != 1)


def coarsening_offered(ops: list[Operation]) -> bool:
    """Whether a group's kernel may run several elements a thread (`ELEMENTS_PER_THREAD`): it
    holds no loop and runs over the batch (not once). It pays where a block's fixed work (a
    reduction's tree, its start: `cost.py`'s t_blocks) is large against its bytes, or where
    one element a thread keeps too few bytes in flight; elsewhere the cost model ties it with
    one element a thread, which is enumerated first and kept."""
    return not any(isinstance(op, kas.LoopOp) for op in ops) and not runs_once(ops)


def group_configs(dags: list[BlockDAG], d: int, group: tuple[int, ...], n: int, profile: DeviceProfile,
                  itemsize: int, keep: int, registers: Mapping[str, CompiledFigures] | None = None,
                  layout: str = "aos", per_thread: str = "auto", above: float = math.inf,
                  offered: dict | None = None, analyses: dict | None = None
                  ) -> tuple[list[Config], int, tuple[float, float, float]]:
    """The `keep` cheapest configurations of one group, how many configurations were
    analysed to find them, and the group's floor (`_floor_time` of it is at most any
    configuration's time). `registers`: ptxas's registers and spills of kernels compiled
    before, by `registers.signature` (the estimate and no spills otherwise); `layout`: of the global arrays;
    `per_thread`: see `PER_THREAD_CHOICES`; `above`: where the floor's time, alone or with the
    block's other calls' (`_rest_floor`), weighted by the block's runs, passes it, no
    configuration is analysed (`candidate_configs`' cover bound); `offered`: the search's memo
    of its calls' implementations (`_impl_choices`); `analyses`: the search's memo of the
    configurations analysed, by their models' `structure` (the same analysis and cost, whichever
    group of that structure asked first; each still counts as a configuration analysed, so that
    the budget binds where it did). A configuration whose blocks leave an SM fewer warps than
    its schedulers is kept only where none other was analysed (`_idle_schedulers`)."""
    dag = dags[d]
    analyses = {} if analyses is None else analyses
    ops = [dag.ops[i] for i in group]
    inputs, outputs = crossing_values(dag, group)
    batch = n
    if runs_once(ops):
        n = 1  # a kernel of uniform values runs over one element
        sizes = [v.type.size for v in [*inputs, *outputs]]  # type: ignore[attr-defined]
    else:
        # Uniform inputs and reductions' partials move no bytes per element.
        # A gathered value moves its node numbers besides its rows (`global_words`).
        sizes = [moved_words(v, itemsize) for v in [*inputs, *outputs]]
    # Every configuration's cost is at least `floor`: the launch plus the transfer of its global
    # bytes at the full copy rate, or its arithmetic at the full flop rate (`cost.kernel_cost`
    # can only add to both). Configurations are analysed cheapest floor first, and the analysis
    # stops once `keep` configurations cost no more than the next floor: the same `keep` best
    # as analysing all of them, for a fraction of the work on memory-bound groups.
    choices = _impl_choices(dag, group, offered)
    # An op's flops do not depend on its mapping; a call in a loop runs its trip count times.
    flops = n * sum(runs * op_flops(impl.op, profile, itemsize) for runs, impl in zip(call_runs(ops), choices[0]))
    rate = peak_flops(profile, itemsize)
    # Several elements a thread pay in a reducing kernel (its tree and fixed work shared), and
    # where one element a thread, at the most threads an SM holds, keeps fewer bytes of loads in
    # flight than the SM needs (`cost.py`'s turnaround term): elsewhere the cost model ties them
    # with one a thread, and analysing them only slows the search.
    loaded = itemsize * sum(v.type.size for v in inputs if not kas.is_uniform(v))  # type: ignore[attr-defined]
    starved = loaded * profile.max_threads_per_sm < profile.bandwidth / profile.sms * profile.turnaround
    coarsen = (per_thread == "auto" and coarsening_offered(ops)
               and (starved or any(isinstance(op, kas.ReduceOp) for op in ops)))
    # A kernel writing a scatter's rows sums them in groups of elements its blocks must hold
    # whole (`artifact.scatter_groups`).
    whole = math.lcm(1, *[group_elements(next(iter(v.uses)).operation.index.type.count.data) or 1  # type: ignore
                          for v in outputs if kas.only_scattered(v)])
    shapes = []  # (impls, elements a block, elements a thread, bx) of every configuration
    for impls in choices:
        bx = max((i.bx for i in impls), default=1)
        same_bx = all(i.bx == bx for i in impls)  # (no call remapped: a thread runs whole elements)
        for threads in BLOCK_THREADS:
            by = max(1, threads // bx)
            if by > 4:
                by -= by % 4  # keeps every value's block chunk 16-byte aligned for vector copies
            if bx * by > profile.max_threads_per_block:
                continue
            for elements in (1, *(ELEMENTS_PER_THREAD if coarsen and same_bx and by % 32 == 0 else ())):
                if by * elements % whole == 0:
                    shapes.append((impls, by * elements, elements, bx))
    # Seconds of the global bytes at the copy rate, by elements a block (configurations share
    # them: a search asks for most groups' floors only to leave the group out, below).
    moved = {block: 32 * global_sectors(n, block, sizes, itemsize, layout, block * profile.max_blocks_per_sm)
                    / profile.bandwidth
             for block in dict.fromkeys(shape[1] for shape in shapes)}
    # The floor of any kernel (or kernels) doing this group's work: one launch, its bytes at the
    # copy rate (the fewest sectors of any BY), the arithmetic of its calls that run for every
    # element at the peak rate (those of uniform values computed for every element may run once
    # in another cover), and on a GPU its gathered rows through the caches (`cost.gather_time`:
    # the same for every configuration, and paid by each kernel that reads them).
    gathered = gather_time(n, profile, sizes, itemsize) if profile.kind != "cpu" else 0.0
    least = (profile.launch_overhead, min(moved.values(), default=math.inf),
             _element_arithmetic(dag, group, n, profile, itemsize), gathered)
    if above < math.inf and (_floor_time(least) * dag.multiplier > above or (
            _floor_time(least) + _rest_floor(dag, group, batch, profile, itemsize)) * dag.multiplier > above):
        return [], 0, least
    candidates = [(profile.launch_overhead + max(moved[block], flops / rate, gathered), k, impls, block, elements,
                   bx) for k, (impls, block, elements, bx) in enumerate(shapes)]
    # (of equal floors the preferred first, so that the analysis stopping at the kept costs keeps them)
    reduces = any(isinstance(op, kas.ReduceOp) for op in ops)
    gathers = any(isinstance(size, Gathered) for size in sizes)
    candidates.sort(key=lambda c: (c[0], tie_rank(c[3], c[4], reduces, c[5], gathers), c[1]))
    analysed: list[tuple[float, int, Config]] = []  # (bound, enumeration index, config)

    def rank(time: float, m: KernelModel, bound: float, index: int) -> tuple:
        """How the analysed configurations are ordered (below)."""
        return time, tie_rank(m.by, m.per_thread, reduces, m.bx, gathers), bound, index

    def worst_kept() -> tuple:
        best = sorted(rank(c.cost.time, c.model, b, i) for b, i, c in analysed)
        return best[keep - 1] if len(best) >= keep else (math.inf,)

    work = 0
    idle: set[int] = set()  # (the analysed configurations leaving schedulers without a warp)
    for floor, index, impls, by, elements, _ in candidates:
        if floor >= worst_kept()[0]:
            break  # this and every later configuration cost at least as much as the kept ones
        base = build_kernel_model(ops, impls, inputs, outputs, by, itemsize, layout, elements)
        # (fuse-partition emits this unoptimized form, every value at its own shared offset; a
        # kernel that fits a block only once the in-kernel steps overlap its values is marked
        # `unplaced` until fuse-allocate-shared places them, and the cost below says whether it
        # fits then.)
        key = (structure(base), n, tuple(sizes))
        seen = analyses.get(key)  # (a configuration of the same structure, this group's or another's)
        if seen is None:
            m = optimize(base, stop_before=BARRIER_STEP, copy=False)  # (base is built for this alone)
            # A row of every register value per element: where the elements' values together
            # pass a thread's registers, ptxas spills what one element a thread keeps (unrolled
            # reverse-mode code: 2 elements a thread of a 24-step time loop's gradient spilled
            # 2.3 KB a thread, one element none; benchmarks/NOTES.md, Derivatives, 2026-11-28).
            too_wide = elements > 1 and profile.kind != "cpu" and peak_register_words(m) > profile.max_regs_per_thread
            seen = analyses[key] = _Analysis(m, None if too_wide else kernel_cost(m, n, profile, sizes))
        m, bound = seen.model, seen.bound
        if bound is None or not bound.feasible:
            continue
        work += 1
        if not registers:
            # Barriers cost at least nothing: a configuration that costs more than the kept
            # ones without any, or on a CPU profile (no barrier term: its cost is known now)
            # ranks after them, is analysed no further.
            lower, worst = time_without_barriers(bound, profile), worst_kept()
            if lower > worst[0] or (profile.kind == "cpu" and rank(lower, m, bound.time, index) > worst):
                continue
        if seen.cost is None:
            final = place_barriers(m, copy=False)  # (m, the optimized copy, is not read after)
            known = registers.get(signature(final)) if registers else None
            seen.model, seen.cost = final, kernel_cost(final, n, profile, sizes, known.registers, known.spill_bytes) \
                if known else cost_with_barriers(bound, final, n, profile)
        final, cost = seen.model, seen.cost
        if _idle_schedulers(cost, profile):
            idle.add(index)
        analysed.append((bound.time, index, Config(d, group, impls, by, final, cost, inputs, outputs,
                                                   cost.time * dag.multiplier)))
    # Equal costs go by `tie_rank` (as in the cover), then keep the order of their bounds, then
    # of enumeration (as the search always did). (The analysis above runs as if every
    # configuration could be kept, so that what it analyses and counts against the budget does
    # not depend on which leave schedulers idle.)
    analysed.sort(key=lambda a: rank(a[2].cost.time, a[2].model, a[0], a[1]))
    if any(index not in idle for _, index, _ in analysed):
        analysed = [a for a in analysed if a[1] not in idle]
    return [c for _, _, c in analysed[:keep]], work, least


@record
class _Analysis:
    """A configuration's analysis (`group_configs`): its model through the in-kernel steps before
    the barriers and its cost there (None: too many registers for several elements a thread),
    then, once asked, the model with its barriers and its cost."""

    model: KernelModel
    bound: KernelCost | None
    cost: KernelCost | None = None


def _idle_schedulers(cost: KernelCost, profile: DeviceProfile) -> bool:
    """Whether a GPU kernel's resident blocks hold fewer warps an SM than the SM has schedulers
    (`SCHEDULERS_PER_SM`): a scheduler without a warp issues nothing, and the warps it has
    wait out each load and each step of a sum one after another. The cost model prices such a
    kernel by its bytes and arithmetic as if its loads were in flight together; measured, the
    calls holding one ran 3.4x and 13x slower than priced (BP1's one-element-a-thread copy into
    the scatter's rows, 64 threads a block whose 125-343 words an element fill an SM's shared
    memory: two warps an SM; a plan without it 1.7x faster in float64 at order 4:
    benchmarks/NOTES.md, High-order elements, 2026-12-02 (night)). So the search keeps one only
    where it analysed no other of the group (`group_configs`)."""
    return profile.kind != "cpu" and cost.warps < SCHEDULERS_PER_SM


def _floor_time(floor: tuple[float, float, float, float]) -> float:
    """The least time of a group's kernel (or kernels) by its floor (`group_configs`): a sum
    of kernels' times, each at least its launch plus the largest of its terms, is at least one
    launch plus the largest of the terms' sums."""
    launch, moved, arithmetic, gathered = floor
    return launch + max(moved, arithmetic, gathered)


def _rest_floor(dag: BlockDAG, group: tuple[int, ...], n: int, profile: DeviceProfile, itemsize: int) -> float:
    """The least time of the other kernels of any cover that holds `group` as a kernel: those
    that run the block's other calls (0 where the group holds them all). They are one launch or
    more; between them they read every value their calls take from outside them and write every
    value of theirs read outside them, each at least once, through global memory (uniform values
    counted as nothing, a gathered value as its node numbers alone, its rows maybe from caches),
    and do their calls' arithmetic (the loops' bodies counted as nothing: they may run in another
    block's kernels); on a GPU the kernels reading a gathered value gather its rows, one of them
    at least (`cost.gather_time`): at the copy rate, the peak rate or the gather rate, whichever
    takes longest. So a cover holding the group costs at least the group's floor and this."""
    held = set(group)
    calls = [i for i in dag.calls if i not in held]
    if not calls:
        return 0.0
    # (the loops that may run inside the rest's kernels are theirs: what they make is not moved)
    rest = tuple(sorted(calls + [i for i in dag.kernel_loops() if i not in held]))
    inputs, outputs = crossing_values(dag, rest)
    words, gathered = 0, []
    for v in [*inputs, *outputs]:
        size = moved_words(v, itemsize)
        words += size.index_words if isinstance(size, Gathered) else size
        if isinstance(size, Gathered):
            gathered.append(size)
    rows = gather_time(n, profile, gathered, itemsize) if profile.kind != "cpu" else 0.0
    return profile.launch_overhead + max(n * words * itemsize / profile.bandwidth,
                                         _element_arithmetic(dag, calls, n, profile, itemsize), rows)


def moved_words(v: SSAValue, itemsize: int) -> float | Gathered:
    """Words an element moves through global memory for a value a kernel loads or stores:
    none for a uniform value, a gathered value's node numbers and rows (`global_words`), a
    value that scatters alone add the partial rows of its groups (`cost.scattered_words`)."""
    if kas.is_uniform(v):
        return 0
    if kas.only_scattered(v):
        rows = next(iter(v.uses)).operation.index.type.count.data  # type: ignore[attr-defined]
        return scattered_words(v.type.size, rows)  # type: ignore[attr-defined]
    return global_words(v, itemsize)


def crossing_values(dag: BlockDAG, group: tuple[int, ...]) -> tuple[list[SSAValue], list[SSAValue]]:
    """`external_values` of a group of the block as it was when its DAG was built, in the same
    order, from the block's tables (`dag.node_values`) instead of a walk of the IR: what the
    group's nodes read that none of them makes, and what they make that another node or the
    block's end reads. (The search's; a rewrite renaming values uses `external_values`.)"""
    held = set(group)
    inputs: list[SSAValue] = []
    outputs: list[SSAValue] = []
    seen: set[SSAValue] = set()
    for i in group:
        for v, maker in dag.reads[i]:
            if maker not in held and v not in seen:
                seen.add(v)
                inputs.append(v)
        for r, readers, escapes in dag.made[i]:
            if escapes or not readers <= held:
                outputs.append(r)
    return inputs, outputs


def _element_arithmetic(dag: BlockDAG, nodes, n: int, profile: DeviceProfile, itemsize: int) -> float:
    """Seconds at the peak rate of the arithmetic that `nodes` (calls and loops, a loop's calls
    its trip count times) do for every element of `n`; uniform values' calls not counted."""
    every = [dag.ops[i] for i in nodes if not dag.runs_once(i)]
    lib = default_library()
    flops = n * sum(runs * op_flops(lib.get(c.op_name), profile, itemsize)
                    for runs, c in zip(call_runs(every), flat_calls(every)))
    return flops / peak_flops(profile, itemsize)


# What a cover's objective may add to its predicted time, a configuration: `tie_rank` (at most
# 11 units of a tenth of a nanosecond) and the rounding of its time to units (`solve_cover`).
TIE_SLACK = 2e-9
BOUND_UP_TO = 1.0  # seconds: past it the objective's units may be coarser (`objective_scale`): no bound


def _cover_bound(dags: list[BlockDAG], groups: list[tuple[int, tuple[int, ...]]], found: dict[int, list[Config]],
                 wholes: set[int]) -> float:
    """A time that the floor of every group in the best cover stays within: the predicted time
    of a cover made of what is analysed so far (each block's whole phases and single calls, or
    its single calls alone, whichever is cheaper and has no kernels depending on each other in
    a cycle; loops stay on the host), plus what the cover's objective may add to each of its
    configurations. Infinite where a block has a call without a configuration or the time
    passes `BOUND_UP_TO`. (A block whose one kernel is at its floor has no single calls
    analysed: its cover is that kernel.)"""
    best = {(groups[k][0], groups[k][1][0]): found[k][0] for k in found if len(groups[k][1]) == 1 and found[k]}
    total, count = 0.0, 0
    for d, dag in enumerate(dags):
        covers = [[best[(d, node)] for node in dag.calls]] if all((d, node) in best for node in dag.calls) else []
        whole = [found[k][0] for k in wholes if groups[k][0] == d and found[k]
                 and not set(groups[k][1]) - set(dag.calls)]  # (calls only: a loop inside covers its body's blocks)
        held = {node for c in whole for node in c.group}
        if whole and all(node in held or (d, node) in best for node in dag.calls):
            covers.append(whole + [best[(d, node)] for node in dag.calls if node not in held])
        known = [(sum(c.weighted_time for c in cover), len(cover)) for cover in covers
                 if _kernel_cycle(dags, cover) is None]
        if not known:
            return math.inf
        time, kernels = min(known)
        total += time
        count += kernels
    if total > BOUND_UP_TO:
        return math.inf
    return total + TIE_SLACK * (count + 1)


@kas.remembers_uniformity  # the search changes no IR: which values are uniform is worked out once each
def candidate_configs(program: kas.ProgramOp, n: int, profile: DeviceProfile, itemsize: int,
                      max_size: int, keep: int = 2, progress=None,
                      registers: Mapping[str, CompiledFigures] | None = None,
                      budget: int | None = DEFAULT_CONFIG_BUDGET,
                      layout: str = "aos", loops: str = "auto", per_thread: str = "auto",
                      phases: bool = True, bound: bool = True) -> tuple[list[BlockDAG], list[Config], list[str]]:
    """Configurations of every candidate group, and notes on what the budget left out.

    Whole phases are analysed first, then the other groups smallest first; once `budget`
    configurations have been analysed, the remaining groups of two nodes or more are left
    out (single calls and single loops never are, so a plan always exists). The configurations
    keep the groups' enumeration order.
    With `bound` (the search for the best plan alone), a group of several calls whose floor,
    with the floor of the kernels the block's other calls then need (`_rest_floor`), passes the
    predicted time of a cover already known (`_cover_bound`) is not analysed: every cover
    holding it costs more than that one, so the best cover is the same without it (the plans
    of every example, mesh and high-order example were the same; tests/test_planner.py).
    Groups left out so count no work against the budget.
    `loops`: "auto" lets groups hold loops (run inside the kernel), "host" keeps every loop
    on the host; `per_thread`: see `PER_THREAD_CHOICES`."""
    if loops not in LOOP_PLACEMENTS:
        raise CompileError(f"loops must be one of {', '.join(LOOP_PLACEMENTS)}, got '{loops}'")
    if per_thread not in PER_THREAD_CHOICES:
        raise CompileError(f"per_thread must be one of {', '.join(PER_THREAD_CHOICES)}, got '{per_thread}'")
    dags = program_dags(program)
    groups: list[tuple[int, tuple[int, ...]]] = []
    found: dict[int, list[Config]] = {}
    wholes: set[int] = set()  # (the indices in `groups` of whole phases)
    spent = skipped = 0
    offered: dict = {}  # (the calls' implementations by op name, `_impl_choices`)
    analyses: dict = {}  # (configurations analysed, by structure: `group_configs`)
    cut = max_size  # the size past which some block's groups were not enumerated (`_groups_within`)
    for d, dag in enumerate(dags):
        whole = [g for g in whole_phases(dag, loops == "auto") if len(g) > max_size] if phases and max_size > 1 else []
        small_size = max_size
        whole_configs = []
        for g in whole:  # analysed first: no budget leaves them out
            configs, work, floor = group_configs(dags, d, g, n, profile, itemsize, keep, registers, layout,
                                                 per_thread, offered=offered, analyses=analyses)
            whole_configs.append(configs)
            spent += work
            if _at_floor(dag, g, configs, floor, CPU_FLOOR_MARGIN if profile.kind == "cpu" else FLOOR_MARGIN):
                # No cover of the block moves fewer bytes or does less arithmetic than this one
                # kernel, which runs at that floor: the other groups cannot make a cheaper plan,
                # and the kernel (a convex group of every call) is a plan of the block alone.
                # Single calls are still analysed for the plans after the best (`top` > 1).
                small_size = 0 if bound else 1
        small, size = _groups_within(dag, small_size, loops == "auto", budget) if small_size else ([], 0)
        if size < small_size:  # (not when the block's one kernel at its floor made them pointless)
            cut = min(cut, size)
        for k, configs in enumerate(whole_configs):
            found[len(groups) + len(small) + k] = configs
            wholes.add(len(groups) + len(small) + k)
        groups += [(d, g) for g in small + whole]
    above = None  # `_cover_bound`, once every single call is analysed (groups go smallest first)
    for done, k in enumerate(sorted(range(len(groups)), key=lambda k: (len(groups[k][1]), k))):
        d, g = groups[k]
        if k in found:
            pass
        elif budget is not None and spent >= budget and len(g) > 1:
            skipped += 1
        else:
            if len(g) > 1 and above is None:
                above = _cover_bound(dags, groups, found, wholes) if bound else math.inf
            found[k], work, _ = group_configs(dags, d, g, n, profile, itemsize, keep, registers, layout, per_thread,
                                              math.inf if len(g) == 1 else above, offered=offered, analyses=analyses)
            spent += work
        if progress:
            progress(done + 1, len(groups))
    configs = [c for k in range(len(groups)) if k in found for c in found[k]]
    notes = []
    if skipped or cut < max_size:
        said = []
        if skipped:
            largest = max(len(g) for _, g in groups)
            said.append(f"{skipped} of {len(groups)} candidate groups (the largest, up to {largest} calls) were not "
                        "considered")
        if cut < max_size:
            said.append(f"groups of more than {cut} call{'s' if cut > 1 else ''} were not enumerated")
        notes.append(f"the search stopped at its budget of {budget} analysed configurations: {'; '.join(said)}; "
                     "the plan is the best among the rest")
    return dags, configs, notes


def _groups_within(dag: BlockDAG, max_size: int, loops: bool,
                   budget: int | None) -> tuple[list[tuple[int, ...]], int]:
    """`convex_groups` of the block up to `max_size` nodes, but of no size past the one at
    which they outnumber `budget`: groups are analysed smallest first and each costs at least
    one configuration, so larger ones would be left out anyway (and in a long block there are
    exponentially many of them to enumerate). Also the size it stopped at (`max_size` when
    it did not stop short)."""
    groups = convex_groups(dag, 1 if budget is not None else max_size, loops)
    size = 1 if budget is not None else max_size
    # (no group is larger than the block: past its node count the groups stay the same, and a
    # max_size of millions would otherwise enumerate them again a million times)
    largest = min(max_size, len(dag.calls) + (len(dag.kernel_loops()) if loops else 0))
    while size < largest:
        if len(groups) > budget:  # type: ignore[operator]
            return groups, size if len(dag.calls) > size else max_size
        size += 1
        groups = convex_groups(dag, size, loops)
    return groups, max_size


# How close to its floor (launch plus bytes at the copy rate, or arithmetic at the peak rate) a
# block's one-kernel configuration must be predicted for the search to skip the block's other
# groups of several calls. On a GPU profile, 5%: the rest of the search could gain at most that
# by the model, a third of the 15% it is held to against the clock, and it cost hex8 in float64
# 0.75-0.85 s of a 2.1-2.8 s compile on two cores (its one kernel 3.8% over the floor, its compute
# term above its bytes; the whole search chose that kernel too). With 5% instead of 1%, the plans
# of every example and mesh example in both types on both GPU profiles, of the bake-off's four
# operators at orders 1-8, of the residuals' tangents, diagonals and products, and of 540 random
# programs (60 seeds, 30 to 200 statements, both types and profiles) were the same (benchmarks/
# NOTES.md, Compiling, 2026-12-06). On a CPU profile, 2%: the rest of the search could gain at most that
# by the model, less than the CPU backend's run-to-run drift on two cores (2-4%, benchmarks/
# NOTES.md), and it cost the J2 return mapping 1.6 s of its 2.1 s compile (its one kernel is
# 1.55% over the floor, the arithmetic of its uniform values being counted in it and not in the
# floor; the whole search chose that kernel too). The CPU plans of every example and mesh
# example, in float32 and float64, and of 160 random programs were the same with either margin.
FLOOR_MARGIN = 1.05
CPU_FLOOR_MARGIN = 1.02


def _at_floor(dag: BlockDAG, group: tuple[int, ...], configs: list[Config],
              floor: tuple[float, float, float, float], margin: float = FLOOR_MARGIN) -> bool:
    """Whether `group` holds every call of the block, in one phase, and its best configuration
    costs at most `margin` times its floor (`group_configs`): every other cover of the
    block reads the same inputs and writes the same outputs at least once, gathers the same rows
    at least once (on a GPU) and does the same arithmetic, in one launch or more, so none is
    predicted cheaper. Where the group computes uniform values for every element (a cover may
    compute them once), the arithmetic counted is that of the other calls."""
    if not configs or set(dag.calls) - set(group) or any(phase_levels(dag)):
        return False
    return configs[0].cost.time <= margin * _floor_time(floor)


def _kernel_cycle(dags: list[BlockDAG], chosen: list[Config]) -> list[Config] | None:
    """Chosen kernels that depend on each other in a cycle, or None."""
    for d, dag in enumerate(dags):
        kernel_of = {}
        mine = [c for c in chosen if c.dag == d]
        for k, c in enumerate(mine):
            for node in c.group:
                kernel_of[node] = k
        for i in range(len(dag.ops)):
            kernel_of.setdefault(i, len(mine) + i)  # loops and other ops: nodes of their own
        edges: dict[int, set[int]] = {}
        for a, succ in enumerate(dag.succ):
            for b in succ:
                ka, kb = kernel_of[a], kernel_of[b]
                if ka != kb:
                    edges.setdefault(ka, set()).add(kb)
        color: dict[int, int] = {}
        stack_path: list[int] = []

        def dfs(u: int) -> list[int] | None:
            color[u] = 1
            stack_path.append(u)
            for v in edges.get(u, ()):
                if color.get(v) == 1:
                    return stack_path[stack_path.index(v):]
                if v not in color:
                    found = dfs(v)
                    if found:
                        return found
            stack_path.pop()
            color[u] = 2
            return None

        for u in list(edges):
            if u not in color:
                cycle = dfs(u)
                if cycle:
                    return [mine[k] for k in cycle if k < len(mine)]
    return None


OBJECTIVE_UNITS = 1e10  # the cover's objective in tenths of a nanosecond
OBJECTIVE_LONGEST = 2**40  # the most one configuration's term may be, so that sums fit 64 bits


def objective_scale(configs: list[Config]) -> float:
    """Units a second of the cover's objective: tenths of a nanosecond, unless the longest
    predicted time would then pass `OBJECTIVE_LONGEST` (a batch or a device profile far past
    any machine's), where the times are scaled down together: the same order of covers, each
    term still an integer CP-SAT sums in 64 bits. A time that is not a finite number (a
    profile's rate of 0) is refused by name."""
    if not all(math.isfinite(c.weighted_time) for c in configs):
        raise CompileError("the cost model predicts a kernel's time as infinite or not a number: a device "
                           "profile's rates (bandwidth, flops) must be above 0")
    longest = max((c.weighted_time for c in configs), default=0.0)
    if longest * OBJECTIVE_UNITS <= OBJECTIVE_LONGEST:
        return OBJECTIVE_UNITS
    return OBJECTIVE_LONGEST / longest


def solve_cover(dags: list[BlockDAG], configs: list[Config], top: int,
                budget: float = DEFAULT_COVER_BUDGET) -> list[Plan]:
    """The `top` best distinct covers, best first.

    Exact cover: each call in exactly one chosen configuration, least total predicted time.
    A cover whose kernels would depend on each other in a cycle (possible with convex
    groups) gets a cut forbidding that combination, and the model is solved again. The best
    cover of a program without loops, where no other shares its total, is found without
    CP-SAT (`cover_exact`: the same answer, without loading OR-Tools).
    """
    index = {id(c): i for i, c in enumerate(configs)}
    covering: dict[tuple[int, int], list[int]] = {}
    for ci, c in enumerate(configs):
        for node in c.group:
            covering.setdefault((c.dag, node), []).append(ci)
    # (each call's exactly-one and each kernel loop's at-most-one, in the order CP-SAT is given
    # them: block by block, a block's calls then its loops)
    constraints: list[tuple[bool, list[int]]] = []  # (a loop's at most one, else a call's exactly one; variables)
    for d, dag in enumerate(dags):
        around = enclosing_loops(dags, d)
        # A loop run inside a kernel covers every call of its body (nested loops included).
        inherited = [i for key in around for i in covering.get(key, [])]
        for node in dag.calls:
            opts = covering.get((d, node), [])
            if not opts:
                op = dag.ops[node]
                raise CompileError(located(
                    f"no feasible kernel can run '{op.op_name}' on this device (every implementation exceeds its "
                    "limits: shared memory, registers or threads of a block)", op.location,
                    ["its values are too large for one element's work on chip: split them into smaller ones"]))
            constraints.append((False, opts + inherited))
        for node in dag.kernel_loops():
            if covering.get((d, node)):
                constraints.append((True, covering[(d, node)] + inherited))
    scale = objective_scale(configs)  # objective in units of 0.1 ns while the times fit
    # Of kernels of equal predicted time the cover takes one element a thread, then blocks of
    # 128 threads (`tie_rank`): a tenth of a nanosecond a rank, which breaks ties and nothing
    # else.
    weights = [int(round(c.weighted_time * scale)) + tie_rank(c.model.by, c.model.per_thread, c.model.reduces(),
                                                               c.model.bx, c.model.gathers())
               for c in configs]
    if top == 1 and len(dags) == 1 and not any(loop for loop, _ in constraints):
        chosen = unique_cover(dags[0].calls, [c.group for c in configs], weights)
        if chosen is not None and not _kernel_cycle(dags, [configs[i] for i in chosen]):
            return [Plan([configs[i] for i in chosen], sum(configs[i].weighted_time for i in chosen))]
    model = CoverModel(len(configs))  # (OR-Tools' solver, loaded at the first solve)
    optimal, feasible, unknown = statuses()
    for loop, variables in constraints:
        if loop:
            model.at_most(variables, 1)
        else:
            model.exactly_one(variables)
    model.minimize(enumerate(weights))
    plans: list[Plan] = []
    # One worker (`CoverModel.solve`): the search, and so the order of plans of equal predicted
    # time, is the same on every run (a tuned plan is compiled again later by its index).
    left = budget  # deterministic time: the same model stops at the same point on any machine
    short = False
    while len(plans) < top and left > 0:
        status = model.solve(left)
        left -= model.deterministic_time
        if status not in (optimal, feasible):
            short |= status == unknown
            break
        short |= status != optimal
        chosen = [i for i in range(len(configs)) if model.value(i)]
        cycle = _kernel_cycle(dags, [configs[i] for i in chosen])
        if cycle:
            model.at_most([index[id(c)] for c in cycle], len(cycle) - 1)
            continue
        plans.append(Plan([configs[i] for i in chosen], sum(configs[i].weighted_time for i in chosen)))
        model.at_most(chosen, len(chosen) - 1)
    short |= len(plans) < top and left <= 0
    if not plans:
        # The budget ran out before an acyclic cover was proven: one kernel per call always is.
        plans.append(_one_kernel_per_call(dags, configs))
    plans.sort(key=lambda p: p.predicted_time)
    if short:
        for p in plans:
            p.notes.append(f"the cover search stopped at its budget ({budget:g} units of CP-SAT deterministic "
                           "time): these plans are the best found, not proven the best")
    return plans


def _one_kernel_per_call(dags: list[BlockDAG], configs: list[Config]) -> Plan:
    best: dict[tuple[int, int], Config] = {}
    for c in configs:
        if len(c.group) == 1:
            key = (c.dag, c.group[0])
            if key not in best or c.weighted_time < best[key].weighted_time:
                best[key] = c
    chosen = [best[k] for k in sorted(best)]
    return Plan(chosen, sum(c.weighted_time for c in chosen))


def plan_program(program: kas.ProgramOp, n: int, profile: DeviceProfile, itemsize: int = 4,
                 max_size: int = 8, top: int = 1, keep: int = 2, progress=None,
                 registers: Mapping[str, CompiledFigures] | None = None, budget: int | None = DEFAULT_CONFIG_BUDGET,
                 cover_budget: float = DEFAULT_COVER_BUDGET, layout: str = "aos", loops: str = "auto",
                 per_thread: str = "auto", phases: bool = True) -> tuple[list[BlockDAG], list[Plan]]:
    """The `top` best plans for global arrays in `layout`, loops placed as `loops` allows;
    each plan's `notes` say where a budget cut the search short."""
    if max_size < 1:
        raise CompileError("max-size must be at least 1")
    dags, configs, notes = candidate_configs(program, n, profile, itemsize, max_size, keep, progress, registers,
                                             budget, layout, loops, per_thread, phases, bound=top == 1)
    if not any(dag.calls for dag in dags):
        return dags, [Plan([], 0.0)]
    plans = solve_cover(dags, configs, top, cover_budget)
    for p in plans:
        p.notes[:0] = notes
    return dags, plans


def rebind(program: kas.ProgramOp, dags: list[BlockDAG], plans: list[Plan]) -> tuple[list[BlockDAG], list[Plan]]:
    """The same plans for an identical copy of the program they were found for."""
    new_dags = program_dags(program)
    out = []
    for plan in plans:
        configs = []
        for c in plan.configs:
            inputs, outputs = external_values(new_dags[c.dag], c.group)
            configs.append(Config(c.dag, c.group, c.impls, c.by, c.model, c.cost, inputs, outputs,
                                  c.weighted_time))
        out.append(Plan(configs, plan.predicted_time, list(plan.notes), list(plan.recomputed), list(plan.stored)))
    return new_dags, out
