"""kas-jacobian: each program replaced by its per-element Jacobian (`transforms.jacobian`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.dialects.kas import ProgramOp
from irfuse.library.catalogue import default_library
from irfuse.transforms.jacobian import jacobian_program


@dataclass(frozen=True)
class KasJacobian(ModulePass):
    """`<name>_jacobian`: the outputs, then the Jacobian of output `of` by each input of `wrt`,
    per element (named `prefix` + of + `_` + `prefix` + the input's name)."""

    name = "kas-jacobian"
    of: str = ""
    wrt: tuple[str, ...] = ()
    prefix: str = "d"
    names: tuple[str, ...] = ()  # the Jacobians' names, where not prefix + of + _ + prefix + input
    who: str = "kas-jacobian"  # what refusals name: this pass, or a `derivative` line

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            derived = jacobian_program(program, self.of, self.wrt, default_library(), self.prefix, who=self.who,
                                       names=self.names)
            Rewriter.replace_op(program, derived, new_results=[])
        op.verify()
