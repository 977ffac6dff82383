"""Ops defined once for every shape: generic names resolved by their operands' types.

A family (`mmul`, `exp`, `det`, `select`, ...) turns the types of its operands into one op
of the library: its result type and its definition in index notation, written for those
shapes (`Family.instantiate`). The op is named by the family and the operand types
(`mmul_4x3_3x2`: a C identifier, as kernels and device functions are named after ops), so IR
that names it is understood by any process (`Library.get` instantiates a name it does not
hold yet). The suffixed built-in ops (`mmul33`) stay as they are.

Type codes in names: `s` a scalar, `m` a mask, else the dimensions joined by `x` (`3` a
vector of 3, `4x3` a matrix, `3x3x3` a tensor). Families with parameters put them between
the family and the codes: `contract_ik_kj_ij_3x3_3x3` (the inputs' and the result's index
letters), `item_2_8x3` and `put_2_8x3_3` (entry 2 of an array's first axis read, written),
`repeat_8_3` (eight copies of a vector), `reshape_4x4x4_64` (a vector of 64 as a tensor).
"""

from __future__ import annotations

import functools
import math
import re
from collections.abc import Callable, Sequence

from irfuse.artifact.records import record
from irfuse.dialects.kas import MAX_DIM, KasType, MaskType, ScalarType, kas_type_of_shape
from irfuse.library.indexexpr import DefinitionError

MAX_TENSOR_RANK = 4  # the value types' limit (a tensor has 3 or 4 axes)


@record(frozen=True)
class Instance:
    """A family's op for given operand types."""

    operand_names: tuple[str, ...]
    result: KasType
    definition: str
    doc: str


@record(frozen=True)
class Family:
    name: str
    signature: str  # for messages: `mmul(A: matrixMxK, B: matrixKxN) -> matrixMxN`
    doc: str
    arity: int | None  # operands (None: given by the parameters, as contract's)
    make: Callable[[tuple[KasType, ...], tuple[str, ...]], Instance]

    def instantiate(self, types: Sequence[KasType], params: Sequence[str] = ()) -> tuple[str, Instance]:
        """(op name, instance) for these operand types; DefinitionError saying what the family
        takes otherwise."""
        types = tuple(types)
        if not params and self.name in COUNTED_BY_OPERANDS:
            params = (str(len(types)),)  # (a program's stack(v0, ..., vN-1): named stack_N as the transforms' are)
        if self.arity is not None and len(types) != self.arity:
            raise DefinitionError(f"'{self.name}' takes {self.arity} operand(s), got {len(types)}: "
                                  f"{self.signature}")
        instance = self.make(types, tuple(params))
        if len(instance.result.shape) > MAX_TENSOR_RANK:
            raise DefinitionError(f"'{self.name}' of {_spelled(types)} would give a value of "
                                  f"{len(instance.result.shape)} axes; values have at most {MAX_TENSOR_RANK}")
        return mangled(self.name, params, types), instance


def type_code(t: KasType) -> str:
    if isinstance(t, MaskType):
        return "m"
    if isinstance(t, ScalarType):
        return "s"
    return "x".join(str(d) for d in t.shape)


@functools.lru_cache(maxsize=1 << 12)
def type_of_code(code: str) -> KasType | None:
    """The type a mangled name's operand code spells (`s`, `m`, `3x3`), or None. (Kept by code:
    every lookup of a family op's name parses its codes, and the types are immutable.)"""
    if code == "m":
        return MaskType()
    if code == "s":
        return ScalarType()
    if not re.fullmatch(r"[1-9]\d*(x[1-9]\d*)*", code):
        return None
    return kas_type_of_shape(tuple(int(d) for d in code.split("x")))


def mangled(family: str, params: Sequence[str], types: Sequence[KasType]) -> str:
    return "_".join([family, *params, *(type_code(t) for t in types)])


def _spelled(types: Sequence[KasType]) -> str:
    return ", ".join(t.spelling() for t in types) or "no operands"


def _idx(rank: int, first: str = "i") -> str:
    """`i0,i1,...` (`first` + position) for a value of `rank` axes."""
    return ",".join(f"{first}{k}" for k in range(rank))


def _ref(name: str, rank: int, first: str = "i") -> str:
    return f"{name}[{_idx(rank, first)}]" if rank else name


def _target(rank: int) -> str:
    return f"C[{_idx(rank)}]" if rank else "r"


def _refuse(family: "str", signature: str, types: Sequence[KasType], why: str = "") -> DefinitionError:
    return DefinitionError(f"'{family}' does not take {_spelled(types)}{': ' + why if why else ''}; "
                           f"its signature: {signature}")


