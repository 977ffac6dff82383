"""From a KAS file to a compiled plan: frontend, pass pipeline, CUDA C, cubin.

A `Plan` is everything needed to execute a program elsewhere: the lowered
IR (host program + kernels), the CUDA source for one dtype, the kernels'
launch shapes and argument order, and (when compiled) the cubin with the
ptxas resources.  `Plan.save`/`Plan.load` write and read a directory.
"""

from __future__ import annotations

import dataclasses
import json
import os
from dataclasses import dataclass, field

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.parser import Parser
from xdsl.passes import PassPipeline
from xdsl.printer import Printer

from irfuse.backend.cuda_emit import KernelInfo, emit_module
from irfuse.backend.nvrtc import CubinResult, KernelResources, compile_cubin
from irfuse.diagnostics import CompileError, Diagnostic
from irfuse.dialects.fuse import Fuse
from irfuse.dialects.kas import Kas, ProgramOp
from irfuse.frontend.irgen import compile_file
from irfuse.passes.registry import DEFAULT_PIPELINE, pass_factories
from irfuse.runtime.reference import find_program

ITEMSIZE = {"f32": 4, "f64": 8}


def make_context() -> Context:
    ctx = Context()
    from xdsl.dialects.builtin import Builtin

    ctx.load_dialect(Builtin)
    ctx.load_dialect(Kas)
    ctx.load_dialect(Fuse)
    return ctx


def module_text(module: ModuleOp) -> str:
    from io import StringIO

    out = StringIO()
    Printer(stream=out).print_op(module)
    return out.getvalue() + "\n"


def parse_module(text: str, name: str = "<plan>") -> ModuleOp:
    return Parser(make_context(), text, name).parse_module()


def run_pipeline(module: ModuleOp, pipeline: str, dtype: str | None = None) -> ModuleOp:
    """Applies a pass pipeline; `dtype` becomes every pass's that has one and does not set it."""
    from xdsl.utils.arg_spec import parse_pipeline

    from irfuse.tools.opt import strip_module_anchor

    try:
        specs = list(parse_pipeline(strip_module_anchor(pipeline)))
        factories = pass_factories()
        unknown = [p.name for p in specs if p.name not in factories]
        if unknown:
            raise ValueError(f"unknown passes {unknown}")
        passes = []
        for spec in specs:
            cls = factories[spec.name]()
            p = cls.from_spec(spec)
            if dtype and hasattr(p, "dtype") and "dtype" not in spec.parameters:
                p = dataclasses.replace(p, dtype=dtype)  # passes that count bytes use the run's type
            passes.append(p)
        pp = PassPipeline(tuple(passes))
    except Exception as e:  # the spec parser raises several kinds
        raise CompileError(f"bad --pipeline '{pipeline}': {e}") from None
    pp.apply(make_context(), module)
    module.verify()
    return module


@dataclass
class Plan:
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
            raise CompileError("this plan carries no reference program")
        return find_program(self.reference_module)

    @property
    def program(self) -> ProgramOp:
        return find_program(self.module)

    @property
    def itemsize(self) -> int:
        return ITEMSIZE[self.dtype]

    def resources(self, kernel: str) -> KernelResources | None:
        return self.cubin.resources.get(kernel) if self.cubin else None

    def save(self, directory: str) -> None:
        os.makedirs(directory, exist_ok=True)
        with open(os.path.join(directory, "kernels.cu"), "w") as f:
            f.write(self.source)
        with open(os.path.join(directory, "program.mlir"), "w") as f:
            f.write(module_text(self.module))
        if self.reference_module is not None:
            with open(os.path.join(directory, "reference.mlir"), "w") as f:
                f.write(module_text(self.reference_module))
        manifest = {
            "format": 1, "dtype": self.dtype, "meta": self.meta,
            "program": {"inputs": self.program.inputs, "outputs": self.program.outputs},
            "kernels": [k.to_json() | {"block": [k.bx, k.by, 1], "grid": f"ceil(n / {k.by})",
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

    @staticmethod
    def load(directory: str) -> "Plan":
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
            raise CompileError(Diagnostic(f"not a valid irfuse plan directory: {e}", directory)) from None
        return Plan(module, manifest["dtype"], source, kernels, cubin, manifest.get("meta", {}), reference)


def lower(module: ModuleOp, pipeline: str | None = None, dtype: str | None = None) -> ModuleOp:
    return run_pipeline(module, pipeline or DEFAULT_PIPELINE, dtype)


def build_plan(module: ModuleOp, dtype: str = "f32", compile_gpu: bool = True,
               arch: str | None = None) -> Plan:
    """Emits CUDA C for an already-lowered module and (optionally) compiles it with NVRTC.

    A kernel that ptxas makes spill is re-emitted asking for fewer resident
    blocks (more registers per thread) until it does not, or one block is asked.
    """
    itemsize = ITEMSIZE[dtype]
    min_blocks: dict[str, int] = {}
    while True:
        emitted = emit_module(module, itemsize, min_blocks)
        source = ("#define IRFUSE_REAL double\n" if dtype == "f64" else "") + emitted.source
        cubin = compile_cubin(source, arch) if compile_gpu else None
        if cubin is None:
            break
        retry = False
        for k in emitted.kernels:
            r = cubin.resources.get(k.name)
            if r is not None and (r.spill_stores or r.spill_loads) and k.min_blocks > 1:
                min_blocks[k.name] = k.min_blocks // 2
                retry = True
        if not retry:
            break
    if cubin is not None:
        _record_registers(module, cubin, itemsize)
    return Plan(module, dtype, source, emitted.kernels, cubin)


def _record_registers(module: ModuleOp, cubin: CubinResult, itemsize: int) -> None:
    from irfuse.analysis.kernel_model import model_from_kernel
    from irfuse.dialects.fuse import KernelOp
    from irfuse.planner.registers import record, signature

    entries = {}
    for kernel in module.ops:
        if isinstance(kernel, KernelOp) and kernel.sym_name.data in cubin.resources:
            regs = cubin.resources[kernel.sym_name.data].registers
            if regs:
                entries[signature(model_from_kernel(kernel, itemsize)[0])] = regs
    if entries:
        record(entries)


def compile_program(path: str, pipeline: str | None = None, dtype: str = "f32",
                    compile_gpu: bool = True, arch: str | None = None) -> tuple[Plan, list[Diagnostic]]:
    result = compile_file(path)
    reference = result.module.clone()
    module = lower(result.module, pipeline, dtype)
    plan = build_plan(module, dtype, compile_gpu, arch)
    plan.reference_module = reference
    plan.meta = {"source": os.path.basename(path), "pipeline": pipeline or DEFAULT_PIPELINE}
    return plan, result.warnings
