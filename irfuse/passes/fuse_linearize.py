"""fuse-linearize: Orders each kernel's calls to minimize peak shared memory (exact up to 12
calls, greedy above). The barriers of the old order do not fit the new one, so it leaves the
conservative barrier after every op; `fuse-place-barriers` then keeps only those needed."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.passes.kernel_pass import rewrite_kernels
from irfuse.transforms.linearization import linearize


@dataclass(frozen=True)
class FuseLinearize(ModulePass):
    """Orders each kernel's calls to minimize peak shared memory, with a barrier after every op."""

    name = "fuse-linearize"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_kernels(op, linearize)
