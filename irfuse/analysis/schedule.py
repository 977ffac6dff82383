"""The in-kernel analyses: thread remapping, register promotion, linearization,
shared-memory allocation, barrier placement and race detection.

All decisions are made on exact per-thread sets of shared-memory words:
a call's thread (tx, ty) touches the words of its access patterns; loads and
stores are block-wide copies whose words may be touched by any thread.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

from irfuse.analysis.access_patterns import AccessPattern, compatible_fast, words_array
from irfuse.analysis.kernel_model import KernelModel, MOp

ANY = -1  # a block-wide copy: any thread
MULTI = -2  # several threads
NONE = -3  # no access since the last barrier
ALIGN_WORDS = 4  # 16-byte alignment of every shared value (vector copies)
EXACT_LINEARIZE_LIMIT = 12  # calls; above this the greedy heuristic orders them


# --- Threads of a call -------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def call_threads(impl_bx: int, kernel_bx: int, by: int, remap: bool):
    """(tx, ty, tid) arrays of the threads running a call, in the call's own coordinates.

    Without remapping, thread (tx, ty) of the kernel runs the call as (tx, ty) when
    tx < impl_bx; with remapping, the block's first by*impl_bx threads run it as
    (tid % impl_bx, tid / impl_bx).
    """
    ty, tx = np.divmod(np.arange(by * impl_bx), impl_bx)
    tid = np.arange(by * impl_bx) if remap else ty * kernel_bx + tx
    return tx, ty, tid


@functools.lru_cache(maxsize=8192)
def _ap_words(ap: AccessPattern, impl_bx: int, kernel_bx: int, by: int, remap: bool):
    """(words, tid, y): every word a call's threads touch through `ap`, the kernel thread that
    touches it and that thread's element in the call's coordinates."""
    tx, ty, tid = call_threads(impl_bx, kernel_bx, by, remap)
    w = words_array(ap, tx, ty, impl_bx, by)
    return w.ravel(), np.repeat(tid, w.shape[1]), np.repeat(ty, w.shape[1])


# The padded layout (`pitch` > 0): element e of a `size`-word value starts at e*pitch.
def pitched(i, size: int, pitch: int):
    """Where word i of the packed block chunk (element after element) lives."""
    return i if not pitch else (i // size) * pitch + i % size


def element_shift(y, size: int, pitch: int):
    """How far element y's base moves: a device function reading word w of a padded value
    through the moved pointer touches w + element_shift(y) (w inside element y)."""
    return y * (pitch - size) if pitch else 0


def copy_words(v, by: int) -> np.ndarray:
    """The shared words of a value's block chunk, element after element, in copy order."""
    return v.offset + pitched(np.arange(by * v.size), v.size, v.pitch)


def call_words(v, ap: AccessPattern, impl_bx: int, kernel_bx: int, by: int, remap: bool):
    """(words, tid) of a call's access to value `v` through `ap`."""
    w, t, y = _ap_words(ap, impl_bx, kernel_bx, by, remap)
    return v.offset + w + element_shift(y, v.size, v.pitch), t


@dataclass
class Access:
    words: np.ndarray
    threads: np.ndarray
    write: bool


def accesses(model: KernelModel, op: MOp) -> list[Access]:
    """Shared-memory accesses of one op (register values touch no shared memory)."""
    out: list[Access] = []
    if op.kind in ("load", "store"):
        v = model.values[op.value]  # type: ignore[index]
        if v.shared:
            words = copy_words(v, model.by)
            out.append(Access(words, np.full(words.shape, ANY), op.kind == "load"))
    elif op.kind == "call":
        impl = op.impl
        assert impl is not None
        for k, a in enumerate(op.args):
            v = model.values[a]
            if v.shared:
                w, t = call_words(v, impl.operand_aps[k], impl.bx, model.bx, model.by, op.remap)
                out.append(Access(w, t, False))
        v = model.values[op.result]  # type: ignore[index]
        if v.shared:
            w, t = call_words(v, impl.result_ap, impl.bx, model.bx, model.by, op.remap)
            out.append(Access(w, t, True))
    return out


# --- Barriers ------------------------------------------------------------------


def _conflicts(prev: np.ndarray, threads: np.ndarray) -> np.ndarray:
    return (prev != NONE) & ((prev < 0) | (threads < 0) | (prev != threads))


def _merge(state: np.ndarray, words: np.ndarray, threads: np.ndarray) -> None:
    if words.size == 0:
        return
    order = np.argsort(words, kind="stable")
    w, t = words[order], threads[order]
    uniq, first = np.unique(w, return_index=True)
    tmin = np.minimum.reduceat(t, first)
    tmax = np.maximum.reduceat(t, first)
    new = np.where(tmin == tmax, tmin, MULTI)  # ANY and MULTI both conflict with every other thread
    old = state[uniq]
    state[uniq] = np.where(old == NONE, new, np.where(old == new, old, MULTI))


