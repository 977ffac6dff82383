"""The `kas` dialect: programs of elementary-op calls over batched small values.

Every SSA value of a `kas` type holds one value per element of the batch, except the
*uniform* ones, which hold one value for the whole batch: the program's inputs it lists
as `uniform(...)`, `kas.constant` literals, `kas.reduce` results, and the results of calls
whose operands are all uniform (`irfuse.analysis.uniformity`).
A program is a `kas.program` whose arguments are the inputs and whose
`kas.return` lists the outputs; `kas.call` applies a library op;
`kas.loop` repeats its body, carrying values between iterations;
`kas.reduce` combines a per-element value over the batch (sum, max or min, word by word).

Meshes: a program may also read and write *nodal* values (one per node of a mesh, a second
batch; the program lists them as `nodal(...)`) through *connectivities* (`!kas.index<K>`:
per element, the numbers of its K nodes). `kas.gather` reads an element's K node rows of a
nodal input into a per-element value; `kas.scatter` adds an element's K rows into the nodal
value it returns (the sum over every element and position naming the node, 0 where none).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import ClassVar

from xdsl.dialects.builtin import ArrayAttr, FloatAttr, Float64Type, IntAttr, StringAttr, SymbolNameConstraint, SymbolRefAttr
from xdsl.dialects.utils.enum_attribute import EnumAttribute
from xdsl.ir import (
    Attribute,
    Block,
    Dialect,
    Operation,
    ParametrizedAttribute,
    Region,
    SpacedOpaqueSyntaxAttribute,
    SSAValue,
    TypeAttribute,
)
from xdsl.irdl import (
    irdl_attr_definition,
    irdl_op_definition,
    lazy_traits_def,
    operand_def,
    opt_prop_def,
    prop_def,
    region_def,
    result_def,
    traits_def,
    var_operand_def,
    var_result_def,
)
from xdsl.parser import AttrParser, Parser, UnresolvedOperand
from xdsl.printer import Printer
from xdsl.traits import HasParent, IsolatedFromAbove, IsTerminator, Pure, SymbolOpInterface
from xdsl.utils.exceptions import VerifyException
from xdsl.utils.str_enum import StrEnum

from irfuse.artifact.host_plan import MAX_TOTAL_ITERATIONS  # noqa: F401 (irgen imports it from here)
from irfuse.artifact.scatter_groups import ELEMENT_SLOTS
from irfuse.dialects.located import LocatedOperation
from irfuse.dialects.op_registry import op_registry


class KasType(ParametrizedAttribute, TypeAttribute):
    """Base of the value types; `shape` is the per-element shape (row-major)."""

    KEYWORD: ClassVar[str]

    @property
    def shape(self) -> tuple[int, ...]:
        raise TypeError(f"{type(self).__name__} must define its shape")  # every concrete type does

    @property
    def size(self) -> int:
        n = 1
        for d in self.shape:
            n *= d
        return n

    def spelling(self) -> str:
        """How the type is written in KAS source (e.g. ``matrix3x3``)."""
        return self.KEYWORD + "x".join(str(d) for d in self.shape)

    def print_parameters(self, printer: Printer) -> None:
        if self.shape:
            printer.print_string("<" + "x".join(str(d) for d in self.shape) + ">")

    def verify(self) -> None:
        if any(d < 1 for d in self.shape):
            raise VerifyException(f"{self.name} dimensions must be positive, got {self.shape}")

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        """A type of one word an element (scalar, mask) is written bare: `<...>` after it is
        refused at its place (xDSL's generic parameters would be zipped with none: an internal
        error). The types with a shape parse their dimensions instead."""
        at = parser.pos
        if parser.parse_optional_punctuation("<") is not None:
            parser.raise_error(f"{cls.name} takes no parameters (one word an element)", at, parser.pos)
        return []


def _parse_dims(parser: AttrParser, rank: int | None, name: str) -> list[int]:
    with parser.in_angle_brackets():
        dims = parser.parse_dimension_list()
    if rank is not None and len(dims) != rank:
        parser.raise_error(f"{name} expects {rank} dimension(s), got {len(dims)}")
    return dims


@irdl_attr_definition
class ScalarType(KasType):
    name = "kas.scalar"
    KEYWORD: ClassVar[str] = "scalar"

    @property
    def shape(self) -> tuple[int, ...]:
        return ()


@irdl_attr_definition
class MaskType(KasType):
    """One truth value per element: what a comparison gives and a selection picks by. A word
    in memory like a scalar's, 1 for true and 0 for false (any nonzero word reads as true)."""

    name = "kas.mask"
    KEYWORD: ClassVar[str] = "mask"

    @property
    def shape(self) -> tuple[int, ...]:
        return ()


