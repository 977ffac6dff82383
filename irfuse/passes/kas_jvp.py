"""kas-jvp: each program replaced by its forward derivative (`transforms.forward_mode`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.dialects.kas import ProgramOp
from irfuse.library.catalogue import default_library
from irfuse.transforms.forward_mode import forward_derivative


@dataclass(frozen=True)
class KasJvp(ModulePass):
    """`<name>_jvp`: the outputs and their tangents along the inputs `wrt` (tangent inputs and
    outputs named `prefix` + the value's name)."""

    name = "kas-jvp"
    wrt: tuple[str, ...] = ()
    prefix: str = "d"
    who: str = "kas-jvp"  # what refusals name: this pass, or a `derivative` line

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            derived = forward_derivative(program, self.wrt, default_library(), self.prefix, who=self.who)
            Rewriter.replace_op(program, derived, new_results=[])
        op.verify()
