"""The host program of a lowered module as plain steps (`irfuse.artifact.host_plan`): what
the runtime replays, saved with the plan, so that running a plan never reads IR.

Each SSA value of the `kas.program` becomes a `Value` with its extent
(`analysis.uniformity`), each top-level or loop-body op a step, and the passes over the batch
a run in chunks takes (`analysis.batch_passes`) the indices of their top-level steps.
"""

from __future__ import annotations

from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import Block, SSAValue

from irfuse.analysis.batch_passes import batch_passes
from irfuse.analysis.uniformity import Extent, value_extent
from irfuse.artifact import host_plan as hp
from irfuse.diagnostics import UsageError
from irfuse.dialects import fuse, kas


def lower_host_program(module: ModuleOp) -> hp.HostPlan:
    """The module's `kas.program` as a `HostPlan`; UsageError when it still holds ops that
    no kernel runs (a module not lowered)."""
    if not any(isinstance(op, kas.ProgramOp) for op in module.ops):
        return hp.HostPlan((), (), (), (), ())  # kernels alone (the implementation checks'): nothing to run them
    program = kas.program_of(module)
    ids: dict[SSAValue, int] = {}
    values: list[hp.Value] = []

    def vid(v: SSAValue) -> int:
        if v not in ids:
            extent = value_extent(v)
            kernel = v.owner.kernel_name if extent == Extent.PARTIALS else ""  # type: ignore[union-attr]
            ids[v] = len(values)
            values.append(hp.Value(tuple(v.type.shape), extent.value, kernel,  # type: ignore[attr-defined]
                                   isinstance(v.type, kas.IndexType)))
        return ids[v]

    def steps_of(block: Block) -> list[hp.Step]:
        out: list[hp.Step] = []
        for op in block.ops:
            if isinstance(op, fuse.LaunchOp):
                out.append(hp.Launch(op.kernel_name, tuple(vid(a) for a in op.args), tuple(vid(r) for r in op.res)))
            elif isinstance(op, fuse.CombineOp):
                out.append(hp.Combine(op.kernel_name, vid(op.partials), vid(op.res)))
            elif isinstance(op, kas.ConstantOp):
                out.append(hp.Constant(vid(op.res), op.number))
            elif isinstance(op, kas.TableOp):
                out.append(hp.Constant(vid(op.res), 0.0, op.numbers))
            elif isinstance(op, kas.ScatterOp):
                size = op.res.type.size  # type: ignore[attr-defined]
                k = op.index.type.count.data  # type: ignore[attr-defined]
                out.append(hp.Scatter(fuse.scatter_kernel_name(size), vid(op.value), vid(op.index), vid(op.res),
                                      fuse.scatter_atomic_kernel_names(size, k), fuse.scatter_onto_kernel_name(size),
                                      fuse.scatter_groups_kernel_name(size, k)))
            elif isinstance(op, kas.LoopOp):
                args = tuple(vid(a) for a in op.body.block.args)
                inits = tuple(vid(v) for v in op.iter_args)
                body = tuple(steps_of(op.body.block))
                yielded = list(op.body.block.last_op.operands)  # type: ignore[union-attr]
                swappable = tuple(_swappable(y, op, yielded) for y in yielded)
                out.append(hp.Loop(op.trip_count.data, args, inits, body, tuple(vid(y) for y in yielded),
                                   tuple(vid(r) for r in op.res), swappable))
            elif isinstance(op, (kas.ReturnOp, kas.YieldOp)):
                break
            elif isinstance(op, (kas.CallOp, kas.ReduceOp, kas.GatherOp)):
                raise UsageError(f"the program still has {op.name} ops: lower it first (e.g. --pipeline fuse-each)")
            else:
                raise UsageError(f"the host program cannot run '{op.name}'")
        return out

    inputs = tuple((name, vid(arg)) for name, arg in zip(program.inputs, program.body.block.args))
    steps = steps_of(program.body.block)
    outputs = tuple((name, vid(v)) for name, v in zip(program.outputs, program.return_op.values))
    top = [op for op in program.body.block.ops if not isinstance(op, kas.ReturnOp)]
    index = {op: k for k, op in enumerate(top)}
    plan = batch_passes(program)
    passes = tuple(hp.BatchPass(tuple(index[op] for op in p.steps), p.reads, p.outputs,
                                tuple(vid(v) for v in p.partials), tuple(index[c] for c in p.combines))
                   for p in plan.passes)
    return hp.HostPlan(tuple(values), inputs, outputs, tuple(steps), passes, plan.align, program.sym_name.data)


def _swappable(y: SSAValue, loop: kas.LoopOp, yielded: list[SSAValue]) -> bool:
    """Whether a yielded value's buffer may trade places with its carried value's: it is made
    by a launch of the loop's own body (not an outer value, a block argument or an inner
    loop's result, whose buffers other values share) and yielded once."""
    owner = y.owner
    return (isinstance(owner, fuse.LaunchOp) and owner.parent_block() is loop.body.block
            and sum(v is y for v in yielded) == 1)