def _index_param(family: str, params: Sequence[str], written: str) -> int:
    """A family's whole-number parameter (an entry, a count): given by the transforms that make
    its calls, not by a program's call of it, which is told what to write (`written`)."""
    if len(params) != 1 or not str(params[0]).isdigit():
        raise DefinitionError(f"'{family}' takes its {'entry' if family in ('item', 'put') else 'count'} from the "
                              f"program's syntax, not from a call: {written}")
    return int(params[0])


def _numeric(t: KasType) -> bool:
    return not isinstance(t, MaskType)


# --- the families -------------------------------------------------------------------------

FAMILIES: dict[str, Family] = {}


def family(name: str, signature: str, doc: str, arity: int | None = None):
    def register(make):
        FAMILIES[name] = Family(name, signature, doc, arity, make)
        return make
    return register


def _elementwise(name: str, expr: Callable[[list[str]], str], doc: str, arity: int,
                 scalars_after_first: bool = True) -> None:
    """A family applied entry by entry to values of one shape: operands after the first may
    also be scalars (one value for every entry)."""
    names = {1: ("A",), 2: ("A", "B"), 3: ("A", "lo", "hi")}[arity]
    shapes = ", ".join(["A: any", *(f"{x}: the shape of A, or scalar" for x in names[1:])])
    signature = f"{name}({shapes}) -> the shape of A"

    def make(types, params):
        first = types[0]
        if not all(_numeric(t) for t in types) or any(
                t != first and not (scalars_after_first and isinstance(t, ScalarType)) for t in types[1:]):
            raise _refuse(name, signature, types)
        rank = len(first.shape)
        refs = [_ref(x, rank if t == first else 0) for x, t in zip(names, types)]
        return Instance(names, first, f"{_target(rank)} = {expr(refs)}", doc)
    family(name, signature, doc, arity)(make)


for _name, _fn, _doc in (("exp", "exp({0})", "e to the power A"), ("log", "log({0})", "natural logarithm"),
                         ("sqrt", "sqrt({0})", "square root"), ("rsqrt", "rsqrt({0})", "1 / square root"),
                         ("sin", "sin({0})", "sine"), ("cos", "cos({0})", "cosine"),
                         ("tanh", "tanh({0})", "hyperbolic tangent"), ("abs", "abs({0})", "absolute value"),
                         ("sign", "sign({0})", "-1, 0 or 1 (NaN stays NaN)"), ("neg", "-{0}", "negation"),
                         ("floor", "floor({0})", "the largest whole number not above A")):
    _elementwise(_name, lambda refs, f=_fn: f.format(*refs), _doc, 1)
for _name, _fn, _doc in (("add", "{0} + {1}", "sum"), ("sub", "{0} - {1}", "difference"),
                         ("pow", "pow({0}, {1})", "A to the power B"),
                         ("min", "min({0}, {1})", "the smaller (NaN if either is)"),
                         ("max", "max({0}, {1})", "the larger (NaN if either is)"),
                         ("emul", "{0}*{1}", "product entry by entry"),
                         ("ediv", "{0}/{1}", "quotient entry by entry"),
                         ("floordiv", "floordiv({0}, {1})", "A / B rounded down (NumPy's and Python's A // B)"),
                         ("mod", "mod({0}, {1})",
                          "A - B floordiv(A, B), the sign of B (NumPy's and Python's A % B)")):
    _elementwise(_name, lambda refs, f=_fn: f.format(*refs), _doc, 2)
_elementwise("clamp", lambda refs: f"clamp({refs[0]}, {refs[1]}, {refs[2]})", "A within [lo, hi]", 3)


@family("scale", "scale(A: any, s: scalar) -> the shape of A", "A times a scalar", 2)
def _scale(types, params):
    a, s = types
    if not _numeric(a) or not isinstance(s, ScalarType):
        raise _refuse("scale", FAMILIES["scale"].signature, types)
    rank = len(a.shape)
    return Instance(("A", "s"), a, f"{_target(rank)} = {_ref('A', rank)}*s", "A times a scalar")


def _matrix(t: KasType) -> tuple[int, int] | None:
    return t.shape if len(t.shape) == 2 and _numeric(t) else None  # type: ignore[return-value]


def _vector(t: KasType) -> int | None:
    return t.shape[0] if len(t.shape) == 1 else None


