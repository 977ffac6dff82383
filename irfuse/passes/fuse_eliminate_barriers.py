"""fuse-eliminate-barriers: Keeps a barrier only before an op that would otherwise race with another thread on a shared word."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.analysis import schedule
from irfuse.passes.kernel_pass import rewrite_kernels


@dataclass(frozen=True)
class FuseEliminateBarriers(ModulePass):
    """Keeps a barrier only before an op that would otherwise race with another thread on a shared word."""

    name = "fuse-eliminate-barriers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        from xdsl.dialects.builtin import IntAttr

        from irfuse.dialects import fuse

        for kernel in [k for k in op.ops if isinstance(k, fuse.KernelOp)]:
            before = sum(1 for o in kernel.body.block.ops if isinstance(o, fuse.BarrierOp))
            kernel.attributes["barriers_before"] = IntAttr(before)  # for reports: what elimination removed
        rewrite_kernels(op, lambda m: schedule.place_barriers(m))
