"""The `fuse` dialect: kernels, and where each on-chip value lives.

A `fuse.kernel` runs with blocks of `bx * by` threads: `by` elements of the
batch per block, `bx` threads per element (thread coordinates `tx < bx`,
`ty < by`). A kernel with `elements_per_thread = E` (E > 1) runs its `by`
elements on `bx * by / E` threads: thread row ty runs elements ty, ty + by/E,
..., each statement for all of them in turn (a block's fixed work, a
reduction's tree for one, is spread over E times as many elements).  Its
block arguments are global arrays: the inputs, then the outputs.  Inside, `fuse.load` copies the block's elements of an input on
chip, `fuse.call` runs an implementation of a library op, `fuse.store`
writes a value to an output and `fuse.barrier` is `__syncthreads()`.

Every on-chip value carries a `#fuse.place`: `shared[OFF]` (the block's
`by` elements, element after element, at word offset OFF of the kernel's
shared buffer) or `reg` (each thread holds its own element's part).  The
in-kernel passes rewrite exactly these places and the barriers.

A `fuse.loop` runs its body a constant number of times inside the kernel. Each of its
results is a *carried* value with one place of its own (`-> (T into reg, ...)`): the
iter_arg k, the body's block argument k, the value yielded as k and result k all live
there. Only `fuse.copy` writes such a place (the iter_args and the yielded values are
copies into it, or the block argument itself when a value is carried unchanged), so a
carried value's storage is never shared with a value the body computes.

A kernel's global arrays are in the module's layout (`irfuse.dialects.layouts`): array of
structures unless the kernel says `layout(soa)`, structure of arrays; loads and stores
index global memory accordingly.

Uniform values (one for the whole batch, see `kas.is_uniform`) enter a kernel as inputs it
lists in `uniform(...)`: every element loads the same words. A kernel marked `once` runs
over a batch of one element: it computes uniform values from uniform values. A
`fuse.store ... reduce <kind>` combines the block's elements of a value into one partial
per block (a fixed tree in shared memory) instead of storing them: the output holds the
partials, word-major (word k of block b at k * blocks + b).

In the host program, `fuse.launch` runs a kernel on whole arrays and `fuse.combine`
combines a launch's partials into the reduced value, in a fixed order.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, IntAttr, ModuleOp, StringAttr, SymbolNameConstraint, SymbolRefAttr, UnitAttr
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import Attribute, Block, BlockArgument, Dialect, ParametrizedAttribute, Region, SSAValue, SpacedOpaqueSyntaxAttribute
from xdsl.irdl import (
    IRDLOperation,
    VarConstraint,
    base,
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_operand_def,
    opt_attr_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, NoTerminator, SymbolOpInterface, SymbolTable
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from irfuse.artifact.scatter_groups import GROUP_SLOTS, group_elements
from irfuse.dialects.access_pattern import AccessPattern, APError
from irfuse.dialects.element_types import module_element_type
from irfuse.dialects import kas
from irfuse.dialects.kas import (IndexType, KasType, MaskType, ReduceKind, ReduceKindAttr, ScatterOp, kas_type_of_shape,
                                 locate_block_arguments, parse_block_arguments)
from irfuse.dialects.layouts import LAYOUT_ATTR, Layout, module_layout
from irfuse.dialects.located import LocatedOperation
from irfuse.dialects.op_registry import op_registry


class Space(StrEnum):
    """Where an on-chip value lives."""

    SHARED = "shared"
    REG = "reg"
    UNIFORM = "uniform"  # the block's one copy of a uniform input, which every element reads


@irdl_attr_definition
class SpaceAttr(EnumAttribute[Space], SpacedOpaqueSyntaxAttribute):
    name = "fuse.space"


class RegisterUse(StrEnum):
    """Whether a value accessed through an access pattern may be placed in registers."""

    ALLOWED = "allowed"
    NOREG = "noreg"


@irdl_attr_definition
class RegisterUseAttr(EnumAttribute[RegisterUse], SpacedOpaqueSyntaxAttribute):
    name = "fuse.register_use"


@irdl_attr_definition
class LayoutAttr(EnumAttribute[Layout], SpacedOpaqueSyntaxAttribute):
    name = "fuse.layout"


SHARED = Space.SHARED
REG = Space.REG
UNIFORM = Space.UNIFORM


@irdl_attr_definition
class PlaceAttr(ParametrizedAttribute):
    """Where an on-chip value lives: `shared[offset]` (words), `shared[offset, pitch P]`, `reg`,
    or `uniform` (a value loaded from a uniform input: the block's one copy of it, in shared
    memory outside the planned buffer, which every element's thread reads).

    A shared value holds the block's elements one after another; with a pitch, element `e`
    starts at `offset + e*P` instead of `offset + e*size` (P > size words: padding that moves
    elements onto other banks, see `irfuse.analysis.bank_conflicts`). Pitch 0 means none.
    """

    name = "fuse.place"
    space: SpaceAttr
    offset: IntAttr
    pitch: IntAttr

    def __init__(self, space: Space, offset: int = 0, pitch: int = 0):
        super().__init__(SpaceAttr(Space(space)), IntAttr(offset), IntAttr(pitch))

    @staticmethod
    def shared(offset: int, pitch: int = 0) -> "PlaceAttr":
        return PlaceAttr(SHARED, offset, pitch)

    @staticmethod
    def reg() -> "PlaceAttr":
        return PlaceAttr(REG, 0)

    @staticmethod
    def uniform() -> "PlaceAttr":
        return PlaceAttr(UNIFORM, 0)

    @property
    def is_shared(self) -> bool:
        return self.space.data == SHARED

    @property
    def is_uniform(self) -> bool:
        return self.space.data == UNIFORM

    def text(self) -> str:
        if self.is_uniform:
            return UNIFORM
        if not self.is_shared:
            return REG
        pitch = f", pitch {self.pitch.data}" if self.pitch.data else ""
        return f"shared[{self.offset.data}{pitch}]"

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.text()}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            return _parse_place_body(parser)

    def verify(self) -> None:
        if self.offset.data < 0:
            raise VerifyException(f"shared offset must be non-negative, got {self.offset.data}")
        if self.pitch.data < 0 or (self.pitch.data and self.space.data != SHARED):
            raise VerifyException(f"a pitch must be positive and belongs to a shared place, got {self.pitch.data}")


def _parse_place_body(parser: AttrParser) -> list[Attribute]:
    if parser.parse_optional_keyword(REG):
        return [SpaceAttr(REG), IntAttr(0), IntAttr(0)]
    if parser.parse_optional_keyword(UNIFORM):
        return [SpaceAttr(UNIFORM), IntAttr(0), IntAttr(0)]
    parser.parse_keyword(SHARED)
    parser.parse_punctuation("[")
    off = parser.parse_integer(allow_boolean=False, allow_negative=False)
    pitch = 0
    if parser.parse_optional_punctuation(","):
        parser.parse_keyword("pitch")
        pitch = parser.parse_integer(allow_boolean=False, allow_negative=False)
        if pitch == 0:
            parser.raise_error("a pitch must be positive (leave it out for none)")
    parser.parse_punctuation("]")
    return [SpaceAttr(SHARED), IntAttr(off), IntAttr(pitch)]


def parse_place(parser: AttrParser) -> PlaceAttr:
    space, off, pitch = _parse_place_body(parser)
    return PlaceAttr(space.data, off.data, pitch.data)  # type: ignore[attr-defined]


@irdl_attr_definition
class AccessPatternAttr(ParametrizedAttribute):
    """`#fuse.ap<"start", block, stride, count[, noreg]>`: the words each thread touches
    (see `irfuse.dialects.access_pattern`); implementations carry one per operand and result."""

    name = "fuse.ap"
    start: StringAttr
    block: IntAttr
    stride: IntAttr
    count: IntAttr
    register_use: RegisterUseAttr

    def __init__(self, start: str, block: int, stride: int, count: int, noreg: bool = False):
        super().__init__(StringAttr(start), IntAttr(block), IntAttr(stride), IntAttr(count),
                         RegisterUseAttr(RegisterUse.NOREG if noreg else RegisterUse.ALLOWED))

    @staticmethod
    def of(ap: AccessPattern) -> "AccessPatternAttr":
        return AccessPatternAttr(ap.start, ap.block, ap.stride, ap.count, ap.noreg)

    def pattern(self) -> AccessPattern:
        return AccessPattern(self.start.data, self.block.data, self.stride.data, self.count.data,
                             self.register_use.data == RegisterUse.NOREG)

    def print_parameters(self, printer: Printer) -> None:
        printer.print_string(f"<{self.pattern().text()}>")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        with parser.in_angle_brackets():
            start = parser.parse_str_literal()
            nums = []
            for _ in range(3):
                parser.parse_punctuation(",")
                nums.append(parser.parse_integer(allow_boolean=False, allow_negative=False))
            use = RegisterUse.ALLOWED
            if parser.parse_optional_punctuation(","):
                parser.parse_keyword(RegisterUse.NOREG)
                use = RegisterUse.NOREG
        return [StringAttr(start), *(IntAttr(n) for n in nums), RegisterUseAttr(use)]

    def verify(self) -> None:
        try:
            self.pattern()
        except APError as e:
            raise VerifyException(str(e)) from None


# The most shared memory any GPU irfuse targets gives one block (Hopper: 227 KB): a place
# beyond it cannot be allocated, whatever the device.
MAX_SHARED_BYTES_PER_BLOCK = 227 * 1024
MAX_THREADS_PER_BLOCK = 1024


def _itemsize(op: IRDLOperation) -> int:
    """Bytes per word of the values of the module holding `op` (kas.element_type; float32 if none)."""
    module = op
    while module is not None and not isinstance(module, ModuleOp):
        module = module.parent_op()
    if module is None:
        return 4
    try:
        return module_element_type(module).itemsize
    except VerifyException:
        return 8  # the module's own verification names the bad attribute


class OnChipOp(LocatedOperation):
    """An op whose single result lives on chip at `place`."""

    def get_place(self) -> PlaceAttr:
        return self.properties["place"]  # type: ignore[return-value]

    def set_place(self, place: PlaceAttr) -> None:
        self.properties["place"] = place

    def verify_pitch(self) -> None:
        verify_place(self, self.get_place(), self.results[0].type.size)  # type: ignore[attr-defined]


class SourceIntoPlaceOp(OnChipOp):
    """`%v = OP %source into PLACE : T`: an on-chip copy of `source` (fuse.load, fuse.copy)."""

    def __init__(self, source: SSAValue, place: PlaceAttr):
        super().__init__(operands=[source], result_types=[source.type], properties={"place": place})

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.operands[0])
        printer.print_string(f" into {self.get_place().text()} : ")
        printer.print_attribute(self.results[0].type)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser):
        src = parser.parse_unresolved_operand()
        parser.parse_keyword("into")
        place = parse_place(parser)
        parser.parse_punctuation(":")
        t = parser.parse_type()
        op = cls(parser.resolve_operand(src, t), place)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


def enclosing_kernel(op: IRDLOperation) -> "KernelOp | None":
    """The `fuse.kernel` an op is in, through any `fuse.loop`s."""
    parent = op.parent_op()
    while isinstance(parent, LoopOp):
        parent = parent.parent_op()
    return parent if isinstance(parent, KernelOp) else None


def verify_place(op: IRDLOperation, place: PlaceAttr, size: int) -> None:
    """A place holds a value of `size` words per element: a pitch no smaller than it, and the
    block's elements within the shared memory a block can have; only a load fills the
    uniform place."""
    if place.is_uniform and not isinstance(op, LoadOp):
        raise VerifyException(f"{op.name} cannot write the uniform place: only a fuse.load of a uniform input does")
    if place.pitch.data and place.pitch.data < size:
        raise VerifyException(f"pitch {place.pitch.data} is smaller than the value's {size} words per element")
    kernel = enclosing_kernel(op)
    if place.is_shared and kernel is not None and kernel.unplaced is None:
        end = place.offset.data + kernel.by.data * (place.pitch.data or size)
        nbytes = end * _itemsize(op)
        if nbytes > MAX_SHARED_BYTES_PER_BLOCK:
            raise VerifyException(
                f"{place.text()} for {kernel.by.data} elements of {size} words ends at word {end} "
                f"({nbytes} bytes): a block has at most {MAX_SHARED_BYTES_PER_BLOCK} bytes of shared memory")


def place_of(v: SSAValue) -> PlaceAttr | None:
    """Where an on-chip value lives: its op's place, or for a `fuse.loop` result or body
    argument the loop's place for it; None for a value that is not on chip."""
    owner = v.owner
    if isinstance(owner, OnChipOp):
        return owner.get_place()
    if isinstance(owner, LoopOp):
        return owner.place_list()[v.index]  # type: ignore[attr-defined]
    if isinstance(v, BlockArgument) and isinstance(v.block.parent_op(), LoopOp):
        return v.block.parent_op().place_list()[v.index]  # type: ignore[union-attr]
    return None


@irdl_op_definition
class LoadOp(SourceIntoPlaceOp):
    """Copies this block's elements of a kernel input from global memory on chip; or, with
    `gather %index`, each element's rows of a nodal input at the node numbers its row of the
    connectivity `index` gives (`%Xe = fuse.load %X gather %conn into shared[0] :
    !kas.matrix<4x3>`: row a of element e is node conn[e][a] of X)."""

    name = "fuse.load"
    source = operand_def(KasType)
    index = opt_operand_def(IndexType)
    res = result_def(KasType)
    place = prop_def(PlaceAttr)
    traits = lazy_traits_def(lambda: (HasParent(KernelOp),))

    def __init__(self, source: SSAValue, place: PlaceAttr, index: SSAValue | None = None):
        result = source.type if index is None else kas_type_of_shape(
            (index.type.count.data, *source.type.shape))  # type: ignore[attr-defined]
        OnChipOp.__init__(self, operands=[source, [index] if index is not None else []], result_types=[result],
                          properties={"place": place})

    @property
    def gathers(self) -> bool:
        return self.index is not None

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_operand(self.source)
        if self.index is not None:
            printer.print_string(" gather ")
            printer.print_operand(self.index)
        printer.print_string(f" into {self.get_place().text()} : ")
        printer.print_attribute(self.res.type)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "LoadOp":
        src = parser.parse_unresolved_operand()
        index = parser.parse_unresolved_operand() if parser.parse_optional_keyword("gather") else None
        parser.parse_keyword("into")
        place = parse_place(parser)
        parser.parse_punctuation(":")
        t = parser.parse_type()
        if index is None:
            op = cls(parser.resolve_operand(src, t), place)
        else:
            # The operands' types are the kernel arguments' (already known by name).
            if not isinstance(t, KasType) or not t.shape:
                parser.raise_error(f"a gathering fuse.load gives an element value of K rows, not {t}")
            idx = parser.resolve_operand(index, IndexType(t.shape[0]))  # type: ignore[attr-defined]
            source = parser.resolve_operand(src, kas_type_of_shape(t.shape[1:]))  # type: ignore[attr-defined]
            op = cls(source, place, idx)
        op.attributes |= parser.parse_optional_attr_dict()
        return op

    def verify_(self) -> None:
        self.verify_pitch()
        if self.index is None and self.source.type != self.res.type:
            raise VerifyException("fuse.load result type must match its source")
        if self.index is not None:
            want = (self.index.type.count.data, *self.source.type.shape)  # type: ignore[attr-defined]
            if tuple(self.res.type.shape) != want:  # type: ignore[attr-defined]
                raise VerifyException(f"fuse.load gather: through {self.index.type}, rows of {self.source.type} "
                                      f"give {'x'.join(map(str, want))} per element, not {self.res.type}")
            if self.place.is_uniform:
                raise VerifyException("fuse.load gather gives one value per element: it cannot go into the uniform "
                                      "place")
        kernel = self.parent_op()
        if isinstance(kernel, KernelOp) and self.source not in kernel.input_args:
            raise VerifyException("fuse.load must read a kernel input argument")
        if isinstance(kernel, KernelOp) and self.index is not None:
            if self.index not in kernel.input_args:
                raise VerifyException("fuse.load gather must read its connectivity from a kernel input argument")
            if kernel.runs_once:
                raise VerifyException("fuse.load gather reads per-element rows: a kernel that runs once cannot")
            if kernel.global_layout != Layout.AOS.value:
                raise VerifyException("fuse.load gather: a kernel with gathers takes arrays of structures")
        if isinstance(kernel, KernelOp):
            uniform = kernel.input_args.index(self.source) in kernel.uniform_positions
            if self.place.is_uniform and not uniform:
                raise VerifyException("fuse.load into the uniform place must read a uniform input of the kernel")
            if uniform and not self.place.is_uniform:
                raise VerifyException("fuse.load of a uniform input goes into the uniform place (the block's one "
                                      f"copy, which every element reads), not {self.place.text()}")


@irdl_op_definition
class CallOp(OnChipOp):
    """Runs implementation `impl` of library op `callee` on on-chip operands."""

    name = "fuse.call"
    callee = prop_def(SymbolRefAttr)
    impl = prop_def(StringAttr)
    args = var_operand_def(KasType)
    res = result_def(KasType)
    place = prop_def(PlaceAttr)
    # Set by fuse-remap-threads: the call runs on the block's first threads, renumbered.
    remap = opt_attr_def(UnitAttr)
    traits = lazy_traits_def(lambda: (HasParent(KernelOp, LoopOp),))

    def __init__(self, callee: str, impl: str, args: Sequence[SSAValue], result_type: Attribute,
                 place: PlaceAttr):
        super().__init__(operands=[args], result_types=[result_type],
                         properties={"callee": SymbolRefAttr(callee), "impl": StringAttr(impl),
                                     "place": place})

    @property
    def op_name(self) -> str:
        return self.callee.root_reference.data

    @property
    def remapped(self) -> bool:
        return self.remap is not None

    def verify_(self) -> None:
        try:
            impl = op_registry().lookup_implementation(self.op_name, self.impl.data)
        except KeyError as e:
            raise VerifyException(str(e.args[0])) from None
        op = impl.op
        self.verify_pitch()
        if [a.type for a in self.args] != list(op.operand_types) or self.res.type != op.result_type:
            raise VerifyException(f"fuse.call types do not match the signature {op.signature()}")
        kernel = enclosing_kernel(self)
        if kernel is not None and impl.bx > kernel.bx.data:
            raise VerifyException(f"implementation '{impl.name}' of '{self.op_name}' runs with {impl.bx} threads "
                                  f"per element, but its kernel has bx = {kernel.bx.data}")
        for a in self.args:
            if place_of(a) is None:
                raise VerifyException("fuse.call operands must be on-chip values (results of fuse.load, fuse.call, "
                                      "fuse.copy or fuse.loop, or a fuse.loop's carried values)")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_attribute(self.callee)
        printer.print_string(f"[{self.impl.data}](")
        printer.print_list(self.args, printer.print_operand)
        printer.print_string(f") into {self.place.text()} : (")
        printer.print_list(self.args.types, printer.print_attribute)
        printer.print_string(") -> ")
        printer.print_attribute(self.res.type)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "CallOp":
        callee = parser.parse_attribute()
        if not isinstance(callee, SymbolRefAttr):
            parser.raise_error("expected the op name as @symbol")
        parser.parse_punctuation("[")
        impl = parser.parse_identifier()
        parser.parse_punctuation("]")
        pos = parser.pos
        args = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_unresolved_operand)
        parser.parse_keyword("into")
        place = parse_place(parser)
        parser.parse_punctuation(":")
        types = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_type)
        parser.parse_punctuation("->")
        rt = parser.parse_type()
        operands = parser.resolve_operands(args, types, pos)
        op = cls(callee.root_reference.data, impl, operands, rt, place)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class StoreOp(LocatedOperation):
    """Writes this block's elements of an on-chip value to a kernel output. `reduce`: the
    block's partial of a reduction over the batch; `scatter`: the rows of a scatter (which
    the host program's `kas.scatter` adds into the nodes after the kernel, and nothing else
    reads), written summed in the connectivity's groups (`artifact.scatter_groups`)."""

    name = "fuse.store"
    T: ClassVar = VarConstraint("T", base(KasType))
    value = operand_def(T)
    dest = operand_def(T)
    reduce = opt_prop_def(ReduceKindAttr)  # set: the block's partial of a reduction over the batch
    scatter = opt_prop_def(UnitAttr)  # set: the rows a scatter adds into nodes
    traits = lazy_traits_def(lambda: (HasParent(KernelOp),))
    assembly_format = "$value `to` $dest (`reduce` $reduce^)? (`scatter` $scatter^)? attr-dict `:` type($value)"

    def __init__(self, value: SSAValue, dest: SSAValue, reduce: ReduceKind | str | None = None, scatter: bool = False):
        properties: dict = {"reduce": ReduceKindAttr(ReduceKind(reduce))} if reduce else {}
        if scatter:
            properties["scatter"] = UnitAttr()
        super().__init__(operands=[value, dest], properties=properties)

    @property
    def reduce_kind(self) -> ReduceKind | None:
        return self.reduce.data if self.reduce is not None else None

    @property
    def scatters(self) -> bool:
        return self.scatter is not None

    def verify_(self) -> None:
        if self.value.type != self.dest.type:
            raise VerifyException("fuse.store value and destination types differ")
        kernel = self.parent_op()
        if isinstance(kernel, KernelOp) and self.dest not in kernel.output_args:
            raise VerifyException("fuse.store must write a kernel output argument")
        if place_of(self.value) is None:
            raise VerifyException("fuse.store stores an on-chip value")
        if self.reduce is not None and isinstance(kernel, KernelOp) and kernel.once is not None:
            raise VerifyException("fuse.store reduce in a kernel that runs once: it has no batch to reduce")
        if self.scatter is not None:
            if self.reduce is not None:
                raise VerifyException("fuse.store is a reduction's partial or a scatter's rows, not both")
            shape = tuple(self.value.type.shape)  # type: ignore[attr-defined]
            if not shape or isinstance(self.value.type, MaskType):
                raise VerifyException(f"fuse.store scatter writes each element's rows, but {self.value.type} has none")
            if isinstance(kernel, KernelOp) and kernel.once is not None:
                raise VerifyException("fuse.store scatter in a kernel that runs once: it has no elements")
            group = group_elements(shape[0])
            if not group:
                raise VerifyException(f"fuse.store scatter of {shape[0]} rows an element: a scatter adds rows of "
                                      f"elements of at most {GROUP_SLOTS} nodes")
            if isinstance(kernel, KernelOp) and kernel.by.data % group:
                raise VerifyException(f"fuse.store scatter of {shape[0]} rows an element in a kernel of "
                                      f"{kernel.by.data} elements a block: the rows are summed in groups of {group} "
                                      "elements, which its blocks must hold whole")


