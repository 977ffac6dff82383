"""A light model of one kernel, shared by the in-kernel passes and the planner.

The passes read a `fuse.kernel` into a `KernelModel`, decide (order,
places, offsets, barriers, thread remapping) with the analyses of
`irfuse.analysis.schedule`, and write the decisions back; the planner builds
models of candidate kernels directly and runs the very same analyses, so
its prediction describes the kernel that will be emitted.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import UnitAttr

from irfuse.dialects import fuse
from irfuse.library.catalogue import find_implementation
from irfuse.library.implementations import Implementation


@dataclass
class MValue:
    """One on-chip value: `size` words per element; `shared` place at `offset` with elements
    `pitch` words apart (0: `size`, no padding), else registers."""

    id: int
    size: int
    name: str = ""
    shared: bool = True
    offset: int = 0
    stored: bool = False  # written to a kernel output
    is_input: bool = False  # loaded from a kernel input
    pitch: int = 0

    @property
    def span(self) -> int:
        return self.pitch or self.size


@dataclass
class MOp:
    kind: str  # "load", "call", "store", "barrier"
    value: int | None = None  # load: the loaded value; store: the stored value
    impl: Implementation | None = None
    args: list[int] = field(default_factory=list)
    result: int | None = None
    remap: bool = False
    location: object = None  # the source location of the statement the op comes from

    def reads(self) -> list[int]:
        if self.kind == "call":
            return list(self.args)
        if self.kind == "store":
            return [self.value]  # type: ignore[list-item]
        return []

    def writes(self) -> list[int]:
        if self.kind == "call":
            return [self.result]  # type: ignore[list-item]
        if self.kind == "load":
            return [self.value]  # type: ignore[list-item]
        return []


@dataclass
class KernelModel:
    bx: int
    by: int
    values: dict[int, MValue]
    ops: list[MOp]
    itemsize: int = 4
    layout: str = "aos"  # of the global arrays the kernel loads and stores (irfuse.dialects.layouts)

    @property
    def threads(self) -> int:
        return self.bx * self.by

    def calls(self) -> list[MOp]:
        return [op for op in self.ops if op.kind == "call"]

    def shared_words(self) -> int:
        top = 0
        for v in self.values.values():
            if v.shared:
                top = max(top, v.offset + self.by * v.span)
        return top

    def shared_bytes(self) -> int:
        return self.shared_words() * self.itemsize

    def barrier_count(self) -> int:
        return sum(1 for op in self.ops if op.kind == "barrier")

    def without_barriers(self) -> list[MOp]:
        return [op for op in self.ops if op.kind != "barrier"]

    def copy(self) -> "KernelModel":
        return KernelModel(self.bx, self.by, {k: MValue(**vars(v)) for k, v in self.values.items()},
                           [MOp(**{**vars(op), "args": list(op.args)}) for op in self.ops], self.itemsize,
                           self.layout)


def launch_min_blocks(threads: int) -> int:
    """Resident blocks the emitted kernel asks ptxas for (`__launch_bounds__`): 1024 threads
    per SM, i.e. at most 64 registers per thread.

    Without a minimum, `__launch_bounds__` lets ptxas squeeze registers for full occupancy
    and spill; without launch bounds at all it assumes 1024-thread blocks.
    """
    return max(1, 1024 // threads)


# --- IR <-> model -----------------------------------------------------------


def model_from_kernel(kernel, itemsize: int = 4, library=None) -> tuple[KernelModel, dict]:
    """The model of a `fuse.kernel` and the map model op index -> IR op (barriers included)."""
    values: dict[int, MValue] = {}
    ids: dict = {}
    ops: list[MOp] = []
    ir_ops: list = []

    def vid(v) -> int:
        if v not in ids:
            ids[v] = len(ids)
            owner = v.owner
            place = owner.get_place()
            values[ids[v]] = MValue(ids[v], v.type.size, v.name_hint or "", place.is_shared, place.offset.data,
                                    is_input=isinstance(owner, fuse.LoadOp), pitch=place.pitch.data)
        return ids[v]

    for op in kernel.body.block.ops:
        if isinstance(op, fuse.LoadOp):
            ops.append(MOp("load", value=vid(op.res), location=op.location))
        elif isinstance(op, fuse.CallOp):
            impl = find_implementation(op.op_name, op.impl.data, library)
            ops.append(MOp("call", impl=impl, args=[vid(a) for a in op.args], result=vid(op.res),
                           remap=op.remapped, location=op.location))
        elif isinstance(op, fuse.StoreOp):
            v = vid(op.value)
            values[v].stored = True
            ops.append(MOp("store", value=v, location=op.location))
        elif isinstance(op, fuse.BarrierOp):
            ops.append(MOp("barrier", location=op.location))
        else:
            raise ValueError(f"unexpected op {op.name} in a fuse.kernel")
        ir_ops.append(op)
    model = KernelModel(kernel.bx.data, kernel.by.data, values, ops, itemsize, kernel.global_layout)
    return model, {"ops": ir_ops, "ids": ids}


def write_back(kernel, model: KernelModel, mapping: dict) -> None:
    """Rewrites the kernel's op order, places, remap flags and barriers from the model.

    The model's non-barrier ops must be the kernel's non-barrier ops (in any order).
    """
    ir_ops = [op for op in mapping["ops"] if not isinstance(op, fuse.BarrierOp)]
    defs = {mapping["ids"][op.results[0]]: op for op in ir_ops if isinstance(op, (fuse.LoadOp, fuse.CallOp))}
    stores: dict[int, list] = {}
    for op in ir_ops:
        if isinstance(op, fuse.StoreOp):
            stores.setdefault(mapping["ids"][op.value], []).append(op)
    block = kernel.body.block
    for op in list(block.ops):
        op.detach()
        if isinstance(op, fuse.BarrierOp):
            op.erase()
    used_stores: dict[int, int] = {}
    for mop in model.ops:
        if mop.kind == "barrier":
            block.add_op(fuse.BarrierOp())
            continue
        if mop.kind == "store":
            k = used_stores.get(mop.value, 0)  # type: ignore[arg-type]
            ir = stores[mop.value][k]  # type: ignore[index]
            used_stores[mop.value] = k + 1  # type: ignore[index]
        else:
            ir = defs[mop.result if mop.kind == "call" else mop.value]  # type: ignore[index]
        block.add_op(ir)
        if mop.kind in ("load", "call"):
            vid_ = mop.result if mop.kind == "call" else mop.value
            v = model.values[vid_]  # type: ignore[index]
            ir.set_place(fuse.PlaceAttr.shared(v.offset, v.pitch) if v.shared else fuse.PlaceAttr.reg())
        if mop.kind == "call":
            if mop.remap:
                ir.attributes["remap"] = UnitAttr()
            else:
                ir.attributes.pop("remap", None)
