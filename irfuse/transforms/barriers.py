"""Barrier placement: a barrier exactly where a shared access would otherwise race, or
the conservative baseline of one after every op."""

from __future__ import annotations

from irfuse.analysis.hazards import HazardTracker
from irfuse.analysis.kernel_model import KernelModel, MOp
from irfuse.analysis.shared_accesses import accesses


def place_barriers(model: KernelModel) -> KernelModel:
    """The model with a barrier exactly before each op that would otherwise race."""
    out = model.copy()
    ops = out.without_barriers()
    tracker = HazardTracker(out.shared_words())
    placed: list[MOp] = []
    for i, op in enumerate(ops):
        acc = accesses(out, op)
        if tracker.conflict(acc) is not None:
            placed.append(MOp("barrier"))
            tracker.reset()
        tracker.record(acc, i)
        placed.append(op)
    out.ops = placed
    return out


def barrier_after_every_op(model: KernelModel) -> KernelModel:
    """The baseline, race-free whatever the order and offsets: a barrier after the loads,
    after every call, and after a store that another kind of op follows."""
    out = model.copy()
    ops = out.without_barriers()
    placed: list[MOp] = []
    for i, op in enumerate(ops):
        placed.append(op)
        nxt = ops[i + 1] if i + 1 < len(ops) else None
        if nxt is not None and (op.kind == "call" or (op.kind != "call" and nxt.kind != op.kind)):
            placed.append(MOp("barrier"))
    out.ops = placed
    return out


