"""Register promotion: values whose producer and consumers run with the same threads and
touch the same words per thread move from shared memory to registers.

In an array-of-structures kernel, loaded and stored values stay in shared memory unless
asked (`inputs`, `outputs`; a value only reduced over the batch is not stored this way):
the block copies them between global and shared memory
contiguously, where a thread reading its own element's words from global memory would
stride by the element's size. In a structure-of-arrays kernel the same per-thread access
is coalesced (word k of consecutive elements is contiguous), so loaded and stored values
are promoted too: no shared staging, no barrier after the loads.

A value made by copies (a loop's carried value, a loaded value copied for a loop) goes to
registers when every call reading it agrees on the threads and words (as for a loaded
value), and every value copied into it that is in registers is held by those same
threads; a loop then keeps it in registers across iterations."""

from __future__ import annotations

from irfuse.analysis.access_patterns import compatible_fast, reads_within
from irfuse.kernel.model import KernelModel, MOp, OpKind, Patterns


def _consumers(model: KernelModel) -> dict[int, list[tuple[MOp, int]]]:
    """Each value's reading calls and operand positions, in the kernel's order."""
    out: dict[int, list[tuple[MOp, int]]] = {}
    for op in model.calls():
        for k, a in enumerate(op.args):
            out.setdefault(a, []).append((op, k))
    return out


def promote_registers(model: KernelModel, outputs: bool = False, inputs: bool = False, *,
                      copy: bool = True) -> KernelModel:
    """Values produced and consumed by calls with the same threads and compatible access
    patterns (none `noreg`) move to registers; with `outputs`, stored values may too; with
    `inputs`, loaded values whose consumers all agree (each thread then reads its own words
    from global memory instead of the block copying them coalesced). Structure-of-arrays
    kernels promote loaded and stored values whatever the options say, and every kernel its
    gathered values (read thread by thread either way)."""
    out = model.copy() if copy else model
    if out.layout == "soa":
        inputs = outputs = True
    producers = {op.result: op for op in out.calls()}
    # A value only reduced (its store is the block's tree, staged from registers as from
    # shared memory) is not written to global memory by threads: it may go to registers.
    written = {op.value for op in out.ops if op.kind == OpKind.STORE and not op.reduce}
    consumers = _consumers(out)
    for vid, v in out.values.items():
        if v.uniform:
            continue  # the block's copy of a uniform input: read where it is
        uses = consumers.get(vid, [])
        # The access every consumer must agree with: the producer's result, or for a loaded
        # value its first consumer's operand.
        # A gathered value is read by each thread from its nodes' rows wherever it is placed
        # (`cuda_emit.emit_gather`): in registers it saves the shared copy and the barrier.
        if v.is_input and (inputs or v.gather) and uses:
            ref, k0 = uses[0]
            ap = ref.impl.operand_aps[k0]  # type: ignore[union-attr]
        elif v.is_input or vid not in producers or (vid in written and not outputs):
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
        # F^T F, read by inv and trace, pushed its kernel past 64 registers).
        fits = compatible_fast
        if ref is producers.get(vid) and set().union(*(cons.impl.operand_aps[k].relative()  # type: ignore[union-attr]
                                                        for cons, k in uses)) < ap.relative():
            fits = reads_within
        ok = not ap.noreg and all(
            cons.impl.bx == bx and cons.remap == ref.remap  # type: ignore[union-attr]
            and fits(ap, cons.impl.operand_aps[k], bx, out.by)  # type: ignore[union-attr]
            for cons, k in uses)
        v.shared = not ok
        if not v.shared:
            v.offset = 0
    _promote_copied(out, outputs, consumers)
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
        model.values[vid].shared = ap.noreg or partial or not all(
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


