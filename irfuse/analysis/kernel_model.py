"""A light model of one kernel, shared by the in-kernel passes and the planner.

The passes read a `fuse.kernel` into a `KernelModel`, decide (order,
places, offsets, barriers, thread remapping) with the analyses of
`irfuse.analysis.schedule`, and write the decisions back; the planner builds
models of candidate kernels directly and runs the very same analyses, so
its prediction describes the kernel that will be emitted.

A kernel with in-kernel loops stays one flat list of ops: a `loop` op opens a loop's body
and its `yield` op closes it (`loop_ends`); `unrolled` is the order in which a block
runs them with each body repeated (twice stand for any number of iterations, see there),
and `op_weights` how many times each runs. A loop's results are *carried* values
(`MValue.carried`): one value each, written by the `copy` ops that enter it (before the
loop, and at the end of the body) and read in the body and after the loop.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from xdsl.dialects.builtin import UnitAttr

from irfuse.dialects import fuse
from irfuse.dialects.access_pattern import AccessPattern
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
    carried: bool = False  # a loop's carried value (see the module's docstring)
    uniform: bool = False  # in the uniform place: the block's one copy of a uniform input (not shared, no registers)
    type: object = None  # its kas type where known (building IR from a model needs it)

    @property
    def span(self) -> int:
        return self.pitch or self.size


@dataclass
class MOp:
    kind: str  # "load", "call", "copy", "store", "barrier", "loop", "yield"
    value: int | None = None  # load: the loaded value; store: the stored value
    impl: Implementation | None = None
    args: list[int] = field(default_factory=list)  # call: operands; copy: [source]
    result: int | None = None  # call, copy
    remap: bool = False
    location: object = None  # the source location of the statement the op comes from
    trip: int = 0  # loop: iterations
    carries: list[int] = field(default_factory=list)  # loop, yield: the loop's carried values
    inits: int = 0  # loop: how many of them are carried in (the others only out)
    origin: int = -1  # index of the IR op it was read from (model_from_kernel), -1 if none
    reduce: str = ""  # store: the reduction whose per-block partial it stores ("" for a plain store)

    def reads(self) -> list[int]:
        if self.kind in ("call", "copy"):
            return list(self.args)
        if self.kind == "store":
            return [self.value]  # type: ignore[list-item]
        return []

    def writes(self) -> list[int]:
        if self.kind in ("call", "copy"):
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
    once: bool = False  # runs over one element (a kernel of uniform values)
    per_thread: int = 1  # elements each thread runs (`fuse.kernel` elements_per_thread)

    @property
    def threads(self) -> int:
        return self.bx * self.by // self.per_thread

    @property
    def thread_rows(self) -> int:
        """Threads per element column: element y runs on thread row y % thread_rows."""
        return self.by // self.per_thread

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

    def has_loops(self) -> bool:
        return any(op.kind == "loop" for op in self.ops)

    def copy(self) -> "KernelModel":
        return KernelModel(self.bx, self.by, {k: MValue(**vars(v)) for k, v in self.values.items()},
                           [MOp(**{**vars(op), "args": list(op.args), "carries": list(op.carries)})
                            for op in self.ops], self.itemsize, self.layout, self.once, self.per_thread)

    def place(self, vid: int) -> fuse.PlaceAttr:
        """The IR place of value `vid`."""
        v = self.values[vid]
        if v.uniform:
            return fuse.PlaceAttr.uniform()
        return fuse.PlaceAttr.shared(v.offset, v.pitch) if v.shared else fuse.PlaceAttr.reg()

    def array_words(self) -> int:
        """Shared words the emitted kernel declares apart from the planned buffer: each uniform
        input's block copy, each reduction's staging of the block's elements, and the runs of
        each register load staged through shared memory (`staged_run_loads`)."""
        staged = sum(self.values[self.ops[i].value].size * self.by for i in staged_run_loads(self))
        return staged + sum(self.values[op.value].size * (self.by if op.kind == "store" else 1) for op in self.ops
                            if (op.kind == "load" and self.values[op.value].uniform) or (op.kind == "store" and op.reduce))

    def batch_loads(self) -> int:
        """Words per element the kernel loads from per-element inputs (uniform ones are read
        from cache by every element: no per-element traffic)."""
        return sum(self.values[op.value].size for op in self.ops
                   if op.kind == "load" and not self.values[op.value].uniform)


# --- loops ------------------------------------------------------------------


def loop_ends(ops: list[MOp]) -> dict[int, int]:
    """The index of each `loop` op's `yield` in `ops`."""
    ends: dict[int, int] = {}
    stack: list[int] = []
    for i, op in enumerate(ops):
        if op.kind == "loop":
            stack.append(i)
        elif op.kind == "yield":
            ends[stack.pop()] = i
    return ends


