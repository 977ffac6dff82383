"""fuse-linearize: Orders each kernel's calls to minimize peak shared memory (exact up to 12 calls, greedy above)."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.analysis import schedule
from irfuse.passes.kernel_pass import rewrite_kernels


@dataclass(frozen=True)
class FuseLinearize(ModulePass):
    """Orders each kernel's calls to minimize peak shared memory (exact up to 12 calls, greedy above)."""

    name = "fuse-linearize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_kernels(op, lambda m: schedule.linearize(m))
