"""Barrier placement: a barrier exactly where a shared access would otherwise race, or
the conservative baseline of one after every op."""

from __future__ import annotations

from irfuse.analysis.hazards import HazardTracker
from irfuse.analysis.placements import Placements
from irfuse.kernel.model import KernelModel, MOp, OpKind, Patterns, unrolled
from irfuse.analysis.shared_accesses import accesses


def place_barriers(model: KernelModel, *, copy: bool = True) -> KernelModel:
    """The model with a barrier exactly before each op that would otherwise race.

    Ops are followed in the order a block runs them (loop bodies twice, so that the accesses
    of one iteration meet those of the next across the back edge); a barrier placed before an
    op stands before every run of it, so the walk is repeated with the barriers found until
    it finds no new one (without loops, one walk)."""
    out = model.copy() if copy else model
    ops = out.without_barriers()
    patterns, placed = Patterns(out), Placements(out)
    accs = [accesses(out, op, patterns, placed) for op in ops]
    order = unrolled(ops)
    loops = any(op.kind == OpKind.LOOP for op in ops)
    before: set[int] = set()
    while True:
        tracker = HazardTracker(out.shared_words())
        found = set(before)
        for i in order:
            if i in found:
                tracker.reset()
            elif tracker.conflict(accs[i]) is not None:
                found.add(i)
                tracker.reset()
            tracker.record(accs[i], i)
        if found == before or not loops:
            before = found  # (without loops the walk just made met each barrier where it placed it)
            break
        before = found
    placed: list[MOp] = []
    for i, op in enumerate(ops):
        if i in before:
            placed.append(MOp(OpKind.BARRIER))
        placed.append(op)
    out.ops = placed
    return out


def barrier_after_every_op(model: KernelModel) -> KernelModel:
    """The baseline, race-free whatever the order and offsets: a barrier after the loads,
    after every call and copy, after a store that another kind of op follows, at the start
    of every loop body (after its `loop` op) and after every loop."""
    return with_barrier_after_every_op(model.copy())


def with_barrier_after_every_op(out: KernelModel) -> KernelModel:
    """`barrier_after_every_op` on a model of the caller's own (changed, and returned)."""
    ops = out.without_barriers()
    placed: list[MOp] = []
    for i, op in enumerate(ops):
        placed.append(op)
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        if nxt is not None and (op.kind not in (OpKind.LOAD, OpKind.STORE) or nxt.kind != op.kind):
            placed.append(MOp(OpKind.BARRIER))
    out.ops = placed
    return out


