"""Hazards between the shared-memory accesses of a kernel's threads, and the races among them.

A barrier is needed before an op exactly when it reads a word another thread wrote, or
writes a word another thread read or wrote, since the last barrier. `HazardTracker`
follows which thread touched each word since the last barrier; `find_races` walks a
kernel's ops with it and reports every pair that no barrier separates.
"""

from __future__ import annotations

import numpy as np

from irfuse.artifact.records import record
from irfuse.kernel.model import KernelModel, MOp, OpKind, Patterns, unrolled
from irfuse.analysis.placements import Placements
from irfuse.analysis.shared_accesses import MULTI, Access, accesses

NONE = -3  # no access since the last barrier


def _conflicts(prev: np.ndarray, threads: np.ndarray) -> np.ndarray:
    return (prev != NONE) & ((prev < 0) | (threads < 0) | (prev != threads))


def _merge(state: np.ndarray, words: np.ndarray, owners: np.ndarray) -> None:
    """Adds an access given as distinct words and each one's owner (`Access.owners`): ANY
    and MULTI both conflict with every other thread."""
    if words.size == 0:
        return
    old = state[words]
    state[words] = np.where(old == NONE, owners, np.where(old == owners, old, MULTI))


class HazardTracker:
    """Which thread read and wrote each shared word since the last barrier."""

    def __init__(self, words: int):
        self.last_write = np.full(max(words, 1), NONE, dtype=np.int64)
        self.last_read = np.full(max(words, 1), NONE, dtype=np.int64)
        self.write_op = np.full(max(words, 1), -1, dtype=np.int64)
        self.read_op = np.full(max(words, 1), -1, dtype=np.int64)
        # Nothing touched since the last barrier: no access conflicts, and a record writes its
        # owners as they are (the planner walks thousands of candidate kernels' ops: the first
        # op after each barrier is not checked word by word).
        self.clean = True

    def reset(self) -> None:
        if not self.clean:
            for a in (self.last_write, self.last_read):
                a.fill(NONE)
            self.clean = True

    def conflict(self, acc: list[Access]) -> tuple[int, int, str] | None:
        """The first (word, earlier op index, kind) another thread touched in a conflicting way."""
        if self.clean:
            return None
        for a in acc:
            checks = [(self.last_write, self.write_op, "written")]
            if a.write:
                checks.append((self.last_read, self.read_op, "read"))
            words, owners = a.owners()
            for state, who, kind in checks:
                # (a word of several threads conflicts where a word's thread would: asked of
                # the distinct words first, the full list only to name the first word hit)
                if not _conflicts(state[words], owners).any():
                    continue
                bad = _conflicts(state[a.words], a.threads)
                if bad.any():
                    i = int(np.argmax(bad))
                    w = int(a.words[i])
                    return w, int(who[w]), kind
        return None

    def record(self, acc: list[Access], op_index: int) -> None:
        fresh = {True: self.clean, False: self.clean}  # (writes, reads) untouched since the barrier
        for a in acc:
            state, who = (self.last_write, self.write_op) if a.write else (self.last_read, self.read_op)
            words, owners = a.owners()
            if fresh[a.write]:
                state[words] = owners  # (every word NONE, each word once: what `_merge` gives)
            else:
                _merge(state, words, owners)
            fresh[a.write] = False
            who[words] = op_index
        if acc:
            self.clean = False


@record
class Race:
    word: int
    first: int  # op index (model.ops, barriers included)
    second: int
    kind: str  # "written" or "read": what the first op did to the word


def find_races(model: KernelModel) -> list[Race]:
    """Every pair of ops touching one shared word from different threads, at least one
    writing, with no barrier between them (first such word per op), following loops around
    their back edge (`kernel.model.unrolled`)."""
    tracker = HazardTracker(model.shared_words())
    races = []
    seen = set()
    patterns, placed = Patterns(model), Placements(model)
    for i in unrolled(model.ops):
        op = model.ops[i]
        if op.kind == OpKind.BARRIER:
            tracker.reset()
            continue
        acc = accesses(model, op, patterns, placed)
        hit = tracker.conflict(acc)
        if hit is not None and (hit[1], i) not in seen:
            seen.add((hit[1], i))
            races.append(Race(hit[0], hit[1], i, hit[2]))
        tracker.record(acc, i)
    return races


def describe_op(model: KernelModel, op: MOp, index: int) -> str:
    """How race reports name an op of a kernel body (counted from 0, barriers included)."""
    v = model.values
    if op.kind == OpKind.CALL:
        return f"op {index} (fuse.call @{op.impl.op.name}[{op.impl.name}] into %{v[op.result].name})"  # type: ignore
    if op.kind == OpKind.LOAD:
        return f"op {index} (fuse.load of %{v[op.value].name})"  # type: ignore[index]
    if op.kind == OpKind.COPY:
        return f"op {index} (fuse.copy of %{v[op.args[0]].name} into %{v[op.result].name})"  # type: ignore[index]
    if op.kind in (OpKind.LOOP, OpKind.YIELD):
        return f"op {index} (fuse.{op.kind})"
    return f"op {index} (fuse.store of %{v[op.value].name})"  # type: ignore[index]