def op_weights(ops: list[MOp]) -> list[int]:
    """How many times each op runs per thread: the product of its enclosing loops' trip counts
    (a `loop` op itself runs once per entry, its `yield` once per iteration)."""
    out: list[int] = []
    factor = [1]
    for op in ops:
        if op.kind == "loop":
            out.append(factor[-1])
            factor.append(factor[-1] * op.trip)
        elif op.kind == "yield":
            out.append(factor[-1])
            factor.pop()
        else:
            out.append(factor[-1])
    return out


def unrolled(ops: list[MOp]) -> list[int]:
    """Indices of `ops` in the order a block runs them, each loop body repeated: twice when
    the loop iterates more than once. Twice suffices for any analysis of pairs of accesses
    since the last barrier: every iteration touches the same words from the same threads,
    so a pair across two or more iterations is also a pair across one."""
    ends = loop_ends(ops)
    out: list[int] = []

    def walk(lo: int, hi: int) -> None:
        i = lo
        while i < hi:
            out.append(i)
            if ops[i].kind == "loop":
                end = ends[i]
                for _ in range(min(ops[i].trip, 2)):
                    walk(i + 1, end + 1)
                i = end + 1
            else:
                i += 1

    walk(0, len(ops))
    return out


# --- who holds which words ----------------------------------------------------


def default_pattern(size: int) -> AccessPattern:
    """The pattern of a value no call touches: one thread per element, all its words."""
    return AccessPattern(f"ty*{size}" if size > 1 else "ty", 1, 1, size)


def register_pattern(model: KernelModel, vid: int) -> tuple[AccessPattern, int, bool]:
    """(AP, implementation bx, remapped): the threads that hold value `vid`'s words when it is
    in registers. Its producing call's result pattern; for a loaded, copied or carried value
    the first call reading it; one thread per element if no call touches it."""
    for op in model.ops:
        if op.kind == "call" and op.result == vid:
            return op.impl.result_ap, op.impl.bx, op.remap  # type: ignore[union-attr]
    for op in model.ops:
        if op.kind == "call" and vid in op.args:
            return op.impl.operand_aps[op.args.index(vid)], op.impl.bx, op.remap  # type: ignore[union-attr]
    return default_pattern(model.values[vid].size), 1, False


def copy_pattern(model: KernelModel, op: MOp) -> tuple[AccessPattern, int, bool]:
    """The threads that run a `copy`: each word is copied by the thread holding it in
    registers (the source's, else the destination's); between shared values, by the threads
    that read the destination first, so that no barrier is needed in between."""
    src, dst = op.args[0], op.result
    if not model.values[src].shared:
        return register_pattern(model, src)
    return register_pattern(model, dst)  # type: ignore[arg-type]


# Bytes of loads an SM must keep in flight to stream at the copy bandwidth: bandwidth per SM
# times the turnaround from a block's loads to the next block's (H200: 4.26 TB/s / 132 SMs x
# about 1.4 us, the larger of the two built-in GPUs). Measured on SyncTest's kernel (4.6 KB a
# block), 10 resident blocks asked stream fastest on the H200 (8: 3% slower; 11 and 12:
# 0.5-0.7%) and faster than 11 on the H100 (benchmarks/NOTES.md, tenth and nineteenth sessions).
IN_FLIGHT_BYTES = 45 * 1024


