"""kas-split-nodes: the program replaced by one of its passes over nodes and elements."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.passes.program_parts import replace_by_part
from irfuse.transforms.node_phases import split_at_nodal_statements


@dataclass(frozen=True)
class KasSplitNodes(ModulePass):
    """Replaces a program over a mesh by its pass `pass` (`irfuse.transforms.node_phases`):
    the nodal statements before the elements, the elements, those after, and so on (a program
    with no nodal statement has one pass, the elements)."""

    name = "kas-split-nodes"
    which: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        replace_by_part(op, split_at_nodal_statements(op).passes, self.which, self.name, "which", ("pass", "passes"))
