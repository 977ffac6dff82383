"""Test passes in the style of MLIR's `-test-print-*`: print what an analysis finds in each
`fuse.kernel` (to stderr, one block per kernel) and leave the IR as it is, so that the
analysis can be checked on hand-written IR apart from the transformation that uses it.

- `test-print-races`: every pair of shared accesses from different threads, one writing,
  that no barrier separates (what `fuse-verify-races` refuses, and `fuse-place-barriers`
  prevents);
- `test-print-bank-wavefronts`: shared-memory wavefronts per block, per value and in all
  (what `fuse-allocate-shared` pads against, and the cost model's `t_shared` counts);
- `test-print-shared-peak`: the peak words of simultaneously live shared values in the
  kernel's current order against the words it allocates (what `fuse-linearize` minimizes
  and `fuse-allocate-shared` reaches);
- `test-print-uniformity`: what each value of each program holds, one value per element,
  one for the whole batch, or a reduction's partials (`analysis.uniformity`: what the
  planner groups by, the kernel builder loads whole and the runtime allocates);
- `test-print-batch-passes`: the passes over the batch that a lowered program takes when
  its batch runs in chunks (`analysis.batch_passes`: what `runtime.streaming` runs), or
  why it cannot;
- `test-print-staged-loads`: the register loads a structure-of-arrays kernel stages through
  shared memory in 16-byte runs on the GPU (`kernel.policies.staged_run_loads`: what the CUDA
  emitter stages, and the cost model counts as shared memory).
"""

from __future__ import annotations

import sys
from dataclasses import dataclass

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.analysis.batch_passes import batch_passes
from irfuse.analysis.bank_conflicts import kernel_wavefronts, value_wavefronts
from irfuse.analysis.hazards import describe_op, find_races
from irfuse.kernel.policies import staged_run_loads
from irfuse.kernel.bridge import model_from_kernel
from irfuse.analysis.shared_lifetimes import peak_shared_words
from irfuse.analysis.uniformity import value_extent
from irfuse.dialects import fuse
from irfuse.dialects.kas import ProgramOp
from irfuse.passes.kernel_pass import kernels_of
from irfuse.passes.module_element_type import itemsize_of


def _models(module: ModuleOp):
    itemsize = itemsize_of(module)
    for kernel in kernels_of(module):
        yield kernel.sym_name.data, model_from_kernel(kernel, itemsize)[0]


@dataclass(frozen=True)
class TestPrintRaces(ModulePass):
    """Prints every cross-thread shared access pair with a write that no barrier separates."""

    name = "test-print-races"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for name, model in _models(op):
            races = find_races(model)
            print(f"races in @{name}: {len(races)}", file=sys.stderr)
            for r in races:
                verb = "writes" if r.kind == "written" else "reads"
                print(f"  {describe_op(model, model.ops[r.first], r.first)} {verb} shared word {r.word}; "
                      f"{describe_op(model, model.ops[r.second], r.second)} touches it from another thread",
                      file=sys.stderr)


@dataclass(frozen=True)
class TestPrintBankWavefronts(ModulePass):
    """Prints the shared-memory wavefronts per block of every shared value and of each kernel."""

    name = "test-print-bank-wavefronts"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for name, model in _models(op):
            print(f"wavefronts in @{name}: {kernel_wavefronts(model)} per block", file=sys.stderr)
            for vid, v in model.values.items():
                if v.shared:
                    pitch = f", pitch {v.pitch}" if v.pitch else ""
                    print(f"  %{v.name} shared[{v.offset}{pitch}]: {value_wavefronts(model, vid, v.pitch)[0]}",
                          file=sys.stderr)


@dataclass(frozen=True)
class TestPrintSharedPeak(ModulePass):
    """Prints each kernel's peak of live shared words in its current order and the words it allocates."""

    name = "test-print-shared-peak"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for name, model in _models(op):
            print(f"shared words in @{name}: peak {peak_shared_words(model)} live, "
                  f"{model.shared_words()} allocated", file=sys.stderr)


@dataclass(frozen=True)
class TestPrintUniformity(ModulePass):
    """Prints what each value of each program holds: per element, uniform, or partials."""

    name = "test-print-uniformity"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            print(f"values of @{program.sym_name.data}:", file=sys.stderr)
            for inner in program.walk():
                values = list(inner.results)
                for region in inner.regions:
                    for block in region.blocks:
                        values += list(block.args)
                for v in values:
                    print(f"  %{v.name_hint or '?'} ({inner.name}): {value_extent(v).value}", file=sys.stderr)


def _step(op) -> str:
    """`%a, %b = fuse.launch @k`, `%m = fuse.combine max`, `kas.loop`, `kas.return`."""
    names = ", ".join(f"%{r.name_hint or '?'}" for r in op.results)
    what = op.name
    if isinstance(op, fuse.LaunchOp):
        what += f" @{op.kernel_name}"
    elif isinstance(op, fuse.CombineOp):
        what += f" {op.reduce_kind.value}"
    return f"{names} = {what}" if names else what


@dataclass(frozen=True)
class TestPrintBatchPasses(ModulePass):
    """Prints the passes over the batch that each lowered program takes when run in chunks."""

    name = "test-print-batch-passes"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for program in [p for p in op.walk() if isinstance(p, ProgramOp)]:
            head = f"batch passes of @{program.sym_name.data}"
            try:
                plan = batch_passes(program)
            except ValueError as e:
                print(f"{head}: none, {e}", file=sys.stderr)
                continue
            print(f"{head}: {len(plan.passes)}, chunks of a multiple of {plan.align} elements", file=sys.stderr)
            for k, step in enumerate(plan.passes):
                print(f"  pass {k}: reads {', '.join(step.reads) or 'nothing'}; gives "
                      f"{', '.join(step.outputs) or 'no output'}", file=sys.stderr)
                for s in step.steps:
                    print(f"    {_step(s)}", file=sys.stderr)
                for c in step.combines:
                    print(f"    then {_step(c)}", file=sys.stderr)


@dataclass(frozen=True)
class TestPrintStagedLoads(ModulePass):
    """Prints the register loads each kernel stages through shared memory in 16-byte runs."""

    name = "test-print-staged-loads"

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        for name, model in _models(op):
            staged = [model.values[model.ops[i].value] for i in staged_run_loads(model)]  # type: ignore[index]
            if not staged:
                print(f"staged loads in @{name}: none", file=sys.stderr)
                continue
            words = sum(v.size for v in staged) * model.by
            print(f"staged loads in @{name}: {len(staged)}, {words * model.itemsize} bytes a block", file=sys.stderr)
            for v in staged:
                print(f"  %{v.name}: {v.size} runs of {model.by} words", file=sys.stderr)
