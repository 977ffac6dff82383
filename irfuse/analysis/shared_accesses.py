"""Which shared-memory words each op of a kernel touches, and from which thread.

A call's thread (tx, ty) touches the words of its access patterns (in its own
coordinates when remapped; element ty on thread row ty % rows when each thread runs several
elements), a copy's threads those of `kernel.model.copy_pattern`;
loads and stores are block-wide copies whose words any thread may touch (`ANY`), except
a reduction's store whose tree takes its first step straight from the value's words
(`tree_reads_in_place`): thread t reads elements i and i + half for each i = t (mod threads).
A padded value (`pitch` > 0) stores element e at e*pitch.
Everything else in-kernel (hazards, races, bank conflicts, barrier placement) reads
these sets.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from irfuse.analysis.access_patterns import words_array
from irfuse.analysis.placements import Placements
from irfuse.kernel.model import KernelModel, MOp, OpKind, Patterns, copy_pattern
from irfuse.dialects.access_pattern import AccessPattern

ANY = -1  # a block-wide copy: any thread
WARP = 32  # threads of a warp


def tree_half(by: int) -> int:
    """The first step of a block's reduction tree over `by` elements (by > 1): the largest
    power of two below by; element i < half takes element i + half where that exists."""
    return 1 << max(0, (by - 1).bit_length() - 1)


def tree_reads_in_place(size: int, pitch: int, by: int) -> bool:
    """Whether a reduction's tree reads a shared value where it is (a scalar, unpadded, whose
    first step is wider than a warp) instead of a block copy of it: the emitter's choice, which
    the race analysis follows (`tree_first_readers`)."""
    return size == 1 and not pitch and tree_half(by) > WARP


def tree_first_readers(by: int, threads: int) -> np.ndarray:
    """The thread that reads each of the block's elements in the tree's first step: element i
    (and i + half) by thread i % threads, as the emitted loop over i < half runs."""
    i = np.arange(by)
    return np.where(i < tree_half(by), i, i - tree_half(by)) % threads


@functools.lru_cache(maxsize=4096)
def call_threads(impl_bx: int, kernel_bx: int, by: int, remap: bool, rows: int | None = None):
    """(tx, ty, tid) arrays of the threads running a call, in the call's own coordinates.

    Without remapping, thread (tx, ty % rows) of the kernel runs the call as (tx, ty) when
    tx < impl_bx (`rows`: the kernel's thread rows, by / elements_per_thread; all of `by`
    when None); with remapping, the block's first by*impl_bx threads run it as
    (tid % impl_bx, tid / impl_bx).
    """
    ty, tx = np.divmod(np.arange(by * impl_bx), impl_bx)
    tid = np.arange(by * impl_bx) if remap else (ty % (rows or by)) * kernel_bx + tx
    return tx, ty, tid


@functools.lru_cache(maxsize=8192)
def _ap_words(ap: AccessPattern, impl_bx: int, kernel_bx: int, by: int, remap: bool, rows: int):
    """(words, tid, y): every word a call's threads touch through `ap`, the kernel thread that
    touches it and that thread's element in the call's coordinates."""
    tx, ty, tid = call_threads(impl_bx, kernel_bx, by, remap, rows)
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


def call_words(v, ap: AccessPattern, impl_bx: int, kernel_bx: int, by: int, remap: bool, rows: int | None = None):
    """(words, tid) of a call's access to value `v` through `ap`, the kernel's threads in
    `rows` rows (see `call_threads`)."""
    w, t, y = _ap_words(ap, impl_bx, kernel_bx, by, remap, rows or by)
    return v.offset + w + element_shift(y, v.size, v.pitch), t


def call_access(v, ap: AccessPattern, impl_bx: int, kernel_bx: int, by: int, remap: bool, rows: int | None,
                write: bool) -> Access:
    """A call's (or copy's) `Access` to value `v` through `ap` (see `call_words`)."""
    w, t = call_words(v, ap, impl_bx, kernel_bx, by, remap, rows)
    uniq, owner = _ap_owners(ap, impl_bx, kernel_bx, by, remap, rows or by, v.size, v.pitch)
    return Access(w, t, write, (v.offset + uniq, owner))


MULTI = -2  # a word several threads touch (in `Access.owners`)


def word_owners(words: np.ndarray, threads: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the distinct words, sorted; for each the one thread touching it, or MULTI where
    several do or `ANY` where a block-wide copy does): all the hazard tracking needs."""
    if words.size == 0:
        return words, threads
    order = np.argsort(words, kind="stable")
    w, t = words[order], threads[order]
    uniq, first = np.unique(w, return_index=True)
    tmin = np.minimum.reduceat(t, first)
    tmax = np.maximum.reduceat(t, first)
    return uniq, np.where(tmin == tmax, tmin, MULTI)


