"""Programs written as Python functions: `@irfuse.program` read into the KAS syntax tree.

    @irfuse.program
    def rotate(R: irfuse.Matrix[3, 3], Q: irfuse.Matrix[3, 3], x: irfuse.Vector[3]):
        for _ in range(4):
            T = R @ Q
            R = T + Q
        v = R @ x
        return R, irfuse.ops.venorm3(v)

The function is never run. Its source is parsed (`ast`) into the same syntax tree the KAS
parser builds (`syntax.Program`), with the positions of the Python file, and handed to
the KAS frontend's IR generation: the `kas` IR is the one the same program written in
KAS gives, and every diagnostic, the KAS frontend's included, names the Python file,
line and column. What the body may hold:

- `name = expression` (and `name += expression`, `-=`, `*=`, `@=`), where an expression
  is a parameter or a value assigned before, a call of an op (`irfuse.ops.mmul33(A, B)`,
  or an op imported from `irfuse.ops`; operands by position or by the names of the op's
  definition or signature, `irfuse.ops.det(A=J)`), or an infix form resolved by the operands' types
  to a catalogue op: `+` (sadd, vaddN, maddNN), `-` (ssub, vsubN, msubNN), unary `-`
  (sneg, vnegN, mnegNN), `*` (smul; svmulN and smmulNN with the scalar on either side),
  `/` (sdiv; of another value by a scalar or one of its shape the generic `ediv`), `**` (the
  generic `pow`), `//` and `%` (the generic `floordiv` and `mod`: NumPy's and Python's floor
  division and remainder, the remainder taking the divisor's sign), `@` (mmulNN, mvmulNN);
  unary `+` is its operand; Python's `abs(x)`,
  `max(a, b, ...)`, `min(a, b, ...)` are the generic ops of those names; `a if m else b` is
  `irfuse.where(m, a, b)`; NumPy's and `math`'s functions of values (`np.sin`, `np.maximum`,
  `np.where`, `np.einsum`, `np.linalg.det`, `np.add`, ...: `numpy_functions`) the op or infix
  form of their meaning, and its array methods (`A.trace()`, `A.dot(v)`: `METHODS`) those
  functions of the value; values NumPy makes (`np.eye(3)`, `np.array([...])`, `np.zeros(3)`)
  stacks of their entries; `*` of two values of one shape is `emul`, and `+`, `-`, `/`, ... of a
  value and a scalar the scalar in every entry (NumPy's). Nested expressions get temporaries
  (`_t1`, ...), those of uniform values alone in a loop's body made before the loop;
- `name = number` (`acc = 0.0`): one value for the batch, or the number in every element where
  the variable holds one value per element (the function traced again so: `translate_function`);
- `for _ in range(N):` with N an integer (a literal or a name bound to an int where the
  function is defined, or their arithmetic, `N + 1`), which becomes `loop N { ... }` (and
  `range(a, b)`, `range(a, b, step)`: a loop of as many trips as Python's range holds; of
  none, a body never run or read); `for q in range(N):` whose body
  reads and assigns arrays at `x[q]` (the counter only as an index), `loop q N { ... }`;
- `x: irfuse.Tensor[8, 3, 3]` (an annotation without a value) declares a variable, an array
  of 8 matrices here; `x[2]` reads an entry at a number; `y: irfuse.Scalar = expression`
  declares and assigns (the value must be of the annotated type);
- `if`/`elif`/`else` on a comparison (`a > b`) or a mask: both sides computed, each
  variable either assigns selected element by element; comparisons as values are masks
  (chained as Python's: `a < b <= c` is `a < b and b <= c`), their logic `not`, `and`, `or`
  or NumPy's `~`, `&`, `|`, `^`, masks compared by `!=` (`xor`) and `==` (its `not`);
  `irfuse.where(m, a, b)` selects;
- `a, b = x, y`: every value computed before any target is assigned (`a, b = b, a` swaps);
- `x = y` copies; `A.T` transposes; `@` is `mmul`/`mvmul`/`dot` for any compatible shapes
  where no suffixed op is; every generic op is `irfuse.ops.NAME` (`irfuse.ops.det(J)`,
  `irfuse.ops.contract("q,qij->ij", w, eps)`);
- `return a, b` (names or expressions; a name returned again an output of its own, a copy),
  last, or inside `if`/`else` (`python_returns`: moved to the end first); a docstring; `pass`;
- numbers (`0.5`, `2`, `-1e-3`, and names of the module or closure bound to an int or a
  float, `SCALE`, `math.pi`, read when the function is compiled) as operands: uniform scalars
  (`A * 0.5` is smmulNN); an entry's number may count from the end (`v[-1]`), an entry of an
  entry is read and assigned in one subscript (`J[0, 1]`, `J[0][1]`), and a slice (`A[:, 0]`)
  read and assigned entry by entry;
- `irfuse.sum(x)`, `irfuse.max(x)`, `irfuse.min(x)`: reductions over the batch.

A parameter annotated `irfuse.Uniform[T]` holds one value for the whole batch. A variable
holds a uniform value when it is assigned a reduction or an expression of uniform values
only, and keeps holding that kind of value (as it keeps its type).

Meshes: a parameter annotated `irfuse.Nodal[irfuse.Vector[D]]` (or `irfuse.Nodal[irfuse.Scalar]`)
holds one value per node, one annotated `irfuse.Index[K]` each element's K node numbers.
`Xe = irfuse.gather(X, conn)` gives each element its nodes' rows (a K x D matrix, or a vector
of K), `irfuse.scatter(fe, conn)` adds each element's rows into its nodes (a nodal value,
which a program returns). They are the KAS `gather` and `scatter` (at the top level of the
function). An op of nodal values (and uniform ones) gives a nodal value: a nodal statement,
run once per node at the function's top level (the KAS language's); a connectivity is read by
gather and scatter only.

Derivatives: `@irfuse.derivative("jvp", wrt=("F", "mu"))` on the function (above or below
`@irfuse.program`) is the KAS `derivative jvp wrt F, mu;` line: the program is its forward
derivative (`"vjp"`: reverse; `"grad", of="E"`: a gradient); stacked, the one nearest the
`def` applies first.

Anything else (while loops, calls of what is not an op, attributes of values other than
`.T`) is refused at its line: a program's control flow cannot depend on its data, which is
why a branch computes both of its sides.
"""

from __future__ import annotations

import ast
import functools
import inspect
import itertools
import linecache
import math
import numbers
import re
import textwrap
import typing

from irfuse.artifact.records import record
from irfuse.diagnostics import CompileError, SourceFile, UsageError
from irfuse.frontend.irgen import FrontendResult, build_module, is_reduction
from irfuse.dialects.kas import KasType, MaskType, kas_type_of_shape
from irfuse.frontend.python_returns import returns_at_end
from irfuse.frontend.syntax import (COMPARISONS, COPY, DEFAULT_PREFIX, DERIVATIVE_MODES, MAX_DIM, MAX_TRIP_COUNT,
                                    MAX_VALUE_WORDS, MODES_WITH_OF, Call, Condition, Declaration, Derivative, If,
                                    Index, Loop, Name, Number, Pos, Program, Statement, Text)
from irfuse.library.families import STRING_ELSEWHERE, STRING_FIRST, string_params
from irfuse.library.catalogue import Library, default_library
from irfuse.library.indexexpr import DefinitionError

# -- value types in annotations ----------------------------------------------------------


class ValueType:
    """The type of one element's value: `irfuse.Scalar`, `irfuse.Mask`, `Vector[n]`,
    `Matrix[n, m]`, `Tensor[n, m, k]` or `Tensor[n, m, k, l]`."""

    def __init__(self, shape: tuple[int, ...], mask: bool = False):
        self.shape = shape
        self.mask = mask

    def spelling(self) -> str:
        s = self.shape
        if not s:
            return "mask" if self.mask else "scalar"
        return {1: "vector", 2: "matrix"}.get(len(s), "tensor") + "x".join(str(d) for d in s)

    def __repr__(self) -> str:
        if self.mask:
            return "irfuse.Mask"
        return f"irfuse.{_FAMILY_NAMES[len(self.shape)]}" + (f"[{', '.join(map(str, self.shape))}]" if self.shape else "")

    def __eq__(self, other) -> bool:
        return isinstance(other, ValueType) and other.shape == self.shape and other.mask == self.mask

    def __hash__(self) -> int:
        return hash((self.shape, self.mask))


_FAMILY_NAMES = {0: "Scalar", 1: "Vector", 2: "Matrix", 3: "Tensor", 4: "Tensor"}


class _Family:
    def __init__(self, name: str, ranks: tuple[int, ...]):
        self.name, self.ranks = name, ranks

    def __getitem__(self, dims) -> ValueType:
        dims = dims if isinstance(dims, tuple) else (dims,)
        if len(dims) not in self.ranks or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 1 for d in dims):
            want = " or ".join(f"{len(r)} positive integers" for r in ((0,) * k for k in self.ranks))
            raise UsageError(f"irfuse.{self.name}[...] takes {want}, not {dims!r}")
        if max(dims, default=1) > MAX_DIM or math.prod(dims) > MAX_VALUE_WORDS:
            raise UsageError(f"irfuse.{self.name}{list(dims)}: each size is at most {MAX_DIM} and a value holds at most "
                             f"{MAX_VALUE_WORDS:,} words, not {math.prod(dims):,}")
        return ValueType(tuple(dims))

    def __repr__(self) -> str:
        return f"irfuse.{self.name}"


class UniformType(ValueType):
    """`irfuse.Uniform[T]`: a value of type T that is the same for the whole batch."""

    def __repr__(self) -> str:
        return f"irfuse.Uniform[{ValueType(self.shape)!r}]"

    def __eq__(self, other) -> bool:
        return isinstance(other, UniformType) and other.shape == self.shape

    def __hash__(self) -> int:
        return hash(("uniform", self.shape))


class _Uniform:
    def __getitem__(self, t) -> UniformType:
        if not isinstance(t, ValueType) or isinstance(t, UniformType):
            raise UsageError(f"irfuse.Uniform takes a value type (irfuse.Scalar, irfuse.Matrix[3, 3], ...), not {t!r}")
        return UniformType(t.shape, t.mask)

    def __repr__(self) -> str:
        return "irfuse.Uniform"


class NodalType(ValueType):
    """`irfuse.Nodal[T]`: one value of type T per node of a mesh (read through `irfuse.gather`,
    made by `irfuse.scatter`)."""

    def __repr__(self) -> str:
        return f"irfuse.Nodal[{ValueType(self.shape)!r}]"

    def __eq__(self, other) -> bool:
        return isinstance(other, NodalType) and other.shape == self.shape

    def __hash__(self) -> int:
        return hash(("nodal", self.shape))


class _Nodal:
    def __getitem__(self, t) -> NodalType:
        if not isinstance(t, ValueType) or isinstance(t, (UniformType, NodalType, ConnectivityType)) or t.mask \
                or len(t.shape) > 1:
            raise UsageError(f"irfuse.Nodal takes irfuse.Scalar or irfuse.Vector[D] (one value per node), not {t!r}")
        return NodalType(t.shape)

    def __repr__(self) -> str:
        return "irfuse.Nodal"


class ConnectivityType(ValueType):
    """`irfuse.Index[K]`: a connectivity, each element's K node numbers (int32 or int64)."""

    def spelling(self) -> str:
        return f"index{self.shape[0]}"

    def __repr__(self) -> str:
        return f"irfuse.Index[{self.shape[0]}]"

    def __eq__(self, other) -> bool:
        return isinstance(other, ConnectivityType) and other.shape == self.shape

    def __hash__(self) -> int:
        return hash(("index", self.shape))


class _Index:
    def __getitem__(self, k) -> ConnectivityType:
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise UsageError(f"irfuse.Index takes the number of nodes per element (a positive integer), not {k!r}")
        return ConnectivityType((k,))

    def __repr__(self) -> str:
        return "irfuse.Index"


class MeshCall:
    """`irfuse.gather(X, conn)` and `irfuse.scatter(fe, conn)` inside a traced function."""

    def __init__(self, kind: str):
        self.kind = kind

    def __call__(self, *args, **kwargs):
        raise UsageError(f"irfuse.{self.kind} moves values between a mesh's nodes and its elements: call it inside "
                         "an @irfuse.program function, which irfuse compiles (irfuse.mesh.scatter_add adds "
                         "NumPy arrays)")

    def __repr__(self) -> str:
        return f"irfuse.{self.kind}"