class HazardTracker:
    """Which thread read and wrote each shared word since the last barrier."""

    def __init__(self, words: int):
        self.last_write = np.full(max(words, 1), NONE, dtype=np.int64)
        self.last_read = np.full(max(words, 1), NONE, dtype=np.int64)
        self.write_op = np.full(max(words, 1), -1, dtype=np.int64)
        self.read_op = np.full(max(words, 1), -1, dtype=np.int64)

    def reset(self) -> None:
        for a in (self.last_write, self.last_read):
            a.fill(NONE)

    def conflict(self, acc: list[Access]) -> tuple[int, int, str] | None:
        """The first (word, earlier op index, kind) another thread touched in a conflicting way."""
        for a in acc:
            checks = [(self.last_write, self.write_op, "written")]
            if a.write:
                checks.append((self.last_read, self.read_op, "read"))
            for state, who, kind in checks:
                bad = _conflicts(state[a.words], a.threads)
                if bad.any():
                    i = int(np.argmax(bad))
                    w = int(a.words[i])
                    return w, int(who[w]), kind
        return None

    def record(self, acc: list[Access], op_index: int) -> None:
        for a in acc:
            state, who = (self.last_write, self.write_op) if a.write else (self.last_read, self.read_op)
            _merge(state, a.words, a.threads)
            who[a.words] = op_index


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


@dataclass
class Race:
    word: int
    first: int  # op index (model.ops, barriers included)
    second: int
    kind: str  # "written" or "read": what the first op did to the word


def find_races(model: KernelModel) -> list[Race]:
    """Every pair of ops touching one shared word from different threads, at least one
    writing, with no barrier between them (first such word per op)."""
    tracker = HazardTracker(model.shared_words())
    races = []
    for i, op in enumerate(model.ops):
        if op.kind == "barrier":
            tracker.reset()
            continue
        acc = accesses(model, op)
        hit = tracker.conflict(acc)
        if hit is not None:
            races.append(Race(hit[0], hit[1], i, hit[2]))
        tracker.record(acc, i)
    return races


# --- Remapping and registers ----------------------------------------------------


def remap_threads(model: KernelModel) -> KernelModel:
    """Calls whose implementation uses fewer threads per element than the kernel run on the
    block's first threads, renumbered (x only when that dimension differs)."""
    out = model.copy()
    for op in out.calls():
        op.remap = op.impl.bx != out.bx  # type: ignore[union-attr]
    return out


def _consumers(model: KernelModel, vid: int) -> list[tuple[MOp, int]]:
    return [(op, k) for op in model.calls() for k, a in enumerate(op.args) if a == vid]


def promote_registers(model: KernelModel, outputs: bool = False, inputs: bool = False) -> KernelModel:
    """Values produced and consumed by calls with the same threads and compatible access
    patterns (none `noreg`) move to registers; with `outputs`, stored values may too; with
    `inputs`, loaded values whose consumers all agree (each thread then reads its own words
    from global memory instead of the block copying them coalesced)."""
    out = model.copy()
    producers = {op.result: op for op in out.calls()}
    for vid, v in out.values.items():
        uses = _consumers(out, vid)
        # The access every consumer must agree with: the producer's result, or for a loaded
        # value its first consumer's operand.
        if v.is_input and inputs and uses:
            ref, k0 = uses[0]
            ap = ref.impl.operand_aps[k0]  # type: ignore[union-attr]
        elif v.is_input or vid not in producers or (v.stored and not outputs):
            continue
        else:
            ref = producers[vid]
            ap = ref.impl.result_ap  # type: ignore[union-attr]
        bx = ref.impl.bx  # type: ignore[union-attr]
        ok = not ap.noreg and all(
            cons.impl.bx == bx and cons.remap == ref.remap  # type: ignore[union-attr]
            and compatible_fast(ap, cons.impl.operand_aps[k], bx, out.by)  # type: ignore[union-attr]
            for cons, k in uses)
        v.shared = not ok
        if not v.shared:
            v.offset = 0
    return out


# --- Order and allocation ---------------------------------------------------------


def _dependencies(model: KernelModel) -> dict[int, set[int]]:
    calls = model.calls()
    producer = {op.result: i for i, op in enumerate(calls)}
    return {i: {producer[a] for a in op.args if a in producer} for i, op in enumerate(calls)}