@irdl_op_definition
class BarrierOp(LocatedOperation):
    """`__syncthreads()`: every thread of the block waits here."""

    name = "fuse.barrier"
    traits = lazy_traits_def(lambda: (HasParent(KernelOp, LoopOp),))
    assembly_format = "attr-dict"

    def __init__(self):
        super().__init__()


@irdl_op_definition
class CopyOp(SourceIntoPlaceOp):
    """Copies an on-chip value to a place of its own: how a value enters a `fuse.loop`'s
    carried place (as its iter_arg or yielded value) and leaves it. Each word is copied by
    the thread that holds it in registers (the source's, else the destination's), so the
    passes know which thread touches which shared word."""

    name = "fuse.copy"
    source = operand_def(KasType)
    res = result_def(KasType)
    place = prop_def(PlaceAttr)
    traits = lazy_traits_def(lambda: (HasParent(KernelOp, LoopOp),))


    def verify_(self) -> None:
        self.verify_pitch()
        if self.source.type != self.res.type:
            raise VerifyException("fuse.copy result type must match its source")
        if place_of(self.source) is None:
            raise VerifyException("fuse.copy copies an on-chip value")



@irdl_op_definition
class YieldOp(LocatedOperation):
    """Ends a `fuse.loop` body: the values carried to the next iteration and out of the loop."""

    name = "fuse.yield"
    values = var_operand_def(KasType)
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(LoopOp)))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


