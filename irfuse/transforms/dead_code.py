"""Removing the statements of a `kas.program` whose values never reach an output (`kas-dce`,
and the phases of a program cut at its reductions)."""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.dialects.builtin import ArrayAttr, StringAttr
from xdsl.ir import Block, Region
from xdsl.rewriter import Rewriter

from irfuse.analysis.liveness import live_values
from irfuse.dialects.kas import LoopOp, ProgramOp, ReturnOp, YieldOp


def _shrink_loop(loop: LoopOp, keep: list[int], carried: int) -> None:
    """Rebuilds `loop` with only the results in `keep`, in that order; the first `carried` of
    them stay carried (their block arguments are read by live ops), the rest become results
    defined by the body alone."""
    old_block = loop.body.block
    kept_iter = keep[:carried]
    new_block = Block(arg_types=[old_block.args[k].type for k in kept_iter])
    for k, new_arg in zip(kept_iter, new_block.args):
        new_arg.name_hint = old_block.args[k].name_hint
        old_block.args[k].replace_all_uses_with(new_arg)
    for op in list(old_block.ops):
        op.detach()
        new_block.add_op(op)
    new_loop = LoopOp(loop.trip_count.data, [loop.iter_args[k] for k in kept_iter],
                      [loop.res[k].type for k in keep], Region(new_block))
    new_loop.location = loop.location
    for k, r in zip(keep, new_loop.res):
        r.name_hint = loop.res[k].name_hint
        loop.res[k].replace_all_uses_with(r)
    Rewriter.replace_op(loop, new_loop, new_results=[None] * len(loop.res))


def eliminate_dead_code(program: ProgramOp) -> None:
    live = live_values(program)
    loops = [op for op in program.body.walk() if isinstance(op, LoopOp)]
    plans: dict[int, tuple[list[int], int]] = {}
    for loop in loops:
        n_iter = len(loop.iter_args)
        args = loop.body.block.args
        # A result stays carried only while some live op reads its block argument; a live
        # result whose argument nobody live reads is the body's last value, carried no more
        # (keeping it carried would keep its initial value, which liveness found dead).
        carried = [k for k in range(n_iter) if args[k] in live]
        plain = [k for k in range(len(loop.res)) if loop.res[k] in live and k not in carried]
        keep = carried + plain  # carried values come first in a loop's results
        term = loop.body.block.last_op
        assert isinstance(term, YieldOp)
        unchanged = keep == list(range(len(loop.res))) and len(carried) == n_iter
        if not unchanged:
            Rewriter.replace_op(term, YieldOp([term.values[k] for k in keep]))
        plans[id(loop)] = (keep, len(carried), unchanged)
    # One walk from the last op back, innermost first: every user of a value is handled
    # before the op that defines it, loops included (a dead loop may carry a value computed
    # before it, which must outlive the loop's own removal).
    for op in reversed(list(program.body.walk())):
        if isinstance(op, LoopOp):
            keep, carried, unchanged = plans[id(op)]
            if not keep:
                assert not any(r.uses for r in op.res)
                Rewriter.erase_op(op)
            elif not unchanged:
                _shrink_loop(op, keep, carried)
        elif op.results and not any(r in live for r in op.results):
            Rewriter.erase_op(op)


def drop_outputs(program: ProgramOp, names: Sequence[str]) -> None:
    """Removes the outputs `names` from `program`'s return, then the statements only they
    needed (a derivative program returning its derivatives alone)."""
    term = program.return_op
    kept = [(name, v) for name, v in zip(program.outputs, term.values) if name not in names]
    new_term = ReturnOp([v for _, v in kept])
    new_term.location = term.location
    Rewriter.replace_op(term, new_term)
    program.output_names = ArrayAttr(StringAttr(name) for name, _ in kept)
    if program.nodal_names is not None:
        nodal = [name for name in program.nodal if name in program.inputs or name in dict(kept)]
        program.nodal_names = ArrayAttr(StringAttr(name) for name in nodal) if nodal else None
    eliminate_dead_code(program)


def keep_only(program: ProgramOp, outputs: Sequence[tuple[str, object]], names: list[str],
              keep: Sequence[str] = ()) -> list[str]:
    """`program` cut to `outputs` ((name, value), in order): its return replaced, then the
    statements and the inputs nothing reads removed, but the inputs named in `keep` (`names`:
    its inputs' names in argument order); the names of the inputs kept."""
    Rewriter.replace_op(program.return_op, ReturnOp([v for _, v in outputs]))  # type: ignore[misc]
    program.output_names = ArrayAttr([StringAttr(out) for out, _ in outputs])
    eliminate_dead_code(program)
    block = program.body.block
    names = list(names)
    for k in reversed(range(len(block.args))):
        if not block.args[k].uses and names[k] not in keep:
            block.erase_arg(block.args[k])
            del names[k]
    program.input_names = ArrayAttr([StringAttr(n) for n in names])
    return names


def set_name_lists(program: ProgramOp, listed: dict[str, list[str]]) -> None:
    """`program`'s properties that list names ("uniform_inputs", "nodal_names") set anew
    (left out where empty)."""
    for prop, values in listed.items():
        program.properties.pop(prop, None)
        if values:
            program.properties[prop] = ArrayAttr([StringAttr(n) for n in values])
