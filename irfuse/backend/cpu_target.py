"""The `cpu` target of irfuse-opt: prints each kernel of a lowered module as the CPU backend
builds it by default, a loop over its elements (`render_cpu_loop`), or a note naming what
makes the kernel keep its CPU twin (`-t cuda` prints the twin, under `IRFUSE_HOST`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import IO

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.utils.target import Target

from irfuse.backend.cuda_emit import kernels_of, strided_arguments
from irfuse.backend.cuda_target import target_element
from irfuse.backend.render_cpu_loop import loop_rendering
from irfuse.diagnostics import CompileError


@dataclass(frozen=True)
class CpuLoopTarget(Target):
    """Each fuse.kernel of the module as a loop over its elements (`-t cpu`), in the module's
    element type."""

    name = "cpu"

    def emit(self, ctx: Context, module: ModuleOp, output: IO[str]) -> None:
        element = target_element(module)
        kernels = kernels_of(module)
        if not kernels and any(op.name in ("kas.call", "kas.gather") for op in module.walk()):
            raise CompileError("no fuse.kernel to render: run a lowering pass first (e.g. -p fuse-each)")
        strided = strided_arguments(module)
        for kernel in kernels:
            name = kernel.sym_name.data
            rendered, reason = loop_rendering(kernel, element.itemsize, None, strided.get(name))
            if rendered is None:
                output.write(f"// fuse.kernel @{name}: its CPU twin (the loop renderer does not take {reason})\n\n")
            else:
                output.write("\n".join(rendered[0]) + "\n\n")