def _products():
    specs = {  # name: (signature, operand checks -> result shape, definition)
        "mmul": ("mmul(A: matrixMxK, B: matrixKxN) -> matrixMxN", "C[i,j] = sum(k) A[i,k]*B[k,j]",
                 lambda a, b: (a[0], b[1]) if _matrix_pair(a, b) and a[1] == b[0] else None, "A B"),
        "mtmul": ("mtmul(A: matrixKxM, B: matrixKxN) -> matrixMxN", "C[i,j] = sum(k) A[k,i]*B[k,j]",
                  lambda a, b: (a[1], b[1]) if _matrix_pair(a, b) and a[0] == b[0] else None, "A^T B"),
        "mmult": ("mmult(A: matrixMxK, B: matrixNxK) -> matrixMxN", "C[i,j] = sum(k) A[i,k]*B[j,k]",
                  lambda a, b: (a[0], b[0]) if _matrix_pair(a, b) and a[1] == b[1] else None, "A B^T"),
    }
    for name, (signature, definition, shape, doc) in specs.items():
        def make(types, params, name=name, signature=signature, definition=definition, shape=shape, doc=doc):
            a, b = types
            result = shape(a.shape, b.shape) if _matrix(a) and _matrix(b) else None
            if result is None:
                raise _refuse(name, signature, types)
            return Instance(("A", "B"), kas_type_of_shape(result), definition, doc)
        family(name, signature, doc, 2)(make)


def _matrix_pair(a, b) -> bool:
    return len(a) == 2 and len(b) == 2


_products()


@family("mvmul", "mvmul(A: matrixMxN, v: vectorN) -> vectorM", "matrix times vector", 2)
def _mvmul(types, params):
    a, v = types
    if not (_matrix(a) and _vector(v) == a.shape[1]):
        raise _refuse("mvmul", FAMILIES["mvmul"].signature, types)
    return Instance(("A", "v"), kas_type_of_shape((a.shape[0],)), "r[i] = sum(j) A[i,j]*v[j]", "A v")


@family("mtvmul", "mtvmul(A: matrixMxN, v: vectorM) -> vectorN", "transposed matrix times vector", 2)
def _mtvmul(types, params):
    a, v = types
    if not (_matrix(a) and _vector(v) == a.shape[0]):
        raise _refuse("mtvmul", FAMILIES["mtvmul"].signature, types)
    return Instance(("A", "v"), kas_type_of_shape((a.shape[1],)), "r[i] = sum(j) A[j,i]*v[j]", "A^T v")


@family("outer", "outer(v: vectorM, w: vectorN) -> matrixMxN", "outer product", 2)
def _outer(types, params):
    v, w = types
    if _vector(v) is None or _vector(w) is None:
        raise _refuse("outer", FAMILIES["outer"].signature, types)
    return Instance(("v", "w"), kas_type_of_shape((v.shape[0], w.shape[0])), "C[i,j] = v[i]*w[j]", "v w^T")


@family("dot", "dot(v: vectorN, w: vectorN) -> scalar", "dot product", 2)
def _dot(types, params):
    v, w = types
    if _vector(v) is None or v != w:
        raise _refuse("dot", FAMILIES["dot"].signature, types)
    return Instance(("v", "w"), ScalarType(), "r = sum(i) v[i]*w[i]", "v . w")


@family("ddot", "ddot(A: any, B: the shape of A) -> scalar", "sum of the products of entries (A:B)", 2)
def _ddot(types, params):
    a, b = types
    if not a.shape or a != b or not _numeric(a):
        raise _refuse("ddot", FAMILIES["ddot"].signature, types)
    rank = len(a.shape)
    return Instance(("A", "B"), ScalarType(), f"r = sum({_idx(rank)}) {_ref('A', rank)}*{_ref('B', rank)}", "A:B")


@family("norm", "norm(A: vector, matrix or tensor) -> scalar", "Euclidean (Frobenius) norm", 1)
def _norm(types, params):
    (a,) = types
    if not a.shape or not _numeric(a):
        raise _refuse("norm", FAMILIES["norm"].signature, types)
    rank = len(a.shape)
    return Instance(("A",), ScalarType(), f"r = sqrt(sum({_idx(rank)}) {_ref('A', rank)}*{_ref('A', rank)})",
                    "sqrt(A:A)")


@family("transpose", "transpose(A: matrixMxN) -> matrixNxM", "transpose", 1)
def _transpose(types, params):
    (a,) = types
    if not _matrix(a):
        raise _refuse("transpose", FAMILIES["transpose"].signature, types)
    return Instance(("A",), kas_type_of_shape(a.shape[::-1]), "C[i,j] = A[j,i]", "A^T")


