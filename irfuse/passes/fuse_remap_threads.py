"""fuse-remap-threads: Runs calls that need fewer threads per element than the kernel on the block's first threads, renumbered."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.passes.kernel_pass import rewrite_kernels
from irfuse.transforms.remap import remap_threads


@dataclass(frozen=True)
class FuseRemapThreads(ModulePass):
    """Runs calls that need fewer threads per element than the kernel on the block's first threads, renumbered."""

    name = "fuse-remap-threads"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_kernels(op, remap_threads)
