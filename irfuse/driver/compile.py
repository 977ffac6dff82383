"""Compiling a program to a `CompiledProgram`: frontend, pass pipeline, CUDA C, cubin.

Compilation is a pure function of its inputs: the source, the options below and the
installed irfuse (with its op libraries). The element type and the global arrays' layout
are written into the IR as the module attributes `kas.element_type` and `kas.layout`; the batch size and device profile the cost
model plans for reach `fuse-partition` as its options; register counts of earlier
compiles are used only when a register table is named. The disk cache only saves time.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import PassPipeline

from irfuse.kernel.policies import default_min_blocks
from irfuse.backend.cuda_emit import emit_module
from irfuse.backend.render_cpu_loop import cpu_loop_kernel
from irfuse.backend.compilers import compiler_for
from irfuse.diagnostics import Diagnostic
from irfuse.dialects.context import make_context
from irfuse.dialects.element_types import element_type, module_element_type, set_module_element_type
from irfuse.dialects.layouts import set_module_layout, set_module_strides
from irfuse.driver.artifact import CompiledProgram
from irfuse.frontend.irgen import FrontendResult, compile_file, compile_source
from irfuse.passes.registry import DEFAULT_PIPELINE, build_passes
from irfuse.planner.cost import DEFAULT_BATCH


@dataclass(frozen=True)
class PlanningOptions:
    """What the fusion search plans for; given to `fuse-partition` wherever the pipeline
    names it without setting these options itself."""

    n: int = DEFAULT_BATCH
    profile: str = "h100"
    registers: str | None = None  # a register table written by `irfuse compile`

    def partition_defaults(self) -> dict[str, dict[str, object]]:
        opts: dict[str, object] = {"n": self.n, "profile": self.profile}
        if self.registers:
            opts["registers"] = self.registers
        return {"fuse-partition": opts}


def run_pipeline(module: ModuleOp, pipeline: str, planning: PlanningOptions | None = None) -> ModuleOp:
    """Applies a pass pipeline to a module and verifies the result."""
    passes = build_passes(pipeline, (planning or PlanningOptions()).partition_defaults())
    PassPipeline(tuple(passes)).apply(make_context(), module)
    module.verify()
    return module


def lower(module: ModuleOp, pipeline: str | None = None, planning: PlanningOptions | None = None) -> ModuleOp:
    return run_pipeline(module, pipeline or DEFAULT_PIPELINE, planning)


def build(module: ModuleOp, compile_gpu: bool = True, arch: str | None = None) -> CompiledProgram:
    """Emits CUDA C for an already-lowered module (in its element type) and, with
    `compile_gpu`, compiles it with NVRTC.

    A kernel that ptxas makes spill is re-emitted asking for fewer resident
    blocks (more registers per thread) until it does not, or one block is asked: first
    1024 threads per SM where more were asked (`launch_min_blocks`), then half as many.
    """
    element = module_element_type(module)
    min_blocks: dict[str, int] = {}
    while True:
        emitted = emit_module(module, element, min_blocks, cpu_loop=cpu_loop_kernel)
        cubin = compiler_for("cuda").compile(emitted.source, emitted.kernels, element, arch) if compile_gpu else None
        if cubin is None:
            break
        retry = False
        for k in emitted.kernels:
            r = cubin.resources.get(k.name)
            if r is not None and (r.spill_stores or r.spill_loads) and k.min_blocks > 1:
                base = default_min_blocks(k.threads)
                min_blocks[k.name] = base if k.min_blocks > base else k.min_blocks // 2
                retry = True
        if not retry:
            break
    return CompiledProgram(module, element.name, emitted.source, emitted.kernels, cubin)


def compile_program(path: str, pipeline: str | None = None, dtype: str = "f32", compile_gpu: bool = True,
                    arch: str | None = None, planning: PlanningOptions | None = None, layout: str = "aos"
                    ) -> tuple[CompiledProgram, list[Diagnostic]]:
    """A KAS file compiled with a pipeline (the default one when None) for an element type
    and a layout of the global arrays (`irfuse.dialects.layouts`)."""
    return compile_frontend(compile_file(path), os.path.basename(path), pipeline, dtype, compile_gpu, arch, planning,
                            layout)


def compile_text(text: str, filename: str, pipeline: str | None = None, dtype: str = "f32",
                 compile_gpu: bool = True, arch: str | None = None, planning: PlanningOptions | None = None,
                 layout: str = "aos", strides: dict[str, tuple[int, ...]] | None = None
                 ) -> tuple[CompiledProgram, list[Diagnostic]]:
    """KAS source text (diagnostics name it `filename`) compiled as `compile_program` does."""
    return compile_frontend(compile_source(text, filename), os.path.basename(filename), pipeline, dtype, compile_gpu,
                            arch, planning, layout, strides)


def compile_frontend(result: FrontendResult, name: str, pipeline: str | None = None, dtype: str = "f32",
                     compile_gpu: bool = True, arch: str | None = None, planning: PlanningOptions | None = None,
                     layout: str = "aos", strides: dict[str, tuple[int, ...]] | None = None
                     ) -> tuple[CompiledProgram, list[Diagnostic]]:
    """A frontend's module (KAS text or a Python function) compiled as `compile_program` does;
    `strides`: program inputs and outputs that are strided views (`dialects.layouts`)."""
    set_module_element_type(result.module, element_type(dtype))
    set_module_layout(result.module, layout)
    set_module_strides(result.module, strides or {})
    reference = result.module.clone()
    module = lower(result.module, pipeline, planning)
    program = build(module, compile_gpu, arch)
    program.reference_module = reference
    program.meta = {"source": name, "pipeline": pipeline or DEFAULT_PIPELINE}
    return program, result.warnings
