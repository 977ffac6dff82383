"""kas-dce: remove statements whose values never reach a program output."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.dialects.kas import ProgramOp
from irfuse.transforms.dead_code import eliminate_dead_code


@dataclass(frozen=True)
class KasDeadCodeElimination(ModulePass):
    """Removes calls and loop results that no program output depends on."""

    name = "kas-dce"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            eliminate_dead_code(program)
