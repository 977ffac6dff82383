"""kas-vjp: each program replaced by its reverse derivative (`transforms.reverse_mode`)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass
from xdsl.rewriter import Rewriter

from irfuse.dialects.kas import ProgramOp
from irfuse.library.catalogue import default_library
from irfuse.planner.loop_forms import LOOP_JUDGE
from irfuse.transforms.reverse_mode import reverse_derivative


@dataclass(frozen=True)
class KasVjp(ModulePass):
    """`<name>_vjp`: the outputs and the cotangents of the inputs `wrt` for cotangents of the
    outputs given as inputs; with `of` (a uniform scalar output), `<name>_grad`: the outputs
    and the gradient of `of` by the inputs `wrt`. Names: `prefix` + the value's name
    (`bar_`, or `grad_` with `of`, by default). `loops`: `auto`, `unroll` or `tape` (how
    loops are differentiated: unrolled, or run with a history of their carried values split
    into checkpointed segments as the planner's price says; `auto`: unrolled where the
    planner's kernels of the unrolled derivative keep their values in registers, else taped:
    `planner.loop_forms`)."""

    name = "kas-vjp"
    wrt: tuple[str, ...] = ()
    of: str = ""
    prefix: str = ""
    loops: str = "auto"
    who: str = "kas-vjp"  # what refusals name: this pass, or a `derivative` line

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            derived = reverse_derivative(program, self.wrt, default_library(), self.of or None, self.prefix or None,
                                         who=self.who, loops=self.loops, judge=LOOP_JUDGE)
            Rewriter.replace_op(program, derived, new_results=[])
        op.verify()
