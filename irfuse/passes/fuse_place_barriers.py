"""fuse-place-barriers: drops every barrier of a kernel and places one exactly before each op
that would otherwise race with another thread on a shared word (a kernel without barriers
gets the ones it needs)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import IntAttr, ModuleOp
from xdsl.passes import ModulePass

from irfuse.dialects import fuse
from irfuse.passes.kernel_pass import kernels_of, rewrite_kernels
from irfuse.transforms.barriers import place_barriers


@dataclass(frozen=True)
class FusePlaceBarriers(ModulePass):
    """Places a barrier exactly before each op that would otherwise race with another thread
    on a shared word, whatever barriers the kernel had."""

    name = "fuse-place-barriers"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for kernel in kernels_of(op):
            before = sum(1 for o in kernel.body.block.ops if isinstance(o, fuse.BarrierOp))
            kernel.barriers_before = IntAttr(before)  # for reports: what placement removed
        rewrite_kernels(op, place_barriers)
