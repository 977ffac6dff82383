"""The DAG of one block of a `kas.program`, and its convex connected groups of calls.

Nodes are the block's ops (calls and loops; a loop is one node whose body is a
DAG of its own). A group of nodes is *valid* when it is connected (through def-use
edges, either direction) and convex: no path leaves the group and comes back. With
bitsets of ancestors and descendants, a set S is convex iff no node outside S is both
a descendant and an ancestor of S.

Groups hold calls, reductions and, where the search may run loops inside kernels, loops
whose body can (`kernel_loops`): such a group's kernel runs the whole loop, body included,
and the body's own DAG then has no kernels of its own. A group's kernel runs either over
the batch or `once` (calls on uniform values only), so a group holds one kind or the other;
and a reduction's result exists only after its kernel has run over the whole batch (a
global barrier), so no group holds a reduction and an op that depends on it. A call computed
again for a later pass over the batch (`recomputed = P`, `transforms.recompute`) runs in that
pass: no group holds it with a node of an earlier pass.
"""

from __future__ import annotations

from dataclasses import field

from xdsl.ir import Block, Operation

from irfuse.artifact.records import record
from irfuse.dialects import kas
from irfuse.transforms.kernel_builder import forwards_carried
from irfuse.transforms.recompute import RECOMPUTED


@record
class BlockDAG:
    block: Block
    ops: list[Operation]
    succ: list[set[int]]
    pred: list[set[int]]
    desc: list[int] = field(default_factory=list)  # bitsets, strict
    anc: list[int] = field(default_factory=list)
    multiplier: int = 1  # how many times the block runs per program run
    parent: tuple[int, int] | None = None  # (DAG, node) of the loop whose body this is
    once: list[bool] = field(default_factory=list)  # per node: a call of uniform values (`runs_once`)
    again: int = 0  # bitset of the calls computed again for a later pass (`recomputed = P`)
    level: list[int] = field(default_factory=list)  # per node: its pass (`phase_levels`)
    reduce_bits: int = 0  # the reductions' nodes, as a bitset (`reductions`)
    # Per node, as the block was when built (`node_values`): the values it reads that are made
    # outside it, each with the node making it (-1: outside the block); its results, each with
    # the nodes reading it and whether anything outside the block's nodes does.
    reads: list[list[tuple]] = field(default_factory=list)
    made: list[list[tuple]] = field(default_factory=list)

    @property
    def calls(self) -> list[int]:
        """The nodes a kernel runs by themselves: calls and reductions (constants stay on the host)."""
        return [i for i, op in enumerate(self.ops) if isinstance(op, (kas.CallOp, kas.ReduceOp))]

    def runs_once(self, i: int) -> bool:
        return self.once[i]

    def reductions(self) -> int:
        """The reductions' nodes, as a bitset."""
        return self.reduce_bits

    def kernel_loops(self) -> list[int]:
        """The loops that may run inside a kernel: their bodies hold only calls and such loops,
        and no carried value is yielded in another's place."""
        return [i for i, op in enumerate(self.ops) if isinstance(op, kas.LoopOp) and loop_fits_kernel(op)]


def loop_fits_kernel(loop: kas.LoopOp) -> bool:
    body = loop.body_ops
    return not forwards_carried(loop) and bool(body) and all(
        isinstance(op, kas.CallOp) or (isinstance(op, kas.LoopOp) and loop_fits_kernel(op)) for op in body)


def _uses_in(op: Operation) -> set:
    """Values an op reads, counting the ops nested in its regions."""
    vals = set(op.operands)
    for region in op.regions:
        for inner in region.walk():
            vals.update(inner.operands)
    return vals


