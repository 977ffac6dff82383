"""The artifact with its IR: what compiling gives (`CompiledProgram`; a program of several
stages: `CompiledStages`).

A `CompiledProgram` is an `irfuse.artifact.Artifact` (source, kernels, host steps, binaries:
all the runtime reads) that also holds the lowered module and the `kas` program before
lowering (what the reference evaluates, what phases and register tables are read from).
It builds the binaries the runtime asks for on first use: a cubin for another GPU
architecture with NVRTC, the host library for the CPU with the host C++ compiler. `save`
writes a plan directory (the IR as text beside the artifact's files), `load` reads one back
with its IR; `from_artifact` gives an artifact loaded without the compiler its IR again.
"""

from __future__ import annotations

import os

from xdsl.dialects.builtin import ModuleOp

from irfuse.artifact.artifact import Artifact, CubinResult
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.artifact.stages import Stage, StagedArtifact
from irfuse.driver.binaries import build_cubin, build_host_library
from irfuse.diagnostics import Diagnostic, UsageError
from irfuse.dialects.context import module_text, parse_module
from irfuse.dialects.fuse import KernelOp
from irfuse.dialects.kas import IndexType, ProgramOp, is_uniform, program_of
from irfuse.dialects.layouts import module_layout
from irfuse.driver.host_lowering import lower_host_program
from irfuse.kernel.bridge import model_from_kernel
from irfuse.planner.registers import CompiledFigures, signature, write_register_table


class CompiledProgram(Artifact):
    """An artifact and the IR it was compiled from (see the module's docstring)."""

    def __init__(self, module: ModuleOp, dtype: str, source: str, kernels: list[KernelInfo],
                 cubin: CubinResult | None = None, meta: dict | None = None,
                 reference_module: ModuleOp | None = None, host_library: str | None = None):
        super().__init__(dtype, module_layout(module), source, kernels, lower_host_program(module), cubin, meta,
                         host_library=host_library)
        self.module = module
        self.reference_module = reference_module  # the kas program before lowering

    @property
    def reference_program(self) -> ProgramOp:
        if self.reference_module is None:
            raise UsageError("this compiled program carries no reference program")
        return program_of(self.reference_module)

    @property
    def program(self) -> ProgramOp:
        return program_of(self.module)

    @property
    def program_text(self) -> str:
        return module_text(self.module)

    @property
    def reference_text(self) -> str | None:
        return module_text(self.reference_module) if self.reference_module is not None else None

    def cubin_for(self, arch: str) -> CubinResult:
        """The cubin for `arch`, compiled with NVRTC from the source where the one held is for
        another architecture (or there is none)."""
        if self.cubin is None or self.cubin.arch != arch:
            self.cubin = build_cubin(self.source, arch)
        return self.cubin

    @property
    def host_library(self) -> str:
        """The host library of the source, built (or found in the cache) on first use."""
        if not self.has_host_library():
            self._host_library = build_host_library(self.source, self.kernels)
        return self._host_library  # type: ignore[return-value]

    @host_library.setter
    def host_library(self, path: str) -> None:
        self._host_library = path

    def save(self, directory: str) -> list[str]:
        written = super().save(directory)
        if self.cubin is not None:
            write_register_table(os.path.join(directory, "registers.json"), self.compiled_figures())
            written.append("registers.json")
        return written

    @staticmethod
    def load(directory: str) -> "CompiledProgram":
        """A plan directory with its IR (`Artifact.load`, then the IR texts parsed)."""
        return CompiledProgram.from_artifact(Artifact.load(directory), directory)

    @staticmethod
    def from_artifact(artifact: Artifact, where: str = "<artifact>") -> "CompiledProgram":
        """The artifact with its IR parsed from the texts it keeps (itself if it has it)."""
        if isinstance(artifact, CompiledProgram):
            return artifact
        if artifact.program_text is None:
            raise UsageError(Diagnostic("the plan holds no program.mlir: its IR cannot be read", where))
        module = _parsed(artifact.program_text, where, "program.mlir")
        reference = _parsed(artifact.reference_text, where, "reference.mlir") if artifact.reference_text else None
        program = CompiledProgram(module, artifact.dtype, artifact.source, artifact.kernels, artifact.cubin,
                                  artifact.meta, reference, artifact._host_library)
        return program

    def register_table(self) -> dict[str, int | dict[str, int]]:
        """signature -> ptxas's registers (and spilled bytes, where it spilled) of every compiled
        kernel: what `--registers` reads back (`planner.registers`)."""
        return {sig: figures.as_json() for sig, figures in self.compiled_figures().items()}

    def compiled_figures(self) -> dict[str, CompiledFigures]:
        """signature -> `CompiledFigures` of every kernel the cubin holds."""
        if self.cubin is None:
            return {}
        out = {}
        for kernel in self.module.ops:
            if isinstance(kernel, KernelOp) and kernel.sym_name.data in self.cubin.resources:
                r = self.cubin.resources[kernel.sym_name.data]
                if r.registers:
                    out[signature(model_from_kernel(kernel, self.itemsize)[0])] = CompiledFigures(
                        r.registers, r.spill_stores + r.spill_loads)
        return out