def _square(name: str, types, low: int = 1, high: int | None = None) -> int:
    (a,) = types
    m = _matrix(a)
    if not m or m[0] != m[1] or m[0] < low or (high is not None and m[0] > high):
        why = "" if not m or m[0] != m[1] else f"it is in closed form for {low}x{low} to {high}x{high} matrices"
        raise _refuse(name, FAMILIES[name].signature, types, why)
    return m[0]


@family("trace", "trace(A: matrixNxN) -> scalar", "sum of the diagonal", 1)
def _trace(types, params):
    _square("trace", types)
    return Instance(("A",), ScalarType(), "r = sum(i) A[i,i]", "tr A")


@family("sym", "sym(A: matrixNxN) -> matrixNxN", "symmetric part (A + A^T)/2", 1)
def _sym(types, params):
    _square("sym", types)
    return Instance(("A",), types[0], "C[i,j] = 0.5*(A[i,j] + A[j,i])", "(A + A^T)/2")


@family("skew", "skew(A: matrixNxN) -> matrixNxN", "skew part (A - A^T)/2", 1)
def _skew(types, params):
    _square("skew", types)
    return Instance(("A",), types[0], "C[i,j] = 0.5*(A[i,j] - A[j,i])", "(A - A^T)/2")


@family("dev", "dev(A: matrixNxN) -> matrixNxN", "deviator A - tr(A)/N I", 1)
def _dev(types, params):
    n = _square("dev", types)
    return Instance(("A",), types[0], f"C[i,j] = A[i,j] - delta(i,j)*(sum(k) A[k,k])/{n}", "A - tr(A)/N I")


def _det_text(n: int, a: Callable[[int, int], str]) -> str:
    if n == 1:
        return a(0, 0)
    if n == 2:
        return f"({a(0, 0)}*{a(1, 1)} - {a(0, 1)}*{a(1, 0)})"
    return (f"({a(0, 0)}*({a(1, 1)}*{a(2, 2)} - {a(1, 2)}*{a(2, 1)}) - {a(0, 1)}*({a(1, 0)}*{a(2, 2)} - "
            f"{a(1, 2)}*{a(2, 0)}) + {a(0, 2)}*({a(1, 0)}*{a(2, 1)} - {a(1, 1)}*{a(2, 0)}))")


def _cofactor_text(n: int, i: int, j: int) -> str:
    """Entry (i, j) of the cofactor matrix of A (n = 2, 3): (-1)^(i+j) times the minor."""
    if n == 1:
        return "1"
    rows = [r for r in range(n) if r != i]
    cols = [c for c in range(n) if c != j]
    minor = _det_text(n - 1, lambda r, c: f"A[{rows[r]},{cols[c]}]")
    return minor if (i + j) % 2 == 0 else f"(-{minor})"


def _per_entry(n: int, entry: Callable[[int, int], str]) -> str:
    """An n x n result entry by entry: a sum of selections (`delta` selects exactly: each
    entry's tree is its own expression alone)."""
    return " + ".join(f"delta(i,{i})*delta(j,{j})*({entry(i, j)})" for i in range(n) for j in range(n))


@family("det", "det(A: matrix2x2 or matrix3x3) -> scalar", "determinant (closed form)", 1)
def _det(types, params):
    n = _square("det", types, 1, 3)
    return Instance(("A",), ScalarType(), "r = " + _det_text(n, lambda i, j: f"A[{i},{j}]"), "det A")


@family("cof", "cof(A: matrix2x2 or matrix3x3) -> the same", "cofactor matrix (closed form)", 1)
def _cof(types, params):
    n = _square("cof", types, 1, 3)
    return Instance(("A",), types[0], "C[i,j] = " + _per_entry(n, lambda i, j: _cofactor_text(n, i, j)), "cof A")


@family("inv", "inv(A: matrix2x2 or matrix3x3) -> the same", "inverse (closed form: cof(A)^T times 1 / det A)", 1)
def _inv(types, params):
    n = _square("inv", types, 1, 3)
    det = _det_text(n, lambda i, j: f"A[{i},{j}]")
    # One division, then products: each entry is its cofactor times the same reciprocal, which
    # the C compiler computes once (nine IEEE divisions, each a dozen instructions and a slow
    # path on the GPU, made the element kernels of meshes bound by issuing instructions).
    return Instance(("A",), types[0],
                    "C[i,j] = " + _per_entry(n, lambda i, j: f"{_cofactor_text(n, j, i)}*(1/{det})"), "A^-1")