@irdl_attr_definition
class VectorType(KasType):
    name = "kas.vector"
    KEYWORD: ClassVar[str] = "vector"
    length: IntAttr

    def __init__(self, n: int):
        super().__init__(IntAttr(n))

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.length.data,)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        return [IntAttr(d) for d in _parse_dims(parser, 1, cls.name)]


@irdl_attr_definition
class MatrixType(KasType):
    name = "kas.matrix"
    KEYWORD: ClassVar[str] = "matrix"
    rows: IntAttr
    cols: IntAttr

    def __init__(self, rows: int, cols: int):
        super().__init__(IntAttr(rows), IntAttr(cols))

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.rows.data, self.cols.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        return [IntAttr(d) for d in _parse_dims(parser, 2, cls.name)]


@irdl_attr_definition
class TensorType(KasType):
    name = "kas.tensor"
    KEYWORD: ClassVar[str] = "tensor"
    dims: ArrayAttr[IntAttr]

    def __init__(self, dims: Sequence[int]):
        super().__init__(ArrayAttr(IntAttr(d) for d in dims))

    @property
    def shape(self) -> tuple[int, ...]:
        return tuple(d.data for d in self.dims.data)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        dims = _parse_dims(parser, None, cls.name)
        return [ArrayAttr(IntAttr(d) for d in dims)]

    def verify(self) -> None:
        super().verify()
        if len(self.shape) not in (3, MAX_AXES):
            raise VerifyException(f"kas.tensor must have 3 or {MAX_AXES} dimensions, got {len(self.shape)}")


@irdl_attr_definition
class IndexType(KasType):
    """A connectivity: per element, the numbers of its `count` nodes (32-bit integers in
    memory, whatever the program's element type). Only program inputs have this type, and only
    `kas.gather` and `kas.scatter` read them."""

    name = "kas.index"
    KEYWORD: ClassVar[str] = "index"
    count: IntAttr

    def __init__(self, count: int):
        super().__init__(IntAttr(count))

    @property
    def shape(self) -> tuple[int, ...]:
        return (self.count.data,)

    @classmethod
    def parse_parameters(cls, parser: AttrParser) -> Sequence[Attribute]:
        return [IntAttr(d) for d in _parse_dims(parser, 1, cls.name)]


MAX_AXES = 4  # a value's axes at most: scalar, vector, matrix, tensor of 3 or 4
# Entries an axis at most (and a connectivity's nodes an element): the nodes of an element a
# scatter adds (`scatter_groups.ELEMENT_SLOTS`, 1,024), so that a hexahedron of order 9 (1,000
# nodes) is gathered and scattered whole.
MAX_DIM = ELEMENT_SLOTS


def kas_type_of_shape(shape: Sequence[int]) -> KasType:
    shape = tuple(shape)
    if len(shape) == 0:
        return ScalarType()
    if len(shape) == 1:
        return VectorType(shape[0])
    if len(shape) == 2:
        return MatrixType(*shape)
    return TensorType(shape)


_UNIQUING_SUFFIX = re.compile(r"_\d+$")


def ssa_hint(variable: str) -> str:
    """The SSA name hint that prints as a KAS variable's name.

    xDSL drops a trailing ``_<digits>`` from name hints (it is the printer's
    uniquing suffix), so such names keep an extra trailing ``_``.
    """
    return variable + "_" if _UNIQUING_SUFFIX.search(variable) else variable


def variable_of_hint(hint: str) -> str:
    """Inverse of `ssa_hint`."""
    if hint.endswith("_") and _UNIQUING_SUFFIX.search(hint[:-1]):
        return hint[:-1]
    return hint


# --- Operations -------------------------------------------------------------


@irdl_op_definition
class ReturnOp(LocatedOperation):
    """Ends a `kas.program`: its operands are the program's outputs."""

    name = "kas.return"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(ProgramOp)))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


@irdl_op_definition
class YieldOp(LocatedOperation):
    """Ends a `kas.loop` body: the values of this iteration."""

    name = "kas.yield"
    values = var_operand_def()
    traits = lazy_traits_def(lambda: (IsTerminator(), HasParent(LoopOp)))
    assembly_format = "($values^ `:` type($values))? attr-dict"

    def __init__(self, values: Sequence[SSAValue]):
        super().__init__(operands=[values])