def node_values(block: Block, ops: list[Operation], index: dict) -> tuple[list[list[tuple]], list[list[tuple]]]:
    """For each node: the values it (its nested ops included) reads that are made outside it,
    once each in reading order, with the index of the node making each (-1: made outside the
    block: its arguments, the program's); and its results, each with the set of nodes reading
    it and whether something not among the nodes does (the block's terminator). What crosses
    into and out of any set of nodes follows from these without walking the IR again
    (`search.crossing_values`: each group the search analyses, and the rest of its block)."""
    reads, made = [], []
    for op in ops:
        inner_ops = set(op.walk())
        inner_blocks = {b for inner in inner_ops for region in inner.regions for b in region.blocks}
        seen: set = set()
        mine = []
        for inner in op.walk():
            for a in inner.operands:
                owner = a.owner
                inside = owner in inner_ops if isinstance(owner, Operation) else owner in inner_blocks
                if not inside and a not in seen:
                    seen.add(a)
                    mine.append((a, index.get(owner, -1) if isinstance(owner, Operation) else -1))
        reads.append(mine)
        results = []
        for r in op.results:
            readers, escapes = set(), False
            for use in r.uses:
                user = use.operation
                while user is not None and user.parent_block() is not block:
                    user = user.parent_op()
                if user in index:
                    readers.add(index[user])
                else:
                    escapes = True
            results.append((r, frozenset(readers), escapes))
        made.append(results)
    return reads, made


def block_dag(block: Block, multiplier: int = 1, parent: tuple[int, int] | None = None) -> BlockDAG:
    ops = [op for op in block.ops if not isinstance(op, (kas.ReturnOp, kas.YieldOp))]
    index = {op: i for i, op in enumerate(ops)}
    n = len(ops)
    succ: list[set[int]] = [set() for _ in range(n)]
    pred: list[set[int]] = [set() for _ in range(n)]
    for j, op in enumerate(ops):
        for v in _uses_in(op):
            owner = v.owner
            if isinstance(owner, Operation) and owner in index and owner is not op:
                i = index[owner]
                succ[i].add(j)
                pred[j].add(i)
    desc = [0] * n
    for i in reversed(range(n)):  # block order is topological
        for j in succ[i]:
            desc[i] |= (1 << j) | desc[j]
    anc = [0] * n
    for j in range(n):
        for i in pred[j]:
            anc[j] |= (1 << i) | anc[i]
    # (asked for every group the search grows: worked out once per block)
    once = [isinstance(op, kas.CallOp) and kas.is_uniform(op.res) for op in ops]
    again = sum(1 << i for i, op in enumerate(ops) if RECOMPUTED in op.attributes)
    reads, made = node_values(block, ops, index)
    dag = BlockDAG(block, ops, succ, pred, desc, anc, multiplier, parent, once, again,
                   reduce_bits=sum(1 << i for i, op in enumerate(ops) if isinstance(op, kas.ReduceOp)),
                   reads=reads, made=made)
    dag.level = _levels(dag)
    return dag


def program_dags(program: kas.ProgramOp) -> list[BlockDAG]:
    """The DAG of the program body and of every loop body (nested), with run counts; a
    body's DAG comes after its parent's."""
    out: list[BlockDAG] = []

    def visit(block: Block, mult: int, parent: tuple[int, int] | None) -> None:
        me = len(out)
        out.append(block_dag(block, mult, parent))
        for i, op in enumerate(out[me].ops):
            if isinstance(op, kas.LoopOp):
                visit(op.body.block, mult * op.trip_count.data, (me, i))

    visit(program.body.block, 1, None)
    return out


def enclosing_loops(dags: list[BlockDAG], d: int) -> list[tuple[int, int]]:
    """(DAG, node) of every loop around block DAG `d`, innermost first."""
    out = []
    parent = dags[d].parent
    while parent is not None:
        out.append(parent)
        parent = dags[parent[0]].parent
    return out


def is_convex(dag: BlockDAG, members: int) -> bool:
    d = a = 0
    m = members
    while m:
        low = m & -m
        i = low.bit_length() - 1
        d |= dag.desc[i]
        a |= dag.anc[i]
        m ^= low
    return (d & a & ~members) == 0