def _comparison(name: str, fn: str, doc: str) -> None:
    signature = f"{name}(a: scalar, b: scalar) -> mask"

    def make(types, params):
        if any(not isinstance(t, ScalarType) for t in types):
            raise _refuse(name, signature, types)
        return Instance(("a", "b"), MaskType(), f"r = {fn}(a, b)", doc)
    family(name, signature, doc, 2)(make)


for _name, _doc in (("lt", "a < b"), ("le", "a <= b"), ("gt", "a > b"), ("ge", "a >= b"), ("eq", "a == b"),
                    ("ne", "a != b")):
    _comparison(_name, _name, _doc + " (false where either is NaN, but ne)")


def _logic(name: str, arity: int, doc: str) -> None:
    signature = f"{name}({', '.join(['m: mask', 'n: mask'][:arity])}) -> mask"

    def make(types, params):
        if any(not isinstance(t, MaskType) for t in types):
            raise _refuse(name, signature, types)
        names = ("m", "n")[:arity]
        return Instance(names, MaskType(), f"r = {name}({', '.join(names)})", doc)
    family(name, signature, doc, arity)(make)


_logic("and", 2, "both")
_logic("or", 2, "either")
_logic("xor", 2, "one but not both (of masks: Python's m != n)")
_logic("not", 1, "the opposite")


@family("select", "select(m: mask, A: any, B: the type of A) -> the type of A",
        "A where m holds, else B (the other side never reaches the result)", 3)
def _select(types, params):
    m, a, b = types
    if not isinstance(m, MaskType) or a != b:
        raise _refuse("select", FAMILIES["select"].signature, types)
    rank = len(a.shape)
    return Instance(("m", "A", "B"), a, f"{_target(rank)} = select(m, {_ref('A', rank)}, {_ref('B', rank)})",
                    "m ? A : B")


@family("ifeq", "ifeq(A: any, B: the type of A, X: the type of A, Y: the type of A) -> the type of A",
        "X where A equals B, else Y, entry by entry (a maximum's derivative picks the tied entries)", 4)
def _ifeq(types, params):
    if not _numeric(types[0]) or any(t != types[0] for t in types[1:]):
        raise _refuse("ifeq", FAMILIES["ifeq"].signature, types)
    rank = len(types[0].shape)
    a, b, x, y = (_ref(n, rank) for n in ("A", "B", "X", "Y"))
    return Instance(("A", "B", "X", "Y"), types[0], f"{_target(rank)} = select(eq({a}, {b}), {x}, {y})",
                    "A == B ? X : Y")


@family("zeros", "zeros(A: any) -> the type of A", "zeros of A's type (A's values are not read)", 1)
def _zeros(types, params):
    if not _numeric(types[0]):
        raise _refuse("zeros", FAMILIES["zeros"].signature, types)
    return Instance(("A",), types[0], f"{_target(len(types[0].shape))} = 0", "0")


@family("item", "item_K(A: an array of N values) -> one value (K < N, after a loop is unrolled)",
        "entry K of an array's first axis", 1)
def _item(types, params):
    (a,) = types
    k = _index_param("item", params, "read entry K of an array as a[K]")
    if not a.shape or not k < a.shape[0] or not _numeric(a):
        raise _refuse("item", FAMILIES["item"].signature, types)
    rest = a.shape[1:]
    ref = f"A[{','.join([str(k), *_idx(len(rest)).split(',')]) if rest else k}]"
    return Instance(("A",), kas_type_of_shape(rest), f"{_target(len(rest))} = {ref}", f"A[{k}]")


@family("put", "put_K(A: an array of N values, v: one value) -> the array, entry K replaced",
        "the array with entry K of its first axis replaced", 2)
def _put(types, params):
    a, v = types
    k = _index_param("put", params, "replace entry K of an array by assigning a[K] = ...")
    if not a.shape or not k < a.shape[0] or tuple(v.shape) != tuple(a.shape[1:]) or not _numeric(a):
        raise _refuse("put", FAMILIES["put"].signature, types)
    rank = len(a.shape)
    rest = _idx(rank - 1, "i") if rank > 1 else ""
    target = f"C[a,{rest}]" if rest else "C[a]"
    vref = f"v[{rest}]" if rest else "v"
    aref = f"A[a,{rest}]" if rest else "A[a]"
    # (`delta` selects exactly: the entry replaced is v alone, the others A's, NaN or not)
    return Instance(("A", "v"), a, f"{target} = delta(a,{k})*{vref} + (1 - delta(a,{k}))*{aref}",
                    f"A with A[{k}] = v")