class CompiledStages(StagedArtifact):
    """A program of several stages (`irfuse.artifact.stages`), each a `CompiledProgram`,
    with the whole program before it was cut (`reference_module`: what the reference
    evaluates)."""

    def __init__(self, reference_module: ModuleOp, stages: list[Stage], meta: dict | None = None,
                 fused: list[Stage] | None = None):
        program = program_of(reference_module)
        types = dict(zip(program.inputs, program.input_types())) | dict(zip(program.outputs, program.output_types()))
        uniform = frozenset(program.uniform) | frozenset(
            out for out, v in zip(program.outputs, program.return_op.values) if is_uniform(v))
        index = frozenset(k for k, t in types.items() if isinstance(t, IndexType))
        super().__init__(program.sym_name.data, tuple(program.inputs), tuple(program.outputs),
                         {k: tuple(t.shape) for k, t in types.items()}, uniform, frozenset(program.nodal), index,
                         stages, meta, module_text(reference_module), fused)
        self.reference_module = reference_module

    @property
    def reference_program(self) -> ProgramOp:
        return program_of(self.reference_module)

    def stage_programs(self) -> list[CompiledProgram]:
        """The stages' (and fused stages') programs that a search planned (a fused stage's
        kernels, emitted from its stages', are planned by none)."""
        return [s.artifact for s in [*self.stages, *(self.fused or ())] if isinstance(s.artifact, CompiledProgram)]

    def compiled_figures(self) -> dict[str, CompiledFigures]:
        """signature -> `CompiledFigures` of every planned stage's kernels (as `CompiledProgram`'s)."""
        out: dict[str, CompiledFigures] = {}
        for program in self.stage_programs():
            out.update(program.compiled_figures())
        return out

    @staticmethod
    def from_artifact(staged: StagedArtifact, where: str = "<artifact>") -> "CompiledStages":
        """The staged program with its IR parsed from the texts it keeps (itself if it has it)."""
        if isinstance(staged, CompiledStages):
            return staged
        if staged.reference_text is None:
            raise UsageError(Diagnostic("the plan holds no reference.mlir: its program cannot be read", where))
        reference = _parsed(staged.reference_text, where, "reference.mlir")
        stages = [Stage(s.over, s.inputs, s.outputs, CompiledProgram.from_artifact(s.artifact, where))
                  for s in staged.stages]
        return CompiledStages(reference, stages, staged.meta, staged.fused)


def _parsed(text: str, where: str, name: str) -> ModuleOp:
    """A plan's IR text parsed; a parse or verifier error names the file."""
    try:
        return parse_module(text, os.path.join(where, name))
    except Exception as e:  # noqa: BLE001 -- whatever the parser raises is the plan's fault
        raise UsageError(Diagnostic(f"not a valid irfuse plan directory: {e}", where)) from None