def can_share_kernel(dag: BlockDAG, members: int) -> bool:
    """Whether the nodes of a group may run in one kernel: all over the batch or all once
    (or once, read only inside the group: see `_read_inside_only`), and no reduction with an
    op that depends on it."""
    nodes = [i for i in range(len(dag.ops)) if (members >> i) & 1]
    if len({dag.runs_once(i) for i in nodes}) > 1 and not all(
            _read_inside_only(dag, i, members) for i in nodes if dag.runs_once(i)):
        return False
    if members & dag.again:
        # A call computed again for pass P runs with pass P's nodes, none of an earlier pass.
        first = max(dag.level[i] for i in nodes if (dag.again >> i) & 1)
        if any(dag.level[i] < first for i in nodes):
            return False
    reduces = dag.reductions() & members
    while reduces:
        low = reduces & -reduces
        if dag.desc[low.bit_length() - 1] & members:
            return False
        reduces ^= low
    return True


def _read_inside_only(dag: BlockDAG, i: int, members: int) -> bool:
    """Whether node `i`'s value is read by the group's nodes alone (not returned, yielded or
    read by another kernel): a uniform call may then join a kernel over the batch, where each
    thread computes it again (an entry of a uniform table, a scaled constant: no separate
    kernel, no round trip through global memory)."""
    res = dag.ops[i].results[0]
    return (all((members >> j) & 1 for j in dag.succ[i])
            and not any(isinstance(u.operation, (kas.ReturnOp, kas.YieldOp)) for u in res.uses))


def phase_levels(dag: BlockDAG) -> list[int]:
    """For each node, how many reductions lie on the longest path into it: nodes of one level
    may share a kernel (a reduction's readers come a level after it). A call computed again for
    pass P is at level P at least."""
    return dag.level


def _levels(dag: BlockDAG) -> list[int]:
    level = [0] * len(dag.ops)
    for i in range(len(dag.ops)):  # block order is topological
        level[i] = max((level[p] + isinstance(dag.ops[p], kas.ReduceOp) for p in dag.pred[i]), default=0)
        if (dag.again >> i) & 1:
            level[i] = max(level[i], dag.ops[i].attributes[RECOMPUTED].data)
    return level


def whole_phases(dag: BlockDAG, loops: bool = False) -> list[tuple[int, ...]]:
    """Each phase of the block as one group: its calls (and with `loops` the loops that may
    run inside a kernel) of one `phase_levels` level, with the uniform calls only they read;
    those that are convex and may share a kernel. An element routine's straight-line code,
    too long for `convex_groups` to enumerate, is one such group."""
    nodes = set(dag.calls) | (set(dag.kernel_loops()) if loops else set())
    level = phase_levels(dag)
    out = []
    for lv in sorted({level[i] for i in nodes}):
        members = {i for i in nodes if level[i] == lv}
        if all(dag.runs_once(i) for i in members):
            continue
        while True:  # drop the uniform calls read outside (dropping one may strand another)
            mask = sum(1 << i for i in members)
            stranded = {i for i in members if dag.runs_once(i) and not _read_inside_only(dag, i, mask)}
            if not stranded:
                break
            members -= stranded
        if len(members) > 1 and is_convex(dag, mask) and can_share_kernel(dag, mask):
            out.append(tuple(sorted(members)))
    return out


def convex_groups(dag: BlockDAG, max_size: int, loops: bool = False) -> list[tuple[int, ...]]:
    """Every connected convex group of at most `max_size` nodes (calls, and with `loops`
    the loops that may run inside a kernel), each once.

    Grows groups from each node as their smallest member, adding neighbouring nodes
    of larger index (ESU-style), so no subset of the block is ever scanned blindly.
    """
    calls = set(dag.calls) | (set(dag.kernel_loops()) if loops else set())
    neigh = {i: {j for j in dag.succ[i] | dag.pred[i] if j in calls} for i in calls}
    found: set[int] = set()
    out: list[tuple[int, ...]] = []

    def grow(members: int, frontier: set[int], root: int, size: int) -> None:
        if members in found:
            return
        found.add(members)
        if is_convex(dag, members) and can_share_kernel(dag, members):
            out.append(tuple(i for i in sorted(calls) if (members >> i) & 1))
        if size == max_size:
            return
        for j in sorted(frontier):
            new = members | (1 << j)
            if new in found:
                continue
            grow(new, (frontier | {k for k in neigh[j] if k > root and not (members >> k) & 1}) - {j},
                 root, size + 1)

    for r in sorted(calls):
        grow(1 << r, {k for k in neigh[r] if k > r}, r, 1)
    return out
