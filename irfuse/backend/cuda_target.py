"""The `cuda` target of irfuse-opt: prints the CUDA C of a lowered module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from irfuse.backend.cuda_emit import emit_module


@dataclass(frozen=True)
class CudaTarget(Target):
    """CUDA C for every fuse.kernel of the module (`-t cuda`, or `-t cuda{dtype=f64}`)."""

    name = "cuda"
    dtype: str = "f32"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        emitted = emit_module(module, 8 if self.dtype == "f64" else 4)
        if self.dtype == "f64":
            output.write("#define IRFUSE_REAL double\n")
        output.write(emitted.source)