@irdl_op_definition
class CallOp(LocatedOperation):
    """Applies the library op `callee` to its operands, element by element."""

    name = "kas.call"
    callee = prop_def(SymbolRefAttr)
    args = var_operand_def()
    res = result_def()
    traits = traits_def(Pure())
    assembly_format = "$callee `(` $args `)` attr-dict `:` functional-type($args, $res)"

    def __init__(self, callee: str, args: Sequence[SSAValue], result_type: Attribute):
        super().__init__(operands=[args], result_types=[result_type],
                         properties={"callee": SymbolRefAttr(callee)})

    @property
    def op_name(self) -> str:
        return self.callee.root_reference.data

    def verify_(self) -> None:
        registry = op_registry()
        op = registry.lookup_op(self.op_name)
        if op is None:
            hint = registry.closest_ops(self.op_name)
            raise VerifyException(
                f"unknown op '{self.op_name}'" + (f"; did you mean {', '.join(hint)}?" if hint else ""))
        if len(self.args) != len(op.operand_types):
            raise VerifyException(
                f"'{self.op_name}' takes {len(op.operand_types)} operand(s), got {len(self.args)}")
        for k, (arg, want) in enumerate(zip(self.args, op.operand_types)):
            if arg.type != want:
                raise VerifyException(
                    f"operand {k} of '{self.op_name}' must be {want}, got {arg.type}")
        if self.res.type != op.result_type:
            raise VerifyException(
                f"result of '{self.op_name}' is {op.result_type}, not {self.res.type}")


def _check_connectivity(op: Operation, index: SSAValue, nodal: SSAValue, element: SSAValue) -> None:
    """The shapes of a gather or scatter: element value (K, *S) for nodal value S through an
    index of K."""
    if not isinstance(index.type, IndexType):
        raise VerifyException(f"{op.name}: the connectivity must be a !kas.index, got {index.type}")
    for v in (nodal, element):
        if isinstance(v.type, (IndexType, MaskType)) or not isinstance(v.type, KasType):
            raise VerifyException(f"{op.name}: {v.type} values cannot be gathered or scattered")
    want = (index.type.count.data, *nodal.type.shape)  # type: ignore[attr-defined]
    if tuple(element.type.shape) != want:  # type: ignore[attr-defined]
        raise VerifyException(f"{op.name}: through {index.type}, a nodal {nodal.type} goes with an element value "
                              f"of shape {'x'.join(map(str, want))}, not {element.type}")


@irdl_op_definition
class GatherOp(LocatedOperation):
    """Row a of the result is the nodal value at node `index[a]`, for each element."""

    name = "kas.gather"
    nodal = operand_def()
    index = operand_def(IndexType)
    res = result_def()
    traits = traits_def(Pure())
    assembly_format = "$nodal `,` $index attr-dict `:` functional-type(operands, results)"

    def __init__(self, nodal: SSAValue, index: SSAValue):
        count = index.type.count.data  # type: ignore[attr-defined]
        super().__init__(operands=[nodal, index],
                         result_types=[kas_type_of_shape((count, *nodal.type.shape))])  # type: ignore[attr-defined]

    def verify_(self) -> None:
        _check_connectivity(self, self.index, self.nodal, self.res)
        # (that the value read is nodal, an input or a nodal statement's, is `ProgramOp`'s check)


@irdl_op_definition
class ScatterOp(LocatedOperation):
    """The nodal value whose node n holds the sum of row a of `value` over every element and
    position a with `index[a] = n` (0 at nodes no element names)."""

    name = "kas.scatter"
    value = operand_def()
    index = operand_def(IndexType)
    res = result_def()
    traits = traits_def(Pure())
    assembly_format = "$value `,` $index attr-dict `:` functional-type(operands, results)"

    def __init__(self, value: SSAValue, index: SSAValue):
        super().__init__(operands=[value, index],
                         result_types=[kas_type_of_shape(tuple(value.type.shape)[1:])])  # type: ignore[attr-defined]

    def verify_(self) -> None:
        _check_connectivity(self, self.index, self.res, self.value)


def only_scattered(v: SSAValue) -> bool:
    """Whether `v` is read by scatters alone, as the rows they add, all through one
    connectivity: the kernel that makes it writes it summed in that connectivity's groups
    (`fuse.store ... scatter`), not row by row. (Scatters through two connectivities add the
    rows in two orders of groups: they read the rows as they are.)"""
    if not v.uses or not all(isinstance(u.operation, ScatterOp) and u.index == 0 for u in v.uses):
        return False
    return len({u.operation.index for u in v.uses}) == 1  # type: ignore[attr-defined]


def is_nodal_input(v: SSAValue) -> bool:
    """Whether `v` is an input the program lists as nodal."""
    owner = v.owner
    if not isinstance(owner, Block):
        return False
    parent = owner.parent_op()
    return isinstance(parent, ProgramOp) and parent.inputs[v.index] in parent.nodal  # type: ignore[attr-defined]


# What may read a connectivity: gathers and scatters, and once they are lowered the launches
# of the kernels that gather (`fuse.load ... gather`).
MESH_READERS = frozenset({"kas.gather", "kas.scatter", "fuse.launch"})


