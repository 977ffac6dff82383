"""fuse-verify-races: proves that a barrier separates every pair of accesses to one shared
word by different threads when at least one of them writes; fails naming both accesses."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.analysis import schedule
from irfuse.analysis.kernel_model import MOp, model_from_kernel
from irfuse.diagnostics import CompileError, Diagnostic
from irfuse.dialects import fuse


def describe(model, op: MOp, index: int) -> str:
    v = model.values
    if op.kind == "call":
        return f"op {index} (fuse.call @{op.impl.op.name}[{op.impl.name}] into %{v[op.result].name})"
    if op.kind == "load":
        return f"op {index} (fuse.load of %{v[op.value].name})"
    return f"op {index} (fuse.store of %{v[op.value].name})"


@dataclass(frozen=True)
class FuseVerifyRaces(ModulePass):
    """Fails if two threads touch one shared word, one writing, with no barrier between them."""

    name = "fuse-verify-races"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        diags = []
        for kernel in [k for k in op.ops if isinstance(k, fuse.KernelOp)]:
            model, _ = model_from_kernel(kernel)
            for race in schedule.find_races(model):
                first, second = model.ops[race.first], model.ops[race.second]
                verb = "writes" if race.kind == "written" else "reads"
                diags.append(Diagnostic(
                    f"race in fuse.kernel @{kernel.sym_name.data}: {describe(model, first, race.first)} {verb} "
                    f"shared word {race.word} and {describe(model, second, race.second)} touches it from "
                    "another thread with no fuse.barrier between them",
                    notes=["ops are counted from 0 in the kernel body, barriers included"]))
        if diags:
            raise CompileError(diags)
