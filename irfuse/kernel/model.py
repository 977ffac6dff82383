"""The kernel model: one `fuse.kernel` as plain data, shared by the in-kernel
transformations, the analyses and the planner.

The in-kernel passes read a `fuse.kernel` into a `KernelModel` (`kernel.bridge`), decide
(order, places, offsets, barriers, thread remapping) with the analyses, and write the
decisions back (`kernel.bridge.write_back`); the planner builds models of candidate kernels
directly (`transforms.kernel_builder`) and runs the very same analyses, so its prediction
describes the kernel that will be emitted. This module holds the data and the queries on it
that need nothing else: the ops in order (`OpKind`), the values and where they live, the
loops' structure, and which threads hold a register value.

A kernel with in-kernel loops stays one flat list of ops: a `loop` op opens a loop's body
and its `yield` op closes it (`loop_ends`); `unrolled` is the order in which a block
runs them with each body repeated (twice stand for any number of iterations, see there),
and `op_weights` how many times each runs. A loop's results are *carried* values
(`MValue.carried`): one value each, written by the `copy` ops that enter it (before the
loop, and at the end of the body) and read in the body and after the loop.
"""

from __future__ import annotations

import functools
from dataclasses import field

from xdsl.utils.str_enum import StrEnum

from irfuse.artifact.records import record
from irfuse.dialects.access_pattern import AccessPattern
from irfuse.library.implementations import Implementation


class OpKind(StrEnum):
    """What an op of the model does: one per `fuse` op a kernel body holds."""

    LOAD = "load"  # fuse.load: a kernel input onto the chip
    CALL = "call"  # fuse.call: an implementation of a library op
    COPY = "copy"  # fuse.copy: a value to another place (a loop's carried values)
    STORE = "store"  # fuse.store: a value (or a reduction's per-block partial) to a kernel output
    BARRIER = "barrier"  # fuse.barrier
    LOOP = "loop"  # fuse.loop: opens a loop's body
    YIELD = "yield"  # fuse.yield: closes it


@record
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
    gather: int = 0  # loaded through a connectivity of this many nodes per element (0: a plain load)
    literal: bool = False  # a uniform scalar input every launch gives one literal (a `kas.constant`)

    @property
    def span(self) -> int:
        return self.pitch or self.size


@record
class MOp:
    kind: OpKind
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
    scatter: bool = False  # store: the rows it writes are a scatter's terms, added into nodes after the kernel

    def reads(self) -> list[int]:
        if self.kind in (OpKind.CALL, OpKind.COPY):
            return list(self.args)
        if self.kind == OpKind.STORE:
            return [self.value]  # type: ignore[list-item]
        return []

    def writes(self) -> list[int]:
        if self.kind in (OpKind.CALL, OpKind.COPY):
            return [self.result]  # type: ignore[list-item]
        if self.kind == OpKind.LOAD:
            return [self.value]  # type: ignore[list-item]
        return []


@record
class KernelModel:
    bx: int
    by: int
    values: dict[int, MValue]
    ops: list[MOp]
    itemsize: int = 4
    layout: str = "aos"  # of the global arrays the kernel loads and stores (irfuse.dialects.layouts)
    once: bool = False  # runs over one element (a kernel of uniform values)
    per_thread: int = 1  # elements each thread runs (`fuse.kernel` elements_per_thread)
    loads_by_readers: bool = False  # `fuse.kernel`'s loads_by_readers (`transforms.reader_loads`)

    @property
    def threads(self) -> int:
        return self.bx * self.by // self.per_thread

    @property
    def thread_rows(self) -> int:
        """Threads per element column: element y runs on thread row y % thread_rows."""
        return self.by // self.per_thread

    def calls(self) -> list[MOp]:
        return [op for op in self.ops if op.kind == OpKind.CALL]

    def shared_words(self) -> int:
        top = 0
        for v in self.values.values():
            if v.shared:
                top = max(top, v.offset + self.by * v.span)
        return top

    def shared_bytes(self) -> int:
        return self.shared_words() * self.itemsize

    def barrier_count(self) -> int:
        return sum(1 for op in self.ops if op.kind == OpKind.BARRIER)

    def without_barriers(self) -> list[MOp]:
        return [op for op in self.ops if op.kind != OpKind.BARRIER]

    def has_loops(self) -> bool:
        return any(op.kind == OpKind.LOOP for op in self.ops)

    def reduces(self) -> bool:
        """Whether the kernel writes a reduction's block partials."""
        return any(op.kind == OpKind.STORE and op.reduce for op in self.ops)

    def gathers(self) -> bool:
        """Whether the kernel loads a value through a connectivity."""
        return any(v.gather for v in self.values.values())

    def copy(self) -> "KernelModel":
        ops = []
        for op in self.ops:
            twin = _shallow(op)
            twin.args, twin.carries = list(op.args), list(op.carries)
            ops.append(twin)
        return KernelModel(self.bx, self.by, {k: _shallow(v) for k, v in self.values.items()}, ops,
                           self.itemsize, self.layout, self.once, self.per_thread, self.loads_by_readers)

    def batch_loads(self) -> int:
        """Words per element the kernel loads from per-element inputs (uniform ones are read
        from cache by every element: no per-element traffic); a gathered value's rows and its
        connectivity's node numbers (32-bit) included."""
        return sum(self.values[op.value].size + index_words(self.values[op.value].gather, self.itemsize)
                   for op in self.ops if op.kind == OpKind.LOAD and not self.values[op.value].uniform)