def nodal_values(program: "ProgramOp") -> set[SSAValue]:
    """The values of a program over a mesh that hold one value per node: its nodal inputs,
    the results of its scatters, and those of its nodal statements (top-level calls with a
    nodal operand, every other operand uniform: they run once per node)."""
    nodal = {a for name, a in zip(program.inputs, program.body.block.args) if name in program.nodal}
    for op in program.body.block.ops:
        if isinstance(op, ScatterOp) or (isinstance(op, CallOp) and any(a in nodal for a in op.args)):
            nodal.add(op.res)
    return nodal


def nodal_statements(program: "ProgramOp") -> list[Operation]:
    """The program's work over the nodes: its nodal statements (calls that run once per node)
    and its reductions of nodal values (over the nodes, not the elements)."""
    nodal = nodal_values(program)
    return [op for op in program.body.block.ops
            if (isinstance(op, CallOp) and op.res in nodal) or (isinstance(op, ReduceOp) and op.operand in nodal)]


class ReduceKind(StrEnum):
    """How `kas.reduce` combines the batch's values, word by word."""

    SUM = "sum"
    MAX = "max"
    MIN = "min"


@irdl_attr_definition
class ReduceKindAttr(EnumAttribute[ReduceKind], SpacedOpaqueSyntaxAttribute):
    name = "kas.reduce_kind"


@irdl_op_definition
class ConstantOp(LocatedOperation):
    """A numeric literal: a uniform scalar."""

    name = "kas.constant"
    value = prop_def(FloatAttr)
    res = result_def(ScalarType)
    traits = traits_def(Pure())

    def __init__(self, value: float):
        super().__init__(result_types=[ScalarType()], properties={"value": FloatAttr(value, Float64Type())})

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.number!r}")  # repr: the shortest text that reads back exactly
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.res.type)

    @classmethod
    def parse(cls, parser: Parser) -> "ConstantOp":
        value = parser.parse_number()
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        at = parser.pos
        t = parser.parse_type()
        if not isinstance(t, ScalarType):
            parser.raise_error(f"kas.constant is a !kas.scalar, not {t}", at, parser.pos)
        op = cls(float(value))  # type: ignore[arg-type]
        op.attributes |= attrs
        return op

    @property
    def number(self) -> float:
        return float(self.value.value.data)

    def verify_(self) -> None:
        if not isinstance(self.value.type, Float64Type):
            raise VerifyException(f"kas.constant holds an f64, got {self.value.type}")
        v = self.number
        if v != v or v in (float("inf"), float("-inf")):
            raise VerifyException(f"kas.constant must be finite, got {v}")


@irdl_op_definition
class TableOp(LocatedOperation):
    """Literal values of a uniform vector, matrix or tensor, fixed when the program is compiled
    (`irfuse.compile(..., constants=...)` puts one in place of a uniform input): the kernels
    read them as constants of their own (on the GPU, the constant bank: operands of the
    arithmetic, no loads), the host passes them where a launch takes them."""

    name = "kas.table"
    values = prop_def(ArrayAttr[FloatAttr])
    res = result_def(KasType)
    traits = traits_def(Pure())

    def __init__(self, values: Sequence[float], result_type: Attribute):
        super().__init__(result_types=[result_type],
                         properties={"values": ArrayAttr(FloatAttr(float(v), Float64Type()) for v in values)})

    def print(self, printer: Printer) -> None:
        printer.print_string(f" [{', '.join(repr(v) for v in self.numbers)}]")  # (repr: reads back exactly)
        printer.print_op_attributes(self.attributes)
        printer.print_string(" : ")
        printer.print_attribute(self.res.type)

    @classmethod
    def parse(cls, parser: Parser) -> "TableOp":
        numbers = parser.parse_comma_separated_list(parser.Delimiter.SQUARE, parser.parse_number)
        attrs = parser.parse_optional_attr_dict()
        parser.parse_punctuation(":")
        at = parser.pos
        t = parser.parse_type()
        if not isinstance(t, KasType) or isinstance(t, IndexType):
            parser.raise_error(f"kas.table holds numbers of a value type, not {t}", at, parser.pos)
        op = cls([float(v) for v in numbers], t)
        op.attributes |= attrs
        return op

    @property
    def numbers(self) -> tuple[float, ...]:
        return tuple(float(a.value.data) for a in self.values.data)

    def verify_(self) -> None:
        t = self.res.type
        if not isinstance(t, KasType) or isinstance(t, IndexType):
            raise VerifyException(f"kas.table holds numbers of a value type, not {t}")
        if len(self.values.data) != t.size:  # type: ignore[attr-defined]
            raise VerifyException(f"kas.table of a {t} holds {t.size} numbers, "  # type: ignore[attr-defined]
                                  f"not {len(self.values.data)}")
        for v in self.numbers:
            if v != v or v in (float("inf"), float("-inf")):
                raise VerifyException(f"kas.table's numbers must be finite, got {v}")


