"""Per-element values a later pass over the batch reads: stored or computed again.

A program that reduces over the batch and uses the result per element runs in passes (a
statement's pass: the most reductions on a path from the inputs to its operands). A
per-element value made in one pass and read in a later one (`crossing_values`) is either
written by the pass that makes it and read back by the later one (stored: the program as
written, once lowered), or computed again in the later pass from the inputs and batch-wide
values it comes from (`recompute`: its per-element statements cloned before their first
reader there, marked `recomputed = P` with the pass P they run in, which the search keeps them
in: `planner.dag`). Which costs less depends on the bytes and the arithmetic
of both (writing and reading the value against reading its inputs again and redoing its
calls): `fuse-partition` plans both and keeps the cheaper. A value made by a loop, a gather
or anything but calls is always stored.
"""

from __future__ import annotations

from xdsl.dialects.builtin import IntAttr
from xdsl.ir import Block, Operation, SSAValue
from xdsl.rewriter import InsertPoint, Rewriter

from irfuse.analysis.batch_passes import used_values
from irfuse.dialects import kas
from irfuse.transforms.dead_code import eliminate_dead_code

RECOMPUTED = "recomputed"  # a statement's copy computed again: the later pass it runs in (an integer)


def statement_passes(program: kas.ProgramOp) -> tuple[dict[Operation, int], dict[SSAValue, int]]:
    """Each top-level statement's pass (the most reductions on a path from the inputs to what it
    reads) and each top-level value's level (its statement's pass, one more for a reduction's
    result)."""
    levels: dict[SSAValue, int] = {a: 0 for a in program.body.block.args}
    passes: dict[Operation, int] = {}
    for op in program.body.block.ops:
        p = max((levels.get(v, 0) for v in used_values(op)), default=0)
        passes[op] = p
        for r in op.results:
            levels[r] = p + (1 if isinstance(op, kas.ReduceOp) else 0)
    return passes, levels


def _cone(value: SSAValue) -> list[kas.CallOp] | None:
    """The per-element calls `value` is computed from (itself included), in program order, down
    to the program's inputs and batch-wide values; None where a per-element value on the way is
    not a call's (a loop's, a gather's): such a value cannot be computed again."""
    found: set[Operation] = set()
    stack = [value]
    while stack:
        v = stack.pop()
        owner = v.owner
        if isinstance(owner, Block) or kas.is_uniform(v):
            continue
        if not isinstance(owner, kas.CallOp):
            return None
        if owner not in found:
            found.add(owner)
            stack.extend(owner.args)
    block = value.owner.parent_block()  # type: ignore[union-attr]
    return [op for op in block.ops if op in found]  # type: ignore[misc]


@kas.remembers_uniformity  # (an analysis: each value's uniformity asked once, not once a statement)
def crossing_values(program: kas.ProgramOp) -> list[Operation]:
    """The top-level calls whose per-element result a statement of a later pass reads, where the
    result can be computed again (`_cone`), in program order."""
    passes, levels = statement_passes(program)
    found = []
    for op in program.body.block.ops:
        if not isinstance(op, kas.CallOp) or kas.is_uniform(op.res):
            continue
        later = any(_reads_later(use, program, passes, levels[op.res]) for use in op.res.uses)
        if later and _cone(op.res) is not None:
            found.append(op)
    return found


def _reads_later(use, program: kas.ProgramOp, passes: dict[Operation, int], level: int) -> bool:
    """Whether `use` is a statement of a pass after `level` reading the value (the return is not:
    an output is written by the pass that makes it)."""
    top = _top(use.operation, program)
    return not isinstance(top, kas.ReturnOp) and passes[top] > level


def _top(op: Operation, program: kas.ProgramOp) -> Operation:
    """The top-level statement `op` is (or is nested in)."""
    while op.parent_op() is not program:
        op = op.parent_op()  # type: ignore[assignment]
    return op


def value_name(op: Operation) -> str:
    """A crossing value's name, as the program calls it."""
    return kas.variable_of_hint(op.results[0].name_hint or "?")


def recompute(program: kas.ProgramOp, values: list[Operation]) -> None:
    """Each of `values` (top-level calls, `crossing_values`) computed again for the statements of
    later passes that read it: its per-element calls cloned (marked `recomputed`) before the first
    such statement of each later pass, the later readers reading the copy; what is then read by
    nothing is removed."""
    passes, levels = statement_passes(program)
    block = program.body.block
    readers: dict[tuple[Operation, int], list] = {}  # (value's call, later pass) -> the uses there
    for op in values:
        assert _cone(op.results[0]) is not None, "recompute: a value that cannot be computed again"
        for use in list(op.results[0].uses):
            if _reads_later(use, program, passes, levels[op.results[0]]):
                readers.setdefault((op, passes[_top(use.operation, program)]), []).append(use)
    # Each later pass's copies go before its first statement that reads any of them.
    first: dict[int, Operation] = {}
    for (_, p), uses in readers.items():
        for use in uses:
            top = _top(use.operation, program)
            if p not in first or block.get_operation_index(top) < block.get_operation_index(first[p]):
                first[p] = top
    copies: dict[int, dict[SSAValue, SSAValue]] = {}  # a later pass -> original value -> its copy there
    for (op, p), uses in readers.items():
        mapping = copies.setdefault(p, {})
        for call in _cone(op.results[0]) or []:
            if call.res not in mapping:
                clone = call.clone(value_mapper=dict(mapping))
                clone.attributes[RECOMPUTED] = IntAttr(p)
                Rewriter.insert_op(clone, InsertPoint.before(first[p]))
                mapping[call.res] = clone.res
        for use in uses:
            use.operation.operands[use.index] = mapping[op.results[0]]
    eliminate_dead_code(program)