def structure(model: KernelModel) -> tuple:
    """Everything of `model` that the in-kernel steps and the cost model read, as one hashable
    key: two models with the same key differ only in their values' names and their ops' source
    locations (which only diagnostics and emitted comments read), so the steps make the same
    decisions on both. The search analyses a group's configuration once for all the groups of
    the same structure (an element routine's unrolled quadrature points:
    `planner.search.group_configs`)."""
    values = tuple((v.size, v.shared, v.offset, v.stored, v.is_input, v.pitch, v.carried, v.uniform, v.type,
                    v.gather, v.literal) for v in model.values.values())
    ops = tuple((op.kind, op.value, _impl_structure(op.impl), tuple(op.args), op.result, op.remap, op.trip,
                 tuple(op.carries), op.inits, op.origin, op.reduce, op.scatter) for op in model.ops)
    return (model.bx, model.by, model.itemsize, model.layout, model.once, model.per_thread, model.loads_by_readers,
            tuple(model.values), values, ops)


def _impl_structure(impl: Implementation | None) -> tuple | None:
    if impl is None:
        return None
    return (impl.function_name, impl.bx, impl.recommended_by, tuple(impl.operand_aps), impl.result_ap,
            impl.along_tables)


@record(frozen=True)
class Gathered:
    """A global array a kernel reads through a connectivity: `rows` node rows of `row_words`
    words per element, and the element's node numbers (`index_words` words, read in order)."""

    rows: int
    row_words: int
    index_words: int


def index_words(count: int, itemsize: int) -> int:
    """Words of the element type that `count` 32-bit node numbers take."""
    return -(-count * 4 // itemsize)


def _shallow(obj):
    """A field-by-field copy of a dataclass instance (what `dataclasses.replace` gives, without
    running `__init__`: the planner copies models thousands of times)."""
    twin = object.__new__(type(obj))
    twin.__dict__.update(obj.__dict__)
    return twin


# --- loops ------------------------------------------------------------------


def loop_ends(ops: list[MOp]) -> dict[int, int]:
    """The index of each `loop` op's `yield` in `ops`."""
    ends: dict[int, int] = {}
    stack: list[int] = []
    for i, op in enumerate(ops):
        if op.kind == OpKind.LOOP:
            stack.append(i)
        elif op.kind == OpKind.YIELD:
            ends[stack.pop()] = i
    return ends


def op_weights(ops: list[MOp]) -> list[int]:
    """How many times each op runs per thread: the product of its enclosing loops' trip counts
    (a `loop` op itself runs once per entry, its `yield` once per iteration)."""
    if not any(op.kind is OpKind.LOOP for op in ops):
        return [1] * len(ops)
    out: list[int] = []
    factor = [1]
    for op in ops:
        if op.kind == OpKind.LOOP:
            out.append(factor[-1])
            factor.append(factor[-1] * op.trip)
        elif op.kind == OpKind.YIELD:
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
            if ops[i].kind == OpKind.LOOP:
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


class Patterns:
    """Every value's register pattern from one walk of the ops: (AP, implementation bx,
    remapped), the threads that hold a value's words when it is in registers (its producing
    call's result pattern; for a loaded, copied or carried value the first call reading it; one
    thread per element if no call touches it), and `covers` of it. Made once for a model and
    asked of many values (the bank-conflict and hazard analyses, register promotion, the
    emitters): a walk per value is quadratic in the ops. Valid while the model's ops stay as
    they were (its values' places may change: the answers do not read them)."""

    def __init__(self, model: KernelModel) -> None:
        self.model = model
        self.made: dict[int, MOp] = {}
        self.read: dict[int, tuple[MOp, int]] = {}
        for op in model.ops:
            if op.kind == OpKind.CALL:
                self.made.setdefault(op.result, op)  # type: ignore[arg-type]
                for k, a in enumerate(op.args):
                    self.read.setdefault(a, (op, k))

    def __call__(self, vid: int) -> tuple[AccessPattern, int, bool]:
        op = self.made.get(vid)
        if op is not None:
            return op.impl.result_ap, op.impl.bx, op.remap  # type: ignore[union-attr]
        if vid in self.read:
            op, k = self.read[vid]
            return op.impl.operand_aps[k], op.impl.bx, op.remap  # type: ignore[union-attr]
        return default_pattern(self.model.values[vid].size), 1, False

    def covers(self, vid: int) -> bool:
        """`covers_value` of the value's own register pattern."""
        return covers_value(self.model, self(vid), vid)


def covers_value(model: KernelModel, pattern: tuple[AccessPattern, int, bool], vid: int) -> bool:
    """Whether the threads of `pattern` touch every word of value `vid` (a reader's pattern
    may touch some: `item_0` of an array reads its first row)."""
    ap, bx, _ = pattern
    return _covers(ap, bx, model.by, model.values[vid].size)


@functools.lru_cache(maxsize=1 << 14)
def _covers(ap: AccessPattern, bx: int, by: int, size: int) -> bool:
    # (remembered: the plan search asks it of the same few patterns in thousands of kernels,
    # and each answer evaluates the pattern's start expression for every thread)
    words = {ap.start_of(tx, 0, bx, by) + r for tx in range(bx) for r in ap.relative()}
    return words >= set(range(size))


def copy_pattern(model: KernelModel, op: MOp, patterns: Patterns | None = None) -> tuple[AccessPattern, int, bool]:
    """The threads that run a `copy`: each word is copied by the thread holding it in
    registers (the source's, else the destination's); between shared values, by the threads
    that read the destination first, so that no barrier is needed in between, where they read
    all of it (else one thread per element copies every word). `patterns`: the model's
    `Patterns`, where the caller asks of many copies."""
    patterns = patterns or Patterns(model)
    src, dst = op.args[0], op.result
    if not model.values[src].shared:
        return patterns(src)
    if model.values[dst].shared and not patterns.covers(dst):  # type: ignore[index, arg-type]
        return default_pattern(model.values[dst].size), 1, False  # type: ignore[index]
    return patterns(dst)  # type: ignore[arg-type]
