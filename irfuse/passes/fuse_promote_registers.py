"""fuse-promote-registers: Places values in registers when every call touching them runs with the same threads and compatible access patterns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.passes.kernel_pass import rewrite_kernels
from irfuse.transforms.promotion import promote_registers


@dataclass(frozen=True)
class FusePromoteRegisters(ModulePass):
    """Places values in registers when every call touching them runs with the same threads and compatible access patterns."""

    name = "fuse-promote-registers"
    outputs: bool = False
    inputs: bool = False
    OPTION_DOCS: ClassVar[dict[str, str]] = {
        "outputs": "also values stored to global memory (stores then write from registers); always in "
                   "structure-of-arrays kernels",
        "inputs": "also loaded values (each thread reads its own words from global memory); always in "
                  "structure-of-arrays kernels",
    }

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        rewrite_kernels(op, lambda m: promote_registers(m, self.outputs, self.inputs))