@irdl_op_definition
class ReduceOp(LocatedOperation):
    """Combines a per-element value over the whole batch into a uniform one of the same
    type, word by word (a batch sum of 3x3 matrices is a 3x3 matrix)."""

    name = "kas.reduce"
    kind = prop_def(ReduceKindAttr)
    operand = operand_def(KasType)
    res = result_def(KasType)
    # A reduction inside a loop would need a global barrier in every iteration.
    traits = lazy_traits_def(lambda: (Pure(), HasParent(ProgramOp)))
    assembly_format = "$kind $operand attr-dict `:` type($operand) `->` type($res)"

    def __init__(self, kind: ReduceKind | str, operand: SSAValue):
        super().__init__(operands=[operand], result_types=[operand.type],
                         properties={"kind": ReduceKindAttr(ReduceKind(kind))})

    @property
    def reduce_kind(self) -> ReduceKind:
        return self.kind.data

    def verify_(self) -> None:
        if self.res.type != self.operand.type:
            raise VerifyException(
                f"kas.reduce gives its operand's type ({self.operand.type}), not {self.res.type}")
        if is_uniform(self.operand):
            raise VerifyException("kas.reduce needs a per-element operand; this one is uniform")


# Loop iterations in all, nested loops multiplied (kas.loop and fuse.loop alike, and the saved
# host plan's): a loop run from the host launches its body's kernels every iteration, one
# inside a kernel counts them in 32-bit registers.


def verify_total_iterations(op: Operation, trip_count: int) -> None:
    """Refuses a loop whose iterations, its enclosing loops' trip counts multiplied in, exceed
    `MAX_TOTAL_ITERATIONS` (any loop op with a `trip_count` property counts)."""
    total, parent = trip_count, op.parent_op()
    while parent is not None:
        trips = parent.properties.get("trip_count")
        if isinstance(trips, IntAttr):
            total *= trips.data
        parent = parent.parent_op()
    if total > MAX_TOTAL_ITERATIONS:
        raise VerifyException(f"{op.name} runs {total:,} iterations with its enclosing loops; at most "
                              f"{MAX_TOTAL_ITERATIONS:,} are allowed")


@irdl_op_definition
class LoopOp(LocatedOperation):
    """Runs its body `trip_count` times in order.

    The first block arguments receive the `iter_args` on the first iteration
    and the body's first yielded values afterwards.  Results are the values
    yielded by the last iteration: the carried ones first, then values that
    are only defined inside the loop and read after it.
    """

    name = "kas.loop"
    trip_count = prop_def(IntAttr)
    iter_args = var_operand_def()
    res = var_result_def()
    body = region_def("single_block")

    def __init__(self, trip_count: int, iter_args: Sequence[SSAValue],
                 result_types: Sequence[Attribute], body: Region):
        super().__init__(operands=[iter_args], result_types=[result_types],
                         properties={"trip_count": IntAttr(trip_count)}, regions=[body])

    @property
    def body_ops(self) -> list[Operation]:
        """The body's statements (calls and loops), without its kas.yield."""
        return [op for op in self.body.block.ops if not isinstance(op, YieldOp)]

    def verify_(self) -> None:
        if self.trip_count.data < 1:
            raise VerifyException(f"kas.loop trip count must be at least 1, got {self.trip_count.data}")
        verify_total_iterations(self, self.trip_count.data)
        block = self.body.block
        if len(block.args) != len(self.iter_args):
            raise VerifyException(
                f"kas.loop body has {len(block.args)} arguments but {len(self.iter_args)} iter_args")
        for k, (a, v) in enumerate(zip(block.args, self.iter_args)):
            if a.type != v.type:
                raise VerifyException(f"kas.loop block argument {k} is {a.type}, iter_arg is {v.type}")
        term = block.last_op
        if not isinstance(term, YieldOp):
            raise VerifyException("kas.loop body must end with kas.yield")
        if len(term.values) != len(self.res):
            raise VerifyException(
                f"kas.yield yields {len(term.values)} values but kas.loop has {len(self.res)} results")
        for k, (y, r) in enumerate(zip(term.values, self.res)):
            if y.type != r.type:
                raise VerifyException(f"kas.yield value {k} is {y.type}, loop result is {r.type}")
        if len(self.res) < len(self.iter_args):
            raise VerifyException("kas.loop must have a result for each iter_arg")
        for k, v in enumerate(self.iter_args):
            if is_uniform(v):
                raise VerifyException(f"kas.loop iter_arg {k} is uniform; a loop carries per-element values")

    def print(self, printer: Printer) -> None:
        printer.print_string(f" {self.trip_count.data}")
        if self.iter_args:
            printer.print_string(" iter_args(")
            printer.print_list(
                zip(self.body.block.args, self.iter_args),
                lambda p: (printer.print_ssa_value(p[0]), printer.print_string(" = "),
                           printer.print_ssa_value(p[1])))
            printer.print_string(")")
        printer.print_string(" -> (")
        printer.print_list(self.res.types, printer.print_attribute)
        printer.print_string(") ")
        printer.print_region(self.body, print_entry_block_args=False, print_empty_block=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "LoopOp":
        trip = parser.parse_integer(allow_boolean=False)
        pos = parser.pos
        names: list[Parser.UnresolvedArgument] = []
        inits: list[UnresolvedOperand] = []
        if parser.parse_optional_keyword("iter_args"):
            def one():
                arg = parser.parse_argument(expect_type=False)
                parser.parse_punctuation("=")
                return arg, parser.parse_unresolved_operand()
            for arg, init in parser.parse_comma_separated_list(Parser.Delimiter.PAREN, one):
                names.append(arg)
                inits.append(init)
        parser.parse_punctuation("->")
        types = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_type)
        if len(types) < len(inits):
            parser.raise_error("kas.loop needs a result type for each iter_arg")
        operands = parser.resolve_operands(inits, types[: len(inits)], pos)
        args = [a.resolve(t) for a, t in zip(names, types)]
        body = parser.parse_region(args)
        op = cls(trip, operands, types, body)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


