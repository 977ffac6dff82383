"""Stored values built in place: a value staged in shared memory for its store alone, made by
calls that only move words, is written part by part as its parts are made.

A call only moves words where every entry of its result is an entry of an operand (every
tree of its op's definition a `Leaf`, `OpDef.moved_words`: `stack`, a permutation `contract`,
`reshape`, `item`).
When a stored value V (in shared memory, read by plain stores alone) is made by such a call,
through a chain of such calls whose results are in registers and read by the chain alone,
from values in registers made by calls (its *leaves*), then each word of V is a known word of
a leaf. The kernel then writes each leaf's words into V's staging right after the call that
makes the leaf, and the calls of the chain run nowhere (they are *moved*): no thread holds V
whole in registers until its last part is made. J2's consistent tangent stacks nine
directions' 3x3 tangents and permutes their axes: held until the last direction's, its 81
entries took 128 registers a thread (4 blocks of 128 an SM); written as made, 94 (5 blocks),
and the kernel ran at 91% of a copy of its bytes against 77% (benchmarks/NOTES.md, Matrices
and solves, 2026-12-02).

Only one-thread-an-element calls of an array-of-structures kernel without loops take part (a
thread running several elements writes each one's parts).
The analysis reads the model and changes nothing; the steps and the emitters that must agree
on it ask it: V's lifetime starts at its first leaf (`shared_lifetimes.lifetimes`), a leaf's
call writes V's words (`shared_accesses.accesses`, so barriers and the race check see them),
a moved call touches nothing and holds no registers (`planner.cost`), stored values that do
not need the leaves are made before the first (`transforms.linearization`), and the emitters
write the leaves (`backend.cuda_emit`).
"""

from __future__ import annotations

from irfuse.artifact.records import record
from irfuse.kernel.model import KernelModel, MOp, OpKind


@record(frozen=True)
class Placement:
    value: int  # the stored value V
    writes: tuple[tuple[int, tuple[tuple[int, int], ...]], ...]  # (leaf, ((its word, V's word), ...)), by leaf
    moved: frozenset[int]  # the results of the calls that only move words (V's own producer's: V)


def _one_thread(op: MOp) -> bool:
    return op.impl.bx == 1 and not op.remap  # type: ignore[union-attr]


def _placement(model: KernelModel, vid: int, producer: dict[int, MOp], readers: dict[int, list[MOp]]
               ) -> Placement | None:
    """V's placement where it has one (see the module)."""
    top = producer[vid]
    if not _one_thread(top) or top.impl.op.moved_words is None:
        return None
    targets: dict[int, dict[int, list[int]]] = {}  # leaf -> its word -> V's words
    moved = {vid}
    work = [(top, list(range(model.values[vid].size)))]  # (a moving call, V's word for each word of its result)
    while work:
        op, into = work.pop()
        words = op.impl.op.moved_words
        assert words is not None
        parts: dict[int, list[tuple[int, int]]] = {}  # operand -> (its word, V's word)
        for r, (k, w) in enumerate(words):
            parts.setdefault(op.args[k], []).append((w, into[r]))
        for a, pairs in parts.items():
            v = model.values[a]
            if v.shared or v.uniform or v.is_input or v.carried or a not in producer:
                return None  # (its words are not a call's registers)
            made = producer[a]
            inner = made.impl.op.moved_words if _one_thread(made) else None
            chained = inner is not None and not v.stored and a not in moved and all(
                r is op for r in readers.get(a, []))
            if chained:
                size = v.size
                to = [-1] * size
                for w, t in pairs:
                    to[w] = t
                if -1 in to:
                    return None  # (a word of it that V does not take: it is made, so it is not moved)
                moved.add(a)
                work.append((made, to))
            elif _one_thread(made) and made.impl.result_ap.relative() == set(range(v.size)):  # type: ignore
                for w, t in pairs:
                    targets.setdefault(a, {}).setdefault(w, []).append(t)
            else:
                return None
    order = {op.result: i for i, op in enumerate(model.ops) if op.kind == OpKind.CALL}
    writes = tuple((leaf, tuple((w, t) for w in sorted(ws) for t in sorted(ws[w])))
                   for leaf, ws in sorted(targets.items(), key=lambda p: order[p[0]]))
    return Placement(vid, writes, frozenset(moved))


def placements(model: KernelModel) -> dict[int, Placement]:
    """The model's stored values built in place, by value (see the module)."""
    if model.layout != "aos" or model.once:
        return {}
    values = model.values
    if not any(op.kind == OpKind.CALL and values[op.result].shared and values[op.result].stored  # type: ignore
               and op.impl.op.moved_words is not None for op in model.ops) or model.has_loops():
        return {}
    producer: dict[int, MOp] = {}
    readers: dict[int, list[MOp]] = {}
    for op in model.ops:
        if op.kind == OpKind.CALL:
            producer[op.result] = op  # type: ignore[index]
        for a in dict.fromkeys(op.reads()):
            readers.setdefault(a, []).append(op)
    out = {}
    for vid, v in model.values.items():
        if vid not in producer or not v.shared or v.uniform or v.carried or v.is_input:
            continue
        uses = readers.get(vid, [])
        if not uses or any(op.kind != OpKind.STORE or op.reduce or op.scatter for op in uses):
            continue
        found = _placement(model, vid, producer, readers)
        if found is not None:
            out[vid] = found
    return out


class Placements:
    """A model's placements, asked op by op (made once for an analysis of many ops; valid while
    the model's ops and places stay as they were)."""

    def __init__(self, model: KernelModel) -> None:
        self.by_value = placements(model)
        self.moved: set[int] = set().union(*(p.moved for p in self.by_value.values()))
        self.leaves: dict[int, list[tuple[int, tuple[tuple[int, int], ...]]]] = {}
        for p in self.by_value.values():
            for leaf, pairs in p.writes:
                self.leaves.setdefault(leaf, []).append((p.value, pairs))

    def is_moved(self, op: MOp) -> bool:
        """Whether `op` is a call that runs nowhere (its words moved by the leaves' writes)."""
        return op.kind == OpKind.CALL and op.result in self.moved

    def leaf_writes(self, op: MOp) -> list[tuple[int, tuple[tuple[int, int], ...]]]:
        """The stored values `op` writes words of (and which), beside its own result."""
        if op.kind != OpKind.CALL:
            return []
        return self.leaves.get(op.result, [])  # type: ignore[arg-type]

    def written(self, op: MOp) -> list[int]:
        """What `op` writes: its own writes (none if it is moved) and the stored values its leaf feeds."""
        if self.is_moved(op):
            return []
        return op.writes() + [v for v, _ in self.leaf_writes(op)]

    def read(self, op: MOp) -> list[int]:
        """What `op` reads (nothing if it is moved)."""
        return [] if self.is_moved(op) else op.reads()
