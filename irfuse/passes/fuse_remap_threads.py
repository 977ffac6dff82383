"""fuse-remap-threads: Runs calls that need fewer threads per element than the kernel on the block's first threads, renumbered."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.analysis import schedule
from irfuse.passes.kernel_pass import rewrite_kernels


@dataclass(frozen=True)
class FuseRemapThreads(ModulePass):
    """Runs calls that need fewer threads per element than the kernel on the block's first threads, renumbered."""

    name = "fuse-remap-threads"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_kernels(op, lambda m: schedule.remap_threads(m))
