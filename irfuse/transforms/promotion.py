"""Register promotion: values whose producer and consumers run with the same threads and
touch the same words per thread move from shared memory to registers.

In an array-of-structures kernel a stored value is staged in shared memory, the block
copying it to global memory contiguously, unless each thread writing its own element's words
(striding by the element's size, in vectors: `kernel.policies.row_vector`) costs a warp's L1 fewer
wavefronts than the staging's writes, the copy and the readers' shared reads
(`outputs="auto"`, `_stores_cheaper`; a value only reduced over the batch is not stored this
way). A loaded value is weighed the same way (`inputs="auto"`): it goes to registers where
its rows are short enough that each thread loading its own costs a warp's L1 no more than the
block's copy and the shared reads after it (`_loads_cheaper`). True or False puts every
agreeing one there or none. In a
structure-of-arrays kernel the same per-thread access
is coalesced (word k of consecutive elements is contiguous), so loaded and stored values
are promoted too: no shared staging, no barrier after the loads.

A value made by copies (a loop's carried value, a loaded value copied for a loop) goes to
registers when every call reading it agrees on the threads and words (as for a loaded
value), and every value copied into it that is in registers is held by those same
threads; a loop then keeps it in registers across iterations.

No value of more words a thread than a thread's registers goes there (`kernel.policies.
REGISTER_WORDS`): it would live in local memory, and its calls' straight-line code of that many
words a thread is more than the C compilers take."""

from __future__ import annotations

from irfuse.analysis.access_patterns import compatible_fast, reads_within
from irfuse.kernel.model import KernelModel, MOp, OpKind, Patterns, covers_value
from irfuse.kernel.policies import REGISTER_WORDS, row_vector


def call_readers(model: KernelModel) -> dict[int, list[tuple[MOp, int]]]:
    """Each value's reading calls and operand positions, in the kernel's order."""
    out: dict[int, list[tuple[MOp, int]]] = {}
    for op in model.calls():
        for k, a in enumerate(op.args):
            out.setdefault(a, []).append((op, k))
    return out


LINE_BYTES = 128  # what one L1 wavefront serves a warp (a cache line; a shared-memory access of 32 words)
WARP = 32


def _rows_of_one_thread(model: KernelModel, v, calls: list[MOp]) -> bool:
    """Whether `_loads_cheaper` and `_stores_cheaper` weigh `v`: rows of an array-of-structures
    batch, not a scalar's, that every call touching them runs one thread an element."""
    return model.layout == "aos" and v.size >= 2 and all(op.impl.bx == 1 for op in calls)  # type: ignore[union-attr]


