"""fuse-promote-registers: Places values in registers when every call touching them runs with the same threads and compatible access patterns."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.diagnostics import UsageError
from irfuse.passes.kernel_pass import rewrite_kernels
from irfuse.transforms.promotion import promote_registers


@dataclass(frozen=True)
class FusePromoteRegisters(ModulePass):
    """Places values in registers when every call touching them runs with the same threads and compatible access patterns."""

    name = "fuse-promote-registers"
    outputs: bool = False
    inputs: str | bool = "auto"
    OPTION_DOCS: ClassVar[dict[str, str]] = {
        "outputs": "also values stored to global memory (stores then write from registers); always in "
                   "structure-of-arrays kernels",
        "inputs": "loaded values (each thread reads its own words from global memory instead of the block "
                  "copying them into shared memory): auto: where that costs the L1 fewer wavefronts than the "
                  "copy and its readers' shared reads; true: wherever the readers agree; false: never; always in "
                  "structure-of-arrays kernels",
    }

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        inputs = {"auto": "auto", "true": True, "false": False, True: True, False: False}.get(self.inputs)
        if inputs is None:
            raise UsageError(f"fuse-promote-registers: inputs must be auto, true or false, got '{self.inputs}'")
        rewrite_kernels(op, lambda m: promote_registers(m, self.outputs, inputs))
