"""The passes over the batch that a lowered program takes when its batch runs in chunks.

Elements are independent until a reduction over the batch: a `fuse.combine` needs the
per-block partials of every element, and what reads its result needs the combined value.
A batch run in chunks (`runtime.streaming`) that must give the results of one call bit for
bit therefore runs the program as passes over all of its chunks. Pass p runs, on each
chunk, the steps whose values depend on at most p combined reductions (a step's level);
the chunks of a pass give the partials of level p, and after the pass each reduction over
them is combined once, over the partials of the whole batch, by the same combine kernel as
one call. Chunks of a whole number of the reducing kernels' blocks give those partials
exactly as one call would (a block's partial depends on its own elements only), so the
combined values are those of one call. The last pass gives the program's outputs.

A pass recomputes what it needs from the inputs (a per-element value read on both sides of
a reduction is computed again, not kept): only the partials and the combined values, a few
words per block, outlive a pass. A program without reductions takes one pass.
"""

from __future__ import annotations

import math

from xdsl.ir import Operation, SSAValue

from irfuse.analysis.uniformity import launched_kernel
from irfuse.artifact.records import record
from irfuse.artifact.scatter_groups import group_elements
from irfuse.dialects import fuse, kas


@record(frozen=True)
class BatchPass:
    """One pass: the top-level steps each chunk runs, in program order; the program's inputs
    they read and its outputs the pass gives (each output in the first pass that has it);
    the partials its chunks give, and the combines run once after it."""

    steps: tuple[Operation, ...]
    reads: tuple[str, ...]
    outputs: tuple[str, ...]
    partials: tuple[SSAValue, ...]
    combines: tuple[fuse.CombineOp, ...]


@record(frozen=True)
class BatchPasses:
    passes: tuple[BatchPass, ...]
    align: int  # chunks (all but the last) hold a multiple of this many elements

    @property
    def combined(self) -> tuple[fuse.CombineOp, ...]:
        return tuple(c for p in self.passes for c in p.combines)


def used_values(op: Operation) -> list[SSAValue]:
    """The values `op` reads, those its nested ops (a loop's body) read from outside included."""
    return [v for inner in op.walk() for v in inner.operands]


def value_levels(program: kas.ProgramOp) -> dict[SSAValue, int]:
    """The level of each value the program's top level defines: the most `fuse.combine`s on
    a path from the inputs to it (a combine's result counts that combine)."""
    level: dict[SSAValue, int] = {a: 0 for a in program.body.block.args}
    for op in program.body.block.ops:
        here = max((level.get(v, 0) for v in used_values(op)), default=0)
        for r in op.results:
            level[r] = here + isinstance(op, fuse.CombineOp)
    return level


def batch_passes(program: kas.ProgramOp) -> BatchPasses:
    """The passes of a lowered program (one, all its steps, when it does not reduce)."""
    ops = [op for op in program.body.block.ops if not isinstance(op, kas.ReturnOp)]
    for op in ops:
        for inner in op.walk():
            if isinstance(inner, fuse.CombineOp) and inner.parent_op() is not program:
                raise ValueError(f"a fuse.combine inside {op.name}: reductions are combined at the top level only")
            if isinstance(inner, kas.ReduceOp):
                raise ValueError("the program still has kas.reduce ops: lower it first")
    level = value_levels(program)
    owner = {r: op for op in ops for r in op.results}
    inputs = dict(zip(program.body.block.args, program.inputs))
    returned = list(zip(program.outputs, program.return_op.operands))
    count = 1 + max(level.values(), default=0)
    passes = []
    for p in range(count):
        combines = tuple(op for op in ops if isinstance(op, fuse.CombineOp) and level[op.res] == p + 1)
        partials = tuple(c.partials for c in combines)
        outputs = tuple(name for name, v in returned if level[v] == p)
        # What the pass runs: what its outputs and the partials of the combines after it need,
        # up to the inputs and the values combined before it.
        roots = [*partials, *(v for name, v in returned if name in outputs)]
        needed: set[Operation] = set()
        reads: set[str] = set()
        while roots:
            v = roots.pop()
            step = owner.get(v)
            if step is None:
                if v in inputs:
                    reads.add(inputs[v])
            elif step not in needed and not isinstance(step, fuse.CombineOp):
                needed.add(step)
                roots.extend(used_values(step))
        passes.append(BatchPass(tuple(op for op in ops if op in needed),
                                tuple(k for k in program.inputs if k in reads), outputs, partials, combines))
    blocks = [launched_kernel(c.partials.owner).by.data for p in passes for c in p.combines  # type: ignore[arg-type]
              if isinstance(c.partials.owner, fuse.LaunchOp)]
    # A scatter sums its rows in groups of elements (`artifact.scatter_groups`): chunks that
    # start at a group's first element give one call's bits.
    groups = [group_elements(op.index.type.count.data) for op in program.walk() if isinstance(op, kas.ScatterOp)]
    return BatchPasses(tuple(passes), math.lcm(1, *blocks, *[g for g in groups if g]))
