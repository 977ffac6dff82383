"""kas-dce: remove statements whose values never reach a program output."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, Region
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.analysis.liveness import live_values
from irfuse.dialects.kas import LoopOp, ProgramOp, YieldOp


def _shrink_loop(loop: LoopOp, keep: list[int]) -> None:
    """Rebuilds `loop` with only the results in `keep` (iter_args among them stay carried)."""
    old_block = loop.body.block
    n_iter = len(loop.iter_args)
    kept_iter = [k for k in keep if k < n_iter]
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
    plans: list[tuple[LoopOp, list[int]]] = []
    for loop in loops:
        n_iter = len(loop.iter_args)
        keep = [k for k in range(len(loop.res))
                if loop.res[k] in live or (k < n_iter and loop.body.block.args[k] in live)]
        # Carried values come first in a loop's results; keep that order valid.
        keep = sorted(set(keep) | {k for k in keep if k < n_iter})
        term = loop.body.block.last_op
        assert isinstance(term, YieldOp)
        if keep != list(range(len(loop.res))):
            Rewriter.replace_op(term, YieldOp([term.values[k] for k in keep]))
        plans.append((loop, keep))
    # One walk from the last op back, innermost first: every user of a value is handled
    # before the op that defines it, loops included (a dead loop may carry a value computed
    # before it, which must outlive the loop's own removal).
    keep_of = {id(loop): keep for loop, keep in plans}
    for op in reversed(list(program.body.walk())):
        if isinstance(op, LoopOp):
            keep = keep_of[id(op)]
            if not keep:
                assert not any(r.uses for r in op.res)
                Rewriter.erase_op(op)
            elif keep != list(range(len(op.res))):
                _shrink_loop(op, keep)
        elif op.results and not any(r in live for r in op.results):
            Rewriter.erase_op(op)


@dataclass(frozen=True)
class KasDeadCodeElimination(ModulePass):
    """Removes calls and loop results that no program output depends on."""

    name = "kas-dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            eliminate_dead_code(program)
