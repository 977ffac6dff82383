"""The unoptimized kernel of a group of calls: the one builder behind `fuse-each`,
`fuse-partition`, the planner and the implementation checker.

Unoptimized means what the in-kernel passes start from: every input loaded into shared
memory, the calls in program order each into shared memory, the outputs stored;
sequential 16-byte aligned offsets; a barrier after the loads and after every call.
A `kas.reduce` in the group stores its operand's per-block partials (`fuse.store ...
reduce`); a uniform input is loaded whole by every element; a group of calls on uniform
values only runs `once`, over a batch of one element.
`build_kernel_model` gives the `KernelModel` the planner costs; `kernel.bridge.kernel_op`
writes the same kernel as a `fuse.kernel`, so the planner's candidate and the emitted kernel
are one thing.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from xdsl.ir import Attribute, Operation, SSAValue

from irfuse.kernel.bridge import gather_of, kernel_arguments
from irfuse.kernel.model import Gathered, KernelModel, MOp, MValue, OpKind, index_words
from irfuse.analysis.uniformity import is_uniform
from irfuse.diagnostics import CompileError
from irfuse.dialects import fuse, kas
from irfuse.library.implementations import Implementation
from irfuse.transforms.allocation import ALIGN_WORDS
from irfuse.transforms.barriers import with_barrier_after_every_op


def flat_calls(ops: Sequence[Operation]) -> list[Operation]:
    """The kas.call ops of `ops` and of the bodies of its loops, in program order."""
    out: list[Operation] = []
    for op in ops:
        if isinstance(op, kas.CallOp):
            out.append(op)
        elif isinstance(op, kas.LoopOp):
            out += flat_calls(op.body_ops)
    return out


def erase_unread_gathers(program: kas.ProgramOp) -> None:
    """Erases the `kas.gather`s no op reads any more: every kernel reading their values
    gathers them itself."""
    for op in list(program.body.block.ops):
        if isinstance(op, kas.GatherOp) and not op.res.uses:
            op.detach()
            op.erase()


def forwards_carried(loop: kas.LoopOp) -> bool:
    """Whether the loop yields one of its carried values in another's place (a swap): copies
    into carried places are made one after another, so such a loop stays on the host."""
    args = loop.body.block.args
    yielded = loop.body.block.last_op.operands
    return any(y in args and (k >= len(args) or y is not args[k]) for k, y in enumerate(yielded))


def _read_inside(loop: kas.LoopOp) -> list[SSAValue]:
    """The values the loop's body reads (nested loops included), in order, once each."""
    out: list[SSAValue] = []
    for op in loop.body.block.walk():
        for v in op.operands:
            if v not in out:
                out.append(v)
    return out


