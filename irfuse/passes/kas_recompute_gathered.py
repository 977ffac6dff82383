"""kas-recompute-gathered: nodal statements whose values only gathers read, recomputed row by
row where they are gathered."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import ProgramOp, program_of
from irfuse.library.catalogue import default_library
from irfuse.transforms.recompute_gathered import recompute_where_gathered


@dataclass(frozen=True)
class KasRecomputeGathered(ModulePass):
    """Replaces each top-level gather of a nodal statement's value (a statement not returned
    and read only by gathers and such statements) by the statement applied to each gathered
    row of its operands (`irfuse.transforms.recompute_gathered`); the program is unchanged
    where there is none. `irfuse.compile` plans a program both ways and keeps the cheaper."""

    name = "kas-recompute-gathered"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        programs = [p for p in op.ops if isinstance(p, ProgramOp)]
        if len(programs) != 1:
            raise UsageError(f"{self.name}: the module holds {len(programs)} kas.program ops; the pass rewrites one")
        again = recompute_where_gathered(op, default_library())
        if again is not None:
            old, new = program_of(op), program_of(again)
            new.detach()
            op.body.block.insert_op_before(new, old)
            old.detach()
            old.erase()