@irdl_op_definition
class ProgramOp(LocatedOperation):
    """A KAS program: named inputs (block arguments) and named outputs."""

    name = "kas.program"
    sym_name = prop_def(SymbolNameConstraint())
    input_names = prop_def(ArrayAttr[StringAttr])
    output_names = prop_def(ArrayAttr[StringAttr])
    uniform_inputs = opt_prop_def(ArrayAttr[StringAttr])  # inputs with one value for the batch
    nodal_names = opt_prop_def(ArrayAttr[StringAttr])  # inputs and outputs with one value per node
    body = region_def("single_block")
    traits = traits_def(IsolatedFromAbove(), SymbolOpInterface())

    def __init__(self, name: str, input_names: Sequence[str], input_types: Sequence[Attribute],
                 output_names: Sequence[str], body: Region | None = None, uniform: Sequence[str] = (),
                 nodal: Sequence[str] = ()):
        if body is None:
            body = Region(Block(arg_types=input_types))
        properties: dict[str, Attribute] = {
            "sym_name": StringAttr(name),
            "input_names": ArrayAttr(StringAttr(n) for n in input_names),
            "output_names": ArrayAttr(StringAttr(n) for n in output_names),
        }
        if uniform:
            properties["uniform_inputs"] = ArrayAttr(StringAttr(n) for n in uniform)
        if nodal:
            properties["nodal_names"] = ArrayAttr(StringAttr(n) for n in nodal)
        super().__init__(properties=properties, regions=[body])

    @property
    def nodal(self) -> list[str]:
        """The names of the inputs and outputs that hold one value per node of a mesh."""
        return [s.data for s in self.nodal_names.data] if self.nodal_names is not None else []

    @property
    def uniform(self) -> list[str]:
        """The names of the inputs that hold one value for the whole batch."""
        return [s.data for s in self.uniform_inputs.data] if self.uniform_inputs is not None else []

    @property
    def inputs(self) -> list[str]:
        return [s.data for s in self.input_names.data]

    @property
    def outputs(self) -> list[str]:
        return [s.data for s in self.output_names.data]

    @property
    def return_op(self) -> ReturnOp:
        term = self.body.block.last_op
        assert isinstance(term, ReturnOp)
        return term

    def input_types(self) -> list[KasType]:
        return [a.type for a in self.body.block.args]  # type: ignore[misc]

    def output_types(self) -> list[KasType]:
        return [v.type for v in self.return_op.values]  # type: ignore[misc]

    def verify_(self) -> None:
        block = self.body.block
        if len(block.args) != len(self.input_names):
            raise VerifyException(
                f"kas.program has {len(block.args)} arguments but {len(self.input_names)} input names")
        for a in block.args:
            if not isinstance(a.type, KasType):
                raise VerifyException(f"kas.program inputs must have kas types, got {a.type}")
        term = block.last_op
        if not isinstance(term, ReturnOp):
            raise VerifyException("kas.program body must end with kas.return")
        if len(term.values) != len(self.output_names):
            raise VerifyException(
                f"kas.return returns {len(term.values)} values but kas.program names "
                f"{len(self.output_names)} outputs")
        if len(set(self.outputs)) != len(self.outputs):
            raise VerifyException("kas.program output names must be distinct")
        for name in self.uniform:
            if name not in self.inputs:
                raise VerifyException(f"kas.program lists '{name}' as uniform, but it is not an input")
        if len(set(self.uniform)) != len(self.uniform):
            raise VerifyException("kas.program uniform input names must be distinct")
        with uniformity_memo():  # (the IR does not change while it is verified)
            self._verify_mesh()

    def _verify_mesh(self) -> None:
        """Nodal values are gathered or read by nodal statements (top-level calls whose other
        operands are uniform), never by per-element code; a gather reads no value made from a
        scatter's result; nodal outputs are nodal values made by the program; connectivities are
        inputs read by gathers and scatters only."""
        nodal = self.nodal
        if len(set(nodal)) != len(nodal):
            raise VerifyException("kas.program nodal names must be distinct")
        for name in nodal:
            if name not in self.inputs and name not in self.outputs:
                raise VerifyException(f"kas.program lists '{name}' as nodal, but it is neither an input nor an output")
            if name in self.uniform:
                raise VerifyException(f"kas.program lists '{name}' as both uniform and nodal")
        for name, arg in zip(self.inputs, self.body.block.args):
            readers = {u.operation.name for u in arg.uses}
            if isinstance(arg.type, IndexType):
                if name in self.uniform or name in nodal:
                    raise VerifyException(f"kas.program: the connectivity '{name}' is per element")
                if readers - MESH_READERS:
                    raise VerifyException(f"kas.program: the connectivity '{name}' is read by "
                                          f"{', '.join(sorted(readers - MESH_READERS))}; only "
                                          "kas.gather and kas.scatter read connectivities")
        per_node = nodal_values(self)
        for op in self.body.walk():
            if isinstance(op, CallOp):
                domains = {a in per_node for a in op.args if not is_uniform(a)}
                if domains == {True, False}:
                    raise VerifyException(f"kas.call @{op.op_name} reads nodal and per-element values; gather the "
                                          "nodal ones first")
                if True in domains and op.parent_op() is not self:
                    raise VerifyException(f"kas.call @{op.op_name} reads a nodal value inside a loop: nodal "
                                          "statements stand at the program's top level")
            elif isinstance(op, GatherOp):
                if op.nodal not in per_node:
                    raise VerifyException("kas.gather reads a nodal value (an input listed in nodal(...) or a "
                                          "nodal statement's result)")
            elif isinstance(op, ScatterOp):
                if op.value in per_node or is_uniform(op.value):
                    raise VerifyException("kas.scatter adds a per-element value, not a nodal or uniform one")
            elif not isinstance(op, (ReduceOp, ReturnOp)) and any(v in per_node for v in op.operands):
                if not (op.name == "fuse.launch"):
                    raise VerifyException(f"{op.name} reads a nodal value; only gathers, scatters' results, nodal "
                                          "statements and reductions do")
        for name, v in zip(self.outputs, self.return_op.values):
            made = v in per_node
            if (name in nodal) != made:
                raise VerifyException(f"kas.program: output '{name}' " + (
                    "is nodal but not a nodal value (a scatter's or a nodal statement's result)" if not made else
                    "is a nodal value but not listed in nodal(...)"))
            if made and v in self.body.block.args:
                raise VerifyException(f"kas.program: output '{name}' returns the nodal input as it is")

    def print(self, printer: Printer) -> None:
        printer.print_string(" ")
        printer.print_symbol_name(self.sym_name.data)
        printer.print_string("(")
        printer.print_list(self.body.block.args, printer.print_block_argument)
        printer.print_string(") -> (")
        printer.print_list(
            zip(self.outputs, self.return_op.values),
            lambda p: (printer.print_string(p[0]), printer.print_string(" : "),
                       printer.print_attribute(p[1].type)))
        printer.print_string(") ")
        if self.uniform:
            printer.print_string("uniform(" + ", ".join(self.uniform) + ") ")
        if self.nodal:
            printer.print_string("nodal(" + ", ".join(self.nodal) + ") ")
        printer.print_region(self.body, print_entry_block_args=False)
        printer.print_op_attributes(self.attributes)

    @classmethod
    def parse(cls, parser: Parser) -> "ProgramOp":
        name = parser.parse_symbol_name().data
        args, locations = parse_block_arguments(parser)
        parser.parse_punctuation("->")

        def out():
            n = parser.parse_identifier()
            parser.parse_punctuation(":")
            parser.parse_type()
            return n
        outputs = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, out)
        uniform: list[str] = []
        if parser.parse_optional_keyword("uniform"):
            uniform = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_identifier)
        nodal: list[str] = []
        if parser.parse_optional_keyword("nodal"):
            nodal = parser.parse_comma_separated_list(Parser.Delimiter.PAREN, parser.parse_identifier)
        body = parser.parse_region(args)
        input_names = [variable_of_hint(a.name.text[1:]) for a in args]
        op = cls(name, input_names, [a.type for a in args], outputs, body, uniform, nodal)
        locate_block_arguments(op.body.block, locations)
        op.attributes |= parser.parse_optional_attr_dict()
        return op


