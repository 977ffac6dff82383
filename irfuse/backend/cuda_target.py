"""The `cuda` target of irfuse-opt: prints the CUDA C of a lowered module."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.target import Target

from irfuse.backend.cuda_emit import emit_module
from irfuse.diagnostics import CompileError
from irfuse.dialects.element_types import module_element_type


@dataclass(frozen=True)
class CudaTarget(Target):
    """CUDA C for every fuse.kernel of the module (`-t cuda`), in the module's element type."""

    name = "cuda"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        output.write(emit_module(module, target_element(module)).source)


def target_element(module: ModuleOp):
    """The module's element type, or the verifier's complaint as a diagnostic."""
    try:
        return module_element_type(module)
    except VerifyException as e:
        raise CompileError(str(e)) from None