@irdl_op_definition
class LoopOp(LocatedOperation):
    """Runs its body `trip_count` times inside the kernel, every thread of the block alike
    (so barriers inside are reached by all). Result k is a carried value living at
    `places[k]`; the first results are carried in (block argument k receives iter_arg k, then
    the value yielded as k), the others only carried out. See the module's docstring."""

    name = "fuse.loop"
    trip_count = prop_def(IntAttr)
    places = prop_def(ArrayAttr[PlaceAttr])
    iter_args = var_operand_def(KasType)
    res = var_result_def(KasType)
    body = region_def("single_block")
    traits = lazy_traits_def(lambda: (HasParent(KernelOp, LoopOp),))

    def __init__(self, trip_count: int, iter_args: Sequence[SSAValue], result_types: Sequence[Attribute],
                 places: Sequence[PlaceAttr], body: Region | None = None):
        if body is None:
            body = Region(Block(arg_types=[v.type for v in iter_args]))
        super().__init__(operands=[iter_args], result_types=[result_types],
                         properties={"trip_count": IntAttr(trip_count), "places": ArrayAttr(places)},
                         regions=[body])

    def place_list(self) -> tuple[PlaceAttr, ...]:
        return self.places.data

    def set_places(self, places: Sequence[PlaceAttr]) -> None:
        self.properties["places"] = ArrayAttr(places)

    @property
    def yield_op(self) -> YieldOp | None:
        last = self.body.block.last_op
        return last if isinstance(last, YieldOp) else None

    def verify_(self) -> None:
        if self.trip_count.data < 1:
            raise VerifyException(f"fuse.loop trip count must be at least 1, got {self.trip_count.data}")
        kas.verify_total_iterations(self, self.trip_count.data)
        places = self.place_list()
        if len(places) != len(self.res):
            raise VerifyException(f"fuse.loop has {len(self.res)} results but {len(places)} places")
        block = self.body.block
        if len(block.args) != len(self.iter_args) or len(self.iter_args) > len(self.res):
            raise VerifyException(f"fuse.loop body has {len(block.args)} arguments for {len(self.iter_args)} "
                                  f"iter_args and {len(self.res)} results (each iter_arg has an argument and a result)")
        term = self.yield_op
        if term is None:
            raise VerifyException("fuse.loop body must end with fuse.yield")
        if len(term.values) != len(self.res):
            raise VerifyException(f"fuse.yield yields {len(term.values)} values but fuse.loop has {len(self.res)} "
                                  "results")
        for k, (r, place) in enumerate(zip(self.res, places)):
            verify_place(self, place, r.type.size)  # type: ignore[attr-defined]
            y = term.values[k]
            if y.type != r.type:
                raise VerifyException(f"fuse.yield value {k} is {y.type}, fuse.loop result {k} is {r.type}")
            unchanged = k < len(block.args) and y is block.args[k]
            if not unchanged and not (isinstance(y.owner, CopyOp) and y.owner.get_place() == place):
                raise VerifyException(f"fuse.yield value {k} must be a fuse.copy into the loop's place {place.text()} "
                                      f"for it (or block argument {k}, carried unchanged)")
        for k, (v, a) in enumerate(zip(self.iter_args, block.args)):
            if v.type != a.type or a.type != self.res[k].type:
                raise VerifyException(f"fuse.loop iter_arg {k} is {v.type}, its argument {a.type}")
            if not (isinstance(v.owner, CopyOp) and v.owner.get_place() == places[k]):
                raise VerifyException(f"fuse.loop iter_arg {k} must be a fuse.copy into the loop's place "
                                      f"{places[k].text()} for it")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.trip_count.data}")
        if self.iter_args:
            printer.print_string(" iter_args(")
            printer.print_list(zip(self.body.block.args, self.iter_args),
                               lambda p: (printer.print_ssa_value(p[0]), printer.print_string(" = "),
                                          printer.print_ssa_value(p[1])))
            printer.print_string(")")
        printer.print_string(" -> (")
        printer.print_list(zip(self.res.types, self.place_list()),
                           lambda p: (printer.print_attribute(p[0]), printer.print_string(f" into {p[1].text()}")))
        printer.print_string(") ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "LoopOp":
        trip = parser.parse_integer(allow_boolean=False)
        pos = parser.pos
        names: list = []
        inits: list = []
        if parser.parse_optional_keyword("iter_args"):
            def one():
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation("=")
                return arg, parser.parse_unresolved_operand()
            for arg, init in parser.parse_comma_separated_list(Parser.Delimiter.PAREN, one):
                names.append(arg)
                inits.append(init)
        parser.parse_punctuation("->")

        def result():
            t = parser.parse_type()
            parser.parse_keyword("into")
            return t, parse_place(parser)
        pairs = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, result)
        if len(pairs) < len(inits):
            parser.raise_error("fuse.loop needs a result for each iter_arg", pos, parser.pos)
        types = [t for t, _ in pairs]
        operands = parser.resolve_operands(inits, types[: len(inits)], pos)
        args = [a.resolve(t) for a, t in zip(names, types)]
        body = parser.parse_region(args)
        op = cls(trip, operands, types, [p for _, p in pairs], body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class KernelOp(LocatedOperation):
    """A GPU kernel over the batch: `bx` threads per element, `by` elements per block."""

    name = "fuse.kernel"
    sym_name = prop_def(SymbolNameConstraint())
    bx = prop_def(IntAttr)
    by = prop_def(IntAttr)
    num_inputs = prop_def(IntAttr)
    layout = opt_prop_def(LayoutAttr)  # absent: array of structures
    uniform_inputs = opt_prop_def(ArrayAttr[IntAttr])  # inputs (by position) holding one value for the batch
    once = opt_prop_def(UnitAttr)  # runs over one element: uniform values from uniform values
    elements_per_thread = opt_prop_def(IntAttr)  # absent: 1 (see the module's docstring)
    # Its shared places are still fuse-partition's (each value at offsets of its own) and pass
    # a block's capacity only once fuse-allocate-shared overlaps them (a long element routine
    # run by one thread an element: most values then live in registers). The capacity is
    # checked when the places are allocated.
    unplaced = opt_prop_def(UnitAttr)
    body = region_def("single_block")
    # Set by fuse-partition: the cost model's prediction and the group of calls it chose.
    predicted_ns = opt_attr_def(IntAttr)
    group = opt_attr_def(StringAttr)
    # Set by fuse-partition: the per-element values an earlier pass made that this kernel
    # computes again instead of reading them back (`transforms.recompute`).
    recomputed = opt_attr_def(ArrayAttr[StringAttr])
    # Set by fuse-partition{finish}: the kernel's last block to finish combines the partials of
    # its reductions (the `fuse.combine`s reading them, in their order) in a launch of at most
    # this many blocks (at most COMBINE_LANES) that asks for it (a run in one call on the GPU);
    # absent: combine kernels.
    finish_parts = opt_attr_def(IntAttr)
    # Set by the driver where ptxas's figures show the kernel's shared memory, not its
    # registers, bounding the blocks an SM holds: its loaded values that several threads of an
    # element read are loaded by those threads, before their reader (`fuse-load-by-readers`).
    loads_by_readers = opt_attr_def(UnitAttr)
    # Set by fuse-place-barriers: the barriers the kernel had before (reports show what it removed).
    barriers_before = opt_attr_def(IntAttr)
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface(), NoTerminator())

    def __init__(self, name: str, bx: int, by: int, input_types: Sequence[Attribute],
                 output_types: Sequence[Attribute], body: Region | None = None, layout: str = "aos",
                 uniform: Sequence[int] = (), once: bool = False, elements_per_thread: int = 1,
                 unplaced: bool = False):
        if body is None:
            body = Region(Block(arg_types=[*input_types, *output_types]))
        properties: dict[str, Attribute] = {"sym_name": StringAttr(name), "bx": IntAttr(bx), "by": IntAttr(by),
                                            "num_inputs": IntAttr(len(input_types))}
        if Layout(layout) != Layout.AOS:
            properties["layout"] = LayoutAttr(Layout(layout))
        if uniform:
            properties["uniform_inputs"] = ArrayAttr(IntAttr(i) for i in uniform)
        if once:
            properties["once"] = UnitAttr()
        if elements_per_thread != 1:
            properties["elements_per_thread"] = IntAttr(elements_per_thread)
        if unplaced:
            properties["unplaced"] = UnitAttr()
        super().__init__(properties=properties, regions=[body])

    @property
    def uniform_positions(self) -> tuple[int, ...]:
        """The inputs every element reads whole (uniform values), by position."""
        return tuple(i.data for i in self.uniform_inputs.data) if self.uniform_inputs is not None else ()

    @property
    def runs_once(self) -> bool:
        return self.once is not None

    @property
    def global_layout(self) -> str:
        """`aos` or `soa`: how the kernel's global arrays hold the batch."""
        return self.layout.data.value if self.layout is not None else Layout.AOS.value

    @property
    def per_thread(self) -> int:
        """Elements each thread runs (`elements_per_thread`, 1 when absent)."""
        return self.elements_per_thread.data if self.elements_per_thread is not None else 1

    @property
    def threads(self) -> int:
        return self.bx.data * self.by.data // max(1, self.per_thread)

    @property
    def input_args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[: self.num_inputs.data])

    @property
    def reduces(self) -> bool:
        """Whether it stores a reduction over the batch (per-block partials)."""
        return any(isinstance(op, StoreOp) and op.reduce_kind is not None for op in self.body.block.ops)

    @property
    def output_args(self) -> tuple[SSAValue, ...]:
        return tuple(self.body.block.args[self.num_inputs.data:])

    def verify_(self) -> None:
        if self.bx.data < 1 or self.by.data < 1:
            raise VerifyException("fuse.kernel bx and by must be positive")
        if self.threads > MAX_THREADS_PER_BLOCK:
            raise VerifyException(f"fuse.kernel has {self.threads} threads per block; the limit is {MAX_THREADS_PER_BLOCK}")
        self._verify_per_thread()
        if self.num_inputs.data > len(self.body.block.args):
            raise VerifyException("fuse.kernel num_inputs exceeds its arguments")
        positions = self.uniform_positions
        if any(not 0 <= i < self.num_inputs.data for i in positions) or len(set(positions)) != len(positions):
            raise VerifyException(f"fuse.kernel uniform inputs {list(positions)} must be distinct input positions "
                                  f"(0..{self.num_inputs.data - 1})")
        if positions and self.runs_once:
            raise VerifyException("fuse.kernel that runs once reads every input whole: it lists no uniform inputs")
        for out in self.output_args:
            stores = [u.operation for u in out.uses if isinstance(u.operation, StoreOp)]
            if len(stores) != 1:
                raise VerifyException(f"fuse.kernel output must be stored exactly once, found {len(stores)} stores")
        if self.finish_parts is not None:
            if not 1 <= self.finish_parts.data <= COMBINE_LANES:
                raise VerifyException(f"fuse.kernel @{self.sym_name.data}: finish_parts must be 1 to {COMBINE_LANES} "
                                      f"(a combine lane a partial), got {self.finish_parts.data}")
            if not self.reduces:
                raise VerifyException(f"fuse.kernel @{self.sym_name.data} has finish_parts but no reduction over "
                                      "the batch whose partials its last block could combine")
        module = self.parent_op()
        if isinstance(module, ModuleOp):
            try:
                expected = module_layout(module)
            except VerifyException:
                return  # the module's own verification names the bad attribute
            if self.global_layout != expected:
                raise VerifyException(
                    f"fuse.kernel @{self.sym_name.data} is laid out {self.global_layout} but the module's global "
                    f"arrays are {expected} ({LAYOUT_ATTR}): every kernel of a module shares its layout")

    def _verify_per_thread(self) -> None:
        e = self.per_thread
        if e == 1:
            return
        name = f"fuse.kernel @{self.sym_name.data}"
        if e < 1 or e & (e - 1) or self.by.data % e:
            raise VerifyException(f"{name}: elements_per_thread = {e} must be a power of two dividing by = {self.by.data}")
        if self.runs_once:
            raise VerifyException(f"{name} runs once (one element): it takes no elements_per_thread")
        for op in self.body.walk():
            if isinstance(op, LoopOp):
                raise VerifyException(f"{name}: a kernel with a fuse.loop inside runs one element a thread "
                                      f"(elements_per_thread = {e} given)")
            if isinstance(op, CallOp) and op.remapped:
                raise VerifyException(f"{name}: a remapped call runs its elements on threads of its own: "
                                      f"no remapping with elements_per_thread = {e}")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        per = f", elements_per_thread = {self.per_thread}" if self.per_thread != 1 else ""
        printer.print_string(f" block(bx = {self.bx.data}, by = {self.by.data}{per}) ")
        if self.layout is not None:
            printer.print_string(f"layout({self.layout.data.value}) ")
        if self.runs_once:
            printer.print_string("once ")
        if self.unplaced is not None:
            printer.print_string("unplaced ")
        if self.uniform_positions:
            printer.print_string("uniform(" + ", ".join(map(str, self.uniform_positions)) + ") ")
        printer.print_string("(")
        printer.print_list(self.input_args, printer.print_block_argument)
        printer.print_string(") -> (")
        printer.print_list(self.output_args, printer.print_block_argument)
        printer.print_string(") ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "KernelOp":
        name = parser.parse_symbol_name().data
        parser.parse_keyword("block")
        parser.parse_punctuation("(")
        parser.parse_keyword("bx")
        parser.parse_punctuation("=")
        bx = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(",")
        parser.parse_keyword("by")
        parser.parse_punctuation("=")
        by = parser.parse_integer(allow_boolean=False)
        per_thread = 1
        if parser.parse_optional_punctuation(",") is not None:
            parser.parse_keyword("elements_per_thread")
            parser.parse_punctuation("=")
            per_thread = parser.parse_integer(allow_boolean=False)
        parser.parse_punctuation(")")
        layout = "aos"
        if parser.parse_optional_keyword("layout") is not None:
            parser.parse_punctuation("(")
            at = parser.pos
            word = parser.parse_identifier()
            if word not in {layout.value for layout in Layout}:
                parser.raise_error(f"layout must be aos or soa, got '{word}'", at, parser.pos)
            layout = word
            parser.parse_punctuation(")")
        once = parser.parse_optional_keyword("once") is not None
        unplaced = parser.parse_optional_keyword("unplaced") is not None
        uniform: list[int] = []
        if parser.parse_optional_keyword("uniform") is not None:
            uniform = parser.parse_comma_separated_list(
                Parser.Delimiter.PAREN, lambda: parser.parse_integer(allow_boolean=False, allow_negative=False))
        ins, in_locations = parse_block_arguments(parser)
        parser.parse_punctuation("->")
        outs, out_locations = parse_block_arguments(parser)
        body = parser.parse_region([*ins, *outs])
        op = cls(name, bx, by, [a.type for a in ins], [a.type for a in outs], body, layout, uniform, once, per_thread,
                 unplaced)
        locate_block_arguments(op.body.block, [*in_locations, *out_locations])
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class LaunchOp(LocatedOperation):
    """Runs kernel `kernel` over the whole batch: inputs in, new output arrays out."""

    name = "fuse.launch"
    kernel = prop_def(SymbolRefAttr)
    args = var_operand_def(KasType)
    res = var_result_def(KasType)
    assembly_format = "$kernel `(` $args `)` attr-dict `:` functional-type($args, $res)"

    def __init__(self, kernel: str, args: Sequence[SSAValue], result_types: Sequence[Attribute]):
        super().__init__(operands=[args], result_types=[result_types],
                         properties={"kernel": SymbolRefAttr(kernel)})

    @property
    def kernel_name(self) -> str:
        return self.kernel.root_reference.data

    def verify_(self) -> None:
        kernel = SymbolTable.lookup_symbol(self, self.kernel)
        if kernel is None:
            raise VerifyException(f"fuse.launch of @{self.kernel_name}: no such fuse.kernel in the module")
        if not isinstance(kernel, KernelOp):
            raise VerifyException(f"fuse.launch of @{self.kernel_name}: it is a {kernel.name}, not a fuse.kernel")
        want_in = [a.type for a in kernel.input_args]
        want_out = [a.type for a in kernel.output_args]
        if list(self.args.types) != want_in:
            raise VerifyException(
                f"fuse.launch of @{self.kernel_name}: operand types ({', '.join(map(str, self.args.types))}) "
                f"do not match the kernel's inputs ({', '.join(map(str, want_in))})")
        if list(self.res.types) != want_out:
            raise VerifyException(
                f"fuse.launch of @{self.kernel_name}: result types ({', '.join(map(str, self.res.types))}) "
                f"do not match the kernel's outputs ({', '.join(map(str, want_out))})")
        for k, (r, out) in enumerate(zip(self.res, kernel.output_args)):
            store = next((u.operation for u in out.uses if isinstance(u.operation, StoreOp)), None)
            if store is not None and store.scatters and not kas.only_scattered(r):
                reader = next(u.operation for u in r.uses if not isinstance(u.operation, ScatterOp))
                raise VerifyException(f"fuse.launch of @{self.kernel_name}: result {k} holds a scatter's rows summed "
                                      f"in groups, which only kas.scatter reads, not {reader.name}")
            if store is None or store.reduce_kind is None:
                continue
            reader = next((u.operation for u in r.uses if not isinstance(u.operation, CombineOp)), None)
            if reader is not None:
                raise VerifyException(
                    f"fuse.launch of @{self.kernel_name}: result {k} holds a {store.reduce_kind.value} reduction's "
                    f"per-block partials, which only fuse.combine reads, not {reader.name}")


# A combine kernel's lanes: COMBINE_BLOCKS blocks of COMBINE_THREADS threads per word (powers
# of two: its tree halves them), each lane combining every COMBINE_LANES-th partial in turn, so
# a sum's rounding depends on them (reference.sum_depth). Several blocks, because one SM alone
# reads 65,536 partials at a fraction of the bandwidth the GPU has (8.5 us on an H100).
COMBINE_THREADS = 1024
COMBINE_BLOCKS = 8
COMBINE_LANES = COMBINE_THREADS * COMBINE_BLOCKS


def scatter_kernel_name(size: int) -> str:
    """The kernel that adds per-element rows of `size` words into nodes (`kas.scatter`)."""
    return f"irf_scatter_{size}"


def scatter_groups_kernel_name(size: int, nodes_per_element: int) -> str:
    """The kernel that sums per-element rows of `size` words (of elements of
    `nodes_per_element` nodes) read from an array into their groups' partials, for a scatter
    whose rows no kernel summed as it wrote them (the rows of an input)."""
    return f"irf_scatter_groups_{size}_{nodes_per_element}"


def scatter_onto_kernel_name(size: int) -> str:
    """The scatter kernel of a chunk after the first: each node's sum goes on from the output."""
    return f"irf_scatter_onto_{size}"


def scatter_atomic_kernel_names(size: int, nodes_per_element: int) -> tuple[str, str]:
    """The kernels of a scatter a call asks to run with atomics (`scatter="atomic"`): one sets
    the nodes to 0, the other adds each row (of elements of `nodes_per_element` nodes) into
    its node."""
    return f"irf_zero_{size}", f"irf_scatter_atomic_{size}_{nodes_per_element}"


# A reducing kernel whose last block combines its partials (`fuse.kernel` finish_parts): its
# first `finish_threads` threads stand for the lanes, each loading FINISH_BATCH partials at a
# time (backend.combine_emit; the cost model's `last_block_combine_time`).
FINISH_BATCH = 8


def finish_threads(threads: int) -> int:
    """The threads of a block that stand for the combine's lanes when it finishes a reduction:
    the largest power of two among them (the lanes' tree halves them)."""
    return 1 << (max(threads, 1).bit_length() - 1)


def combine_kernel_name(kind: str, size: int) -> str:
    return f"irf_combine_{kind}_{size}"


@irdl_op_definition
class CombineOp(LocatedOperation):
    """Combines the per-block partials a launch stored with `reduce` into the reduced value
    (a uniform one), in a fixed order: the same partials give the same bits every time."""

    name = "fuse.combine"
    kind = prop_def(ReduceKindAttr)
    partials = operand_def(KasType)
    res = result_def(KasType)
    assembly_format = "$kind $partials attr-dict `:` type($partials) `->` type($res)"

    def __init__(self, kind: ReduceKind | str, partials: SSAValue):
        super().__init__(operands=[partials], result_types=[partials.type],
                         properties={"kind": ReduceKindAttr(ReduceKind(kind))})

    @property
    def reduce_kind(self) -> ReduceKind:
        return self.kind.data

    @property
    def kernel_name(self) -> str:
        """The generated kernel that combines partials of this kind and size."""
        return combine_kernel_name(self.reduce_kind.value, self.res.type.size)  # type: ignore[attr-defined]

    def producing_store(self) -> "StoreOp | None":
        """The kernel's `fuse.store ... reduce` that made the partials, when a launch did."""
        launch = self.partials.owner
        if not isinstance(launch, LaunchOp):
            return None
        kernel = SymbolTable.lookup_symbol(launch, launch.kernel)
        if not isinstance(kernel, KernelOp):
            return None
        out = kernel.output_args[self.partials.index]  # type: ignore[attr-defined]
        return next((u.operation for u in out.uses if isinstance(u.operation, StoreOp)), None)

    def verify_(self) -> None:
        if self.res.type != self.partials.type:
            raise VerifyException(f"fuse.combine gives its partials' type ({self.partials.type}), not {self.res.type}")
        if not isinstance(self.partials.owner, LaunchOp):
            raise VerifyException("fuse.combine combines the partials of a fuse.launch result")
        store = self.producing_store()
        if store is None:
            return  # the launch's own verification names what is missing
        if store.reduce_kind != self.reduce_kind:
            raise VerifyException(
                f"fuse.combine {self.reduce_kind.value} of a kernel output that is "
                + (f"a {store.reduce_kind.value} reduction's partials" if store.reduce_kind else "not partials"))


Fuse = Dialect(
    "fuse",
    [KernelOp, LoadOp, CallOp, CopyOp, LoopOp, YieldOp, StoreOp, BarrierOp, LaunchOp, CombineOp],
    [PlaceAttr, AccessPatternAttr, SpaceAttr, RegisterUseAttr, LayoutAttr],
)
