"""fuse-verify-races: proves that a barrier separates every pair of accesses to one shared
word by different threads when at least one of them writes, and that no shared value is
overwritten while it is still to be read; fails naming the accesses. Loops inside a
kernel are followed around their back edge: an access at the end of an iteration and one
at the start of the next are a pair."""

from __future__ import annotations

from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.analysis.hazards import describe_op, find_races
from irfuse.kernel.bridge import model_from_kernel
from irfuse.analysis.shared_lifetimes import overwrites
from irfuse.diagnostics import CompileError, located
from irfuse.passes.kernel_pass import kernels_of
from irfuse.passes.module_element_type import itemsize_of


COUNTING = ("ops are counted from 0 in the kernel body, barriers included (a fuse.loop, the ops of its body "
            "and its fuse.yield in order)")


@dataclass(frozen=True)
class FuseVerifyRaces(ModulePass):
    """Fails if two threads touch one shared word, one writing, with no barrier between them, or
    if a value is written over shared words of another that is still to be read."""

    name = "fuse-verify-races"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        diags = []
        itemsize = itemsize_of(op)
        for kernel in kernels_of(op):
            model, _ = model_from_kernel(kernel, itemsize)
            for race in find_races(model):
                first, second = model.ops[race.first], model.ops[race.second]
                verb = "writes" if race.kind == "written" else "reads"
                diags.append(located(
                    f"race in fuse.kernel @{kernel.sym_name.data}: {describe_op(model, first, race.first)} {verb} "
                    f"shared word {race.word} and {describe_op(model, second, race.second)} touches it from "
                    "another thread with no fuse.barrier between them", second.location,
                    notes=[COUNTING]))
            for o in overwrites(model):
                victim = model.values[o.victim]
                diags.append(located(
                    f"fuse.kernel @{kernel.sym_name.data}: {describe_op(model, model.ops[o.writer], o.writer)} "
                    f"overwrites shared words {o.words[0]}..{o.words[1] - 1} of %{victim.name}, which "
                    f"{describe_op(model, model.ops[o.reader], o.reader)} reads later"
                    + (" (in the loop's next iteration)" if o.next_iteration else ""), model.ops[o.writer].location,
                    notes=[COUNTING]))
        if diags:
            raise CompileError(diags)
