"""kas-split-phases: the program replaced by one of its phases at reductions over the batch."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import program_of
from irfuse.transforms.batch_phases import split_at_reductions


@dataclass(frozen=True)
class KasSplitPhases(ModulePass):
    """Replaces the program by its phase `phase` (`irfuse.transforms.batch_phases`): what a
    run over one chunk of the batch computes once the reductions of lower levels are known."""

    name = "kas-split-phases"
    phase: int = 0

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        plan = split_at_reductions(op)
        program = program_of(op)
        if not 0 <= self.phase < len(plan.phases):
            raise UsageError(f"kas-split-phases: phase={self.phase}, but program @{program.sym_name.data} has "
                             f"{len(plan.phases)} phase{'s' if len(plan.phases) > 1 else ''} "
                             f"(0 to {len(plan.phases) - 1})")
        Rewriter.replace_op(program, program_of(plan.phases[self.phase].module).clone())
