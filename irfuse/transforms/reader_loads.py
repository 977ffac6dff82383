"""Loads by their readers: in a kernel marked `loads_by_readers` (`fuse.kernel`), the loaded
values that several threads of an element read (a high-order element's stored geometric
factors, a line of them a thread) leave shared memory: each thread loads from global memory
the words its reader reads, right before that reader, into registers.

A block's copy of a loaded value into shared memory is started at the kernel's start and its
words are held until their last reader: BP3's six factors at order 7 in float64 took 96-103 KB
of a block's 146 KB, one block an SM where its registers (128 a thread, no spill) allowed two.
Loaded by their readers, the factors hold a reader's registers only while it runs. Where the
registers and not the shared memory bound the blocks, those registers cost blocks: on an H200
the factors loaded so made BP3 at order 7 1.69x faster and at order 5 (two blocks an SM either
way) 1.4-1.5x slower (benchmarks/NOTES.md, High-order elements, 2026-12-04 (later)). The
planner's count of registers does not tell the two apart (it puts BP3's kernels at 114-140
registers where ptxas holds them to 128 without spilling), so the driver marks a kernel after
ptxas's figures show its shared memory bounding its blocks (`driver.reader_loads`).

A value is moved only where every reader runs several threads an element with the same threads
and reads the same words a thread (one pattern held in registers), none of more words a thread
than a thread's registers, and where each thread loading its words costs the L1 no more
wavefronts than the block's copy with the readers' shared reads (`_thread_loads_cheaper`)."""

from __future__ import annotations

from irfuse.analysis.access_patterns import compatible_fast
from irfuse.analysis.bank_conflicts import call_access, copy_wavefronts, thread_load_lines
from irfuse.kernel.model import KernelModel, MOp, OpKind
from irfuse.kernel.policies import REGISTER_WORDS
from irfuse.transforms.barriers import with_barrier_after_every_op
from irfuse.transforms.promotion import LINE_BYTES, call_readers


def _thread_loads_cheaper(model: KernelModel, v, uses: list[tuple[MOp, int]]) -> bool:
    """Whether each thread loading the words its first reader reads (a word a load, as the
    emitter loads them) costs the L1 no more wavefronts than the block's way: the copy reading
    the block's rows' lines, writing them into shared memory (`copy_wavefronts`), and each reader
    reading its words there (`call_access`). BK3's factors at order 3 in float64 (125 words an
    element, 25 threads each reading a line of 5): 15 lines a warp loaded directly against the
    copy's 64 a block and 40 a block for each reader (benchmarks/NOTES.md, High-order elements,
    2026-12-03)."""
    ref, k0 = uses[0]
    direct = thread_load_lines(ref.impl.operand_aps[k0], ref.impl.bx, model.bx, model.by, ref.remap,  # type: ignore
                               model.itemsize)
    copied = -(-model.by * v.size * model.itemsize // LINE_BYTES) + copy_wavefronts(
        v.size, 0, model.by, model.threads, model.itemsize) + sum(
        call_access(op.impl.operand_aps[k], op.impl.bx, model.bx, model.by, op.remap, v.size, 0,  # type: ignore
                    model.itemsize)[0] for op, k in uses)
    return direct <= copied


def _movable(model: KernelModel, vid: int, uses: list[tuple[MOp, int]]) -> bool:
    """Whether loaded value `vid` may be loaded by its readers (see the module's docstring)."""
    v = model.values[vid]
    if not (v.is_input and v.shared) or v.uniform or v.gather or v.stored or v.size < 2 or not uses:
        return False
    ref, k0 = uses[0]
    ap, bx = ref.impl.operand_aps[k0], ref.impl.bx  # type: ignore[union-attr]
    return bx > 1 and not ap.noreg and ap.words() <= REGISTER_WORDS and all(
        op.impl.bx == bx and op.remap == ref.remap  # type: ignore[union-attr]
        and compatible_fast(ap, op.impl.operand_aps[k], bx, model.by) for op, k in uses  # type: ignore[union-attr]
    ) and _thread_loads_cheaper(model, v, uses)


def movable_values(model: KernelModel) -> list[int]:
    """The loaded values a mark would move out of shared memory (see the module's docstring)."""
    if model.layout != "aos" or model.once or model.has_loops():
        return []
    readers = call_readers(model)
    return [vid for vid in model.values if _movable(model, vid, readers.get(vid, []))]


def load_by_readers(model: KernelModel, every: bool = False, *, copy: bool = True) -> KernelModel:
    """A kernel marked `loads_by_readers` (with `every`, any kernel) with its `movable_values`
    loaded by their readers, each such load placed right before its value's first reader and
    the barrier after every op left for `fuse-place-barriers`; other kernels as given."""
    out = model.copy() if copy else model
    moved = movable_values(out) if out.loads_by_readers or every else []
    if not moved:
        return out
    for vid in moved:
        v = out.values[vid]
        v.shared, v.offset, v.pitch = False, 0, 0
    loads = {op.value: op for op in out.ops if op.kind == OpKind.LOAD and op.value in moved}
    ops: list[MOp] = []
    for op in out.without_barriers():
        if op.kind == OpKind.LOAD and op.value in loads:
            continue
        ops += [loads.pop(a) for a in dict.fromkeys(op.reads()) if a in loads]
        ops.append(op)
    out.ops = ops
    return with_barrier_after_every_op(out)
