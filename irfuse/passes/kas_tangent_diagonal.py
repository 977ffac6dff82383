"""kas-tangent-diagonal: each program over a mesh replaced by the program of its tangent's
diagonal, gathered and scattered as the program is (`transforms.element_blocks`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.dialects.kas import ProgramOp
from irfuse.library.catalogue import default_library
from irfuse.transforms.element_blocks import element_diagonal_program


@dataclass(frozen=True)
class KasTangentDiagonal(ModulePass):
    """`<name>_diagonal`: the program's gathers, the diagonal of each element's block of d of
    / d wrt (entry (a, i) the block's (a, i, a, i): one forward direction an entry, followed
    to that entry alone) and its scatter through the connectivity `of` is scattered through,
    into the nodal output `diagonal`: the tangent's diagonal where no element names a node
    twice (`irfuse.diagonal` checks the connectivity)."""

    name = "kas-tangent-diagonal"
    of: str = ""
    wrt: str = ""

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        library = default_library()
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            diagonal, _ = element_diagonal_program(program, self.of, self.wrt, library, self.name)
            Rewriter.replace_op(program, diagonal, new_results=[])
        op.verify()