def parse_block_arguments(parser: Parser) -> tuple[list, list]:
    """A parenthesized list of typed block arguments, each optionally followed by its
    `loc(...)` (as --print-debuginfo prints them): the arguments and their locations."""
    locations: list = []

    def one():
        arg = parser.parse_argument(expect_type=True)
        locations.append(parser.parse_optional_location())
        return arg

    return parser.parse_comma_separated_list(Parser.Delimiter.PAREN, one), locations


def locate_block_arguments(block: Block, locations: list) -> None:
    for arg, location in zip(block.args, locations):
        if location is not None:
            arg.location = location


# Answers of `is_uniform` (and of the lowered IR's `analysis.uniformity.is_uniform`), kept while
# `uniformity_memo` is entered: None outside it.
_UNIFORM_MEMO: ContextVar[dict | None] = ContextVar("irfuse_uniform_memo", default=None)


@contextmanager
def uniformity_memo() -> Iterator[dict]:
    """Remembers which values are uniform for as long as the IR is not changed: the fusion
    search asks it of the same values for every candidate kernel. Per thread and task (a
    context variable), so concurrent compilations keep their own."""
    token = _UNIFORM_MEMO.set({})
    try:
        yield _UNIFORM_MEMO.get()  # type: ignore[misc]
    finally:
        _UNIFORM_MEMO.reset(token)