@family("stack", "stack_N(v0, ..., v(N-1): values of one type) -> an array of N of them",
        "an array of its operands")
def _stack(types, params):
    first = types[0] if types else None
    if first is None or any(t != first for t in types) or not _numeric(first) or len(types) != int(params[0]):
        raise _refuse("stack", FAMILIES["stack"].signature, types)
    rank = len(first.shape)
    rest = _idx(rank, "i")
    target = f"C[a,{rest}]" if rank else "C[a]"
    names = tuple(f"V{k}" for k in range(len(types)))
    terms = " + ".join(f"delta(a,{k})*{_ref(n, rank)}" for k, n in enumerate(names))
    return Instance(names, kas_type_of_shape((len(types), *first.shape)), f"{target} = {terms}", "[v0, v1, ...]")


# A loop's history for reverse mode (`transforms.reverse_mode`): a stack of its carried states,
# the newest at entry 0. Every entry is written with constant indices (a row moved is a
# register moved; no comparison, no index held in a value), so the derivatives, the reference
# and the implementations come from the definitions as for any op.


@family("repeat", "repeat_N(v: a value) -> an array of N copies of it", "N copies of a value along a new first axis",
        1)
def _repeat(types, params):
    (v,) = types
    if not _numeric(v) or not _index_param("repeat", params, "stack(v, v, ...) makes an array of copies") > 0:
        raise _refuse("repeat", FAMILIES["repeat"].signature, types)
    rank = len(v.shape)
    target = f"C[a,{_idx(rank)}]" if rank else "C[a]"
    return Instance(("V",), kas_type_of_shape((int(params[0]), *v.shape)), f"{target} = {_ref('V', rank)}",
                    "[v, v, ...]")


def _shifted(name: str, a: KasType, rows: Sequence[int], first: str | None) -> str:
    """`C[a,...] = ...`: entry 0 is `first` (None: the array's row rows[0]), entry k the array's
    row rows[k] (rows past the list: zeros)."""
    rank = len(a.shape)
    rest = _idx(rank - 1)
    target = f"C[a,{rest}]" if rest else "C[a]"
    terms = [] if first is None else [f"delta(a,0)*{first}"]
    for k, row in enumerate(rows, start=len(terms)):
        terms.append(f"delta(a,{k})*{name}[{row},{rest}]" if rest else f"delta(a,{k})*{name}[{row}]")
    return f"{target} = " + (" + ".join(terms) if terms else "0")


@family("push", "push(H: an array of N values, v: one value) -> [v, H[0], ..., H[N-2]]",
        "the array with v in front, its last entry dropped", 2)
def _push(types, params):
    h, v = types
    if not h.shape or tuple(v.shape) != tuple(h.shape[1:]) or not _numeric(h) or not _numeric(v):
        raise _refuse("push", FAMILIES["push"].signature, types)
    return Instance(("H", "v"), h, _shifted("H", h, range(h.shape[0] - 1), _ref("v", len(v.shape))),
                    "[v, H[0], ..., H[N-2]]")


@family("pop", "pop(H: an array of N values) -> [H[1], ..., H[N-1], 0]", "the array without its first entry, "
        "zeros last", 1)
def _pop(types, params):
    (h,) = types
    if not h.shape or not _numeric(h):
        raise _refuse("pop", FAMILIES["pop"].signature, types)
    return Instance(("H",), h, _shifted("H", h, range(1, h.shape[0]), None), "[H[1], ..., H[N-1], 0]")


CONTRACT_SIGNATURE = 'contract("ij,jk->ik", A, B, ...) -> the result of the index expression'


# What both frontends say of a call's strings: contract and reshape take one, first.
INDEX_EXPRESSION_FIRST = "'contract' takes the index expression first, as a string: contract(\"ik,kj->ij\", A, B)"
SHAPE_FIRST = "'reshape' takes the new shape first, as a string: reshape(\"4x4x4\", v)"
STRING_ELSEWHERE = ("a string is only the first operand of 'contract' (its index expression) or 'reshape' (its "
                    "new shape)")
STRING_FIRST = {"contract": INDEX_EXPRESSION_FIRST, "reshape": SHAPE_FIRST}  # family -> what it says without


def string_params(family: str, text: str, count: int) -> tuple[str, ...]:
    """The parameters of a call's name that its first operand, a string, gives: a
    contraction's index letters (`contract_params`), a reshape's shape code (`reshape_params`)."""
    return contract_params(text, count) if family == "contract" else reshape_params(text, count)


