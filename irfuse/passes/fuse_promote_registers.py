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
    outputs: str | bool = "auto"
    inputs: str | bool = "auto"
    OPTION_DOCS: ClassVar[dict[str, str]] = {
        "outputs": "stored values (each thread writes its own words to global memory instead of the block "
                   "copying them out of shared memory): auto: where that costs the L1 fewer wavefronts than the "
                   "shared writes, the copy and the readers' shared reads; true: wherever the readers agree; false: "
                   "never; always in structure-of-arrays kernels",
        "inputs": "loaded values (each thread reads its own words from global memory instead of the block "
                  "copying them into shared memory): auto: where that costs the L1 no more wavefronts than the "
                  "copy and its readers' shared reads; true: wherever the readers agree; false: never; always in "
                  "structure-of-arrays kernels",
    }

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        words = {"auto": "auto", "true": True, "false": False, True: True, False: False}
        inputs, outputs = words.get(self.inputs), words.get(self.outputs)
        for name, given, word in (("inputs", self.inputs, inputs), ("outputs", self.outputs, outputs)):
            if word is None:
                raise UsageError(f"fuse-promote-registers: {name} must be auto, true or false, got '{given}'")
        rewrite_kernels(op, lambda m: promote_registers(m, outputs, inputs))