def linearize(model: KernelModel) -> KernelModel:
    """Orders the calls to minimize peak shared memory (exact up to EXACT_LINEARIZE_LIMIT
    calls, greedy above); loads come first, each store right after its value's producer."""
    out = model.copy()
    calls = out.calls()
    n = len(calls)
    deps = _dependencies(out)
    size = {vid: (v.size * out.by if v.shared else 0) for vid, v in out.values.items()}
    users: dict[int, set[int]] = {}
    for i, op in enumerate(calls):
        for a in op.args:
            users.setdefault(a, set()).add(i)
    inputs = [vid for vid, v in out.values.items() if v.is_input]

    def live_after(done: int) -> int:
        total = 0
        for vid in inputs:
            if any(not (done >> u) & 1 for u in users.get(vid, ())):
                total += size[vid]
        for i, op in enumerate(calls):
            if (done >> i) & 1 and any(not (done >> u) & 1 for u in users.get(op.result, ())):
                total += size[op.result]  # type: ignore[index]
        return total

    def during(done: int, c: int) -> int:
        return live_after(done) + size[calls[c].result]  # type: ignore[index]

    def ready(done: int) -> list[int]:
        return [c for c in range(n) if not (done >> c) & 1 and all((done >> d) & 1 for d in deps[c])]

    order: list[int] = []
    if n <= EXACT_LINEARIZE_LIMIT:
        best: dict[int, tuple[int, list[int]]] = {0: (live_after(0), [])}
        frontier = [0]
        for _ in range(n):
            nxt: dict[int, tuple[int, list[int]]] = {}
            for done in frontier:
                peak, seq = best[done]
                for c in ready(done):
                    p = max(peak, during(done, c))
                    key = done | (1 << c)
                    if key not in nxt or p < nxt[key][0] or (p == nxt[key][0] and seq + [c] < nxt[key][1]):
                        nxt[key] = (p, seq + [c])
            best.update(nxt)
            frontier = list(nxt)
        order = best[(1 << n) - 1][1] if n else []
    else:
        done = 0
        while len(order) < n:
            c = min(ready(done), key=lambda c: (during(done, c), c))
            order.append(c)
            done |= 1 << c
    stores = {op.value: op for op in out.ops if op.kind == "store"}
    new_ops = [op for op in out.ops if op.kind == "load"]
    for c in order:
        new_ops.append(calls[c])
        if calls[c].result in stores:
            new_ops.append(stores[calls[c].result])
    # A loaded value stored unchanged (an input that is also an output) is stored after the loads.
    for op in out.ops:
        if op.kind == "store" and op not in new_ops:
            new_ops.insert(len([o for o in new_ops if o.kind == "load"]), op)
    out.ops = new_ops
    return barrier_after_every_op(out)  # the old barriers belonged to the old order


def peak_shared_words(model: KernelModel) -> int:
    """Peak words of simultaneously live shared values in the model's current order."""
    ops = model.without_barriers()
    first, last = _lifetimes(model, ops)
    peak = 0
    for i in range(len(ops)):
        peak = max(peak, sum(model.values[v].span * model.by for v in first
                             if model.values[v].shared and first[v] <= i <= last[v]))
    return peak


def _lifetimes(model: KernelModel, ops: list[MOp]) -> tuple[dict[int, int], dict[int, int]]:
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for i, op in enumerate(ops):
        for v in op.writes():
            first.setdefault(v, i)
            last.setdefault(v, i)
        for v in op.reads():
            last[v] = i
    return first, last


def allocate_shared(model: KernelModel, align: int = ALIGN_WORDS, pad: bool = True) -> KernelModel:
    """Offsets for the shared values: values whose lifetimes overlap never share words;
    largest first, each at the lowest aligned offset that fits. With `pad`, a value whose
    accesses conflict on banks first gets the element pitch that removes the conflicts."""
    from irfuse.analysis.bank_conflicts import best_pitch

    out = model.copy()
    ops = out.without_barriers()
    first, last = _lifetimes(out, ops)
    placed: list[tuple[int, int, int, int]] = []  # offset, words, first, last
    shared = [vid for vid, v in out.values.items() if v.shared and vid in first]
    for vid in shared:
        out.values[vid].pitch = 0
    for vid in shared:
        out.values[vid].pitch = best_pitch(out, vid) if pad else 0
    shared.sort(key=lambda vid: (-out.values[vid].span, first[vid], vid))
    for vid in shared:
        words = out.values[vid].span * out.by
        busy = sorted((o, o + w) for o, w, f, l in placed if not (l < first[vid] or last[vid] < f))
        off = 0
        for lo, hi in busy:
            if off + words <= lo:
                break
            off = max(off, -(-hi // align) * align)
        out.values[vid].offset = off
        placed.append((off, words, first[vid], last[vid]))
    return out
