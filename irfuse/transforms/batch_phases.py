"""A program that reduces over the batch, cut into phases that each see one chunk at a time.

Every element is independent until a reduction: `vmax = max(speed)` needs the whole batch,
and what reads `vmax` needs it whole too. A run that holds the batch in pieces (Dask
chunks) therefore runs the program as phases. Phase 0 is the program up to its first
reductions: on each chunk it gives the outputs that need no reduction and, for each
reduction, the chunk's own reduced value (a partial). The partials of all chunks are
combined by whoever runs the phases (`irfuse.dask`) into the batch's value, which phase 1
takes as a uniform input of its own, and so on: phase p reads the reductions of level at
most p, where a reduction's level is one more than the most nested reduction its operand
depends on.

Each phase is an ordinary `kas.program`: the original inputs (all of them, so that a phase
is called as the program is; those it does not read cost nothing), then the combined
reductions it reads, as uniform inputs named after their variables. What a phase recomputes
from the inputs (a per-element value that both sides of a reduction read) is recomputed,
not kept: a chunk holds only what one phase gives.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ArrayAttr, ModuleOp, StringAttr
from xdsl.ir import SSAValue
from xdsl.rewriter import Rewriter

from irfuse.analysis.liveness import live_values
from irfuse.artifact.records import record
from irfuse.dialects.kas import ProgramOp, ReduceOp, ReturnOp, is_uniform, program_of, variable_of_hint
from irfuse.transforms.dead_code import eliminate_dead_code


@record(frozen=True)
class Reduction:
    """A reduction combined between phases: the name a phase gives its chunk's partial under
    and the next phases read the combined value under, and how partials combine."""

    name: str
    kind: str  # 'sum', 'max' or 'min'


@record(frozen=True)
class Phase:
    module: ModuleOp
    reads: tuple[Reduction, ...]  # combined reductions it takes, as uniform inputs after the program's own
    outputs: tuple[str, ...]  # outputs of the program this phase gives
    partials: tuple[Reduction, ...]  # reductions of its chunk it gives, as outputs named so

    @property
    def per_chunk(self) -> bool:
        """Whether every chunk must run it: it gives per-element outputs or partials (a phase
        that only makes uniform values from uniform ones gives the same on every chunk)."""
        program = program_of(self.module)
        return bool(self.partials) or not all(is_uniform(v) for v in program.return_op.values)


@record(frozen=True)
class PhasePlan:
    phases: tuple[Phase, ...]
    combined_outputs: dict[str, str]  # program output -> the Reduction name whose combined value it is


def _levels(program: ProgramOp) -> dict[SSAValue, int]:
    """Each top-level value's level: the most reductions on a path from the inputs to it."""
    level: dict[SSAValue, int] = {a: 0 for a in program.body.block.args}
    for op in program.body.block.ops:
        if isinstance(op, ReduceOp):
            level[op.res] = level[op.operand] + 1
            continue
        # a loop's body reads values from outside: they bound its results' level too
        used = [v for inner in op.walk() for v in inner.operands]
        here = max((level.get(v, 0) for v in used), default=0)
        for r in op.results:
            level[r] = here
    return level


def _reductions(program: ProgramOp) -> list[ReduceOp]:
    live = live_values(program)
    return [op for op in program.body.block.ops if isinstance(op, ReduceOp) and op.res in live]


def _names(program: ProgramOp, reduces: list[ReduceOp]) -> dict[ReduceOp, str]:
    """A name for each reduction: the output's it is returned as, else its variable's where no
    input or output is so named."""
    returned = {v: out for out, v in reversed(list(zip(program.outputs, program.return_op.values)))}
    taken = {*program.inputs, *program.outputs}
    names: dict[ReduceOp, str] = {}
    for k, op in enumerate(reduces):
        if op.res in returned and returned[op.res] not in program.inputs:
            names[op] = returned[op.res]
            continue
        base = variable_of_hint(op.res.name_hint) if op.res.name_hint else f"reduced{k}"
        name, i = base, 1
        while name in taken:
            name, i = f"{base}_{i}", i + 1
        taken.add(name)
        names[op] = name
    return names


def split_at_reductions(module: ModuleOp) -> PhasePlan:
    """`module`'s program as phases (one phase, the program itself, when it does not reduce)."""
    program = program_of(module)
    reduces = _reductions(program)
    level = _levels(program)
    names = _names(program, reduces)
    by_value = {op.res: op for op in reduces}
    combined = {out: names[by_value[v]] for out, v in zip(program.outputs, program.return_op.values)
                if v in by_value}
    # The phase that gives each other output: its value's level.
    last = max((level[v] for out, v in zip(program.outputs, program.return_op.values) if out not in combined),
               default=0)
    last = max([last, *(level[op.res] - 1 for op in reduces)])
    phases = tuple(_phase(module, p, names) for p in range(last + 1))
    return PhasePlan(phases, combined)


def _phase(module: ModuleOp, p: int, names: dict[ReduceOp, str]) -> Phase:
    """Phase p: the reductions of level <= p read as uniform inputs, the partials of those of
    level p+1 and the outputs of level p given; the rest removed."""
    original = program_of(module)
    order = {op: k for k, op in enumerate(original.body.block.ops)}
    clone = module.clone()
    program = program_of(clone)
    ops = list(program.body.block.ops)
    twin = {op: ops[order[op]] for op in names}  # the clone's reductions, by the original's
    level = _levels(program)
    block = program.body.block
    reads: list[Reduction] = []
    partials: list[Reduction] = []
    for op, name in names.items():
        reduce = twin[op]
        assert isinstance(reduce, ReduceOp)
        r = Reduction(name, reduce.reduce_kind.value)
        if level[reduce.res] <= p:
            arg = block.insert_arg(reduce.res.type, len(block.args))
            arg.name_hint = reduce.res.name_hint
            reduce.res.replace_all_uses_with(arg)
            Rewriter.erase_op(reduce)
            reads.append(r)
        elif level[reduce.res] == p + 1:
            partials.append(r)
    ret = program.return_op
    kept = [(out, v) for out, v in zip(program.outputs, ret.values)
            if not isinstance(v.owner, ReduceOp) and level.get(v, 0) == p]
    partial_values = [twin[op].results[0] for op, name in names.items()
                      if any(r.name == name for r in partials)]
    values = [v for _, v in kept] + partial_values
    Rewriter.replace_op(ret, ReturnOp(values))
    program.input_names = ArrayAttr([*program.input_names.data, *(StringAttr(r.name) for r in reads)])
    program.output_names = ArrayAttr([StringAttr(out) for out, _ in kept] + [StringAttr(r.name) for r in partials])
    if reads:
        program.uniform_inputs = ArrayAttr([StringAttr(u) for u in program.uniform] +
                                           [StringAttr(r.name) for r in reads])
    eliminate_dead_code(program)
    program.return_op.location = original.return_op.location  # diagnostics point at the program's `return`
    clone.verify()
    return Phase(clone, tuple(reads), tuple(out for out, _ in kept), tuple(partials))

