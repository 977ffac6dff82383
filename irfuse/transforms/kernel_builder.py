"""The unoptimized kernel of a group of calls: the one builder behind `fuse-each`,
`fuse-partition`, the planner and the implementation checker.

Unoptimized means what the in-kernel passes start from: every input loaded into shared
memory, the calls in program order each into shared memory, the outputs stored;
sequential 16-byte aligned offsets; a barrier after the loads and after every call.
`build_kernel_model` gives the `KernelModel` the planner costs; `kernel_op` writes the
same kernel as a `fuse.kernel`, so the planner's candidate and the emitted kernel are
one thing.
"""

from __future__ import annotations

from collections.abc import Sequence

from xdsl.ir import Operation, SSAValue

from irfuse.analysis.kernel_model import KernelModel, MOp, MValue
from irfuse.dialects import fuse
from irfuse.library.implementations import Implementation
from irfuse.transforms.allocation import ALIGN_WORDS
from irfuse.transforms.barriers import barrier_after_every_op


def build_kernel_model(calls: Sequence[Operation], impls: Sequence[Implementation], inputs: Sequence[SSAValue],
                       outputs: Sequence[SSAValue], by: int, itemsize: int, layout: str = "aos") -> KernelModel:
    """`calls` (kas.call ops, program order) with `impls`, loading `inputs` and storing
    `outputs` (results of the calls, global arrays in `layout`). Value ids: the inputs in
    order, then the results."""
    values: dict[int, MValue] = {}
    ops: list[MOp] = []
    vid: dict[SSAValue, int] = {}
    # Source locations: a call keeps its statement's; a load takes the first statement that
    # reads the value, a store the statement that makes it (diagnostics point at the user's line).
    first_reader: dict = {}
    for call in calls:
        for a in call.operands:
            first_reader.setdefault(a, call.location)
    for v in inputs:
        vid[v] = len(vid)
        values[vid[v]] = MValue(vid[v], v.type.size, v.name_hint or "", is_input=True)  # type: ignore[attr-defined]
        ops.append(MOp("load", value=vid[v], location=first_reader.get(v)))
    for call, impl in zip(calls, impls):
        r = call.results[0]
        vid[r] = len(vid)
        values[vid[r]] = MValue(vid[r], r.type.size, r.name_hint or "", stored=r in outputs)  # type: ignore
        ops.append(MOp("call", impl=impl, args=[vid[a] for a in call.operands], result=vid[r],
                       location=call.location))
    for r in outputs:
        ops.append(MOp("store", value=vid[r], location=r.owner.location))
    model = KernelModel(max(impl.bx for impl in impls), by, values, ops, itemsize, layout)
    off = 0
    for v in values.values():
        v.offset = off
        off += -(-v.size * by // ALIGN_WORDS) * ALIGN_WORDS
    return barrier_after_every_op(model)


def kernel_op(name: str, model: KernelModel, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> fuse.KernelOp:
    """The `fuse.kernel` of a model built by `build_kernel_model` from these inputs and outputs."""
    out_ids = {}
    for op in model.ops:
        if op.kind == "store":
            out_ids.setdefault(op.value, len(out_ids))
    kernel = fuse.KernelOp(name, model.bx, model.by, [v.type for v in inputs], [v.type for v in outputs],
                           layout=model.layout)
    first = next((op.location for op in model.ops if op.kind == "call" and op.location is not None), None)
    if first is not None:
        kernel.location = first  # a kernel stands where its first statement does
    for arg, v in zip([*kernel.input_args, *kernel.output_args], [*inputs, *outputs]):
        arg.name_hint = v.name_hint
    block = kernel.body.block
    onchip: dict[int, SSAValue] = {}

    def place(vid: int) -> fuse.PlaceAttr:
        v = model.values[vid]
        return fuse.PlaceAttr.shared(v.offset, v.pitch) if v.shared else fuse.PlaceAttr.reg()

    loads = 0
    for op in model.ops:
        if op.kind == "load":
            ir: Operation = fuse.LoadOp(kernel.input_args[loads], place(op.value))  # type: ignore[arg-type]
            loads += 1
            onchip[op.value] = ir.results[0]  # type: ignore[index]
        elif op.kind == "call":
            impl = op.impl
            assert impl is not None
            ir = fuse.CallOp(impl.op.name, impl.name, [onchip[a] for a in op.args], impl.op.result_type,
                             place(op.result))  # type: ignore[arg-type]
            onchip[op.result] = ir.results[0]  # type: ignore[index]
        elif op.kind == "store":
            ir = fuse.StoreOp(onchip[op.value], kernel.output_args[out_ids[op.value]])  # type: ignore[index]
        else:
            ir = fuse.BarrierOp()
        if op.location is not None:
            ir.location = op.location
        if ir.results:
            ir.results[0].name_hint = model.values[op.result if op.kind == "call" else op.value].name or None  # type: ignore[index]
        block.add_op(ir)
    return kernel
