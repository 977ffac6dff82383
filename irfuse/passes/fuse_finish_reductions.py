"""fuse-finish-reductions: lets each kernel that stores a reduction's per-block partials also
combine them (`fuse.store ... reduce K finish`): the last block to store its partial into a
group of `fuse.COMBINE_GROUP` combines the group, and so on up, the last of all writing the
reduced value. The `fuse.combine` after the launch then launches nothing when the batch runs
at once (the run saves a kernel launch and the combine kernel's own ramp); a batch run in
chunks still stores the partials of each chunk and combines them with the combine kernel, in
the same order, so both give the same bits.

Where no store reduces, the pass changes nothing. It needs lowered kernels (after
`fuse-partition` or `fuse-each`) and fails on a program that still has `kas.reduce` ops."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp, UnitAttr
from xdsl.passes import ModulePass

from irfuse.diagnostics import CompileError, located
from irfuse.dialects import fuse, kas


@dataclass(frozen=True)
class FuseFinishReductions(ModulePass):
    """Marks every reducing `fuse.store` to finish its reduction in its kernel."""

    name = "fuse-finish-reductions"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        unlowered = [o for o in op.walk() if isinstance(o, kas.ReduceOp)]
        if unlowered:
            raise CompileError([located(f"fuse-finish-reductions: {o.name} is not lowered to kernels yet (run "
                                        "fuse-partition or fuse-each first)", o.location) for o in unlowered])
        for store in op.walk():
            if isinstance(store, fuse.StoreOp) and store.reduce_kind is not None and not store.finishes:
                store.finish = UnitAttr()
        op.verify()