def remembers_uniformity(fn):
    """`fn` run inside `uniformity_memo`: for a function that asks many times which values are
    uniform and changes no IR (the fusion search, the reference evaluations)."""
    @functools.wraps(fn)
    def remembering(*args, **kwargs):
        with uniformity_memo():
            return fn(*args, **kwargs)
    return remembering


def uniform_memo() -> dict | None:
    """The memo `uniformity_memo` keeps, or None outside it."""
    return _UNIFORM_MEMO.get()


def is_uniform(v: SSAValue, uniform_args: Collection[SSAValue] = ()) -> bool:
    """Whether a value of a `kas` program holds one value for the whole batch: a uniform
    input, a literal, a reduction's result, or a call's whose operands are all uniform.
    `uniform_args`: block arguments known to be uniform inputs (a program being built)."""
    memo = _UNIFORM_MEMO.get() if not uniform_args else None
    return uniform_through_calls(v, lambda w: uniform_leaf(w, uniform_args), {} if memo is None else memo)


def uniform_leaf(w: SSAValue, uniform_args: Collection[SSAValue]) -> bool:
    """Whether `w`, a value no call makes, is uniform: a uniform input (or one of
    `uniform_args`), a literal, a table or a reduction's result."""
    owner = w.owner
    if isinstance(owner, Block):
        parent = owner.parent_op()
        return w in uniform_args or (
            isinstance(parent, ProgramOp) and parent.inputs[w.index] in parent.uniform)  # type: ignore[attr-defined]
    return isinstance(owner, (ConstantOp, TableOp, ReduceOp))


def uniform_through_calls(v: SSAValue, leaf: Callable[[SSAValue], bool], memo: dict) -> bool:
    """Whether `v` is uniform, a call's result being uniform where all its operands are and any
    other value where `leaf` says so. Every value answered on the way is kept in `memo`, so the
    questions of a whole pass over a program cost one visit a value (a value deep in a chain
    asked again and again made verifying a long unrolled program quadratic)."""
    known = memo.get(v)
    if known is not None:
        return known
    stack = [v]
    while stack:
        w = stack[-1]
        if w in memo:
            stack.pop()
            continue
        owner = w.owner
        if not isinstance(owner, CallOp):
            memo[w] = leaf(w)
            stack.pop()
            continue
        answer: bool | None = True
        for a in owner.args:
            known = memo.get(a)
            if known is None:
                stack.append(a)  # (answered first; w is looked at again after it)
                answer = None
                break
            if not known:
                answer = False
                break
        if answer is not None:
            memo[w] = answer
            stack.pop()
    return memo[v]


def program_of(module) -> ProgramOp:
    """The one `kas.program` of a module; ValueError when there is none or several."""
    programs = [op for op in module.walk() if isinstance(op, ProgramOp)]
    if len(programs) != 1:
        raise ValueError(f"expected exactly one kas.program, found {len(programs)}")
    return programs[0]


Kas = Dialect(
    "kas",
    [ProgramOp, CallOp, ConstantOp, TableOp, ReduceOp, LoopOp, ReturnOp, YieldOp, GatherOp, ScatterOp],
    [ScalarType, MaskType, VectorType, MatrixType, TensorType, IndexType, ReduceKindAttr],
)