def contract_params(spec: str, count: int) -> tuple[str, ...]:
    """A contraction's index letters as parameters of its name: one word per operand, then the
    result's (`"ik,kj->ij"` -> ('ik', 'kj', 'ij')); DefinitionError when the text is no such
    spec for `count` operands."""
    m = re.fullmatch(r"\s*([a-z]*(?:\s*,\s*[a-z]*)*)\s*->\s*([a-z]*)\s*", spec)
    if m is None:
        raise DefinitionError(f"contract: '{spec}' is not an index expression such as \"ik,kj->ij\" (lower-case "
                              "letters, one group per operand, -> and the result's letters)")
    inputs = [x.strip() for x in m.group(1).split(",")]
    if len(inputs) != count:
        raise DefinitionError(f"contract: '{spec}' names {len(inputs)} operand(s), {count} given")
    words = (*inputs, m.group(2))
    return tuple(w if w else "s" for w in words)  # (a scalar's group is empty: `s` in names)


# The factors of the products one entry of a contraction sums, in all: its definition is a tree
# of that many leaves, its forward derivative one of as many terms (the product rule), which
# every pass walks (and a kernel evaluates one after another).
MAX_CONTRACT_FACTORS = 512


@family("contract", CONTRACT_SIGNATURE, "any sum of products written in index notation (einsum)")
def _contract(types, params):
    words = [("" if w == "s" else w) for w in params]
    inputs, result = words[:-1], words[-1]
    if len(inputs) != len(types):
        raise DefinitionError(f"contract: {len(inputs)} index groups for {len(types)} operand(s)")
    sizes: dict[str, int] = {}
    for word, t in zip(inputs, types):
        if len(word) != len(t.shape) or not _numeric(t):
            raise DefinitionError(f"contract: '{word or 'no letters'}' does not index a {t.spelling()} "
                                  f"({len(t.shape)} axes)")
        for letter, n in zip(word, t.shape):
            if sizes.setdefault(letter, n) != n:
                raise DefinitionError(f"contract: index '{letter}' ranges over both {sizes[letter]} and {n}")
    if any(letter not in sizes for letter in result) or len(set(result)) != len(result):
        raise DefinitionError(f"contract: the result's letters '{result}' must be distinct letters of the operands")
    summed = [x for x in dict.fromkeys("".join(inputs)) if x not in result]
    terms = math.prod(sizes[x] for x in summed)
    if terms * len(inputs) > MAX_CONTRACT_FACTORS:
        raise DefinitionError(
            f"contract: '{','.join(inputs)}->{result}' sums {terms} products of {len(inputs)} factors for each entry "
            f"of its result (over {', '.join(f'{x} of {sizes[x]}' for x in summed) or 'no index'}); at most "
            f"{MAX_CONTRACT_FACTORS} factors in all: write it as contractions of fewer operands, each summing its "
            "own indices")
    names = [f"X{k}" for k in range(len(types))]
    product = "*".join(f"{n}[{','.join(w)}]" if w else n for n, w in zip(names, inputs))
    body = f"sum({','.join(summed)}) {product}" if summed else product
    target = f"C[{','.join(result)}]" if result else "r"
    shape = tuple(sizes[x] for x in result)
    return Instance(tuple(names), kas_type_of_shape(shape), f"{target} = {body}",
                    f"contract {','.join(inputs)}->{result}")


RESHAPE_SIGNATURE = 'reshape("4x4x4", v: a value of as many entries) -> a value of that shape'
MAX_RESHAPE_WORDS = 1024  # (each entry's definition selects one of the operand's: a sum of that many terms)
# A reshape's sum along one axis stays flat up to 729 terms (the vector of a hexahedron of order 8,
# the form its plans were measured with), past that in parenthesized runs of 32 (`_reshape`).
FLAT_SUM_TERMS, SUM_RUN = 729, 32


def reshape_params(text: str, count: int) -> tuple[str]:
    """A reshape's new shape as its name's parameter (`"4x4x4"` -> ('4x4x4',), `"s"` or `""`
    a scalar); DefinitionError when the text is no shape or the call has not one operand."""
    if count != 1:
        raise DefinitionError(f"reshape takes the new shape and one value, got {count} value(s): {RESHAPE_SIGNATURE}")
    code = text.strip().lower() or "s"
    if code != "s" and not re.fullmatch(r"[1-9]\d*(x[1-9]\d*)*", code):
        raise DefinitionError(f"reshape: '{text}' is not a shape such as \"4x4x4\" (sizes joined by x; \"s\" a scalar)")
    return (code,)


