"""The bridge between a `fuse.kernel` and its `KernelModel`, both ways: reading a kernel
into a model (`model_from_kernel`), writing a model's decisions back onto the kernel it was
read from (`write_back`: op order, places, remap flags, barriers), and writing a model
built from scratch as a new `fuse.kernel` (`kernel_op`). This is the one place that turns
IR into models and models into IR: the analyses only read models, the transformations
change them, and the passes move the result through here.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence

from xdsl.dialects.builtin import UnitAttr
from xdsl.ir import Operation, SSAValue

from irfuse.dialects import fuse, kas
from irfuse.kernel.model import KernelModel, MOp, MValue, OpKind
from irfuse.library.catalogue import find_implementation


def gather_of(v: SSAValue) -> kas.GatherOp | None:
    """The `kas.gather` that makes `v`, if one does: a kernel reading `v` gathers it itself
    (`fuse.load ... gather`), from the nodal input and the connectivity."""
    return v.owner if isinstance(v.owner, kas.GatherOp) else None


def kernel_arguments(inputs: Sequence[SSAValue]) -> list[SSAValue]:
    """The global arrays a kernel loading `inputs` takes, once each: a gathered value's nodal
    input and connectivity in its place."""
    out: list[SSAValue] = []
    for v in inputs:
        g = gather_of(v)
        for a in ((g.nodal, g.index) if g is not None else (v,)):
            if a not in out:
                out.append(a)
    return out


def literal_arguments(module) -> dict[str, dict[int, float | tuple[float, ...]]]:
    """Kernel name -> {input position: number} for the inputs that every launch of the kernel
    gives from a `kas.constant` of that number, and {input position: numbers} for those given
    from a `kas.table` of more than one word (a uniform input fixed when compiling:
    `transforms.constant_inputs`). The host still writes the constant's word and
    passes it (the launch interface is unchanged); the kernel reads its literal instead, which
    the C compiler folds: the unit directions a Jacobian seeds its tangents with
    (`transforms.jacobian`), the factors of an element code. The model marks their loaded
    values `literal` (`model_from_kernel`), so that what is made of them alone is known when
    compiling (`transforms.promotion`)."""
    seen: dict[str, dict[int, float | None]] = {}
    for op in module.walk():
        if not isinstance(op, fuse.LaunchOp):
            continue
        # (a literal that is not finite keeps its word: C has no portable spelling of it)
        given = {i: _literal(a) for i, a in enumerate(op.args)}
        known = seen.get(op.kernel_name)
        seen[op.kernel_name] = given if known is None else {
            i: v if v is not None and known.get(i) == v else None for i, v in given.items()}
    return {name: {i: v for i, v in given.items() if v is not None}
            for name, given in seen.items() if any(v is not None for v in given.values())}


def _literal(a) -> float | tuple[float, ...] | None:
    """What a launch argument's literal is: a `kas.constant`'s number, a `kas.table`'s numbers
    (its one number where it holds one), or None."""
    if isinstance(a.owner, kas.ConstantOp) and math.isfinite(a.owner.number):
        return a.owner.number
    if isinstance(a.owner, kas.TableOp):
        numbers = a.owner.numbers
        return numbers[0] if len(numbers) == 1 else numbers
    return None


def place_of(model: KernelModel, vid: int) -> fuse.PlaceAttr:
    """The IR place of value `vid` of the model."""
    v = model.values[vid]
    if v.uniform:
        return fuse.PlaceAttr.uniform()
    return fuse.PlaceAttr.shared(v.offset, v.pitch) if v.shared else fuse.PlaceAttr.reg()


def model_from_kernel(kernel, itemsize: int = 4, library=None,
                      literals: Collection[int] = ()) -> tuple[KernelModel, dict]:
    """The model of a `fuse.kernel` and the map model op index -> IR op (barriers included;
    a `fuse.loop` gives its `loop` op, its `fuse.yield` the `yield`). `literals`: the positions
    of its scalar uniform inputs that every launch gives one literal (`literal_arguments`),
    whose loaded values are marked `literal`."""
    literal_args = {kernel.input_args[i] for i in literals if i < len(kernel.input_args)}
    values: dict[int, MValue] = {}
    ids: dict = {}
    ops: list[MOp] = []
    ir_ops: list = []

    def vid(v) -> int:
        if v not in ids:
            ids[v] = len(values)
            owner = v.owner
            place = fuse.place_of(v)
            is_input = isinstance(owner, fuse.LoadOp)
            uniform = place.is_uniform
            values[ids[v]] = MValue(ids[v], v.type.size, v.name_hint or "", place.is_shared, place.offset.data,
                                    is_input=is_input, pitch=place.pitch.data, type=v.type, uniform=uniform)
        return ids[v]

    # A carried value is one model value for the loop's result, its block argument, its
    # iter_arg and its yielded value (one place, see fuse.LoopOp).
    for loop in kernel.walk():
        if isinstance(loop, fuse.LoopOp):
            yielded = loop.yield_op.values if loop.yield_op is not None else []
            for k, r in enumerate(loop.res):
                c = vid(r)
                values[c].carried = True
                group = [loop.body.block.args[k], loop.iter_args[k]] if k < len(loop.iter_args) else []
                for v in [*group, *yielded[k:k + 1]]:
                    ids[v] = c

    def walk(block) -> None:
        for op in block.ops:
            origin = len(ir_ops)
            if isinstance(op, fuse.LoadOp):
                ops.append(MOp(OpKind.LOAD, value=vid(op.res), location=op.location))
                if op.source in literal_args and values[ops[-1].value].uniform and op.res.type.size == 1:
                    values[ops[-1].value].literal = True
                if op.index is not None:
                    values[ops[-1].value].gather = op.index.type.count.data  # type: ignore
            elif isinstance(op, fuse.CallOp):
                impl = find_implementation(op.op_name, op.impl.data, library)
                ops.append(MOp(OpKind.CALL, impl=impl, args=[vid(a) for a in op.args], result=vid(op.res),
                               remap=op.remapped, location=op.location))
            elif isinstance(op, fuse.CopyOp):
                ops.append(MOp(OpKind.COPY, args=[vid(op.source)], result=vid(op.res), location=op.location))
            elif isinstance(op, fuse.StoreOp):
                v = vid(op.value)
                values[v].stored = True
                ops.append(MOp(OpKind.STORE, value=v, location=op.location,
                               reduce=op.reduce_kind.value if op.reduce_kind else "", scatter=op.scatters))
            elif isinstance(op, fuse.BarrierOp):
                ops.append(MOp(OpKind.BARRIER, location=op.location))
            elif isinstance(op, fuse.LoopOp):
                ops.append(MOp(OpKind.LOOP, trip=op.trip_count.data, carries=[vid(r) for r in op.res],
                               inits=len(op.iter_args), location=op.location))
                ops[-1].origin = origin
                ir_ops.append(op)
                walk(op.body.block)
                continue
            elif isinstance(op, fuse.YieldOp):
                loop = op.parent_op()
                ops.append(MOp(OpKind.YIELD, carries=[vid(r) for r in loop.res], location=op.location))
            else:
                raise ValueError(f"unexpected op {op.name} in a fuse.kernel")
            ops[-1].origin = origin
            ir_ops.append(op)

    walk(kernel.body.block)
    model = KernelModel(kernel.bx.data, kernel.by.data, values, ops, itemsize, kernel.global_layout,
                        kernel.runs_once, kernel.per_thread, kernel.loads_by_readers is not None)
    return model, {"ops": ir_ops, "ids": ids}


def write_back(kernel, model: KernelModel, mapping: dict) -> None:
    """Rewrites the kernel's op order, places, remap flags and barriers from the model.

    The model's non-barrier ops must be the kernel's non-barrier ops (in any order that keeps
    every op inside its loop), each knowing the IR op it was read from (`MOp.origin`).
    """
    ir_ops = mapping["ops"]
    for op in reversed(ir_ops):
        op.detach()
        if isinstance(op, fuse.BarrierOp):
            op.erase()

    blocks = [kernel.body.block]
    for mop in model.ops:
        if mop.kind == OpKind.BARRIER:
            blocks[-1].add_op(fuse.BarrierOp())
            continue
        ir = ir_ops[mop.origin]
        blocks[-1].add_op(ir)
        if mop.kind == OpKind.LOOP:
            ir.set_places([place_of(model, c) for c in mop.carries])
            blocks.append(ir.body.block)
        elif mop.kind == OpKind.YIELD:
            blocks.pop()
        elif mop.kind in (OpKind.LOAD, OpKind.CALL, OpKind.COPY):
            vid = mop.result if mop.kind in (OpKind.CALL, OpKind.COPY) else mop.value
            ir.set_place(place_of(model, vid))  # type: ignore[arg-type]
        if mop.kind == OpKind.CALL:
            if mop.remap:
                ir.attributes["remap"] = UnitAttr()
            else:
                ir.attributes.pop("remap", None)


def kernel_op(name: str, model: KernelModel, inputs: Sequence[SSAValue], outputs: Sequence[SSAValue]) -> fuse.KernelOp:
    """The `fuse.kernel` of a model built from scratch (`transforms.kernel_builder`) from these
    inputs and outputs (IR values whose types and names the kernel's arguments take; a
    gathered input's nodal input and connectivity are its arguments, and its load gathers)."""
    arguments = kernel_arguments(inputs)
    position = {a: i for i, a in enumerate(arguments)}
    loads = [op for op in model.ops if op.kind == OpKind.LOAD]
    uniform = [position[inputs[i]] for i, op in enumerate(loads) if model.values[op.value].uniform]  # type: ignore
    kernel = fuse.KernelOp(name, model.bx, model.by, [v.type for v in arguments], [v.type for v in outputs],
                           layout=model.layout, uniform=uniform, once=model.once,
                           elements_per_thread=model.per_thread,
                           unplaced=model.shared_bytes() > fuse.MAX_SHARED_BYTES_PER_BLOCK)
    first = next((op.location for op in model.ops if op.kind == OpKind.CALL and op.location is not None), None)
    if first is not None:
        kernel.location = first  # a kernel stands where its first statement does
    for arg, v in zip([*kernel.input_args, *kernel.output_args], [*arguments, *outputs]):
        arg.name_hint = v.name_hint
    blocks = [kernel.body.block]
    loops: list[fuse.LoopOp] = []
    onchip: dict[int, SSAValue] = {}

    def place(vid: int) -> fuse.PlaceAttr:
        return place_of(model, vid)

    def name(vid: int) -> str | None:
        return model.values[vid].name or None

    loads = stores = 0  # the i-th store writes the i-th output (several may store one value)
    for op in model.ops:
        if op.kind == OpKind.LOAD:
            g = gather_of(inputs[loads])
            args = kernel.input_args
            ir: Operation = (fuse.LoadOp(args[position[inputs[loads]]], place(op.value)) if g is None else  # type: ignore
                             fuse.LoadOp(args[position[g.nodal]], place(op.value), args[position[g.index]]))  # type: ignore
            loads += 1
            onchip[op.value] = ir.results[0]  # type: ignore[index]
        elif op.kind == OpKind.CALL:
            impl = op.impl
            assert impl is not None
            ir = fuse.CallOp(impl.op.name, impl.name, [onchip[a] for a in op.args], impl.op.result_type,
                             place(op.result))  # type: ignore[arg-type]
            onchip[op.result] = ir.results[0]  # type: ignore[index]
        elif op.kind == OpKind.COPY:
            ir = fuse.CopyOp(onchip[op.args[0]], place(op.result))  # type: ignore[arg-type]
            onchip[op.result] = ir.results[0]  # type: ignore[index]
        elif op.kind == OpKind.STORE:
            ir = fuse.StoreOp(onchip[op.value], kernel.output_args[stores], op.reduce or None,  # type: ignore[index]
                              scatter=op.scatter)
            stores += 1
        elif op.kind == OpKind.LOOP:
            ir = fuse.LoopOp(op.trip, [onchip[c] for c in op.carries[:op.inits]],
                             [model.values[c].type for c in op.carries],
                             [place(c) for c in op.carries])
            for c, arg in zip(op.carries, ir.body.block.args):
                onchip[c] = arg
                arg.name_hint = name(c)
        elif op.kind == OpKind.YIELD:
            ir = fuse.YieldOp([onchip[c] for c in op.carries])
        else:
            ir = fuse.BarrierOp()
        if op.location is not None:
            ir.location = op.location
        if op.kind in (OpKind.LOAD, OpKind.CALL, OpKind.COPY):
            ir.results[0].name_hint = name(op.result if op.kind != OpKind.LOAD else op.value)  # type: ignore[arg-type]
        blocks[-1].add_op(ir)
        if op.kind == OpKind.LOOP:
            blocks.append(ir.body.block)  # type: ignore[attr-defined]
            loops.append(ir)  # type: ignore[arg-type]
        elif op.kind == OpKind.YIELD:
            blocks.pop()
            loop = loops.pop()
            for c, r in zip(op.carries, loop.res):
                onchip[c] = r
                r.name_hint = name(c)
    return kernel