def global_words(v: SSAValue, itemsize: int) -> int | Gathered:
    """Words per element a kernel moves to load `v`; for a gathered value its rows and its
    node numbers (32-bit each), as the cost model reads them (`cost.Gathered`)."""
    g = gather_of(v)
    if g is None:
        return v.type.size  # type: ignore[attr-defined]
    rows = g.index.type.count.data  # type: ignore[attr-defined]
    return Gathered(rows, v.type.size // rows, index_words(rows, itemsize))  # type: ignore[attr-defined]


def runs_once(ops: Sequence[Operation]) -> bool:
    """Whether a group's ops compute uniform values only: its kernel runs over one element."""
    return bool(ops) and all(isinstance(op, kas.CallOp) and is_uniform(op.res) for op in ops)


def build_kernel_model(ops: Sequence[Operation], impls: Sequence[Implementation], inputs: Sequence[SSAValue],
                       outputs: Sequence[SSAValue], by: int, itemsize: int, layout: str = "aos",
                       per_thread: int = 1) -> KernelModel:
    """`ops` (kas.call and kas.loop ops, program order) with `impls` for their calls
    (`flat_calls` order), loading `inputs` and storing `outputs` (results of the ops, global
    arrays in `layout`). Value ids: the inputs in order, then results and carried values in
    program order. A loop becomes its carried values' copies in, a `loop` op, its body, the
    copies of the yielded values and a `yield` op. In an array-of-structures kernel, where
    loads and stores are block-wide copies through shared memory, a loaded value that a loop
    reads is first copied (so that it may be held in registers across the iterations instead
    of read from shared memory in each), and a carried value that is an output is copied out
    before it is stored."""
    values: dict[int, MValue] = {}
    mops: list[MOp] = []
    vid: dict[SSAValue, int] = {}
    # Source locations: a call keeps its statement's; a load takes the first statement that
    # reads the value, a store the statement that makes it (diagnostics point at the user's line).
    first_reader: dict = {}
    for call in flat_calls(ops):
        for a in call.operands:
            first_reader.setdefault(a, call.location)
    for op in ops:
        if isinstance(op, kas.ReduceOp):
            first_reader.setdefault(op.operand, op.location)
    once = runs_once(ops)
    if once:
        by = 1  # one element: a kernel of uniform values

    def new(v: SSAValue | None, size: int, name: str, type_: Attribute, **flags) -> int:
        i = len(values)
        values[i] = MValue(i, size, name, type=type_, **flags)
        if v is not None:
            vid[v] = i
        return i

    for v in inputs:
        uniform = not once and is_uniform(v)
        g = gather_of(v)
        # (a literal every launch gives: `kernel.bridge.literal_arguments`, as the passes read it)
        literal = uniform and isinstance(v.owner, kas.ConstantOp) and math.isfinite(v.owner.number)
        mops.append(MOp(OpKind.LOAD, value=new(v, v.type.size, v.name_hint or "", v.type, is_input=True,  # type: ignore
                                          uniform=uniform, shared=not uniform, literal=literal,
                                          gather=g.index.type.count.data if g is not None else 0),  # type: ignore
                        location=first_reader.get(v)))
    pending = iter(impls)
    loaded = set(inputs)

    def emit(block_ops: Sequence[Operation]) -> None:
        for op in block_ops:
            if isinstance(op, kas.CallOp):
                r = op.results[0]
                result = new(r, r.type.size, r.name_hint or "", r.type, stored=r in outputs)  # type: ignore[attr-defined]
                mops.append(MOp(OpKind.CALL, impl=next(pending), args=[vid[a] for a in op.operands], result=result,
                                location=op.location))
            elif isinstance(op, kas.LoopOp):
                if forwards_carried(op):
                    raise CompileError("a loop that yields one carried value in another's place cannot run inside "
                                       "a kernel")
                if layout != "soa":
                    for v in _read_inside(op):
                        if v in loaded and not values[vid[v]].uniform:  # the block's copy serves every iteration
                            loaded.discard(v)
                            held = new(None, v.type.size, v.name_hint or "", v.type)  # type: ignore[attr-defined]
                            mops.append(MOp(OpKind.COPY, args=[vid[v]], result=held, location=op.location))
                            vid[v] = held
                args = op.body.block.args
                carried = [new(None, r.type.size, r.name_hint or "", r.type, carried=True,  # type: ignore[attr-defined]
                               stored=r in outputs and layout == "soa") for r in op.res]
                for k, init in enumerate(op.iter_args):
                    mops.append(MOp(OpKind.COPY, args=[vid[init]], result=carried[k], location=op.location))
                    vid[args[k]] = carried[k]
                mops.append(MOp(OpKind.LOOP, trip=op.trip_count.data, carries=carried, inits=len(args),
                                location=op.location))
                emit(op.body_ops)
                term = op.body.block.last_op
                for k, y in enumerate(term.operands):
                    if k < len(args) and y is args[k]:
                        continue  # carried unchanged
                    mops.append(MOp(OpKind.COPY, args=[vid[y]], result=carried[k], location=term.location))
                mops.append(MOp(OpKind.YIELD, carries=carried, location=term.location))
                for r, c in zip(op.res, carried):
                    vid[r] = c
            elif isinstance(op, kas.ReduceOp):
                pass  # stored as its operand's partials below
            else:
                raise CompileError(f"'{op.name}' cannot be part of a kernel")

    emit(ops)
    for r in outputs:
        if isinstance(r.owner, kas.ReduceOp):
            mops.append(MOp(OpKind.STORE, value=vid[r.owner.operand], location=r.owner.location,
                            reduce=r.owner.reduce_kind.value))
            continue
        stored = vid[r]
        if values[stored].carried and layout != "soa":
            staged = new(None, values[stored].size, values[stored].name, values[stored].type, stored=True)
            mops.append(MOp(OpKind.COPY, args=[stored], result=staged, location=r.owner.location))
            stored = staged
        mops.append(MOp(OpKind.STORE, value=stored, location=r.owner.location, scatter=kas.only_scattered(r)))
    bx = max((impl.bx for impl in impls), default=1)
    model = KernelModel(bx, by, values, mops, itemsize, layout, once, 1 if once else per_thread)
    off = 0
    for v in values.values():
        if v.uniform:
            continue
        v.offset = off
        off += -(-v.size * by // ALIGN_WORDS) * ALIGN_WORDS
    return with_barrier_after_every_op(model)


def launch_ops(name: str, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue], location=None
               ) -> tuple[list[Operation], list[SSAValue]]:
    """The host ops that run a group's kernel `name`: its `fuse.launch` (of its
    `kernel_arguments`), then a `fuse.combine` for each reduction among `outputs`; and the
    value that stands for each output after them."""
    launch = fuse.LaunchOp(name, kernel_arguments(inputs), [v.type for v in outputs])
    ops: list[Operation] = [launch]
    values: list[SSAValue] = []
    for r, v in zip(launch.res, outputs):
        r.name_hint = v.name_hint
        if location is not None:
            launch.location = location
        if isinstance(v.owner, kas.ReduceOp):
            r.name_hint = f"{v.name_hint}_partials" if v.name_hint else None
            combine = fuse.CombineOp(v.owner.reduce_kind, r)
            combine.res.name_hint = v.name_hint
            combine.location = v.owner.location
            ops.append(combine)
            values.append(combine.res)
        else:
            values.append(r)
    if location is not None:
        launch.location = location
    return ops, values