@family("reshape", RESHAPE_SIGNATURE, "the same entries in row-major order, in another shape", 1)
def _reshape(types, params):
    (a,) = types
    shape = () if params[0] == "s" else tuple(int(d) for d in params[0].split("x"))
    size = math.prod(shape)
    if not _numeric(a) or math.prod(a.shape) != size:
        raise _refuse("reshape", RESHAPE_SIGNATURE, types, f"{math.prod(a.shape)} entries cannot fill {params[0]}")
    if size > MAX_RESHAPE_WORDS or len(shape) > MAX_TENSOR_RANK or any(d > MAX_DIM for d in shape):
        raise _refuse("reshape", RESHAPE_SIGNATURE, types, f"a value of {params[0]} (at most {MAX_RESHAPE_WORDS} "
                      f"entries, {MAX_TENSOR_RANK} axes of at most {MAX_DIM} are reshaped)")
    result = kas_type_of_shape(shape)
    if not shape or not a.shape:
        return Instance(("A",), result, f"{_target(len(shape))} = {_ref('A', 0) if not a.shape else _entry(a.shape, 0)}",
                        f"A as {params[0]}")
    # Entry k of the result (row-major) is entry k of A: a selection by deltas of constant indices
    # (`delta` selects exactly), as `stack` writes its entries, nested axis by axis (each axis's
    # delta written once for the entries under it), so that each entry is found by a few delta
    # tests an axis, not by one product of deltas per entry: a 9x9x9 tensor's 729 entries (a
    # hexahedron of order 8) expand to about 58,000 operations and operands (`expand` builds a
    # product only past a first factor that is not 0), 4.3 M written flat.
    letters = _idx(len(shape))

    def nested(d: int, first: int) -> str:
        inner = math.prod(shape[d + 1:])
        if d == len(shape) - 1:
            terms = [f"delta(i{d},{i})*{_entry(a.shape, first + i)}" for i in range(shape[d])]
            if len(terms) <= FLAT_SUM_TERMS:
                return " + ".join(terms)
            # A longer axis's sum in parenthesized runs: a flat sum of 1,000 terms parses as a
            # chain 1,000 deep, past what the definition's recursive walks can descend (a
            # vector of a hexahedron's 1,000 values at order 9 raised RecursionError; now the
            # definition's size is checked and refused by name).
            return " + ".join(f"({' + '.join(terms[k:k + SUM_RUN])})" for k in range(0, len(terms), SUM_RUN))
        return " + ".join(f"delta(i{d},{i})*({nested(d + 1, first + i * inner)})" for i in range(shape[d]))
    return Instance(("A",), result, f"C[{letters}] = " + nested(0, 0), f"A as {params[0]}")


def _unravel(k: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    out = []
    for d in reversed(shape):
        out.append(k % d)
        k //= d
    return tuple(reversed(out))


def _entry(shape: tuple[int, ...], k: int) -> str:
    """`A[...]`: entry k (row-major) of a value of `shape`."""
    return f"A[{','.join(str(i) for i in _unravel(k, shape))}]"


# Families whose one parameter, a count or a position, comes first in an op's name.
PARAMETER_FIRST = ("item", "put", "stack", "repeat")
# Families a program calls without their parameter, which is their operands' count.
COUNTED_BY_OPERANDS = ("stack",)
# A taped loop's history (reverse mode writes them; random programs reach them that way).
HISTORY = ("repeat", "push", "pop")


def parse_mangled(name: str) -> tuple[Family, tuple[str, ...], tuple[KasType, ...]] | None:
    """(family, parameters, operand types) of a family op's name, or None if it is none."""
    parts = name.split("_")
    fam = FAMILIES.get(parts[0])
    if fam is None or len(parts) < 2:
        return None
    rest = parts[1:]
    if fam.name == "contract":
        if (len(rest) - 1) % 2:
            return None
        count = (len(rest) - 1) // 2
        params, codes = rest[:count + 1], rest[count + 1:]
    elif fam.name == "reshape":
        params, codes = rest[:1], rest[1:]
        if len(codes) != 1 or type_of_code(params[0]) is None:
            return None
    elif fam.name in PARAMETER_FIRST:
        params, codes = rest[:1], rest[1:]
    else:
        params, codes = [], rest
    types = [type_of_code(c) for c in codes]
    if any(t is None for t in types) or (fam.name in PARAMETER_FIRST and not params[0].isdigit()):
        return None
    return fam, tuple(params), tuple(types)  # type: ignore[arg-type]
