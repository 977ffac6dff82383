"""Shared-memory bank conflicts: how many wavefronts the shared accesses of a kernel take,
and the padding (element pitch) that removes a value's conflicts.

Shared memory has 32 banks of 4 bytes. A warp's access is served in *phases* of 128 bytes
(32 threads of 4-byte words, 16 threads of 8-byte words); within a phase, threads that touch
different words of one bank are served one after another (one wavefront each), threads that
touch the same word share it. So the cost of one access instruction is, summed over its
phases, the largest number of distinct words any bank is asked for.

A call's thread touches its AP's words one per instruction; the model takes instruction `j`
to touch every thread's `j`-th word in address order (the order of the generated code for
element-wise maps, a close stand-in for the rest). Loads and stores are block-wide
copies: contiguous chunks (conflict free) when unpadded, element-wise copies when padded.

Padding: a value of `size` words per element can be stored with a larger pitch, element `e`
at `e*pitch`. For the element mapping of a 2x2 matrix (size 4), thread `ty` reads word
`ty*4 + k`: 32 threads hit 8 banks, a 4-way conflict; with pitch 5 the 32 threads hit 32
banks. A value is padded only when every call that touches it stays inside its own element
(true of every generated implementation; hand-written ones are checked), because the device
function receives the element's base moved by `ty*(pitch - size)`.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from irfuse.analysis.access_patterns import words_array
from irfuse.kernel.model import KernelModel, MValue, OpKind, Patterns, copy_pattern, op_weights
from irfuse.analysis.shared_accesses import call_threads, element_shift, pitched
from irfuse.dialects.access_pattern import AccessPattern

PHASE_BYTES = 128
MAX_EXTRA_WORDS = 3  # pitches tried: size+1 .. size+MAX_EXTRA_WORDS


def phase_threads(itemsize: int) -> int:
    return PHASE_BYTES // itemsize


def wavefronts(words: np.ndarray, tids: np.ndarray, itemsize: int) -> int:
    """Wavefronts of a sequence of access instructions: `words[t, j]` is the word thread
    `tids[t]` touches in instruction `j`, or negative where that thread has nothing to touch."""
    if words.size == 0:
        return 0
    g = phase_threads(itemsize)
    steps = words.shape[1]
    phase = np.repeat(tids // g, steps)
    step = np.tile(np.arange(steps), words.shape[0])
    w = words.ravel().astype(np.int64)
    live = w >= 0
    if not live.all():
        phase, step, w = phase[live], step[live], w[live]
        if w.size == 0:
            return 0
    nphase = int(phase.max()) + 1
    top = int(w.max()) + 1
    keys = np.sort((step * nphase + phase) * top + w)
    distinct = keys[np.concatenate(([True], keys[1:] != keys[:-1]))]  # one request per distinct word
    slot = distinct // top  # step * nphase + phase
    per_bank = np.bincount(slot * g + distinct % top % g, minlength=steps * nphase * g)
    return int(per_bank.reshape(steps * nphase, g).max(axis=1).sum())  # the busiest bank, each phase


@functools.lru_cache(maxsize=4096)
def copy_wavefronts(size: int, pitch: int, by: int, threads: int, itemsize: int) -> int:
    """Wavefronts of one block-wide copy of a value (load or store): round `j` of the copy has
    thread `t` move word `t + threads * j` of the block's values (none where the last round is
    short)."""
    count = by * size
    if not pitch:
        return math.ceil(count * itemsize / PHASE_BYTES)  # contiguous, 16-byte or 4-byte accesses
    per_thread = -(-count // threads)
    i = np.arange(threads)[:, None] + threads * np.arange(per_thread)[None, :]
    words = np.where(i < count, pitched(i, size, pitch), -1)
    return wavefronts(words, np.arange(threads), itemsize)


@functools.lru_cache(maxsize=16384)
def call_access(ap: AccessPattern, impl_bx: int, kernel_bx: int, by: int, remap: bool,
                size: int, pitch: int, itemsize: int) -> tuple[int, bool]:
    """(wavefronts, inside): a call's access through `ap` to a value of `size` words stored
    with `pitch`, and whether every thread stays inside its own element. (A thread that runs
    several elements runs them one after another, each as the thread of that row would: the
    phases are those of the block with one thread per element.)"""
    tx, ty, tid = call_threads(impl_bx, kernel_bx, by, remap)
    w = words_array(ap, tx, ty, impl_bx, by)
    inside = bool(np.all((w >= ty[:, None] * size) & (w < (ty[:, None] + 1) * size)))
    return wavefronts(w + element_shift(ty[:, None], size, pitch), tid, itemsize), inside


@functools.lru_cache(maxsize=4096)
def thread_load_lines(ap: AccessPattern, impl_bx: int, kernel_bx: int, by: int, remap: bool, itemsize: int) -> int:
    """L1 wavefronts of a block's threads each loading from global memory the words of its
    element that a call reads through `ap`, a word a load: for each warp and load, the distinct
    128-byte lines its lanes touch (the block's rows taken to start on a line)."""
    tx, ty, tid = call_threads(impl_bx, kernel_bx, by, remap)
    words = words_array(ap, tx, ty, impl_bx, by)
    if words.size == 0:
        return 0
    lines = words.astype(np.int64) * itemsize // PHASE_BYTES
    loads = words.shape[1]
    keys = ((tid[:, None] // 32) * loads + np.arange(loads)[None, :]) * (int(lines.max()) + 1) + lines
    return len(np.unique(keys))


def all_touches(model: KernelModel) -> dict[int, list]:
    """(ap, bx, remap, runs) for every call and copy access of each value, by value, `runs`
    the times the op runs (its loops' trip counts). Worked out in one walk of the ops: the
    allocation and the cost ask it of every value of thousands of candidate kernels."""
    out: dict[int, list] = {}
    patterns = Patterns(model)
    for op, runs in zip(model.ops, op_weights(model.ops)):
        if op.kind == OpKind.CALL:
            for k, a in enumerate(op.args):
                out.setdefault(a, []).append((op.impl.operand_aps[k], op.impl.bx, op.remap, runs))
            out.setdefault(op.result, []).append((op.impl.result_ap, op.impl.bx, op.remap, runs))
        elif op.kind == OpKind.COPY:
            pattern = (*copy_pattern(model, op, patterns), runs)
            out.setdefault(op.args[0], []).append(pattern)
            if op.result != op.args[0]:
                out.setdefault(op.result, []).append(pattern)
    return out


def value_wavefronts(model: KernelModel, vid: int, pitch: int, touches: list | None = None) -> tuple[int, bool]:
    """Wavefronts per block of every access to a shared value if stored with `pitch`, and
    whether that pitch is possible (every call access stays inside its element). `touches`:
    the value's entry of `all_touches`, when the caller asks of several values or pitches."""
    v = model.values[vid]
    total, ok = 0, True
    for ap, bx, remap, runs in (touches if touches is not None else all_touches(model).get(vid, ())):
        wf, inside = call_access(ap, bx, model.bx, model.by, remap, v.size, pitch, model.itemsize)
        total += wf * runs
        ok &= inside
    copies = int(v.is_input) + int(v.stored)
    total += copies * copy_wavefronts(v.size, pitch, model.by, model.threads, model.itemsize)
    return total, ok


def best_pitch(model: KernelModel, vid: int, touches: list | None = None) -> int:
    """The pitch (0: none) with the fewest wavefronts; padding only when it strictly helps.
    `touches`: the value's entry of `all_touches`."""
    v: MValue = model.values[vid]
    touches = touches if touches is not None else all_touches(model).get(vid, [])
    best, best_cost = 0, value_wavefronts(model, vid, 0, touches)[0]
    for pitch in range(v.size + 1, v.size + MAX_EXTRA_WORDS + 1):
        cost, ok = value_wavefronts(model, vid, pitch, touches)
        if ok and cost < best_cost:
            best, best_cost = pitch, cost
    return best


def kernel_wavefronts(model: KernelModel) -> int:
    """Shared-memory wavefronts of one block of the kernel, every value at its own pitch."""
    touches = all_touches(model)
    return sum(value_wavefronts(model, vid, v.pitch, touches.get(vid, []))[0]
               for vid, v in model.values.items() if v.shared)
