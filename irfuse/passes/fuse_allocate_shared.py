"""fuse-allocate-shared: Assigns shared offsets; values with disjoint lifetimes share addresses, and values whose accesses conflict on banks are padded."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.diagnostics import CompileError, located
from irfuse.dialects import fuse
from irfuse.kernel.model import KernelModel
from irfuse.passes.kernel_pass import rewrite_kernels
from irfuse.transforms.allocation import allocate_shared


@dataclass(frozen=True)
class FuseAllocateShared(ModulePass):
    """Assigns shared offsets (16-byte aligned); values whose lifetimes do not overlap share
    addresses. With `pad-banks`, a value whose accesses conflict on shared-memory banks gets
    the element pitch (`shared[OFF, pitch P]`) with the fewest wavefronts, see
    `irfuse.analysis.bank_conflicts`; banks are counted in words of the module's element
    type (`kas.element_type`)."""

    name = "fuse-allocate-shared"
    pad_banks: bool = True
    OPTION_DOCS: ClassVar[dict[str, str]] = {
        "pad_banks": "pad values whose accesses conflict on banks (true, false)",
    }

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_kernels(op, lambda m: allocate_shared(m, pad=self.pad_banks), _placed)


def _placed(kernel: fuse.KernelOp, model: KernelModel) -> None:
    """The kernel's places are final: a block's capacity applies to them (see `unplaced`)."""
    if kernel.unplaced is None:
        return
    del kernel.properties["unplaced"]
    if model.shared_bytes() > fuse.MAX_SHARED_BYTES_PER_BLOCK:
        raise CompileError([located(f"fuse-allocate-shared: @{kernel.sym_name.data} needs {model.shared_bytes()} "
                                    f"bytes of shared memory for its {kernel.by.data} elements a block once its "
                                    f"values are overlapped; a block has at most {fuse.MAX_SHARED_BYTES_PER_BLOCK}: "
                                    "give it fewer elements a block", kernel.location)])
