"""Lifetimes of a kernel's shared values in its current op order, and the peak they need."""

from __future__ import annotations

from irfuse.analysis.kernel_model import KernelModel, MOp


def peak_shared_words(model: KernelModel) -> int:
    """Peak words of simultaneously live shared values in the model's current order."""
    ops = model.without_barriers()
    first, last = lifetimes(model, ops)
    peak = 0
    for i in range(len(ops)):
        peak = max(peak, sum(model.values[v].span * model.by for v in first
                             if model.values[v].shared and first[v] <= i <= last[v]))
    return peak


def lifetimes(model: KernelModel, ops: list[MOp]) -> tuple[dict[int, int], dict[int, int]]:
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, op in enumerate(ops):
        for v in op.writes():
            first.setdefault(v, i)
            last.setdefault(v, i)
        for v in op.reads():
            last[v] = i
    return first, last


