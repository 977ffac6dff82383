"""The compiled artifact: everything needed to run a program elsewhere, with no compiler.

A `CompiledProgram` holds the lowered IR (host program + kernels), the complete CUDA
source for one element type, the kernels' launch shapes and argument order, the cubin
with the ptxas resources when compiled for a GPU, and the `kas` program before lowering
(what the reference evaluates). `save`/`load` write and read a directory; the runtime
depends on this type only, not on the compiler that made it.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field

from xdsl.dialects.builtin import ModuleOp

from irfuse.kernel.bridge import model_from_kernel
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.backend.nvrtc import CubinResult, KernelResources
from irfuse.diagnostics import Diagnostic, UsageError
from irfuse.dialects.context import module_text, parse_module
from irfuse.dialects.element_types import ElementType, element_type
from irfuse.dialects.fuse import KernelOp
from irfuse.dialects.layouts import module_layout
from irfuse.dialects.kas import ProgramOp, program_of
from irfuse.planner.registers import signature


@dataclass
class CompiledProgram:
    module: ModuleOp
    dtype: str
    source: str
    kernels: list[KernelInfo]
    cubin: CubinResult | None = None
    meta: dict = field(default_factory=dict)
    reference_module: ModuleOp | None = None  # the kas program before lowering

    @property
    def reference_program(self) -> ProgramOp:
        if self.reference_module is None:
            raise UsageError("this compiled program carries no reference program")
        return program_of(self.reference_module)

    @property
    def program(self) -> ProgramOp:
        return program_of(self.module)

    @property
    def element(self) -> ElementType:
        return element_type(self.dtype)

    @property
    def itemsize(self) -> int:
        return self.element.itemsize

    @property
    def layout(self) -> str:
        """How the program's global arrays hold the batch: `aos` or `soa`."""
        return module_layout(self.module)

    @property
    def sum_by(self) -> int:
        """The fewest elements per block among the kernels that sum over the batch (1: none),
        for the verification's allowance (`reference.sum_depth`)."""
        return min((k.by for k in self.kernels if "sum" in k.reduced), default=1)

    def resources(self, kernel: str) -> KernelResources | None:
        return self.cubin.resources.get(kernel) if self.cubin else None

    def save(self, directory: str) -> list[str]:
        """Writes the plan directory; returns the names of the files written."""
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "kernels.cu"), "w") as f:
            f.write(self.source)
        with open(os.path.join(directory, "program.mlir"), "w") as f:
            f.write(module_text(self.module))
        if self.reference_module is not None:
            with open(os.path.join(directory, "reference.mlir"), "w") as f:
                f.write(module_text(self.reference_module))
        if self.cubin is not None:
            with open(os.path.join(directory, "registers.json"), "w") as f:
                json.dump(self.register_table(), f, indent=1, sort_keys=True)
        manifest = {
            "format": 1, "dtype": self.dtype, "meta": self.meta,
            "program": {"inputs": self.program.inputs, "outputs": self.program.outputs},
            "kernels": [k.to_json() | {"block": list(k.block_dims), "grid": _grid_text(k),
                                       "arguments": [*k.inputs, *k.outputs, "n"]}
                        for k in self.kernels],
        }
        if self.cubin is not None:
            with open(os.path.join(directory, "kernels.cubin"), "wb") as f:
                f.write(self.cubin.cubin)
            manifest["arch"] = self.cubin.arch
            manifest["resources"] = {k: vars(v) for k, v in self.cubin.resources.items()}
        with open(os.path.join(directory, "manifest.json"), "w") as f:
            json.dump(manifest, f, indent=2)
        return ["kernels.cu", *(["kernels.cubin"] if self.cubin is not None else []), "manifest.json", "program.mlir",
                *(["reference.mlir"] if self.reference_module is not None else []),
                *(["registers.json"] if self.cubin is not None else [])]

    @staticmethod
    def load(directory: str) -> "CompiledProgram":
        try:
            with open(os.path.join(directory, "manifest.json")) as f:
                manifest = json.load(f)
            with open(os.path.join(directory, "kernels.cu")) as f:
                source = f.read()
            with open(os.path.join(directory, "program.mlir")) as f:
                module = parse_module(f.read(), os.path.join(directory, "program.mlir"))
            kernels = [KernelInfo.from_json({k: v for k, v in d.items()
                                             if k in KernelInfo.__dataclass_fields__})
                       for d in manifest["kernels"]]
            reference = None
            ref_path = os.path.join(directory, "reference.mlir")
            if os.path.exists(ref_path):
                with open(ref_path) as f:
                    reference = parse_module(f.read(), ref_path)
            cubin = None
            cubin_path = os.path.join(directory, "kernels.cubin")
            if os.path.exists(cubin_path):
                with open(cubin_path, "rb") as f:
                    cubin = CubinResult(manifest["arch"], f.read(), "",
                                        {k: KernelResources(**v) for k, v in manifest.get("resources", {}).items()})
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise UsageError(Diagnostic(f"not a valid irfuse plan directory: {e}", directory)) from None
        return CompiledProgram(module, manifest["dtype"], source, kernels, cubin, manifest.get("meta", {}), reference)

    def register_table(self) -> dict[str, int]:
        """signature -> registers of every compiled kernel (what `--registers` reads back)."""
        if self.cubin is None:
            return {}
        out = {}
        for kernel in self.module.ops:
            if isinstance(kernel, KernelOp) and kernel.sym_name.data in self.cubin.resources:
                regs = self.cubin.resources[kernel.sym_name.data].registers
                if regs:
                    out[signature(model_from_kernel(kernel, self.itemsize)[0])] = regs
        return out


def _grid_text(k: KernelInfo) -> str:
    """A launch's grid, for readers of the manifest (n: the batch size; for a combine
    kernel, the number of partials)."""
    if k.fixed_grid:
        return str(k.fixed_grid)
    return "1" if k.once else f"ceil(n / {k.by})"
