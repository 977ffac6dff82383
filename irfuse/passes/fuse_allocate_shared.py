"""fuse-allocate-shared: Assigns shared offsets, letting values whose lifetimes do not overlap share addresses (16-byte aligned)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.analysis import schedule
from irfuse.passes.kernel_pass import rewrite_kernels


@dataclass(frozen=True)
class FuseAllocateShared(ModulePass):
    """Assigns shared offsets, letting values whose lifetimes do not overlap share addresses (16-byte aligned)."""

    name = "fuse-allocate-shared"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_kernels(op, lambda m: schedule.allocate_shared(m))