# irfuse.Nodal and irfuse.Index (here NodeIndex: `Index` is the syntax tree's array entry).
Nodal, NodeIndex = _Nodal(), _Index()
gather, scatter = MeshCall("gather"), MeshCall("scatter")


class Reduction:
    """`irfuse.sum`, `irfuse.max`, `irfuse.min` inside a traced function: a reduction over the batch."""

    def __init__(self, kind: str):
        self.kind = kind

    def __call__(self, *args, **kwargs):
        raise UsageError(f"irfuse.{self.kind} reduces a value of a program over its batch: call it inside an "
                         "@irfuse.program function, which irfuse compiles")

    def __repr__(self) -> str:
        return f"irfuse.{self.kind}"


Uniform = _Uniform()
# irfuse.sum, irfuse.max and irfuse.min (named so here, where the builtins stay usable).
reduce_sum, reduce_max, reduce_min = Reduction("sum"), Reduction("max"), Reduction("min")

class Where:
    """`irfuse.where(m, a, b)` inside a traced function: a where the mask m holds, else b."""

    def __call__(self, *args, **kwargs):
        raise UsageError("irfuse.where selects between values of a program: call it inside an @irfuse.program "
                         "function, which irfuse compiles")

    def __repr__(self) -> str:
        return "irfuse.where"


where = Where()
Scalar = ValueType(())
Mask = ValueType((), mask=True)
Vector = _Family("Vector", (1,))
Matrix = _Family("Matrix", (2,))
Tensor = _Family("Tensor", (3, 4))


class OpRef:
    """An op of the library, as `irfuse.ops.NAME` names it inside a traced function."""

    def __init__(self, name: str):
        self.name = name

    def __call__(self, *args, **kwargs):
        raise UsageError(f"irfuse.ops.{self.name} is an op of a program, not a function: call it inside an "
                         "@irfuse.program function, which irfuse compiles")

    def __repr__(self) -> str:
        return f"irfuse.ops.{self.name}"


# -- the translation ---------------------------------------------------------------------

INFIX = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.MatMult: "@", ast.Pow: "**",
         ast.FloorDiv: "//", ast.Mod: "%"}
