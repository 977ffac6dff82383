"""kas-split-phases: the program replaced by one of its phases at reductions over the batch."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.passes.program_parts import replace_by_part
from irfuse.transforms.batch_phases import split_at_reductions


@dataclass(frozen=True)
class KasSplitPhases(ModulePass):
    """Replaces the program by its phase `phase` (`irfuse.transforms.batch_phases`): what a
    run over one chunk of the batch computes once the reductions of lower levels are known."""

    name = "kas-split-phases"
    phase: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        replace_by_part(op, split_at_reductions(op).phases, self.phase, self.name, "phase", ("phase", "phases"))
