"""kas-split-nodes: the program replaced by one of its passes over nodes and elements."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import program_of
from irfuse.transforms.node_phases import split_at_nodal_statements


@dataclass(frozen=True)
class KasSplitNodes(ModulePass):
    """Replaces a program over a mesh by its pass `pass` (`irfuse.transforms.node_phases`):
    the nodal statements before the elements, the elements, or those after (a program with no
    nodal statement has one pass, the elements)."""

    name = "kas-split-nodes"
    which: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plan = split_at_nodal_statements(op)
        program = program_of(op)
        if not 0 <= self.which < len(plan.passes):
            raise UsageError(f"kas-split-nodes: which={self.which}, but program @{program.sym_name.data} has "
                             f"{len(plan.passes)} pass{'es' if len(plan.passes) > 1 else ''} "
                             f"(0 to {len(plan.passes) - 1})")
        Rewriter.replace_op(program, program_of(plan.passes[self.which].module).clone())