_ENTRYWISE = {"/": "ediv", "**": "pow", "//": "floordiv", "%": "mod"}  # (NumPy's meanings, entry by entry)
# Python's functions of values that name a generic op of the library (where the function's
# module does not bind the name to something else): abs(x), max(a, b, ...), min(a, b, ...).
BUILTIN_OPS = ("abs", "max", "min")
_COMPARE = {ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!="}
# NumPy's array methods a program's value takes, each NumPy's function of that value first
# (`A.trace()` is `np.trace(A)`, `A.dot(b)` `np.dot(A, b)`, `A.sum()` the sum of its entries).
METHODS = ("trace", "sum", "dot", "transpose", "clip", "max", "min")
# NumPy's functions of values a program does not take, with what to write instead (`numpy_instead`).
_NUMPY_INSTEAD = {"cross": "its entries, np.array([u[1] * w[2] - u[2] * w[1], ...])",
                  "linalg.solve": "np.linalg.inv(A) @ b (the closed-form inverse of a 2x2 or 3x3 matrix)",
                  "mean": "np.sum(x) / n"}
# NumPy's logic of boolean arrays, as masks: `m & n`, `m | n`, `m ^ n` (and `~m`, `m != n`).
MASK_LOGIC = {ast.BitAnd: ("&", "and"), ast.BitOr: ("|", "or"), ast.BitXor: ("^", "xor")}


# Python's arithmetic of whole numbers, as a loop's bounds and an entry's index may be written.
_WHOLE_ARITHMETIC = {ast.Add: lambda a, b: a + b, ast.Sub: lambda a, b: a - b, ast.Mult: lambda a, b: a * b,
                     ast.FloorDiv: lambda a, b: a // b, ast.Mod: lambda a, b: a % b, ast.Pow: lambda a, b: a ** b}


def _signed(node: ast.expr) -> tuple[bool, ast.expr]:
    """(whether the signs before it make it negative, the operand under them): `-+-x` is x."""
    negative = False
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
        negative, node = negative != isinstance(node.op, ast.USub), node.operand
    return negative, node


def _parts(node: ast.Subscript) -> list[ast.expr]:
    """A subscript's indices, one an axis (`A[i, j]`: i and j; `A[i]`: i)."""
    return list(node.slice.elts) if isinstance(node.slice, ast.Tuple) else [node.slice]


def _chain(node: ast.Subscript) -> tuple[list[ast.expr], ast.expr]:
    """(every index of a chain of subscripts in order, what they subscript): `A[i][j, k]` is
    ([i, j, k], A)."""
    indices: list[ast.expr] = []
    while isinstance(node, ast.Subscript):
        indices[:0] = _parts(node)
        node = node.value
    return indices, node


def _has_slice(node: ast.Subscript) -> bool:
    """Whether a subscript (`A[:, 0]`, `A[1][0:2]`) slices along some axis."""
    return any(isinstance(p, ast.Slice) for p in _chain(node)[0])


def entry_at(value: Name, k: int, pos: Pos) -> Index:
    """Entry k (a whole number) of a value's first axis, as an operand."""
    return Index(value, Number(str(k), float(k), pos))


def _is_number(value) -> bool:
    """An int or float of Python or NumPy, not a bool (which Python counts as an int)."""
    return isinstance(value, numbers.Real) and not isinstance(value, bool) and type(value).__name__ != "bool_"


@functools.cache
def numpy_functions() -> dict[int, tuple[str, str, int | None]]:
    """NumPy's and `math`'s functions a program may call on its values, by identity: id ->
    (spelling, what it is, operands). What it is: an infix symbol (`np.add(a, b)` is `a + b`,
    `np.matmul` and `np.dot` `@`, `np.negative(a)` `-a`) or `op:NAME`, the generic op of the
    library of NumPy's meaning entry by entry (`np.sin`, `np.maximum` `max`, `np.where`
    `select`, `np.clip` `clamp`, `np.einsum` `contract`, `np.linalg.det` `det`), or `entries`
    (`np.sum(A)`: the sum of an element's value's entries, `contract("ij->", A)`), `identity`
    (`np.eye(n)`), `stack` (`np.array([...])`, `np.stack([...])`) or `square`; the operands'
    count (None: an einsum's string and its values)."""
    import numpy as np

    table = {"+": ("add", 2), "-": ("subtract", 2), "*": ("multiply", 2), "/": ("divide", 2), "**": ("power", 2),
             "//": ("floor_divide", 2), "%": ("remainder", 2), "@": ("matmul", 2), "neg": ("negative", 1),
             "op:sqrt": ("sqrt", 1), "op:exp": ("exp", 1), "op:log": ("log", 1), "op:sin": ("sin", 1),
             "op:cos": ("cos", 1), "op:tanh": ("tanh", 1), "op:abs": ("abs", 1), "op:sign": ("sign", 1),
             "op:floor": ("floor", 1), "op:max": ("maximum", 2), "op:min": ("minimum", 2),
             "op:select": ("where", 3), "op:clamp": ("clip", 3), "op:contract": ("einsum", None),
             "op:transpose": ("transpose", 1), "op:trace": ("trace", 1), "op:outer": ("outer", 2)}
    found = {id(getattr(np, name)): (f"np.{name}", what, k) for what, (name, k) in table.items()}
    # Values made of others or of numbers: np.eye(3) the identity (a uniform value), np.array([a,
    # b, c]) and np.stack([u, w]) the op `stack` (nested lists stacked in turn), np.square(x) x * x.
    for name, what in (("eye", "identity"), ("identity", "identity"), ("array", "stack"), ("stack", "stack"),
                       ("square", "square"), ("diag", "diagonal"), ("max", "max"), ("min", "min"), ("zeros", "zeros")):
        found[id(getattr(np, name))] = (f"np.{name}", what, 1)
    found[id(np.zeros_like)] = ("np.zeros_like", "op:zeros", 1)  # (zeros of a value's type: the generic op)
    # (np.max(A) the largest of an element's value's entries, np.diag(A) its diagonal, np.diag(v)
    # the matrix of that diagonal: NumPy's)
    found.setdefault(id(np.amax), ("np.amax", "max", 1))
    found.setdefault(id(np.amin), ("np.amin", "min", 1))
    found.setdefault(id(np.fabs), ("np.fabs", "op:abs", 1))
    # (np.absolute is np.abs, np.mod np.remainder, np.true_divide np.divide: named as above)
    found.setdefault(id(np.dot), ("np.dot", "@", 2))
    found[id(np.sum)] = ("np.sum", "entries", 1)  # (of one element's value: its entries' sum)
    found.setdefault(id(np.absolute), ("np.absolute", "op:abs", 1))
    found.setdefault(id(np.true_divide), ("np.true_divide", "/", 2))
    for name in ("det", "inv", "norm"):
        found[id(getattr(np.linalg, name))] = (f"np.linalg.{name}", f"op:{name}", 1)
    for name, op in (("sqrt", "sqrt"), ("exp", "exp"), ("log", "log"), ("sin", "sin"), ("cos", "cos"),
                     ("tanh", "tanh"), ("fabs", "abs"), ("floor", "floor")):
        found[id(getattr(math, name))] = (f"math.{name}", f"op:{op}", 1)
    return found


@functools.cache
def numpy_instead() -> dict[int, str]:
    """id of a NumPy function a program does not take -> what to write instead."""
    import numpy as np

    found = {}
    for path, instead in _NUMPY_INSTEAD.items():
        obj = np
        for part in path.split("."):
            obj = getattr(obj, part)
        found[id(obj)] = instead
    return found


def operand_names(library: Library, op_name: str) -> list[str] | None:
    """The names an op's operands are given by keyword (`irfuse.ops.det(A=J)`): a catalogue op's
    definition's, a generic op's signature's; None for one of as many operands as it is given."""
    op, family = library.get(op_name), library.family(op_name)
    if op is not None:
        return list(op.operand_names)
    if family is not None and family.arity is not None:
        return re.findall(r"(\w+):", family.signature.split("->")[0])
    return None


def infix_family(symbol: str, left: tuple[int, ...], right: tuple[int, ...] | None) -> tuple[str, bool] | None:
    """The generic op (`library.families`) an infix form stands for where no suffixed
    catalogue op does (any shape), and whether its operands are swapped; None if none."""
    if right is None:
        return ("neg", False)
    if symbol in ("+", "-") and (left == right or right == ()):  # (NumPy's: a scalar to every entry)
        return ("add" if symbol == "+" else "sub", False)
    if symbol == "+" and left == ():  # (s + v is v + s, to the bit)
        return ("add", True)
    if symbol == "*":
        if right == ():
            return ("scale", False) if left else ("emul", False)
        if left == ():
            return ("scale", True)
        if left == right:  # (NumPy's: entry by entry)
            return ("emul", False)
    if symbol in _ENTRYWISE and (right == () or right == left):  # (entry by entry, NumPy's meaning)
        return (_ENTRYWISE[symbol], False)
    if symbol == "@":
        if len(left) == 2 and len(right) == 2:
            return ("mmul", False)
        if len(left) == 2 and len(right) == 1:
            return ("mvmul", False)
        if len(left) == 1 and len(right) == 1:
            return ("dot", False)
    return None


def infix_op(symbol: str, left: tuple[int, ...], right: tuple[int, ...] | None) -> tuple[str, bool] | None:
    """The catalogue op an infix form stands for, and whether its operands are swapped
    (the scalar of `s * A` is the op's second operand); None if there is none."""
    def tag(shape):
        return "".join(str(d) for d in shape)
    if right is None:  # unary minus
        return {0: ("sneg", False), 1: (f"vneg{tag(left)}", False), 2: (f"mneg{tag(left)}", False)}.get(len(left))
    if symbol in "+-" and left == right:
        base = {"+": ("sadd", "vadd", "madd"), "-": ("ssub", "vsub", "msub")}[symbol]
        return (base[len(left)] + tag(left), False) if len(left) <= 2 else None
    if symbol == "/" and left == right == ():
        return ("sdiv", False)
    if symbol == "*":
        if left == right == ():
            return ("smul", False)
        for thing, swapped in ((left, False), (right, True)):
            other = right if thing is left else left
            if other == () and len(thing) in (1, 2):
                return (("svmul" if len(thing) == 1 else "smmul") + tag(thing), swapped)
    if symbol == "@" and len(left) == 2:  # (the suffixed ops take operands of the left's shape)
        if right == left:
            return (f"mmul{tag(left)}", False)
        if right == left[1:]:
            return (f"mvmul{tag(left)}", False)
    return None


@record
class TracedSource:
    """The syntax tree of a traced function and the file it came from."""

    program: Program
    source: SourceFile
    name: str


class _Translator:
    SHORT_CHAIN = 32  # links of infix forms traced by recursion (`left_chain`)

    def __init__(self, fn, library: Library, per_element: frozenset[str] = frozenset()):
        self.fn = fn
        self.library = library
        try:
            lines, start = inspect.getsourcelines(fn)
            self.path = inspect.getsourcefile(fn) or "<python>"
        except (OSError, TypeError) as e:
            raise UsageError(f"@irfuse.program needs the function's source ({e}); define it in a file") from None
        # The whole file, for quoting lines in diagnostics: from linecache, where inspect found
        # the function (a notebook's cells are there too, not on disk).
        text = "".join(linecache.getlines(self.path)) or "\n" * (start - 1) + "".join(lines)
        self.file = SourceFile(self.path, text)
        # A method or nested function is indented: parse it dedented, and put the indent
        # back into every column reported.
        first = next((ln for ln in lines if ln.strip()), "")
        self.col_offset = len(first) - len(first.lstrip())
        self.line_offset = start - 1
        self.tree = ast.parse(textwrap.dedent("".join(lines)))
        self.types: dict[str, tuple[int, ...]] = {}
        self.masks: set[str] = set()  # variables holding masks (their shape is ())
        self.indices: list[str] = []  # the counters of the loops around that subscripts read
        self.uniform: set[str] = set()  # variables holding one value for the whole batch
        self.nodal: set[str] = set()  # variables holding one value per node (irfuse.Nodal)
        self.connectivities: set[str] = set()  # parameters annotated irfuse.Index[K]
        self.order: list[str] = []
        self.temps = 0
        self.temporaries: set[str] = set()  # (the names `temp` made)
        # A variable given a number (`acc = 0.0`) is uniform, unless it is one value per element
        # elsewhere (`acc += x[q]` after): then it is traced again, named in `per_element`, and
        # the number is put in every element (`translate_function`).
        self.per_element = per_element
        self.numbered: set[str] = set()  # (variables given a number, uniform so far)
        self.input_names: list[str] = []  # (`translate`)
        self.ready: dict[int, Name] = {}  # a long chain's inner links, traced before it (`left_chain`)
        self.tail: list[Statement] = []  # temporaries of return expressions
        self.own: set[str] = set()  # (`translate`)
        self.return_places: set[str] = set()  # variables of the places returned inside if/else (`translate`)
        # Temporaries a loop's body makes of uniform values alone (`np.eye(3)`, `s - v`'s s in every
        # entry, a slice of a uniform value): the same on every trip and every element, and a uniform
        # value is not assigned inside a loop, so they are made before the outermost loop.
        self.loop_depth = 0
        self.hoisted: list[Statement] = []
        self.in_loops: set[str] = set()  # (variables assigned in a loop: not read by what is hoisted)
        self.scope = dict(fn.__globals__)
        if fn.__closure__:
            self.scope.update(zip(fn.__code__.co_freevars, (c.cell_contents for c in fn.__closure__)))

    # positions and errors
    def pos(self, node: ast.AST) -> Pos:
        return Pos(node.lineno + self.line_offset, node.col_offset + 1 + self.col_offset)

    def error(self, node: ast.AST, message: str) -> CompileError:
        p = self.pos(node)
        return CompileError(self.file.diag(p.line, p.col, message))

    def name(self, text: str, node: ast.AST) -> Name:
        return Name(text, self.pos(node))

    # the function
    def translate(self) -> TracedSource:
        fdef = self.tree.body[0]
        if not isinstance(fdef, ast.FunctionDef):
            raise self.error(fdef, "@irfuse.program applies to a function (def), not to this")
        # Python names may be any Unicode identifier; a program's are KAS's (they name the IR's
        # values and the emitted code's variables), so another is refused where it first occurs.
        for node in ast.walk(fdef):
            text = node.arg if isinstance(node, ast.arg) else node.id if isinstance(node, ast.Name) else None
            if text is not None and not text.isascii():
                raise self.error(node, f"'{text}': a program's names are ASCII letters, digits and '_' "
                                       "(those of KAS): rename it")
        # The function's own names (assigned in it, or its parameters): Python reads none of them
        # from its module, even before they are assigned.
        self.own = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        self.own |= {a.arg for a in fdef.args.args}
        try:
            hints = typing.get_type_hints(self.fn)
        except Exception as e:
            raise self.error(fdef, f"the parameter annotations cannot be evaluated: {e}") from None
        a = fdef.args
        if a.vararg or a.kwarg or a.kwonlyargs or a.posonlyargs or a.defaults:
            raise self.error(fdef, "a program's parameters are plain names, one per input (no *args, **kwargs, "
                                   "keyword-only parameters or defaults)")
        inputs = []
        for arg in a.args:
            t = hints.get(arg.arg)
            if not isinstance(t, ValueType):
                raise self.error(arg, f"parameter '{arg.arg}' needs an irfuse type annotation (irfuse.Scalar, "
                                      "irfuse.Vector[3], irfuse.Matrix[3, 3], irfuse.Tensor[3, 3, 3], ...)")
            self.declare_typed(arg.arg, t, arg)
            inputs.append(self.name(arg.arg, arg))
        self.input_names = [n.text for n in inputs]
        body = list(fdef.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            body = body[1:]
        taken = {n.id for n in ast.walk(fdef) if isinstance(n, ast.Name)} | {a.arg for a in fdef.args.args}
        body, self.return_places = returns_at_end(body, self.error, taken, self.line_offset, self.combines_elements)
        self.own |= self.return_places
        if not body or not isinstance(body[-1], ast.Return) or body[-1].value is None:
            raise self.error(body[-1] if body else fdef, "a program ends with 'return' and the values it gives")
        statements = self.block(body[:-1])
        outputs: list[Name] = []
        for k, node in enumerate(self.returned(body[-1])):
            outputs.append(self.output(node, k, {o.text for o in outputs}))
        statements += self.tail
        declarations = self.declarations(fdef)
        at = self.pos(fdef.decorator_list[0] if fdef.decorator_list else fdef)
        derivatives = [Derivative(Name(mode, at), [Name(w, at) for w in wrt], Name(prefix, at), at,
                                  Name(of, at) if of is not None else None,
                                  Name(loops, at) if loops is not None else None)
                       for mode, wrt, prefix, of, loops in getattr(self.fn, DERIVATIVES, ())]
        program = Program(declarations, inputs, statements, outputs, self.pos(fdef), derivatives)
        return TracedSource(program, self.file, fdef.name)

    def returned(self, ret: ast.Return) -> list[ast.expr]:
        value = ret.value
        return list(value.elts) if isinstance(value, ast.Tuple) else [value]

    def output(self, node: ast.expr, k: int, returned: set[str]) -> Name:
        """Returned value k: a variable by its name, an expression as `out<k>` (`out1` for the
        second; `out1_1`, ... where a variable has that name), and a variable returned before
        (`return a, a`: Python's two references to one array) as a copy named so."""
        node = self.unplussed(node)  # (`return +x` returns x)
        name, i = f"out{k}", 0
        while name in self.types:
            i += 1
            name = f"out{k}_{i}"
        number = self.number(node)
        if number is not None:  # (`return 1.0`: an output of that number, for the whole batch)
            return self.assigned(name, node, self.number_value(number, name, node, self.tail), self.tail)
        if isinstance(node, ast.Subscript) or (isinstance(node, ast.Name) and node.id in returned):
            # (an entry, or a value returned again: copied into an output of its own)
            return self.assigned(name, node, self.call_of(node, self.tail), self.tail)
        return self.expression(node, self.tail, name)

    def declare_typed(self, var: str, t: ValueType, node: ast.AST) -> None:
        """Declares a variable of an annotation's type (a parameter's, or `x: T` in the body)."""
        self.declare(var, t.shape, node, isinstance(t, UniformType), t.mask, isinstance(t, NodalType),
                     isinstance(t, ConnectivityType))

    def declare(self, var: str, shape: tuple[int, ...], node: ast.AST, uniform: bool = False,
                mask: bool = False, nodal: bool = False, connectivity: bool = False) -> None:
        old = self.types.get(var)
        if old is not None and var in self.numbered and not uniform and old == shape and not mask:
            raise _PerElement(var)
        if old is not None and var in self.return_places and (
                (old, var in self.masks, var in self.uniform, var in self.nodal) != (shape, mask, uniform, nodal)):
            was = self.kind_of(old, var in self.masks, var in self.uniform, var in self.nodal)
            raise self.error(node, f"this value is {self.kind_of(shape, mask, uniform, nodal)} where another "
                                   f"'return' gives {was} in its place: every 'return' gives values of the same "
                                   "types")
        if old is not None and (var in self.connectivities) != connectivity:
            raise self.error(node, f"'{var}' is a connectivity (irfuse.Index) and is not assigned"
                             if var in self.connectivities else
                             f"'{var}' holds values and cannot become a connectivity")
        if old is not None and (old != shape or (var in self.masks) != mask):
            was, now = ValueType(old, var in self.masks), ValueType(shape, mask)
            raise self.error(node, f"'{var}' was a {was.spelling()} and would become a "
                                   f"{now.spelling()}: a variable keeps its type (use another name)")
        if old is not None and (var in self.uniform) != uniform:
            kinds = ("one value per element", "one value for the whole batch")
            raise self.error(node, f"'{var}' held {kinds[not uniform]} and would hold {kinds[uniform]}: a variable "
                                   "keeps what it holds (use another name)")
        if old is not None and (var in self.nodal) != nodal:
            kinds = ("one value per element", "one value per node")
            raise self.error(node, f"'{var}' held {kinds[not nodal]} and would hold {kinds[nodal]}: a variable "
                                   "keeps what it holds (use another name)")
        if old is None:
            self.types[var] = shape
            self.order.append(var)
            for flag, kept in ((uniform, self.uniform), (mask, self.masks), (nodal, self.nodal),
                               (connectivity, self.connectivities)):
                if flag:
                    kept.add(var)

    def combines_elements(self, call: ast.Call) -> bool:
        """Whether a call is a batch-wide reduction or a scatter (it combines elements' values)."""
        found = self.resolve(call.func)
        return isinstance(found, Reduction) or (isinstance(found, MeshCall) and found.kind == "scatter")

    @staticmethod
    def kind_of(shape: tuple[int, ...], mask: bool, uniform: bool, nodal: bool) -> str:
        """'a vector3 per element', 'a scalar for the whole batch', 'a mask per node', ..."""
        where = "for the whole batch" if uniform else "per node" if nodal else "per element"
        return f"a {ValueType(shape, mask).spelling()} {where}"

    def declarations(self, fdef: ast.FunctionDef) -> list[Declaration]:
        by_type: dict[tuple, list[str]] = {}
        for var in self.order:
            key = (self.types[var], var in self.uniform, var in self.masks, var in self.nodal,
                   var in self.connectivities)
            by_type.setdefault(key, []).append(var)
        pos = self.pos(fdef)
        return [Declaration((ConnectivityType(shape) if connectivity else ValueType(shape, mask)).spelling(), shape,
                            [Name(v, pos) for v in names], pos, uniform, nodal=nodal)
                for (shape, uniform, mask, nodal, connectivity), names in by_type.items()]

    def is_uniform(self, operand: Name | Number | Index | Text) -> bool:
        return isinstance(operand, (Number, Text)) or operand.text in self.uniform

    def kas_type(self, operand: Name | Number | Index) -> KasType:
        """An operand's value type (a number is a scalar; an array's entry its entry type)."""
        if isinstance(operand, Name) and operand.text in self.masks:
            return MaskType()
        return kas_type_of_shape(self.shape_of(operand))

    def value_is_nodal(self, call: tuple[Name, list]) -> bool:
        """A scatter's value is nodal; an op's (a nodal statement's) when it reads a nodal value."""
        op = call[0].text
        return op == "scatter" or (op != "gather" and not is_reduction(op, len(call[1])) and any(
            isinstance(a, (Name, Index)) and a.text in self.nodal for a in call[1]))

    def value_is_uniform(self, call: tuple[Name, list]) -> bool:
        """A reduction's value is uniform; an op's when all its operands are."""
        return is_reduction(call[0].text, len(call[1])) or all(self.is_uniform(a) for a in call[1])

    def block(self, nodes: list[ast.stmt]) -> list[Statement]:
        out: list[Statement] = []
        for node in nodes:
            if isinstance(node, ast.Assign):
                target = node.targets[0] if len(node.targets) == 1 else None
                if isinstance(target, ast.Subscript):
                    self.assign_entry(target, node.value, out)
                    continue
                if isinstance(target, (ast.Tuple, ast.List)):
                    self.assign_tuple(target, node.value, out)
                    continue
                if not isinstance(target, ast.Name):
                    raise self.error(node, "assign to one name, or to an array's entry x[q], at a time (no "
                                           "unpacking or attributes)")
                self.assign(target, node.value, out)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                self.declare_typed(node.target.id, self.annotation(node.annotation), node.target)
                if node.value is not None:  # (`y: irfuse.Scalar = ...`: declared, then assigned)
                    self.assign(node.target, node.value, out)
            elif isinstance(node, ast.If):
                out.append(self.branch(node, out))
            elif isinstance(node, ast.AugAssign):
                if not isinstance(node.target, ast.Name) or type(node.op) not in INFIX:
                    raise self.error(node, "this augmented assignment cannot be traced")
                expr = ast.BinOp(left=ast.Name(node.target.id, ast.Load()), op=node.op, right=node.value)
                ast.copy_location(expr, node)
                ast.copy_location(expr.left, node.target)
                self.assign(node.target, expr, out)
            elif isinstance(node, ast.For):
                self.loop_depth += 1
                try:
                    loop = self.loop(node)
                finally:
                    self.loop_depth -= 1
                if not self.loop_depth:  # (the uniform temporaries its body made, before it)
                    out += self.hoisted
                    self.hoisted = []
                if loop is not None:  # (None: a loop of no trips)
                    out.append(loop)
            elif isinstance(node, ast.Pass):
                continue
            elif isinstance(node, ast.Return):
                raise self.error(node, "'return' can only end the program")
            elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
                continue  # a string on its own line: a comment
            else:
                what = type(node).__name__.lower()
                article = "an" if what[0] in "aeiou" else "a"
                raise self.error(node, f"{article} '{what}' statement cannot be traced: a program is assignments, "
                                       "'for _ in range(N)' loops and if/else on its values (both sides computed)")
        return out

    def annotation(self, node: ast.expr) -> ValueType:
        """A declaration's type (`x: irfuse.Vector[8]`), evaluated where the function is defined."""
        try:
            t = eval(compile(ast.Expression(node), self.path, "eval"), self.scope)  # noqa: S307 -- the user's own annotation
        except Exception as e:  # noqa: BLE001 -- whatever the annotation raises is named at its line
            raise self.error(node, f"this annotation cannot be evaluated: {e}") from None
        if not isinstance(t, ValueType):
            raise self.error(node, "a declaration's annotation is an irfuse type (irfuse.Vector[8], irfuse.Matrix[4, "
                                   "3], irfuse.Mask, irfuse.Uniform[...])")
        return t

    def branch(self, node: ast.If, out: list[Statement]) -> If:
        """`if cond: ... else: ...` (elif too): both sides computed, each variable either
        assigns selected element by element (see the KAS frontend)."""
        test = node.test
        if isinstance(test, ast.Compare) and len(test.ops) == 1:
            self.check_comparison(test, "a condition")
            lhs, rhs = self.expression(test.left, out), self.expression(test.comparators[0], out)
            if self.is_mask(lhs) or self.is_mask(rhs):  # (`m != n`: the mask of their logic)
                value = self.assigned(self.temp(), test, self.compared(test, 0, lhs, rhs, out), out)
                condition = Condition(value, None, None, self.pos(test))
            else:
                condition = Condition(lhs, _COMPARE[type(test.ops[0])], rhs, self.pos(test))
        else:
            value = self.expression(test, out)
            if not (isinstance(value, Name) and value.text in self.masks):
                raise self.error(test, "a condition is a comparison (a > b) or a mask (m = a > b)")
            condition = Condition(value, None, None, self.pos(test))
        then = self.block(node.body)
        orelse = self.block(node.orelse)
        return If(condition, then, orelse, self.pos(node))

    def index_of(self, node: ast.Subscript, out: list[Statement] | None = None) -> Index:
        """`x[q]` (q a loop's counter) or `x[k]` (a whole number) as an array's entry; read
        (`out` given), an entry of an entry too, `A[i, j]` or `A[i][j]`: each entry but the last
        copied into a temporary (`_t1 = A[i]`, then `_t1[j]`)."""
        if out is not None and (isinstance(node.slice, ast.Tuple) or isinstance(node.value, ast.Subscript)):
            return self.entry_of_entries(node, out)
        if isinstance(node.value, ast.Subscript) or isinstance(node.slice, ast.Tuple):
            raise self.error(node, "an entry of an entry is not assigned on its own: name the entry (r = x[0]), "
                                   "assign its entry (r[1] = ...) and put it back (x[0] = r)")
        if not isinstance(node.value, ast.Name):
            raise self.error(node.value, "an entry is read from a value by its name: x[q]")
        shape = self.lookup(node.value)
        idx = node.slice
        k = None if isinstance(idx, ast.Name) and idx.id in self.indices else self.whole_number(idx)
        if isinstance(idx, ast.Name) and idx.id in self.indices:
            index: Name | Number = self.name(idx.id, idx)
        elif k is not None:
            if k < 0 and shape:  # (Python's: from the end)
                if k < -shape[0]:
                    raise self.error(idx, f"'{node.value.id}[{k}]' reads before the first of its {shape[0]} entries")
                k += shape[0]
            index = Number(str(k), float(k), self.pos(idx))
        elif isinstance(idx, ast.Slice):
            raise self.error(idx, "an entry takes whole numbers or loop counters, one for each axis it goes along "
                                  "(x[q], A[0, 1]): no slices")
        else:
            raise self.error(idx, "an entry's index is the counter of a loop around it (for q in range(N)) or a "
                                  "whole number")
        if not self.types[node.value.id]:
            raise self.error(node, f"'{node.value.id}' is a {ValueType((), node.value.id in self.masks).spelling()}, "
                                   "which has no entries")
        return Index(self.name(node.value.id, node.value), index)

    def entry_of_entries(self, node: ast.Subscript, out: list[Statement]) -> Index:
        """`A[i, j, ...]` or `A[i][j]...` read: the entries along the value's axes in turn."""
        indices, base = _chain(node)
        if not indices:
            raise self.error(node, "an entry takes whole numbers or loop counters (x[q], A[0, 1])")
        if isinstance(base, ast.Name):  # (checked here: the temporaries' names would tell the user nothing)
            shape, written = self.lookup(base), ast.unparse(node)
            self.check_axes(node, indices, shape, written, base.id)
            for axis, idx in enumerate(indices):
                k = self.whole_number(idx)
                if k is not None and not -shape[axis] <= k < shape[axis]:
                    raise self.error(idx, f"'{written}': index {k} is past the {shape[axis]} entries of "
                                          f"'{base.id}' along axis {axis}")
        value = self.copied_rows(base, indices[:-1], out)[-1]
        return self.index_of(ast.copy_location(ast.Subscript(value=value, slice=indices[-1], ctx=ast.Load()), node))

    def copied_rows(self, base: ast.expr, indices: list[ast.expr], out: list[Statement]) -> list[ast.expr]:
        """[base, base[i], base[i][j], ...] for `indices` [i, j, ...], each entry copied into a
        temporary (`_t1 = A[i]`, `_t2 = _t1[j]`), as names to subscript further."""
        rows = [base]
        for idx in indices:
            entry = ast.copy_location(ast.Subscript(value=rows[-1], slice=idx, ctx=ast.Load()), idx)
            row = self.assigned(self.temp(), entry, (self.name(COPY, entry), [self.index_of(entry)]), out)
            rows.append(ast.copy_location(ast.Name(id=row.text, ctx=ast.Load()), idx))
        return rows

    def check_axes(self, node: ast.AST, indices: list, shape: tuple[int, ...], written: str, label: str) -> None:
        """Refuses (at `node`) a subscript `written` of more indices than `label` has axes."""
        if len(indices) > len(shape):
            raise self.error(node, f"'{written}' takes {len(indices)} indices, but '{label}' has {len(shape)} axes")

    def row_of(self, value: Name, k: int, node: ast.AST, out: list[Statement]) -> Name:
        """Entry k of `value`'s first axis copied into a temporary (a value to take entries of)."""
        return self.assigned(self.temp(), node, (self.name(COPY, node), [entry_at(value, k, self.pos(node))]), out)

    def sliced(self, node: ast.Subscript, out: list[Statement]) -> tuple[Name, list]:
        """(op, operands) of a value's slice read (`A[:, 0]`, `A[0, :]`, `v[0:2]`, `A[::-1]`,
        `T[1][:, 2]`): NumPy's view as a value of its own, the entries `slice.indices` gives
        along each sliced axis stacked (op `stack`) in order, a whole number taking one entry
        (and its axis away), the axes after the last index whole; a slice that keeps every
        axis whole is a copy. A subscript after a slice indexes the slice's value, as NumPy's
        (`T[:, 0][1]` is `T[1, 0]`), so that slice is made first."""
        chain, base = [], node
        while isinstance(base, ast.Subscript):
            chain.insert(0, base)
            base = base.value
        if not isinstance(base, ast.Name):
            raise self.error(base, "a slice is taken of a value by its name: A[:, 0]")
        value, shape, label, written = self.name(base.id, base), self.lookup(base), base.id, ast.unparse(node)
        indices: list[ast.expr] = []
        for k, sub in enumerate(chain):
            parts = _parts(sub)
            indices += parts
            if k < len(chain) - 1 and any(isinstance(p, ast.Slice) for p in parts):
                made = self.slice_of(value, shape, self.slice_specs(indices, shape, written, label), sub, out)
                value = self.assigned(self.temp(), sub, made, out)
                shape, label, indices = self.types[value.text], ast.unparse(sub), []
        return self.slice_of(value, shape, self.slice_specs(indices, shape, written, label), node, out)

    def slice_specs(self, indices: list[ast.expr], shape: tuple[int, ...], written: str,
                    label: str) -> list[int | list[int]]:
        """Each index of a slice read (`sliced`; of `label`, of `shape`) as the entry it takes
        (a whole number) or the entries along its axis (a slice: `slice.indices`), checked."""
        self.check_axes(indices[-1], indices, shape, written, label)
        specs: list[int | list[int]] = []
        for axis, idx in enumerate(indices):
            if isinstance(idx, ast.Slice):
                bounds = [None if b is None else self.whole_number(b) for b in (idx.lower, idx.upper, idx.step)]
                if any(b is None and given is not None for b, given in zip(bounds, (idx.lower, idx.upper, idx.step))):
                    raise self.error(idx, f"'{written}': a slice's bounds and step are whole numbers known when the "
                                          "program is compiled (not loop counters)")
                if bounds[2] == 0:
                    raise self.error(idx, f"'{written}': a slice's step is not zero")
                taken = list(range(*slice(*bounds).indices(shape[axis])))
                if not taken:
                    raise self.error(idx, f"'{written}' takes no entry of the {shape[axis]} along axis {axis}: a "
                                          "value has at least one")
                specs.append(taken)
                continue
            k = self.whole_number(idx)
            if k is None:
                raise self.error(idx, f"'{written}': beside a slice, an index is a whole number (a loop's counter "
                                      "reads one entry: x[q])")
            if not -shape[axis] <= k < shape[axis]:
                raise self.error(idx, f"'{written}': index {k} is past the {shape[axis]} entries of '{label}' "
                                      f"along axis {axis}")
            specs.append(k % shape[axis])
        return specs

    def slice_of(self, value: Name, shape: tuple[int, ...], specs: list, node: ast.AST,
                 out: list[Statement]) -> tuple[Name, list]:
        """(op, operands) of `value`'s entries `specs` gives along its leading axes (`sliced`)."""
        def whole(specs: list, shape: tuple[int, ...]) -> bool:
            return all(isinstance(sp, list) and sp == list(range(n)) for sp, n in zip(specs, shape))

        if whole(specs, shape):
            return self.name(COPY, node), [value]  # (every axis whole: the value itself)
        first, rest, pos = specs[0], specs[1:], self.pos(node)

        def part(k: int) -> Name | Index:  # (entry k with the later axes' slices taken)
            if whole(rest, shape[1:]):
                return entry_at(value, k, pos)
            return self.assigned(self.temp(), node, self.slice_of(self.row_of(value, k, node, out), shape[1:], rest,
                                                                  node, out), out)

        if isinstance(first, int):
            if whole(rest, shape[1:]):
                return self.name(COPY, node), [entry_at(value, first, pos)]
            return self.slice_of(self.row_of(value, first, node, out), shape[1:], rest, node, out)
        return self.name("stack", node), [part(k) for k in first]

    def assign_entry(self, target: ast.Subscript, value: ast.expr, out: list[Statement]) -> None:
        if _has_slice(target):
            self.assign_slice(target, value, out)
            return
        if isinstance(target.slice, ast.Tuple) or isinstance(target.value, ast.Subscript):
            self.assign_entry_of_entries(target, value, out)
            return
        entry = self.index_of(target)
        number = self.number(value)
        if number is not None and not self.types[entry.text][1:]:  # (`v[1] = 0.0`: a number in that entry)
            call = (self.name("smul", value), [number, Number("1.0", 1.0, self.pos(value))]) \
                if entry.text in self.uniform else self.number_value(number, entry.text, value, out)
        else:
            call = self.call_of(value, out)
        if entry.text in self.numbered and not self.value_is_uniform(call):
            raise _PerElement(entry.text)  # (`v = np.zeros(3)`, then `v[0] = a`: v is one value per element)
        if self.loop_depth:
            self.in_loops.add(entry.text)
        shape, mask = self.result_of(call, value)
        if mask or shape != self.types[entry.text][1:]:
            want = ValueType(self.types[entry.text][1:]).spelling()
            raise self.error(target, f"'{entry.text}' holds entries of {want}; this value is a "
                                     f"{ValueType(shape, mask).spelling()}")
        out.append(Call(entry, call[0], call[1], self.pos(target)))

    def assign_slice(self, target: ast.Subscript, value: ast.expr, out: list[Statement]) -> None:
        """`A[:, 0] = v`, `v[0:2] = w`, `A[1, :] = 0.0`: NumPy's assignment to a slice, the value
        (of the slice's shape, or a number put in every entry) computed first, then each entry
        of the slice assigned its entry of the value (`A[i, 0] = v[i]`, by `assign_entry`)."""
        if not isinstance(target.value, ast.Name):
            raise self.error(target, "a slice is assigned in one subscript of a value by its name (A[:, 0] = v)")
        base, written = target.value, ast.unparse(target)
        shape = self.lookup(base)
        indices = _parts(target)
        specs = self.slice_specs(indices, shape, written, base.id)
        sliced = tuple(len(sp) for sp in specs if isinstance(sp, list)) + shape[len(specs):]
        every = self.number(value) is not None  # (one number or scalar put in every entry, as NumPy broadcasts)
        if not every:
            made = self.expression(value, out)
            if isinstance(made, Index):  # (`B[:, 0] = A[1]`: the entry as a value of its own)
                made = self.assigned(self.temp(), value, (self.name(COPY, value), [made]), out)
            every = isinstance(made, Number) or (not self.shape_of(made) and not self.is_mask(made))
            if not every and self.shape_of(made) != sliced:
                raise self.error(value, f"'{written}' holds {ValueType(sliced).spelling()} values; this value is a "
                                        f"{self.kinds(made)}")
            if not isinstance(made, Number):
                value = ast.copy_location(ast.Name(id=made.text, ctx=ast.Load()), value)

        def constant(k: int) -> ast.expr:
            return ast.copy_location(ast.Constant(k), target)

        if every:  # (down to the entries' numbers)
            specs += [list(range(n)) for n in shape[len(specs):]]
        for place in itertools.product(*([sp] if isinstance(sp, int) else sp for sp in specs)):
            rel = [sp.index(place[a]) for a, sp in enumerate(specs) if isinstance(sp, list)]
            at = ast.copy_location(ast.Subscript(value=base, slice=ast.Tuple(elts=[constant(k) for k in place],
                                                                            ctx=ast.Load())
                                                 if len(place) > 1 else constant(place[0]), ctx=ast.Store()), target)
            part = value if every or not rel else ast.copy_location(ast.Subscript(
                value=value, slice=ast.Tuple(elts=[constant(k) for k in rel], ctx=ast.Load()) if len(rel) > 1
                else constant(rel[0]), ctx=ast.Load()), value)
            self.assign_entry(at, part, out)

    def assign_entry_of_entries(self, target: ast.Subscript, value: ast.expr, out: list[Statement]) -> None:
        """`A[i, j] = x` (or `A[i][j] = x`, deeper too): the value first, then each entry but
        the last copied out (`_r = A[i]`), the last entry assigned (`_r[j] = x`) and each copied
        back (`A[i] = _r`): the KAS form of NumPy's assignment of one entry."""
        indices, base = _chain(target)
        if not isinstance(base, ast.Name):
            raise self.error(base, "an entry is assigned to a value by its name: A[0, 1] = x")
        shape, written = self.lookup(base), ast.unparse(target)
        self.check_axes(target, indices, shape, written, base.id)
        for idx in indices[1:]:
            if isinstance(idx, ast.Name) and idx.id in self.indices:
                # (an entry a loop's counter writes is one of an array the loop fills, which the
                # entry copied out of the row, read whole on each trip, is not)
                raise self.error(idx, f"'{written}': a loop's counter assigns an entry along the first axis only "
                                      f"({base.id}[q, 0] = x): write the row whole ({base.id}[0] = np.array([...]))")
        if self.number(value) is None:  # (computed before any entry is copied out, as Python does)
            made = self.call_of(value, out)
            if base.id in self.numbered and not self.value_is_uniform(made):
                raise _PerElement(base.id)
            value = ast.copy_location(ast.Name(id=self.assigned(self.temp(), value, made, out).text,
                                               ctx=ast.Load()), value)
        rows = self.copied_rows(base, indices[:-1], out)  # (each entry but the last, copied out)
        for row, idx, part in zip(reversed(rows), reversed(indices), [value, *reversed(rows[1:])]):
            self.assign_entry(ast.copy_location(ast.Subscript(value=row, slice=idx, ctx=ast.Store()), target), part,
                              out)

    def assign_tuple(self, target: ast.Tuple | ast.List, value: ast.expr, out: list[Statement]) -> None:
        """`a, b = x, y` (names or entries): Python's meaning, every value on the right computed
        before any target is assigned. Assigned in order, as the same lines one after the other,
        where no value reads a target assigned before it; otherwise (`a, b = b, a`) each value
        first copied into a temporary."""
        targets = target.elts
        if not all(isinstance(t, (ast.Name, ast.Subscript)) for t in targets):
            bad = next(t for t in targets if not isinstance(t, (ast.Name, ast.Subscript)))
            raise self.error(bad, "a tuple assigns names or arrays' entries (a, b = x, y; no nested or starred "
                                  "targets)")
        if not isinstance(value, (ast.Tuple, ast.List)) or any(isinstance(v, ast.Starred) for v in value.elts):
            raise self.error(value, f"a tuple of {len(targets)} targets takes a tuple of as many values "
                                    "(a, b = x, y): an op gives one value")
        if len(value.elts) != len(targets):
            raise self.error(value, f"{len(targets)} targets take {len(targets)} values, got {len(value.elts)}")

        def base(t: ast.expr) -> str:
            return t.id if isinstance(t, ast.Name) else ast.unparse(t).split("[")[0]
        written: set[str] = set()
        staged = False
        for t, v in zip(targets, value.elts):
            if written & {n.id for n in ast.walk(v) if isinstance(n, ast.Name)}:
                staged = True
            written.add(base(t))
        values = list(value.elts)
        if staged:  # (each value kept in a temporary before any target is written)
            values = [v if self.number(v) is not None else  # (a number reads nothing: as it is)
                      ast.copy_location(ast.Name(id=self.assigned(self.temp(), v, self.call_of(v, out), out).text,
                                                 ctx=ast.Load()), v) for v in values]
        for t, v in zip(targets, values):
            if isinstance(t, ast.Subscript):
                self.assign_entry(t, v, out)
            else:
                self.assign(t, v, out)

    def loop(self, node: ast.For) -> Loop | None:
        it = node.iter
        if node.orelse or not (isinstance(it, ast.Call) and isinstance(it.func, ast.Name) and it.func.id == "range"
                               and 1 <= len(it.args) <= 3 and not it.keywords):
            raise self.error(node, "a loop is 'for _ in range(N)' with a whole number N (no else clause)")
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable is a plain name (it is not available in the body)")
        bounds = [self.constant_int(a) for a in it.args]  # (range(N), range(a, b), range(a, b, step))
        if len(bounds) == 3 and bounds[2] == 0:
            raise self.error(it.args[2], "range()'s step is a whole number other than 0")
        trips = range(*bounds)  # (its trips counted here: len() fails past a C integer)
        span, step = (trips.stop - trips.start, trips.step) if trips.step > 0 else (trips.start - trips.stop, -trips.step)
        count = max(0, -(-span // step))
        if count > MAX_TRIP_COUNT:  # as KAS's `loop N`
            raise self.error(it.args[0] if len(bounds) == 1 else it, f"loop trip count {count} is out of range "
                             f"0..{MAX_TRIP_COUNT}")
        if count == 0:  # (Python's: the body never runs, and is not read)
            return None
        counter = node.target.id
        subscripts = set()  # (the places of indices: x[q], and each of A[q, 0])
        for n in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(n, ast.Subscript):
                subscripts |= {id(n.slice)} | {id(e) for e in getattr(n.slice, "elts", ())}
        indexed = False
        for inner in ast.walk(ast.Module(body=node.body, type_ignores=[])):
            if isinstance(inner, ast.Name) and inner.id == counter and counter != "_":
                if id(inner) not in subscripts:
                    raise self.error(inner, f"the loop counter '{inner.id}' is only read as an array's index "
                                            f"(x[{inner.id}]): every iteration runs the same statements")
                indexed = True
        if indexed and range(*bounds) != range(count):
            raise self.error(it, f"an indexed loop counts from 0 by 1 (for {counter} in range({count})): its counter "
                                 "is the index of the arrays' entries it reads and writes")
        if indexed:
            self.indices.append(counter)
        try:
            body = self.block(node.body)
        finally:
            if indexed:
                self.indices.pop()
        return Loop(count, body, self.pos(node), self.name(counter, node.target) if indexed else None)

    def constant_int(self, node: ast.expr) -> int:
        value = self.whole_number(node)
        if value is None:
            raise self.error(node, "the trip count must be a whole number known when the program is compiled "
                                   "(a literal, or a name bound to an int where the function is defined)")
        return value

    def assign(self, target: ast.Name, value: ast.expr, out: list[Statement]) -> None:
        number, zeros = self.number(value), self.zeros_shape(value)
        call = self.number_value(number, target.id, value, out) if number is not None else \
            self.zeros_value(zeros, target.id, value, out) if zeros is not None else self.call_of(value, out)
        if self.loop_depth:
            self.in_loops.add(target.id)
        shape, mask = self.result_of(call, value)
        self.declare(target.id, shape, target, self.value_is_uniform(call), mask, self.value_is_nodal(call))
        out.append(Call(self.name(target.id, target), call[0], call[1], self.pos(target)))

    def number_value(self, number: Number, var: str, node: ast.expr, out: list[Statement]) -> tuple[Name, list]:
        """(op, operands) of a number given to variable `var` (`acc = 0.0`): uniform (`c * 1`,
        the number itself), or, where `var` holds one value per element (declared so, or so
        elsewhere: `per_element`), the number in every element: `zeros(x)` for 0.0, `c - zeros(x)`
        for another (exact, -0.0 too), x an entry of the first input holding numbers per element."""
        if not self.held_per_element(var):
            self.numbered.add(var)
            return self.name("smul", node), [number, Number("1.0", 1.0, self.pos(node))]
        source = next((p for p in self.input_names if p not in self.uniform | self.masks | self.nodal
                       | self.connectivities), None)
        if source is None:
            raise self.error(node, f"'{var}' holds one value per element and is given a number here, but the program "
                                   "has no input of numbers per element to put it in: compute it from a value of the "
                                   "program")
        value: Name | Index = self.name(source, node)
        while self.shape_of(value):  # (down to one number of it: its first entry)
            if isinstance(value, Index):
                value = self.assigned(self.temp(), node, (self.name(COPY, node), [value]), out)
            value = entry_at(value, 0, self.pos(node))
        zeros = (self.name("zeros", node), [value])
        if number.value == 0.0 and math.copysign(1.0, number.value) > 0:
            return zeros
        return self.name("ssub", node), [number, self.assigned(self.temp(), node, zeros, out)]

    def held_per_element(self, var: str) -> bool:
        """Whether `var` holds one value per element: declared so, or so elsewhere (`per_element`)."""
        return var in self.per_element or (var in self.types and var not in self.uniform)

    def zeros_value(self, shape: tuple[int, ...], var: str | None, node: ast.expr,
                    out: list[Statement]) -> tuple[Name, list]:
        """(op, operands) of NumPy's zeros of `shape` (`np.zeros((3, 3))`) given to `var` (None:
        an operand): stacks of the number 0.0, one value for the batch, or, where `var` holds one
        value per element (`held_per_element`: entries assigned it later, `v[0] = a`), stacks of
        a zero in every element (`number_value`)."""
        zero = Number("0.0", 0.0, self.pos(node))
        if var is not None and self.held_per_element(var):
            fill: Name | Number = self.assigned(self.temp(), node, self.number_value(zero, var, node, out), out)
        else:
            fill = zero
            if var is not None:
                self.numbered.add(var)
        return self.name("stack", node), [self.filled(fill, shape[1:], node, out)] * shape[0]

    def zeros_shape(self, node: ast.expr) -> tuple[int, ...] | None:
        """The shape of `np.zeros(n)` or `np.zeros((n, m, ...))` (whole numbers known when the
        program is compiled), or None for another expression."""
        import numpy as np

        if not (isinstance(node, ast.Call) and self.resolve(node.func) is np.zeros):
            return None
        if len(node.args) != 1 or node.keywords:
            raise self.error(node, "np.zeros takes its shape alone here (np.zeros(3), np.zeros((3, 3))): a program's "
                                   "numbers are of its float type")
        parts = node.args[0].elts if isinstance(node.args[0], (ast.Tuple, ast.List)) else [node.args[0]]
        shape = tuple(self.whole_number(p) for p in parts)
        if not shape or any(n is None or n < 1 for n in shape):
            raise self.error(node.args[0], "np.zeros's shape is whole numbers of at least 1, known when the program "
                                           "is compiled (np.zeros(3), np.zeros((3, 3)))")
        return shape  # type: ignore[return-value]

    def temp(self) -> str:
        while True:
            self.temps += 1
            name = f"_t{self.temps}"
            if name not in self.types:
                self.temporaries.add(name)
                return name

    def expression(self, node: ast.expr, out: list[Statement], name: str | None = None,
                   text: bool = False) -> Name | Number | Text:
        """A value for an operand: a variable, a number, or a temporary (named `name`, or
        `_t<k>`) assigned from a nested expression; a string only where `text` (an op's
        operand: `contract`'s and `reshape`'s first, checked with the call)."""
        if id(node) in self.ready:
            return self.ready.pop(id(node))
        node = self.unplussed(node)
        if isinstance(node, ast.Name) and self.number(node) is None:
            self.lookup(node)
            return self.name(node.id, node)
        if isinstance(node, ast.Subscript) and not _has_slice(node):
            return self.index_of(node, out)
        number = self.number(node)
        if number is not None:
            return number
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            # (elsewhere a string would be taken for the variable it spells: `return "y"`
            # returned y, `x * "1.0"` ended in a KeyError)
            if not text:
                raise self.error(node, STRING_ELSEWHERE)
            return Text(node.value, self.pos(node))
        return self.assigned(name or self.temp(), node, self.call_of(node, out), out)

    def assigned(self, name: str, node: ast.expr, call: tuple[Name, list], out: list[Statement]) -> Name:
        """`name` declared of the type `call` gives and assigned from it (appended to `out`; a
        temporary of uniform values alone made in a loop, to `hoisted`)."""
        shape, mask = self.result_of(call, node)
        self.declare(name, shape, node, self.value_is_uniform(call), mask, self.value_is_nodal(call))
        if self.loop_depth and name in self.temporaries and self.of_uniform_values(call):
            out = self.hoisted
        elif self.loop_depth:
            self.in_loops.add(name)
        out.append(Call(self.name(name, node), call[0], call[1], self.pos(node)))
        return self.name(name, node)

    def of_uniform_values(self, call: tuple[Name, list]) -> bool:
        """Whether an op (no reduction, gather or scatter) reads numbers and uniform values
        alone, none by a loop's counter: its value is the same wherever it is computed."""
        op, args = call[0].text, call[1]
        if is_reduction(op, len(args)) or op in ("gather", "scatter"):
            return False
        return all(isinstance(a, (Number, Text)) or (isinstance(a, (Name, Index)) and a.text in self.uniform
                                                     and a.text not in self.in_loops
                                                     and not (isinstance(a, Index) and isinstance(a.index, Name)))
                   for a in args)

    def lookup(self, node: ast.Name) -> tuple[int, ...]:
        if node.id not in self.types:
            bound = None if node.id in self.own else self.scope.get(node.id)
            if bound is not None and not isinstance(bound, (OpRef, MeshCall, Reduction, Where)):
                raise self.error(node, f"'{node.id}' is a {type(bound).__name__} of the function's module, not a "
                                       "number or a value of the program: an array is an input (irfuse.Uniform[...] "
                                       "for one value for the whole batch)")
            raise self.error(node, f"'{node.id}' is not a value of the program (its parameters and the values "
                                   "assigned before this line are)")
        return self.types[node.id]

    def shape_of(self, name: Name | Number | Index) -> tuple[int, ...]:
        if isinstance(name, Index):
            return self.types[name.text][1:]
        return () if isinstance(name, Number) else self.types[name.text]

    def number(self, node: ast.expr) -> Number | None:
        """A number operand, or None: a literal (`2`, `0.5`, `-1e-3`, `+1`), or a name or
        attribute bound to a number where the function is defined (`SCALE`, `math.pi`, a
        closure's `k`; read when the function is compiled), signed or not."""
        negative, inner = _signed(node)
        literal = isinstance(inner, ast.Constant)
        found = inner.value if literal else self.bound_number(inner)
        if not _is_number(found):
            return None
        try:
            value = float(found)
        except OverflowError:  # (a Python int past float64)
            value = None
        if value is None or not math.isfinite(value):
            if literal:
                raise self.error(node, "this number is too large (beyond float64)")
            what = "past float64's range" if value is None else "NaN" if value != value else "infinite"
            raise self.error(node, f"'{ast.unparse(inner)}' is {what}: a program's numbers are finite")
        text = ast.unparse(inner) if literal else str(int(found)) if isinstance(found, numbers.Integral) \
            else repr(value)
        return Number(("-" if negative else "") + text, -value if negative else value, self.pos(node))

    def unplussed(self, node: ast.expr) -> ast.expr:
        """The operand of `+x` (Python's unary plus: the value itself), or the node; a signed
        number stays as it is (`number` reads it)."""
        while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.UAdd) and self.number(node) is None:
            node = node.operand
        return node

    def whole_number(self, node: ast.expr) -> int | None:
        """A whole number written (`2`, `-1`) or bound where the function is defined (`K`), or
        an arithmetic of such (`N + 1`, `2 * K - 1`: loop bounds and entries), or None."""
        if isinstance(node, ast.BinOp) and type(node.op) in _WHOLE_ARITHMETIC:
            left, right = self.whole_number(node.left), self.whole_number(node.right)
            if left is None or right is None or (isinstance(node.op, (ast.FloorDiv, ast.Mod)) and right == 0) \
                    or (isinstance(node.op, ast.Pow) and not 0 <= right <= 64):
                return None
            return _WHOLE_ARITHMETIC[type(node.op)](left, right)
        negative, inner = _signed(node)
        found = inner.value if isinstance(inner, ast.Constant) else self.bound_number(inner)
        if not _is_number(found) or not isinstance(found, numbers.Integral):
            return None
        return -int(found) if negative else int(found)

    def bound_number(self, node: ast.expr):
        """What a name that is none of the program's values, or an attribute (`math.pi`), is
        bound to in the function's module or closure, or None."""
        if isinstance(node, ast.Name) and node.id not in self.own:
            return self.scope.get(node.id)
        root = node
        while isinstance(root, ast.Attribute):
            root = root.value
        if isinstance(node, ast.Attribute) and isinstance(root, ast.Name) and root.id not in self.own:
            try:
                return self.resolve(node)
            except Exception:  # noqa: BLE001 -- an attribute of a module's object that raises is no number
                return None
        return None

    def check_comparison(self, node: ast.Compare, what: str) -> None:
        """Each of its comparisons one of < <= > >= == !=."""
        for op in node.ops:
            if type(op) not in _COMPARE:
                spelled = {ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not"}.get(type(op))
                raise self.error(node, f"{what} compares values with < <= > >= == !=, not '{spelled}'")

    def is_mask(self, operand) -> bool:
        return isinstance(operand, Name) and operand.text in self.masks

    def kinds(self, *operands) -> str:
        """The operands' types for a message: `mask and vector3`."""
        return " and ".join("mask" if self.is_mask(o) else ValueType(self.shape_of(o)).spelling() for o in operands)

    def comparison(self, node: ast.Compare, out: list[Statement]) -> tuple[Name, list[Name]]:
        """(op, operands) of a comparison: `a < b` an op of the library (`lt`), masks compared
        `m != n` (`xor`) and `m == n` (`not` of it), and a chain `a < b < c` Python's `a < b
        and b < c` (each operand traced once), its links `and`-ed left to right."""
        self.check_comparison(node, "a comparison")
        values = [self.expression(node.left, out)]
        values += [self.expression(c, out) for c in node.comparators]
        if len(node.ops) == 1:
            return self.compared(node, 0, values[0], values[1], out)
        links = [self.assigned(self.temp(), node, self.compared(node, k, values[k], values[k + 1], out), out)
                 for k in range(len(node.ops))]
        result = links[0]
        for link in links[1:-1]:
            result = self.assigned(self.temp(), node, (self.name("and", node), [result, link]), out)
        return self.name("and", node), [result, links[-1]]

    def compared(self, node: ast.Compare, k: int, left, right, out: list[Statement]) -> tuple[Name, list[Name]]:
        """(op, operands) of comparison k of `node` between two traced values."""
        symbol = _COMPARE[type(node.ops[k])]
        if not (self.is_mask(left) or self.is_mask(right)):
            return self.name(COMPARISONS[symbol], node), [left, right]
        if not (self.is_mask(left) and self.is_mask(right)) or symbol not in ("==", "!="):
            raise self.error(node, f"'{symbol}' of {self.kinds(left, right)}: masks are compared with each other by == and != "
                                   "only (m != n holds where one holds and the other does not)")
        if symbol == "!=":
            return self.name("xor", node), [left, right]
        differ = self.assigned(self.temp(), node, (self.name("xor", node), [left, right]), out)
        return self.name("not", node), [differ]

    def left_chain(self, node: ast.BinOp, out: list[Statement]) -> None:
        """Traces the infix forms nested along `node`'s left operands (`a + b + c + ...`, which
        Python nests to the left), innermost first, each into its temporary, so that tracing
        them takes no recursion a link: a sum of 500 terms ran out of Python's stack. The
        temporaries are numbered outermost first and the statements come innermost first, as
        the recursive walk gives them: the same program either way."""
        chain, link = [], node.left
        while isinstance(link, ast.BinOp) and type(link.op) in INFIX and id(link) not in self.ready:
            chain.append(link)
            link = link.left
        if len(chain) < self.SHORT_CHAIN:  # (the recursive walk)
            return
        names = [self.temp() for _ in chain]
        for link, name in zip(reversed(chain), reversed(names)):
            self.ready[id(link)] = self.assigned(name, link, self.call_of(link, out), out)

    def call_of(self, node: ast.expr, out: list[Statement]) -> tuple[Name, list[Name]]:
        """(op, operands) of an expression that is one op application."""
        node = self.unplussed(node)
        if isinstance(node, ast.Call):
            if node.keywords and not isinstance(self.resolve(node.func), OpRef):
                raise self.error(node.keywords[0].value, f"'{ast.unparse(node.func)}' takes its operands by position")
            method = self.method_call(node, out)
            if method is not None:
                return method
            builtin = self.builtin_op(node)
            if builtin is not None:
                values = [self.expression(a, out) for a in node.args]
                return self.folded(builtin, values, node, out) if len(values) > 2 else (builtin, values)
            numpy_call = self.numpy_call(node, out)
            if numpy_call is not None:
                return numpy_call
            reduction = self.resolve(node.func)
            if isinstance(reduction, MeshCall):
                if len(node.args) != 2:
                    what = "a nodal value" if reduction.kind == "gather" else "a value per element"
                    raise self.error(node, f"irfuse.{reduction.kind} takes {what} and a connectivity, got "
                                           f"{len(node.args)} operands")
                return self.name(reduction.kind, node.func), [self.expression(a, out) for a in node.args]
            if isinstance(reduction, Where):
                if len(node.args) != 3:
                    raise self.error(node, f"irfuse.where takes a mask and two values, got {len(node.args)}")
                return self.name("select", node.func), [self.expression(a, out) for a in node.args]
            if isinstance(reduction, Reduction):
                if len(node.args) != 1:
                    raise self.error(node, f"irfuse.{reduction.kind} takes one value (reduced over the batch), "
                                           f"got {len(node.args)}")
                return self.name(reduction.kind, node.func), [self.expression(node.args[0], out)]
            op_name = self.op_name_of(node.func)
            args = [self.expression(a, out, text=True) for a in self.by_position(node, op_name)]
            return self.name(op_name, node.func), args
        if isinstance(node, ast.Compare):
            return self.comparison(node, out)
        if isinstance(node, ast.BinOp) and type(node.op) in MASK_LOGIC:  # NumPy's `m & n`, `m | n`, `m ^ n`
            symbol, op = MASK_LOGIC[type(node.op)]
            operands = [self.expression(node.left, out), self.expression(node.right, out)]
            self.check_masks(node, symbol, operands)
            return self.name(op, node), operands
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Invert):  # NumPy's `~m`
            operand = self.expression(node.operand, out)
            self.check_masks(node, "~", [operand])
            return self.name("not", node), [operand]
        if isinstance(node, ast.Attribute) and node.attr == "T":
            return self.name("transpose", node), [self.expression(node.value, out)]
        if isinstance(node, ast.IfExp):  # `a if m else b`: both computed, selected entry by entry
            test = self.expression(node.test, out)
            if not (isinstance(test, Name) and test.text in self.masks):
                raise self.error(node.test, "a conditional expression's test is a comparison (a > b) or a mask "
                                            "(m = a > b): both values are computed and selected element by element")
            return self.name("select", node), [test, self.expression(node.body, out), self.expression(node.orelse, out)]
        if isinstance(node, ast.BinOp) and type(node.op) in INFIX:
            symbol = INFIX[type(node.op)]
            self.left_chain(node, out)
            left, right = self.expression(node.left, out), self.expression(node.right, out)
            shape = self.shape_of(right)
            if symbol in ("-", "/", "**", "//", "%") and shape and not self.shape_of(left) and \
                    not self.is_mask(left) and infix_op(symbol, (), shape) is None:
                # (NumPy's broadcast of a scalar on the left, `1 - v`, `s / v`: the scalar put in every
                # entry, exactly, then the entries' op)
                left = self.filled(left, shape, node, out)
            found = infix_op(symbol, self.shape_of(left), self.shape_of(right))
            return self.infix(node, symbol, found, [left, right])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            operand = self.expression(node.operand, out)
            return self.infix(node, "-", infix_op("-", self.shape_of(operand), None), [operand])
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):  # of a mask: op `not`
            return self.name("not", node), [self.expression(node.operand, out)]
        if isinstance(node, ast.BoolOp):  # `a and b or c` of masks: ops `and`, `or`, left to right
            first = node.values[0] if len(node.values) == 2 else ast.copy_location(
                ast.BoolOp(op=node.op, values=node.values[:-1]), node)
            left, right = self.expression(first, out), self.expression(node.values[-1], out)
            return self.name("and" if isinstance(node.op, ast.And) else "or", node), [left, right]
        if self.number(node) is not None:
            raise self.error(node, "a number alone is not an op application: use it as an operand")
        if isinstance(node, ast.Subscript) and _has_slice(node):  # `A[:, 0]`, `v[0:2]`, `A[1, :]`
            return self.sliced(node, out)
        if isinstance(node, (ast.Name, ast.Subscript)):  # a copy: `x = y`, `x = y[q]`
            return self.name(COPY, node), [self.expression(node, out)]
        raise self.error(node, "this expression cannot be traced: use ops (irfuse.ops.NAME(...)) and the infix "
                               "forms + - * / ** // % @ on the program's values (not, and, or on masks)")

    def by_position(self, node: ast.Call, op_name: str) -> list[ast.expr]:
        """A call's operands in the op's order: those given by position, then those named by
        the op's parameters (`irfuse.ops.det(A=J)`; its signature in 'irfuse ops')."""
        if not node.keywords:
            return list(node.args)
        names = operand_names(self.library, op_name)
        if names is None:  # (an op of as many operands as it is given: contract, stack)
            raise self.error(node.keywords[0].value, f"'{op_name}' takes its operands by position")
        given: dict[str, ast.expr] = dict(zip(names, node.args))
        for kw in node.keywords:
            if kw.arg is None:
                raise self.error(kw.value, "an op's operands are written out (no **mapping)")
            if kw.arg not in names:
                raise self.error(kw.value, f"'{op_name}' has no operand '{kw.arg}': its operands are "
                                           f"{', '.join(names)}")
            if kw.arg in given:
                raise self.error(kw.value, f"operand '{kw.arg}' of '{op_name}' is given twice")
            given[kw.arg] = kw.value
        missing = [n for n in names if n not in given]
        if len(node.args) > len(names) or missing:
            raise self.error(node, f"'{op_name}' takes {len(names)} operands ({', '.join(names)})" +
                             (f"; '{missing[0]}' is not given" if missing else f", got {len(node.args)}"))
        return [given[n] for n in names]

    def check_masks(self, node: ast.expr, symbol: str, operands: list) -> None:
        """`&`, `|`, `^` and `~` take masks (NumPy's logic of boolean arrays; of numbers they
        are bitwise, which a program's values have no meaning for)."""
        if not all(self.is_mask(o) for o in operands):
            raise self.error(node, f"'{symbol}' is the logic of masks (m = a > b; m & n, m | n, m ^ n, ~m), not of "
                                   f"{self.kinds(*operands)}")

    def infix(self, node: ast.expr, symbol: str, found: tuple[str, bool] | None,
              operands: list[Name]) -> tuple[Name, list[Name]]:
        kinds = " and ".join(ValueType(self.shape_of(o)).spelling() for o in operands)
        if found is None or self.library.get(found[0]) is None:
            shapes = [self.shape_of(o) for o in operands]
            found = infix_family(symbol, shapes[0], shapes[1] if len(shapes) > 1 else None)
        if found is None or (self.library.get(found[0]) is None and self.library.family(found[0]) is None):
            form = f"'{symbol}'" + (" (negation)" if len(operands) == 1 else "")
            raise self.error(node, f"no op of the library computes {form} of {kinds}")
        name, swapped = found
        return self.name(name, node), operands[::-1] if swapped else operands

    def builtin_op(self, node: ast.Call) -> Name | None:
        """The generic op Python's `abs(x)`, `max(a, b)` or `min(a, b)` stands for (where the
        function's module leaves the name to Python's own), or None for another call."""
        func = node.func
        if not isinstance(func, ast.Name) or func.id not in BUILTIN_OPS or func.id in self.scope:
            return None
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(node, f"{func.id}'s values are written out (no *args)")
        if func.id == "abs" and len(node.args) != 1:
            raise self.error(node, f"abs takes one value, got {len(node.args)}")
        if func.id != "abs" and len(node.args) < 2:
            raise self.error(node, f"{func.id}(a, b, ...) is the {'largest' if func.id == 'max' else 'smallest'} of "
                                   f"its values, entry by entry (got {len(node.args)}); irfuse.{func.id}(x) "
                                   "reduces a value over the batch")
        return self.name(func.id, func)

    def numpy_call(self, node: ast.Call, out: list[Statement]) -> tuple[Name, list] | None:
        """(op, operands) of a call of one of NumPy's or `math`'s functions of values
        (`numpy_functions`): the infix form or generic op of its meaning; None for another call."""
        found = numpy_functions().get(id(self.resolve(node.func)))
        if found is None:
            return None
        spelled, what, count = found  # (keywords refused with every call's but an op's: `call_of`)
        if count is not None and len(node.args) != count:
            raise self.error(node, f"{spelled} takes {count} value{'s' if count > 1 else ''} here, got "
                                   f"{len(node.args)}")
        if any(isinstance(a, ast.Starred) for a in node.args):
            raise self.error(node, f"{spelled}'s operands are written out (no *args)")
        return self.numpy_meaning(node, spelled, what, list(node.args), out)

    def numpy_meaning(self, node: ast.Call, spelled: str, what: str, args: list[ast.expr],
                      out: list[Statement]) -> tuple[Name, list]:
        """(op, operands) of NumPy's function `spelled` (of meaning `what`: `numpy_functions`)
        applied to `args`, their count checked."""
        if what == "neg":
            return self.call_of(ast.copy_location(ast.UnaryOp(op=ast.USub(), operand=args[0]), node), out)
        if what == "entries":  # (a scalar's sum is itself; irfuse.sum(x) sums over the batch)
            value = self.expression(args[0], out)
            rank = len(self.shape_of(value))
            if not rank:
                return self.name(COPY, node), [value]
            return self.name("contract", node.func), [Text("ijkl"[:rank] + "->", self.pos(node)), value]
        if what == "identity":  # (a uniform value: the library's s * I of the number 1)
            n = self.whole_number(args[0])
            if n is None or not 2 <= n <= 6:
                raise self.error(args[0], f"{spelled}(n) takes a whole number n from 2 to 6 (the library's "
                                          "identity matrices)")
            return self.name(f"smimul{n}{n}", node.func), [Number("1.0", 1.0, self.pos(args[0]))]
        if what == "stack":
            if isinstance(args[0], (ast.List, ast.Tuple)):
                return self.stacked(args[0], spelled, out)
            if spelled == "np.array":  # (np.array(x): a copy of x)
                return self.name(COPY, node), [self.expression(args[0], out)]
            raise self.error(args[0], f"{spelled} takes the values it stacks written out as a list ([u, w])")
        if what in ("max", "min"):  # (the largest of a value's entries, left to right: NaN if any is)
            value = self.expression(args[0], out)
            if isinstance(value, Number) or not self.shape_of(value):
                return self.name(COPY, node), [value]
            return self.folded(self.name(what, node), self.entries_of(value, node, out), node, out)
        if what == "zeros":  # (an operand: np.zeros assigned is `assign`'s)
            return self.zeros_value(self.zeros_shape(node), None, node, out)
        if what == "diagonal":
            value = self.expression(args[0], out)
            shape = () if isinstance(value, Number) else self.shape_of(value)
            if len(shape) == 2:  # (a matrix's diagonal)
                rows = [self.row_of(value, i, node, out) for i in range(min(shape))]
                return self.name("stack", node), [entry_at(row, i, self.pos(node)) for i, row in enumerate(rows)]
            if len(shape) == 1:  # (the matrix of a vector's diagonal, zeros off it)
                pos, zero = self.pos(node), Number("0.0", 0.0, self.pos(node))
                rows = [self.assigned(self.temp(), node, (self.name("stack", node), [
                    entry_at(value, i, pos) if i == j else zero for j in range(shape[0])]), out)
                    for i in range(shape[0])]
                return self.name("stack", node), rows
            raise self.error(args[0], f"{spelled} takes a matrix (its diagonal) or a vector (the matrix of that "
                                      f"diagonal), not a {self.kinds(value)}")
        if what == "square":  # (NumPy's x * x, x traced once)
            value = self.expression(args[0], out)
            shape = self.shape_of(value)
            return self.infix(node, "*", infix_op("*", shape, shape), [value, value])
        if not what.startswith("op:"):
            op = next(k for k, v in INFIX.items() if v == what)
            return self.call_of(ast.copy_location(ast.BinOp(left=args[0], op=op(), right=args[1]), node), out)
        op_name = what[3:]
        return self.name(op_name, node.func), [self.expression(a, out, text=op_name == "contract") for a in args]

    def folded(self, op: Name, values: list, node: ast.AST, out: list[Statement]) -> tuple[Name, list]:
        """(op, operands) of a two-operand op over `values` left to right (`max(a, b, c)` is
        `max(max(a, b), c)`); of one value, a copy of it."""
        while len(values) > 2:
            values = [self.assigned(self.temp(), node, (op, values[:2]), out), *values[2:]]
        return (op, values) if len(values) == 2 else (self.name(COPY, node), values)

    def filled(self, value: Name | Number, shape: tuple[int, ...], node: ast.AST,
               out: list[Statement]) -> Name | Number:
        """A value of `shape` whose every entry is the scalar `value` (stacks of it, last axis
        first; of no axes, `value` itself)."""
        for n in reversed(shape):
            value = self.assigned(self.temp(), node, (self.name("stack", node), [value] * n), out)
        return value

    def entries_of(self, value: Name, node: ast.AST, out: list[Statement]) -> list[Index]:
        """Every entry of a value, in NumPy's (row-major) order, as operands: each entry of an
        axis but the last copied into a temporary."""
        pos, shape = self.pos(node), self.shape_of(value)
        if len(shape) == 1:
            return [entry_at(value, k, pos) for k in range(shape[0])]
        found: list[Index] = []
        for k in range(shape[0]):
            found += self.entries_of(self.row_of(value, k, node, out), node, out)
        return found

    def stacked(self, node: ast.List | ast.Tuple, spelled: str, out: list[Statement]) -> tuple[Name, list]:
        """`stack` of a list's values in order, a list inside it stacked first into a value of
        its own (`np.array([[a, b], [c, d]])` is a 2x2 matrix of its rows)."""
        if not node.elts or any(isinstance(e, ast.Starred) for e in node.elts):
            raise self.error(node, f"{spelled} stacks values written out, at least one (no *args)")
        values = [self.assigned(self.temp(), e, self.stacked(e, spelled, out), out)
                  if isinstance(e, (ast.List, ast.Tuple)) else self.expression(e, out) for e in node.elts]
        return self.name("stack", node), values

    def method_call(self, node: ast.Call, out: list[Statement]) -> tuple[Name, list] | None:
        """(op, operands) of one of NumPy's array methods (`METHODS`) called on a program's
        value (`A.trace()`, `(A @ B).sum()`, `A.T.dot(v)`, `x.clip(0, 1)`): NumPy's function of
        that value first; None for another call."""
        import numpy as np

        func = node.func
        if not isinstance(func, ast.Attribute) or func.attr not in METHODS or not self.is_value(func.value):
            return None
        spelled, what, count = numpy_functions()[id(getattr(np, func.attr))]
        if len(node.args) + 1 != count or any(isinstance(a, ast.Starred) for a in node.args):
            given = len(node.args)
            raise self.error(node, f"'.{func.attr}()' takes {count - 1 or 'no'} value{'s' * (count != 2)} here "
                                   f"(NumPy's {spelled} of the value), got {given}")
        return self.numpy_meaning(node, spelled, what, [func.value, *node.args], out)

    def is_value(self, node: ast.expr) -> bool:
        """Whether an expression is one of the program's values (a variable of the function, an
        entry, a result, a transpose) and not a module or an object of the function's scope."""
        if isinstance(node, ast.Name):
            return node.id in self.types or node.id in self.own
        if isinstance(node, ast.Attribute):
            return node.attr == "T" and self.is_value(node.value)
        return isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call, ast.Subscript))

    def op_name_of(self, func: ast.expr) -> str:
        """The name of the op (or generic op) a call names."""
        obj = self.resolve(func)
        if not isinstance(obj, OpRef):
            what = ast.unparse(func)
            instead = numpy_instead().get(id(obj))
            if instead is not None:
                raise self.error(func, f"'{what}' is not taken: write {instead}")
            raise self.error(func, f"'{what}' is not an op: a program calls ops of the library (irfuse.ops.NAME, "
                                   "'irfuse ops' lists them) and nothing else")
        if self.library.get(obj.name) is None and self.library.family(obj.name) is None:
            raise self.error(func, f"unknown op '{obj.name}'")
        return obj.name

    def resolve(self, func: ast.expr):
        if isinstance(func, ast.Name):
            return self.scope.get(func.id)
        if isinstance(func, ast.Attribute):
            base = self.resolve(func.value)
            if base is None:
                return None
            try:
                return getattr(base, func.attr)
            except (AttributeError, UsageError):
                return None
        return None

    def moved_shape(self, call: tuple[Name, list], node: ast.AST) -> tuple[int, ...]:
        """The shape of `irfuse.gather(X, conn)` (X's row for each of the K nodes: (K, *row)) or
        of `irfuse.scatter(fe, conn)` (a node's row: fe's shape without its leading K)."""
        kind, (value, conn) = call[0].text, call[1]
        if not isinstance(conn, Name) or conn.text not in self.connectivities:
            raise self.error(node, f"the second operand of irfuse.{kind} is a connectivity (a parameter annotated "
                                   "irfuse.Index[K])")
        k = self.types[conn.text][0]
        if isinstance(value, Index):
            raise self.error(node, f"irfuse.{kind} moves a whole value, not the entry "
                                   f"'{value.text}[{value.index.text}]': name it first ('q = {value.text}"
                                   f"[{value.index.text}]', then irfuse.{kind}(q, {conn.text}))")
        if not isinstance(value, Name) or value.text in self.connectivities:
            raise self.error(node, f"irfuse.{kind} moves a value of the program, not {getattr(value, 'text', value)!r}")
        shape = self.shape_of(value)
        if kind == "gather":
            if value.text not in self.nodal:
                raise self.error(node, f"irfuse.gather reads a nodal value, but '{value.text}' holds one value per "
                                       "element (annotate it irfuse.Nodal[...])")
            return (k, *shape)
        if value.text in self.nodal or value.text in self.uniform:
            raise self.error(node, f"irfuse.scatter adds values per element into the nodes, but '{value.text}' holds "
                                   f"one value {'per node' if value.text in self.nodal else 'for the whole batch'}")
        if not shape or shape[0] != k or len(shape) > 2:
            raise self.error(node, f"irfuse.scatter through an irfuse.Index[{k}] adds a value of {k} rows (a vector{k} "
                                   f"or a matrix{k}xD), not a {ValueType(shape).spelling()}")
        return shape[1:]

    def result_of(self, call: tuple[Name, list], node: ast.AST) -> tuple[tuple[int, ...], bool]:
        """(shape, is a mask) of a call's value."""
        if is_reduction(call[0].text, len(call[1])):
            operand = call[1][0]
            if self.is_uniform(operand):
                what = f"the number {operand.text}" if isinstance(operand, Number) else f"'{operand.text}', which is uniform"
                raise self.error(node, f"irfuse.{call[0].text} reduces a per-element value over the batch, not {what}")
            return self.shape_of(operand), False
        if call[0].text in ("gather", "scatter"):
            return self.moved_shape(call, node), False
        for a in call[1]:
            if isinstance(a, Name) and a.text in self.connectivities:
                raise self.error(node, f"the connectivity '{a.text}' is read only by irfuse.gather and irfuse.scatter")
        nodal = next((a for a in call[1] if isinstance(a, (Name, Index)) and a.text in self.nodal), None)
        element = next((a for a in call[1] if isinstance(a, (Name, Index)) and a.text not in self.nodal
                        and not self.is_uniform(a)), None)
        if nodal is not None and element is not None:
            raise self.error(node, f"'{element.text}' holds one value per element, but '{nodal.text}' one per node: an "
                                   "op runs per element or per node (gather the nodal value first: "
                                   "Xe = irfuse.gather(X, conn))")
        if call[0].text == COPY:
            operand = call[1][0]
            return self.shape_of(operand), isinstance(operand, Name) and operand.text in self.masks
        operands, params = call[1], ()
        stringed = call[0].text in STRING_FIRST
        if stringed and not (operands and isinstance(operands[0], Text)):
            raise self.error(node, STRING_FIRST[call[0].text])
        if any(isinstance(a, Text) for a in operands[stringed:]):
            raise self.error(node, STRING_ELSEWHERE)
        if stringed:
            try:
                params = string_params(call[0].text, operands[0].text, len(operands) - 1)
            except DefinitionError as e:
                raise self.error(node, str(e)) from None
            operands = operands[1:]
        op = self.library.get(call[0].text)
        types = [self.kas_type(a) for a in operands]
        if op is None:
            try:
                op = self.library.resolve(call[0].text, types, params)
            except DefinitionError as e:
                raise self.error(node, str(e)) from None
            assert op is not None
        if types != list(op.operand_types):
            got = ", ".join(t.spelling() for t in types)
            raise self.error(node, f"{op.signature()} cannot take ({got})")
        return tuple(op.result_type.shape), isinstance(op.result_type, MaskType)


DERIVATIVES = "__irfuse_derivatives__"  # a function's derivative declarations, in the order they apply


def wrt_names(wrt) -> tuple | None:
    """`wrt` (an input's name, or a list or tuple of names) as a tuple, or None for anything
    else: not any iterable, since a set's order, and so the derivative's inputs', would vary.
    Whether the entries are names is the caller's to say."""
    return (wrt,) if isinstance(wrt, str) else tuple(wrt) if isinstance(wrt, (list, tuple)) else None


def derivative(mode: str, wrt, prefix: str | None = None, of: str | None = None, loops: str | None = None):
    """A decorator declaring that the program is its derivative, as a KAS `derivative` line:
    `@irfuse.derivative("jvp", wrt=("F",))`, `("vjp", wrt=...)`, `("grad", of="E", wrt=...)`,
    `("jacobian", of="y", wrt=...)`, `("hessian", of="E", wrt=...)` (wrt: an input's name or
    several; prefix: the derivatives' names' start, by default `d`, `bar_`, `grad_`; loops: how reverse mode differentiates loops, `auto`, `unroll` or
    `tape`). It marks the function (or the `@irfuse.program` it decorates) and returns it."""
    if not isinstance(mode, str) or mode not in DERIVATIVE_MODES:
        raise UsageError(f"irfuse.derivative: unknown mode {mode!r}; known: {', '.join(DERIVATIVE_MODES)}")
    if (mode in MODES_WITH_OF) != (of is not None) or (of is not None and not (isinstance(of, str) and
                                                                            of.isidentifier())):
        raise UsageError("irfuse.derivative: 'grad', 'jacobian' and 'hessian' take the output's name as of=..., "
                         "and only they do")
    prefix = DEFAULT_PREFIX[mode] if prefix is None else prefix
    names = wrt_names(wrt)
    if not names or not all(isinstance(n, str) and n.isidentifier() for n in names):
        raise UsageError(f"irfuse.derivative: wrt takes the names of inputs, not {wrt!r}")
    if not isinstance(prefix, str) or not prefix.isidentifier():
        raise UsageError(f"irfuse.derivative: the prefix {prefix!r} is not a name")
    if loops is not None and (mode == "jvp" or not isinstance(loops, str) or loops not in ("auto", "unroll", "tape")):
        raise UsageError(f"irfuse.derivative: loops takes 'auto', 'unroll' or 'tape' (how reverse mode "
                         f"differentiates loops), not {loops!r}" + (" for 'jvp'" if mode == "jvp" else ""))

    def mark(target):
        fn = getattr(target, "fn", target)  # an @irfuse.program keeps its function as .fn
        if not inspect.isfunction(fn):
            raise UsageError(f"@irfuse.derivative applies to a function, not to a {type(target).__qualname__}")
        fn.__dict__[DERIVATIVES] = (*getattr(fn, DERIVATIVES, ()), (mode, names, prefix, of, loops))
        return target
    return mark


def translate_function(fn, library: Library | None = None) -> TracedSource:
    """The KAS syntax tree of a Python function (see the module's docstring)."""
    per_element: frozenset[str] = frozenset()
    while True:
        translator = _Translator(fn, library or default_library(), per_element)
        try:
            return translator.translate()
        except _PerElement as e:  # (a variable given a number is one value per element too: again)
            per_element |= {e.var}
        except RecursionError:  # (what Python parses may nest deeper than tracing it by recursion allows)
            raise translator.error(translator.tree.body[0], "the function's expressions nest too deeply to trace: "
                                   "write the deepest parts as statements of their own") from None


class _PerElement(Exception):
    """A variable given a number is given one value per element too (`translate_function`)."""

    def __init__(self, var: str):
        super().__init__(var)
        self.var = var


def compile_function(fn, library: Library | None = None) -> FrontendResult:
    """A Python function to a module holding one `kas.program`, as `compile_source` makes
    from KAS text; raises `CompileError` at the Python file's line."""
    lib = library or default_library()
    traced = translate_function(fn, lib)
    return build_module(traced.source, traced.program, lib, traced.name)