@functools.lru_cache(maxsize=8192)
def _ap_owners(ap: AccessPattern, impl_bx: int, kernel_bx: int, by: int, remap: bool, rows: int, size: int,
               pitch: int) -> tuple[np.ndarray, np.ndarray]:
    """`word_owners` of a call's access through `ap` to a value at offset 0: the same for every
    kernel placing such a value anywhere (shifted by its offset), so worked out once."""
    w, t, y = _ap_words(ap, impl_bx, kernel_bx, by, remap, rows)
    return word_owners(w + element_shift(y, size, pitch), t)


@dataclass
class Access:
    words: np.ndarray
    threads: np.ndarray
    write: bool
    # `word_owners(words, threads)`, where known when the access is made (else worked out on
    # first use): the hazard tracker merges and checks these.
    owners_known: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False, compare=False)

    def owners(self) -> tuple[np.ndarray, np.ndarray]:
        if self.owners_known is None:
            self.owners_known = word_owners(self.words, self.threads)
        return self.owners_known


def accesses(model: KernelModel, op: MOp, patterns: Patterns | None = None,
             placed: Placements | None = None) -> list[Access]:
    """Shared-memory accesses of one op (register values touch no shared memory); `patterns`
    and `placed` (its `analysis.placements`): the model's, where the caller asks of many ops.
    A call that only moves words into a stored value built in place touches nothing; the call
    making one of its parts also writes the part's words there, each element's by its thread."""
    out: list[Access] = []
    placed = placed or Placements(model)
    if placed.by_value and placed.is_moved(op):
        return out
    for vid, pairs in placed.leaf_writes(op) if placed.by_value else ():
        v = model.values[vid]
        y = np.repeat(np.arange(model.by), len(pairs))
        at = np.tile(np.array([t for _, t in pairs]), model.by)
        words = v.offset + pitched(y * v.size + at, v.size, v.pitch)
        threads = (y % model.thread_rows) * model.bx
        out.append(Access(words, threads, True))
    if op.kind in (OpKind.LOAD, OpKind.STORE):
        v = model.values[op.value]  # type: ignore[index]
        if v.shared:
            words = copy_words(v, model.by)
            threads = np.full(words.shape, ANY)
            if (op.kind == OpKind.STORE and op.reduce and model.by > 1
                    and tree_reads_in_place(v.size, v.pitch, model.by)):
                threads = tree_first_readers(model.by, model.threads)
            # (a block chunk's words are distinct and increasing: each is its own owner entry)
            out.append(Access(words, threads, op.kind == OpKind.LOAD, (words, threads)))
    elif op.kind == OpKind.COPY:
        ap, bx, remap = copy_pattern(model, op, patterns)
        for vid, write in ((op.args[0], False), (op.result, True)):
            v = model.values[vid]  # type: ignore[index]
            if v.shared:
                out.append(call_access(v, ap, bx, model.bx, model.by, remap, model.thread_rows, write))
    elif op.kind == OpKind.CALL:
        impl = op.impl
        assert impl is not None
        for k, a in enumerate(op.args):
            v = model.values[a]
            if v.shared:
                out.append(call_access(v, impl.operand_aps[k], impl.bx, model.bx, model.by, op.remap,
                                       model.thread_rows, False))
        v = model.values[op.result]  # type: ignore[index]
        if v.shared:
            out.append(call_access(v, impl.result_ap, impl.bx, model.bx, model.by, op.remap, model.thread_rows,
                                   True))
    if model.threads == 1:  # a block of one thread (a kernel run once) races with nobody
        for a in out:
            a.threads = np.zeros_like(a.threads)
            a.owners_known = None
    return out


