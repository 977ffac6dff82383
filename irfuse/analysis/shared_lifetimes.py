"""Lifetimes of a kernel's shared values in its current op order: the peak they need, and
values overwritten while still live."""

from __future__ import annotations

from irfuse.analysis.placements import Placements
from irfuse.artifact.records import record
from irfuse.kernel.model import KernelModel, MOp, loop_ends


def peak_shared_words(model: KernelModel) -> int:
    """Peak words of simultaneously live shared values in the model's current order."""
    ops = model.without_barriers()
    first, last = lifetimes(model, ops)
    peak = 0
    for i in range(len(ops)):
        peak = max(peak, sum(model.values[v].span * model.by for v in first
                             if model.values[v].shared and first[v] <= i <= last[v]))
    return peak


def lifetimes(model: KernelModel, ops: list[MOp], placed: Placements | None = None
              ) -> tuple[dict[int, int], dict[int, int]]:
    """(first, last): the op indices between which each value is live. A value defined before
    a loop and read in it or after it is live through the whole loop (every iteration reads
    it again); a value defined in a loop's body lives within the iteration, except a carried
    value, which the next iteration reads (it is defined before the loop) or which only the
    last iteration's copy needs (it may be overwritten earlier in the body). A stored value
    built in place is live from its first part (`analysis.placements`; `placed`: the model's,
    where the caller has them)."""
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    placed = placed or Placements(model)
    written, read = (placed.written, placed.read) if placed.by_value else (MOp.writes, MOp.reads)
    for i, op in enumerate(ops):
        for v in written(op):
            first.setdefault(v, i)
            last[v] = max(last.get(v, i), i)
        for v in read(op):
            last[v] = i
    for begin, end in sorted(loop_ends(ops).items(), key=lambda p: p[1] - p[0]):
        for v, f in first.items():
            if f < begin < last[v]:
                last[v] = max(last[v], end)
    return first, last




@record
class Overwrite:
    """Op `writer` puts a value over shared words of `victim` that op `reader` reads later."""

    victim: int  # value id
    writer: int  # op indices in model.ops (barriers included)
    reader: int
    words: tuple[int, int]  # the overlapping words, [lo, hi)
    next_iteration: bool = False  # the reader runs again in the loop's next iteration


def _extent(model: KernelModel, vid: int) -> tuple[int, int]:
    v = model.values[vid]
    return v.offset, v.offset + model.by * v.span


def overwrites(model: KernelModel) -> list[Overwrite]:
    """Shared values overwritten while still live: a value written between another's definition
    and its last read over words they share. (An op may write over a value it reads itself,
    the last time: all its outputs are computed before any is written; a different thread
    reading those words is a race, which `hazards.find_races` reports.)"""
    placed = Placements(model)
    first, last = lifetimes(model, model.ops, placed)
    out = []
    for vid, v in model.values.items():
        if not v.shared or vid not in first:
            continue
        lo, hi = _extent(model, vid)
        for i in range(first[vid] + 1, last[vid]):
            for w in placed.written(model.ops[i]):
                if w == vid or not model.values[w].shared:
                    continue
                wlo, whi = _extent(model, w)
                if wlo < hi and lo < whi:
                    reader, again = last[vid], False
                    if vid not in model.ops[reader].reads():
                        # Live to the end of a loop (lifetimes): the next iteration reads it again.
                        begin = max(b for b, e in loop_ends(model.ops).items() if e == reader)
                        reader = next(j for j in range(begin, reader) if vid in model.ops[j].reads())
                        again = True
                    out.append(Overwrite(vid, i, reader, (max(lo, wlo), min(hi, whi)), again))
                    break
            else:
                continue
            break
    return out