def launch_min_blocks(model: KernelModel) -> int:
    """Resident blocks the emitted kernel asks ptxas for (`__launch_bounds__`): 1024 threads
    per SM, i.e. at most 64 registers per thread; more for a kernel without loops whose
    blocks load so little that 1024 threads keep less than `IN_FLIGHT_BYTES` of loads in
    flight (SyncTest: 4.6 KB a block, 8 blocks keep 37 KB; asked for 10, ptxas fits it in
    47 registers and it streams 3-4% faster on an H200), up to 2048 threads per SM.

    Without a minimum, `__launch_bounds__` lets ptxas squeeze registers for full occupancy
    and spill; without launch bounds at all it assumes 1024-thread blocks. A kernel that
    spills at the raised minimum is compiled again at 1024 threads (`driver.compile.build`).
    """
    if model.once:
        return 1  # one block over one element
    base = default_min_blocks(model.threads)
    loaded = model.by * model.itemsize * model.batch_loads()
    if model.has_loops() or not loaded or base * loaded >= IN_FLIGHT_BYTES:
        return base
    return max(base, min(2048 // model.threads, -(-IN_FLIGHT_BYTES // loaded)))


# Bytes of shared memory a block may add for staged loads (`staged_run_loads`).
STAGED_RUN_BYTES = 64 * 1024


def staged_run_loads(model: KernelModel) -> list[int]:
    """Indices of the loads a structure-of-arrays kernel stages through shared memory although
    their values live in registers: its leading loads (before its first other op) of
    per-element values, each held whole by one thread of its element. On the GPU the block
    copies such a value's runs (word k of its `by` elements, contiguous in global memory) with
    16-byte asynchronous copies, all the loads' at once, then each thread reads its words
    after one barrier: 4-byte loads straight into registers stream 1-3.5% slower on an H100
    and an H200 (benchmarks/NOTES.md, eighteenth session). The CPU backend loads directly.

    All of them or none: with some of BigFusion's loads staged and the others direct, its
    results were off the direct kernel's by rounding on an H100 and an H200 (within the
    verification's bounds; the same PTX arithmetic, which ptxas compiled differently), while
    every kernel measured with all of them staged gave the direct kernel's bits, which a
    variant for strided views (whose runs cannot be staged, `cuda_emit`) must reproduce.
    Offered where the runs are whole 16-byte pieces (`by` a multiple of 16 bytes' words) and
    the staging takes at most `STAGED_RUN_BYTES` a block (the cost model sees it through
    `array_words`)."""
    if (model.layout != "soa" or model.once or model.per_thread != 1 or model.bx != 1
            or model.by % (16 // model.itemsize)):
        return []
    out: list[int] = []
    for i, op in enumerate(model.ops):
        if op.kind != "load":
            break
        v = model.values[op.value]  # type: ignore[index]
        if v.shared or v.uniform:
            continue
        ap, bx, remap = register_pattern(model, v.id)
        if v.carried or bx != 1 or remap or ap.relative() != frozenset(range(v.size)):
            return []
        out.append(i)
    staged = sum(model.values[model.ops[i].value].size for i in out) * model.by * model.itemsize  # type: ignore[index]
    return out if staged <= STAGED_RUN_BYTES else []


def default_min_blocks(threads: int) -> int:
    """The resident blocks asked of ptxas for any kernel: 1024 threads per SM."""
    return max(1, 1024 // threads)


# --- IR <-> model -----------------------------------------------------------


def model_from_kernel(kernel, itemsize: int = 4, library=None) -> tuple[KernelModel, dict]:
    """The model of a `fuse.kernel` and the map model op index -> IR op (barriers included;
    a `fuse.loop` gives its `loop` op, its `fuse.yield` the `yield`)."""
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
                ops.append(MOp("load", value=vid(op.res), location=op.location))
            elif isinstance(op, fuse.CallOp):
                impl = find_implementation(op.op_name, op.impl.data, library)
                ops.append(MOp("call", impl=impl, args=[vid(a) for a in op.args], result=vid(op.res),
                               remap=op.remapped, location=op.location))
            elif isinstance(op, fuse.CopyOp):
                ops.append(MOp("copy", args=[vid(op.source)], result=vid(op.res), location=op.location))
            elif isinstance(op, fuse.StoreOp):
                v = vid(op.value)
                values[v].stored = True
                ops.append(MOp("store", value=v, location=op.location,
                               reduce=op.reduce_kind.value if op.reduce_kind else ""))
            elif isinstance(op, fuse.BarrierOp):
                ops.append(MOp("barrier", location=op.location))
            elif isinstance(op, fuse.LoopOp):
                ops.append(MOp("loop", trip=op.trip_count.data, carries=[vid(r) for r in op.res],
                               inits=len(op.iter_args), location=op.location))
                ops[-1].origin = origin
                ir_ops.append(op)
                walk(op.body.block)
                continue
            elif isinstance(op, fuse.YieldOp):
                loop = op.parent_op()
                ops.append(MOp("yield", carries=[vid(r) for r in loop.res], location=op.location))
            else:
                raise ValueError(f"unexpected op {op.name} in a fuse.kernel")
            ops[-1].origin = origin
            ir_ops.append(op)

    walk(kernel.body.block)
    model = KernelModel(kernel.bx.data, kernel.by.data, values, ops, itemsize, kernel.global_layout,
                        kernel.runs_once, kernel.per_thread)
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
        if mop.kind == "barrier":
            blocks[-1].add_op(fuse.BarrierOp())
            continue
        ir = ir_ops[mop.origin]
        blocks[-1].add_op(ir)
        if mop.kind == "loop":
            ir.set_places([model.place(c) for c in mop.carries])
            blocks.append(ir.body.block)
        elif mop.kind == "yield":
            blocks.pop()
        elif mop.kind in ("load", "call", "copy"):
            ir.set_place(model.place(mop.result if mop.kind in ("call", "copy") else mop.value))  # type: ignore[arg-type]
        if mop.kind == "call":
            if mop.remap:
                ir.attributes["remap"] = UnitAttr()
            else:
                ir.attributes.pop("remap", None)
