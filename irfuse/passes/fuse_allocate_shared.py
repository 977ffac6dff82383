"""fuse-allocate-shared: Assigns shared offsets; values with disjoint lifetimes share addresses, and values whose accesses conflict on banks are padded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.analysis import schedule
from irfuse.diagnostics import CompileError
from irfuse.passes.kernel_pass import rewrite_kernels


@dataclass(frozen=True)
class FuseAllocateShared(ModulePass):
    """Assigns shared offsets (16-byte aligned); values whose lifetimes do not overlap share
    addresses. With `pad-banks`, a value whose accesses conflict on shared-memory banks gets
    the element pitch (`shared[OFF, pitch P]`) with the fewest wavefronts, see
    `irfuse.analysis.bank_conflicts`; `dtype` sets the word size the banks are counted in."""

    name = "fuse-allocate-shared"
    pad_banks: bool = True
    dtype: str = "f32"
    OPTION_DOCS: ClassVar[dict[str, str]] = {
        "pad_banks": "pad values whose accesses conflict on banks (true, false)",
        "dtype": "element type the bank conflicts are counted for (f32, f64)",
    }

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        if self.dtype not in ("f32", "f64"):
            raise CompileError("fuse-allocate-shared: dtype must be f32 or f64")
        itemsize = 8 if self.dtype == "f64" else 4
        rewrite_kernels(op, lambda m: schedule.allocate_shared(m, pad=self.pad_banks), itemsize)