def _row_wavefronts(model: KernelModel, v) -> tuple[int, int, int]:
    """A warp's L1 wavefronts for its 32 rows of `v`: (each thread reading or writing its row in
    the emitter's vectors, `row_vector`, every vector access of the warp touching every line;
    the lines the rows lie on; the whole rows read or written in shared memory a word at a
    time, one wavefront a warp and word, more for 8-byte words)."""
    row = v.size * model.itemsize
    lines = -(-WARP * row // LINE_BYTES)
    direct = v.size // row_vector(v.size, model.itemsize) * lines
    return direct, lines, v.size * -(-WARP * model.itemsize // LINE_BYTES)


def _loads_cheaper(model: KernelModel, v, uses: list[tuple[MOp, int]]) -> bool:
    """Whether each thread loading its element's words of `v` from global memory costs the
    warp's L1 no more wavefronts than the block's copy does with the shared reads after it.
    A warp's 32 rows of `row` bytes lie on `32 row / 128` lines; a thread loads its row in
    vectors of the widest size dividing it (so every row is aligned), and each such load of
    the warp touches every line: (row / vector) x lines. The copy writes the lines' words into
    shared memory (the lines again) and every reading call reads the element's words there
    (one wavefront a warp and word, more for 8-byte words). Only a value a thread holds whole
    (one thread an element) and reads with every reader alike is weighed, and not a scalar:
    its copy is one coalesced line a warp either way, and in a register it stays live from
    the kernel's start (J2's return measured 8% slower with its `ep` loaded so). So a small row read
    by several calls (StrainEnergy's strain: 24 bytes, two readers: 18 wavefronts against 24)
    is loaded into registers, a wide one (StVenant's 412 bytes) is copied. Measured on an
    H200: StrainEnergy 11% faster with its loads in registers (benchmarks/NOTES.md, Batch-wide
    values, 2026-12-01)."""
    if not _rows_of_one_thread(model, v, [op for op, _ in uses]):
        return False
    direct, lines, words = _row_wavefronts(model, v)
    return direct <= 2 * lines + len(uses) * words


def _stores_cheaper(model: KernelModel, v, producer: MOp, uses: list[tuple[MOp, int]]) -> bool:
    """Whether each thread writing its element's words of a stored value `v` from registers
    costs a warp's L1 fewer wavefronts than the block's way: the producer writing them into
    shared memory (one wavefront a warp and word), the copy reading the lines there and writing
    them out (the lines twice), and every reading call reading them there. A thread writes its
    row in vectors of the widest size dividing it (`row_vector`), each of the warp's
    stores touching every line: (row / vector) x lines. Weighed as `_loads_cheaper` weighs a
    load, and only where it is: one thread an element making and reading the value whole, not a
    scalar; a tie stays staged (the copy writes whole lines). StrainEnergy's 24-byte stress
    (made by mvmul66, read by vdot6): 18 wavefronts against 24, from registers; the 36-byte rows
    of SyncTest and the P1 element: 81 against 27 or more, staged. Words of 4 bytes only: on an
    H200 StrainEnergy's stress from registers took 64.3 against 65.5-66.1 us in float32 and
    124.8-125.0 against 122.3-122.9 us in float64, whose 48-byte rows hold twice the registers
    (benchmarks/NOTES.md, Batch-wide values, 2026-12-01, rows in vectors)."""
    if model.itemsize != 4 or not _rows_of_one_thread(model, v, [producer, *(op for op, _ in uses)]) or any(
            op.kind == OpKind.STORE and op.value == producer.result and op.scatter for op in model.ops):
        return False  # (a scatter's rows are summed by groups where they are staged)
    direct, lines, words = _row_wavefronts(model, v)
    return direct < words + 2 * lines + len(uses) * words  # (a tie stays staged: the copy's stores are whole lines)


def _read_at_once(place: dict[int, int], producer: MOp, uses: list[tuple[MOp, int]]) -> bool:
    """Whether every call reading the producer's result runs right after it, one after
    another, no other call between them (`place`: each call's place among the kernel's calls,
    by `id`). Such a value, read whole by one of them and in part by another, may go to
    registers (`reads_within`): held only while its readers run, it is live across no other
    call's registers. The P1 strain (`eps = sym(H)`, read on its diagonal by `trace` and whole
    by `scale` right after) was staged in shared memory, nine stores and twelve loads an
    element: in registers the P1 residual over 12.6 M Morton tets took 0.484 / 0.487 ms against
    0.495 / 0.494 on an H200, the same bits (benchmarks/NOTES.md, Meshes, 2026-12-03 (late
    night)). A value read again later stays out of registers: held across the calls between,
    Neo-Hookean's F^T F (read by `inv`, then by `trace` seven calls later) made its kernel
    spill."""
    first = place[id(producer)] + 1
    readers = sorted({place[id(op)] for op, _ in uses})
    return bool(readers) and readers == list(range(first, first + len(readers)))


def literal_made(model: KernelModel) -> set[int]:
    """The values made by calls from literals alone (`MValue.literal` inputs, and what calls
    make of them, reading no other operand's entries: `zeros` of any value reads none): the
    same words for every element, known when compiling. In registers the C compiler folds them
    into their readers and they hold none, so each goes there wherever its readers run its
    threads and read words its thread holds, whichever words each reads (a Jacobian's unit
    directions, `put` of a literal into `zeros` of x, read whole by `dev` and on the diagonal
    by `trace`: in shared memory each direction's first steps loaded them, benchmarks/NOTES.md,
    Matrices and solves, 2026-12-02)."""
    made = {vid for vid, v in model.values.items() if v.literal}
    for op in model.ops:
        if op.kind == OpKind.CALL and all(op.args[k] in made for k in op.impl.op.operands_read):  # type: ignore
            made.add(op.result)  # type: ignore[arg-type]
    return made


def promote_registers(model: KernelModel, outputs: bool | str = "auto", inputs: bool | str = "auto", *,
                      copy: bool = True) -> KernelModel:
    """Values produced and consumed by calls with the same threads and compatible access
    patterns (none `noreg`) move to registers; with `outputs` True, stored values may too, with
    "auto" those whose stores cost the L1 fewer wavefronts than their staging (`_stores_cheaper`),
    with False none; with `inputs` True, loaded values whose consumers all agree (each thread then reads its own words
    from global memory instead of the block copying them coalesced), with "auto" those of them
    whose loads cost the L1 no more wavefronts than the copy and its reads (`_loads_cheaper`),
    with False none. Structure-of-arrays
    kernels promote loaded and stored values whatever the options say, and every kernel its
    gathered values (read thread by thread either way)."""
    out = model.copy() if copy else model
    if out.layout == "soa":
        inputs = outputs = True
    for name, given in (("inputs", inputs), ("outputs", outputs)):
        if given not in (True, False, "auto"):
            raise ValueError(f"{name} must be True, False or 'auto', not {given!r}")
    producers = {op.result: op for op in out.calls()}
    # A value only reduced (its store is the block's tree, staged from registers as from
    # shared memory) is not written to global memory by threads: it may go to registers.
    written = {op.value for op in out.ops if op.kind == OpKind.STORE and not op.reduce}
    stored = {op.value for op in out.ops if op.kind == OpKind.STORE}
    consumers = call_readers(out)
    literal = literal_made(out)
    place = {id(op): k for k, op in enumerate(out.calls())}  # (for `_read_at_once`)
    for vid, v in out.values.items():
        if v.uniform:
            continue  # the block's copy of a uniform input: read where it is
        uses = consumers.get(vid, [])
        # The access every consumer must agree with: the producer's result, or for a loaded
        # value its first consumer's operand.
        # A gathered value is read by each thread from its nodes' rows wherever it is placed
        # (`cuda_emit.emit_gather`): in registers it saves the shared copy and the barrier.
        if v.is_input and (inputs is True or v.gather or (inputs == "auto" and _loads_cheaper(out, v, uses))) and uses:
            ref, k0 = uses[0]
            ap = ref.impl.operand_aps[k0]  # type: ignore[union-attr]
        elif v.is_input or vid not in producers or (vid in written and not (
                outputs is True or (outputs == "auto" and _stores_cheaper(out, v, producers[vid], uses)))):
            continue
        else:
            ref = producers[vid]
            ap = ref.impl.result_ap  # type: ignore[union-attr]
        bx = ref.impl.bx  # type: ignore[union-attr]
        # A loaded value holds the words of its first reader's pattern, so every reader must
        # read exactly those. A call's result holds all its words; where its readers together
        # take only some of them (`trace` of F^T F: the diagonal), the others are never
        # computed in registers, so it goes there if each reader takes some of its thread's
        # words (`reads_within`); read whole by one, every reader must read it whole, as before
        # (a value read whole stays live in registers until its last reader: neo_hookean's
        # F^T F, read by inv and trace, pushed its kernel past 64 registers), unless its
        # readers are the calls right after it (`_read_at_once`).
        fits = compatible_fast
        if vid in literal:
            fits = reads_within  # (held whole, folded: see `literal_made`)
        elif ref is producers.get(vid) and (set().union(*(cons.impl.operand_aps[k].relative()  # type: ignore[union-attr]
                                                         for cons, k in uses)) < ap.relative()
                                            or _read_at_once(place, ref, uses)):
            fits = reads_within
        ok = not ap.noreg and ap.words() <= REGISTER_WORDS and all(  # (the words a thread would hold)
            cons.impl.bx == bx and cons.remap == ref.remap  # type: ignore[union-attr]
            and fits(ap, cons.impl.operand_aps[k], bx, out.by)  # type: ignore[union-attr]
            for cons, k in uses)
        # A store, or a reduction's tree, takes every word of the value from where it is: held
        # in registers by a pattern touching only some (a loaded value's first reader taking
        # one word of its row), the others would never be there.
        if ok and vid in stored and not covers_value(out, (ap, bx, ref.remap), vid):
            ok = False
        v.shared = not ok
        if not v.shared:
            v.offset = 0
    _promote_copied(out, outputs is True, consumers)
    return out


def _agrees(model: KernelModel, pattern, other) -> bool:
    (ap, bx, remap), (ap2, bx2, remap2) = pattern, other
    return bx == bx2 and remap == remap2 and compatible_fast(ap2, ap, bx, model.by)


def _promote_copied(model: KernelModel, outputs: bool, consumers: dict[int, list[tuple[MOp, int]]]) -> None:
    """Values made by copies to registers where their readers and register sources agree; a
    value copied from another such value follows it, so this is repeated until stable."""
    copied = {op.result for op in model.ops if op.kind == OpKind.COPY}
    carried = [vid for vid, v in model.values.items() if vid in copied and (outputs or not v.stored)]
    sources = {vid: [op.args[0] for op in model.ops if op.kind == OpKind.COPY and op.result == vid] for vid in carried}
    copied_from = {op.args[0] for op in model.ops if op.kind == OpKind.COPY}
    patterns = Patterns(model)
    for vid in carried:
        ap, bx, remap = patterns(vid)
        # (a value copied elsewhere whose readers here hold some of its words keeps them all:
        # the copy's readers may need the others)
        partial = vid in copied_from and not patterns.covers(vid)
        model.values[vid].shared = ap.noreg or partial or ap.words() > REGISTER_WORDS or not all(
            _agrees(model, (ap, bx, remap), (cons.impl.operand_aps[k], cons.impl.bx, cons.remap))  # type: ignore
            for cons, k in consumers.get(vid, []))
    changed = True
    while changed:
        changed = False
        for vid in carried:
            v = model.values[vid]
            if v.shared:
                continue
            mine = patterns(vid)
            if any(not model.values[s].shared and not _agrees(model, mine, patterns(s))
                   for s in sources[vid]):
                v.shared, changed = True, True
    for vid in carried:
        if not model.values[vid].shared:
            model.values[vid].offset = 0


