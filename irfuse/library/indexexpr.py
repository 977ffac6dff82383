"""Op definitions in index notation, and their expansion to per-entry scalar trees.

An elementary op is defined once, e.g. ``C[i,j] = sum(k) A[i,k]*B[k,j]``.
Index ranges come from the operand shapes.  ``expand`` unrolls the
definition into one scalar expression tree per output entry whose leaves
are ``Leaf(operand, flat_offset)``; the NumPy reference and the flop count
are read off those trees, and the CUDA implementations unroll the same parsed
definition with some indices bound to thread coordinates (`implementations`).

Grammar::

    definition := target "=" expr
    target     := NAME [ "[" idx { "," idx } "]" ]
    expr       := term { ("+" | "-") term }
    term       := unary { ("*" | "/") unary }
    unary      := "-" unary | atom
    atom       := NUMBER | NAME [ "[" ref_idx {"," ref_idx} "]" ] | "(" expr ")"
                | "sum" "(" idx { "," idx } ")" term
                | FUNCTION "(" expr { "," expr } ")" | "delta" "(" ref_idx "," ref_idx ")"
    ref_idx    := idx | INT          (a constant index picks one entry, e.g. A[0,2])

Functions (`FUNCTIONS`: name -> number of arguments): `sqrt abs rcp exp log rsqrt sin cos tanh
sign` of one value; `pow min max` of two; the comparisons `lt le gt ge eq ne` (1 where true,
else 0; false where either side is NaN, as IEEE compares) and `and or` of two masks, `not` of
one (a mask is 0 or 1; any nonzero value counts as true); `select(c, a, b)` (a where c is
nonzero, else b: the side not taken never reaches the result, NaN or not) and `clamp(x, lo, hi)`.
`min`, `max` and `clamp` propagate NaN as NumPy's `minimum` and `maximum` do.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass
from typing import Union

FUNCTIONS = {"sqrt": 1, "abs": 1, "rcp": 1, "exp": 1, "log": 1, "rsqrt": 1, "sin": 1, "cos": 1, "tanh": 1,
             "sign": 1, "not": 1, "pow": 2, "min": 2, "max": 2, "lt": 2, "le": 2, "gt": 2, "ge": 2, "eq": 2,
             "ne": 2, "and": 2, "or": 2, "select": 3, "clamp": 3}
UNARY = tuple(f for f, k in FUNCTIONS.items() if k == 1)
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


class DefinitionError(ValueError):
    """An op definition that does not parse or does not fit its signature."""


# --- Source-level AST -------------------------------------------------------


@dataclass(frozen=True)
class Num:
    value: float


@dataclass(frozen=True)
class Ref:
    name: str
    indices: tuple[str, ...]


@dataclass(frozen=True)
class Bin:
    op: str
    lhs: "Expr"
    rhs: "Expr"


@dataclass(frozen=True)
class Neg:
    arg: "Expr"


@dataclass(frozen=True)
class Func:
    fn: str
    arg: "Expr"


@dataclass(frozen=True)
class Call:
    """A function of two or three values (`FUNCTIONS`)."""

    fn: str
    args: tuple["Expr", ...]


@dataclass(frozen=True)
class Sum:
    indices: tuple[str, ...]
    body: "Expr"


@dataclass(frozen=True)
class Delta:
    i: str
    j: str


Expr = Union[Num, Ref, Bin, Neg, Func, Call, Sum, Delta]


@dataclass(frozen=True)
class Definition:
    target: str
    target_indices: tuple[str, ...]
    expr: Expr
    text: str


_TOKEN = re.compile(r"\s*(?:(\d+\.\d*|\d*\.\d+|\d+)|([A-Za-z_][A-Za-z_0-9]*)|(.))")


def _tokenize(text: str) -> list[str]:
    tokens = []
    pos = 0
    while pos < len(text):
        m = _TOKEN.match(text, pos)
        if m is None or m.end() == pos:
            break
        pos = m.end()
        tok = m.group(1) or m.group(2) or m.group(3)
        if tok and not tok.isspace():
            tokens.append(tok)
    return tokens


class _Parser:
    def __init__(self, text: str):
        self.text = text
        self.toks = _tokenize(text)
        self.pos = 0

    def peek(self) -> str | None:
        return self.toks[self.pos] if self.pos < len(self.toks) else None

    def take(self, expected: str | None = None) -> str:
        tok = self.peek()
        if tok is None or (expected is not None and tok != expected):
            want = f"'{expected}'" if expected else "more input"
            raise DefinitionError(f"in definition '{self.text}': expected {want}, found {tok!r}")
        self.pos += 1
        return tok

    def name(self) -> str:
        tok = self.take()
        if not re.fullmatch(r"[A-Za-z_][A-Za-z_0-9]*", tok):
            raise DefinitionError(f"in definition '{self.text}': expected a name, found {tok!r}")
        return tok

    def index_list(self, allow_constants: bool = False) -> tuple[str, ...]:
        def one() -> str:
            if allow_constants and self.peek() is not None and self.peek().isdigit():
                return self.take()
            return self.name()
        names = [one()]
        while self.peek() == ",":
            self.take(",")
            names.append(one())
        return tuple(names)

    def definition(self) -> Definition:
        target = self.name()
        indices: tuple[str, ...] = ()
        if self.peek() == "[":
            self.take("[")
            indices = self.index_list()
            self.take("]")
        self.take("=")
        expr = self.expr()
        if self.peek() is not None:
            raise DefinitionError(f"in definition '{self.text}': unexpected {self.peek()!r}")
        return Definition(target, indices, expr, self.text)

    def expr(self) -> Expr:
        node = self.term()
        while self.peek() in ("+", "-"):
            op = self.take()
            node = Bin(op, node, self.term())
        return node

    def term(self) -> Expr:
        node = self.unary()
        while self.peek() in ("*", "/"):
            op = self.take()
            node = Bin(op, node, self.unary())
        return node

    def unary(self) -> Expr:
        if self.peek() == "-":
            self.take("-")
            return Neg(self.unary())
        return self.atom()

    def atom(self) -> Expr:
        tok = self.peek()
        if tok is None:
            raise DefinitionError(f"in definition '{self.text}': unexpected end")
        if re.fullmatch(r"\d+\.\d*|\d*\.\d+|\d+", tok):
            self.take()
            return Num(float(tok))
        if tok == "(":
            self.take("(")
            node = self.expr()
            self.take(")")
            return node
        name = self.name()
        if name == "sum":
            self.take("(")
            idx = self.index_list()
            self.take(")")
            # The sum extends over the whole product that follows it.
            return Sum(idx, self.term())
        if name in FUNCTIONS:
            self.take("(")
            args = [self.expr()]
            while self.peek() == ",":
                self.take(",")
                args.append(self.expr())
            self.take(")")
            if len(args) != FUNCTIONS[name]:
                raise DefinitionError(f"in definition '{self.text}': {name} takes {FUNCTIONS[name]} argument(s), "
                                      f"got {len(args)}")
            return Func(name, args[0]) if len(args) == 1 else Call(name, tuple(args))
        if name == "delta":
            self.take("(")
            pair = self.index_list(allow_constants=True)
            if len(pair) != 2:
                raise DefinitionError(f"in definition '{self.text}': delta takes two indices")
            i, j = pair
            self.take(")")
            return Delta(i, j)
        indices: tuple[str, ...] = ()
        if self.peek() == "[":
            self.take("[")
            indices = self.index_list(allow_constants=True)
            self.take("]")
        return Ref(name, indices)


def parse_definition(text: str) -> Definition:
    return _Parser(text).definition()


# --- Expanded scalar trees --------------------------------------------------


@dataclass(frozen=True)
class Leaf:
    operand: int
    offset: int


@dataclass(frozen=True)
class Const:
    value: float


@dataclass(frozen=True)
class SBin:
    op: str
    lhs: "Scalar"
    rhs: "Scalar"


@dataclass(frozen=True)
class SUn:
    fn: str  # "neg", or a function of one value (`UNARY`)
    arg: "Scalar"


@dataclass(frozen=True)
class SCall:
    fn: str  # a function of two or three values
    args: tuple["Scalar", ...]


Scalar = Union[Leaf, Const, SBin, SUn, SCall]


def _flat(shape: tuple[int, ...], idx: tuple[int, ...]) -> int:
    off = 0
    for n, i in zip(shape, idx):
        off = off * n + i
    return off


def fold_bin(op: str, a: Scalar, b: Scalar) -> Scalar:
    """`a op b`, folding constants. A product with a constant 0 is 0 whatever the other
    factor: `delta(i, j)` selects, so off-diagonal entries are exact zeros even where the
    other factor is NaN or infinite (this is the op library's semantics of delta)."""
    if isinstance(a, Const) and isinstance(b, Const):
        return Const({"+": a.value + b.value, "-": a.value - b.value, "*": a.value * b.value,
                      "/": a.value / b.value if b.value else math.nan}[op])
    if op == "*":
        if (isinstance(a, Const) and a.value == 0) or (isinstance(b, Const) and b.value == 0):
            return Const(0.0)
        if isinstance(a, Const) and a.value == 1:
            return b
        if isinstance(b, Const) and b.value == 1:
            return a
    if op == "+":
        if isinstance(a, Const) and a.value == 0:
            return b
        if isinstance(b, Const) and b.value == 0:
            return a
    if op == "-" and isinstance(b, Const) and b.value == 0:
        return a
    if op == "/" and isinstance(b, Const) and b.value == 1:
        return a
    return SBin(op, a, b)


# The nodes an op's expanded definition may hold on its operands' shapes: its trees are built,
# walked by every pass and rendered into kernels, so their size bounds a compile's time and
# memory (a 64x64 matrix product, the largest value's product, holds about half of it).
MAX_EXPANDED_NODES = 1 << 21


class Expander:
    """Unrolls a definition against concrete operand shapes."""

    def __init__(self, definition: Definition, operand_names: list[str],
                 operand_shapes: list[tuple[int, ...]], result_shape: tuple[int, ...]):
        self.d = definition
        self.names = {n: k for k, n in enumerate(operand_names)}
        self.shapes = operand_shapes
        self.result_shape = result_shape
        self.ranges: dict[str, int] = {}
        self._infer_ranges(definition.expr)
        if len(definition.target_indices) != len(result_shape):
            raise DefinitionError(
                f"in definition '{definition.text}': target has {len(definition.target_indices)} "
                f"indices but the result has rank {len(result_shape)}")
        for name, n in zip(definition.target_indices, result_shape):
            self._bind_range(name, n)

    def _bind_range(self, index: str, n: int) -> None:
        if self.ranges.setdefault(index, n) != n:
            raise DefinitionError(
                f"in definition '{self.d.text}': index '{index}' ranges over both "
                f"{self.ranges[index]} and {n}")

    def _infer_ranges(self, e: Expr) -> None:
        if isinstance(e, Ref):
            if e.name not in self.names:
                raise DefinitionError(f"in definition '{self.d.text}': unknown operand '{e.name}'")
            shape = self.shapes[self.names[e.name]]
            if len(shape) != len(e.indices):
                raise DefinitionError(
                    f"in definition '{self.d.text}': '{e.name}' has rank {len(shape)} "
                    f"but is indexed with {len(e.indices)} indices")
            for name, n in zip(e.indices, shape):
                if name.isdigit():
                    if int(name) >= n:
                        raise DefinitionError(
                            f"in definition '{self.d.text}': constant index {name} of '{e.name}' "
                            f"is out of range 0..{n - 1}")
                else:
                    self._bind_range(name, n)
        elif isinstance(e, Bin):
            self._infer_ranges(e.lhs)
            self._infer_ranges(e.rhs)
        elif isinstance(e, (Neg, Func)):
            self._infer_ranges(e.arg)
        elif isinstance(e, Call):
            for a in e.args:
                self._infer_ranges(a)
        elif isinstance(e, Sum):
            self._infer_ranges(e.body)

    def expanded_size(self, e: Expr | None = None) -> int:
        """How many nodes the trees of every output entry hold at most, before folding:
        what `expand` would build (found on the definition alone)."""
        if e is None:
            return math.prod(self.result_shape) * self.expanded_size(self.d.expr)
        if isinstance(e, Bin):
            return 1 + self.expanded_size(e.lhs) + self.expanded_size(e.rhs)
        if isinstance(e, (Neg, Func)):
            return 1 + self.expanded_size(e.arg)
        if isinstance(e, Call):
            return 1 + sum(self.expanded_size(a) for a in e.args)
        if isinstance(e, Sum):
            terms = math.prod(self.ranges.get(i, 1) for i in e.indices)
            return terms * (self.expanded_size(e.body) + 1)
        return 1

    def expand(self) -> list[Scalar]:
        """One scalar tree per output entry, in row-major order; a DefinitionError where they
        would hold more than MAX_EXPANDED_NODES nodes (a compile bounded in time and memory)."""
        size = self.expanded_size()
        if size > MAX_EXPANDED_NODES:
            raise DefinitionError(
                f"in definition '{self.d.text}': on these shapes its entries expand to about {size:,} operations and "
                f"operands; at most {MAX_EXPANDED_NODES:,} (a product of 64x64 matrices is about 1,050,000)")
        out = []
        for idx in itertools.product(*(range(n) for n in self.result_shape)):
            env = dict(zip(self.d.target_indices, idx))
            out.append(self._expand(self.d.expr, env))
        return out

    def _expand(self, e: Expr, env: dict) -> Scalar:
        if isinstance(e, Num):
            return Const(e.value)
        if isinstance(e, Ref):
            k = self.names[e.name]
            try:
                idx = tuple(int(i) if i.isdigit() else env[i] for i in e.indices)
            except KeyError as missing:
                raise DefinitionError(
                    f"in definition '{self.d.text}': index {missing} is neither an output "
                    "index nor summed over") from None
            return self.leaf(k, idx)
        if isinstance(e, Bin):
            return fold_bin(e.op, self._expand(e.lhs, env), self._expand(e.rhs, env))
        if isinstance(e, Neg):
            a = self._expand(e.arg, env)
            return Const(-a.value) if isinstance(a, Const) else SUn("neg", a)
        if isinstance(e, Func):
            return SUn(e.fn, self._expand(e.arg, env))
        if isinstance(e, Call):
            return make_call(e.fn, tuple(self._expand(a, env) for a in e.args))
        if isinstance(e, Delta):
            return self.delta(*(int(i) if i.isdigit() else env[i] for i in (e.i, e.j)))
        if isinstance(e, Sum):
            for i in e.indices:
                if i not in self.ranges:
                    raise DefinitionError(
                        f"in definition '{self.d.text}': summed index '{i}' is not used")
            acc: Scalar | None = None
            for vals in itertools.product(*(range(self.ranges[i]) for i in e.indices)):
                term = self._expand(e.body, {**env, **dict(zip(e.indices, vals))})
                acc = term if acc is None else fold_bin("+", acc, term)
            assert acc is not None
            return acc
        raise DefinitionError(f"unexpected node {e!r}")

    # Index values are integers here; a subclass may bind indices to symbolic values (thread
    # variables) by overriding how an indexed operand and a delta become tree nodes.
    def leaf(self, operand: int, idx: tuple) -> Scalar:
        return Leaf(operand, _flat(self.shapes[operand], idx))

    def delta(self, a, b) -> Scalar:
        return Const(1.0 if a == b else 0.0)


def tree_text(t: Scalar, names: list[str], shapes: list[tuple[int, ...]]) -> str:
    """Tree `t` as definition text over operands `names` (each entry by its constant indices,
    `A[1,2]`): expanding the text gives `t` back (the trees are folded already). Constants are
    written in full positional form (the grammar has no exponents); NaN or an infinity has no
    text (DefinitionError)."""
    def number(v: float) -> str:
        if v != v or v in (math.inf, -math.inf):
            raise DefinitionError(f"the constant {v} cannot be written in a definition")
        text = _positional(abs(v))
        return f"(-{text})" if math.copysign(1.0, v) < 0 else text

    def walk(u: Scalar) -> str:
        if isinstance(u, Leaf):
            shape = shapes[u.operand]
            if not shape:
                return names[u.operand]
            idx, off = [], u.offset
            for n in reversed(shape):
                idx.append(off % n)
                off //= n
            return f"{names[u.operand]}[{','.join(str(i) for i in reversed(idx))}]"
        if isinstance(u, Const):
            return number(u.value)
        if isinstance(u, SBin):
            return f"({walk(u.lhs)} {u.op} {walk(u.rhs)})"
        if isinstance(u, SUn):
            return f"(-{walk(u.arg)})" if u.fn == "neg" else f"{u.fn}({walk(u.arg)})"
        return f"{u.fn}({', '.join(walk(a) for a in u.args)})"
    return walk(t)


def _positional(v: float) -> str:
    """`v` (finite, not negative) in the shortest positional digits that read back exactly."""
    text = repr(v)
    if "e" not in text:
        return text
    import numpy  # (only for the rare constant repr writes with an exponent)

    return numpy.format_float_positional(v, unique=True, trim="0")


def entries_definition(trees: list[Scalar], shape: tuple[int, ...], names: list[str],
                       shapes: list[tuple[int, ...]]) -> str:
    """A definition whose result of `shape` has the trees as its entries (row-major): each
    entry selected by deltas of constant indices (`delta` selects exactly), zero entries left
    out; what an op derived from another's trees is defined by."""
    if not shape:
        return "r = " + tree_text(trees[0], names, shapes)
    letters = "ijklmnpq"[:len(shape)]
    terms = []
    for idx, t in zip(itertools.product(*(range(n) for n in shape)), trees):
        if isinstance(t, Const) and t.value == 0:
            continue
        select = "*".join(f"delta({x},{i})" for x, i in zip(letters, idx))
        terms.append(f"{select}*{tree_text(t, names, shapes)}")
    return f"R[{','.join(letters)}] = " + (" + ".join(terms) if terms else "0")


def make_call(fn: str, args: tuple) -> Scalar:
    """`fn(*args)` as a tree node; a selection whose condition is a constant is the side it
    picks (the other never reaches the result)."""
    if fn == "select" and isinstance(args[0], Const) and args[0].value == args[0].value:
        return args[1] if args[0].value != 0 else args[2]
    return SCall(fn, args)


def count_flops(trees: list[Scalar]) -> int:
    """Arithmetic operations per element (each +,-,*,/, negation, comparison, selection and
    function counts 1)."""
    def walk(t: Scalar) -> int:
        if isinstance(t, SBin):
            return 1 + walk(t.lhs) + walk(t.rhs)
        if isinstance(t, SUn):
            return 1 + walk(t.arg)
        if isinstance(t, SCall):
            return 1 + sum(walk(a) for a in t.args)
        return 0
    return sum(walk(t) for t in trees)


# Functions that are a sequence of instructions on a GPU, not one: the IEEE-rounded square
# root and reciprocal, and the library's transcendental functions (counted as one slow op
# each; a power is a logarithm and an exponential).
SLOW_FUNCTIONS = {"sqrt": 1, "rcp": 1, "rsqrt": 2, "exp": 1, "log": 1, "sin": 1, "cos": 1, "tanh": 1, "pow": 2}


def count_slow_ops(trees: list[Scalar]) -> int:
    """Divisions, reciprocals, square roots and transcendental functions per element (see
    `SLOW_FUNCTIONS`)."""
    def walk(t: Scalar) -> int:
        if isinstance(t, SBin):
            return int(t.op == "/") + walk(t.lhs) + walk(t.rhs)
        if isinstance(t, SUn):
            return SLOW_FUNCTIONS.get(t.fn, 0) + walk(t.arg)
        if isinstance(t, SCall):
            return SLOW_FUNCTIONS.get(t.fn, 0) + sum(walk(a) for a in t.args)
        return 0
    return sum(walk(t) for t in trees)


def apply_function(fn: str, args: list, np) -> object:
    """`fn` of NumPy arrays (or NumPy scalars), in their own precision: what the reference
    and the run-precision evaluations compute (see the module's docstring for each)."""
    if fn == "neg":
        return -args[0]
    a = args[0]
    if fn in ("sqrt", "abs", "exp", "log", "sin", "cos", "tanh", "sign"):
        return {"sqrt": np.sqrt, "abs": np.abs, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos,
                "tanh": np.tanh, "sign": np.sign}[fn](a)
    one = np.ones_like(a)
    if fn == "rcp":
        return one / a
    if fn == "rsqrt":
        return one / np.sqrt(a)
    if fn == "not":
        return np.where(a == 0, one, 0 * one)
    if fn == "pow":
        return np.power(a, args[1])
    if fn == "min":
        return np.minimum(a, args[1])
    if fn == "max":
        return np.maximum(a, args[1])
    if fn == "clamp":
        return np.minimum(np.maximum(a, args[1]), args[2])
    if fn == "select":
        return np.where(a != 0, args[1], args[2])
    b = args[1]
    truth = {"lt": np.less, "le": np.less_equal, "gt": np.greater, "ge": np.greater_equal, "eq": np.equal,
             "ne": np.not_equal, "and": lambda x, y: (x != 0) & (y != 0),
             "or": lambda x, y: (x != 0) | (y != 0)}[fn](a, b)
    return np.where(truth, np.ones_like(a + b), np.zeros_like(a + b))


def eval_numpy(t: Scalar, operands: list) -> object:
    """Evaluates a tree over batched operands ((N, size) arrays); returns an (N,) array."""
    import numpy as np

    if isinstance(t, Leaf):
        return operands[t.operand][:, t.offset]
    if isinstance(t, Const):
        n = operands[0].shape[0] if operands else 0
        dtype = operands[0].dtype if operands else np.float64
        return np.full(n, t.value, dtype=dtype)
    if isinstance(t, SBin):
        a, b = eval_numpy(t.lhs, operands), eval_numpy(t.rhs, operands)
        with np.errstate(all="ignore"):
            return {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[t.op](a, b)
    if isinstance(t, (SUn, SCall)):
        args = [eval_numpy(a, operands) for a in ((t.arg,) if isinstance(t, SUn) else t.args)]
        with np.errstate(all="ignore"):
            return apply_function(t.fn, args, np)
    raise ValueError(f"unexpected node {t!r}")


def eval_numpy_bounded(t: Scalar, operands: list, errors: list, u: float) -> tuple:
    """A tree's value in float64 over batched operands ((N, size) arrays) whose values carry
    errors of at most `errors` (same shapes), and a bound on the error of the tree evaluated
    with unit roundoff `u`, each node's result rounded once: running error analysis to first
    order (plus the product of two errors), which a fused multiply-add (one rounding for two
    nodes) stays within. A literal is rounded once. Returns (values, bounds), (N,) arrays; a
    bound is infinite where none holds (a divisor or a square root's argument within its
    own error of zero)."""
    import numpy as np

    if isinstance(t, Leaf):
        return operands[t.operand][:, t.offset], errors[t.operand][:, t.offset]
    if isinstance(t, Const):
        n = operands[0].shape[0] if operands else 0
        return np.full(n, t.value, dtype=np.float64), np.full(n, u * abs(t.value))
    with np.errstate(all="ignore"):
        if isinstance(t, SBin):
            (a, ea), (b, eb) = (eval_numpy_bounded(t.lhs, operands, errors, u),
                                eval_numpy_bounded(t.rhs, operands, errors, u))
            if t.op in "+-":
                v = a + b if t.op == "+" else a - b
                return v, ea + eb + u * np.abs(v)
            if t.op == "*":
                v = a * b
                return v, np.abs(a) * eb + np.abs(b) * ea + ea * eb + u * np.abs(v)
            v = a / b
            e = np.where(eb < np.abs(b), (ea + np.abs(v) * eb) / (np.abs(b) - eb), np.inf)
            return v, e + u * np.abs(v)
        if isinstance(t, SUn):
            a, ea = eval_numpy_bounded(t.arg, operands, errors, u)
            if t.fn == "neg":
                return -a, ea
            if t.fn == "abs":
                return np.abs(a), ea
            if t.fn == "sqrt":
                v = np.sqrt(a)
                return v, np.where(ea < a, ea / (np.sqrt(a - ea) + v), np.sqrt(ea) + v) + u * v
            if t.fn == "rcp":
                v = 1.0 / a
                e = np.where(ea < np.abs(a), ea * np.abs(v) / (np.abs(a) - ea), np.inf)
                return v, e + u * np.abs(v)
            return _bounded_function(t.fn, [(a, ea)], u, np)
        if isinstance(t, SCall):
            return _bounded_function(t.fn, [eval_numpy_bounded(a, operands, errors, u) for a in t.args], u, np)
    raise ValueError(f"unexpected node {t!r}")


# Ulps the GPU's and the host's math libraries may be off by in a transcendental function
# (CUDA's float functions: 1 to 2 ulps for exp, log, sin, cos, tanh; up to 4 for pow), beyond
# the one rounding every node is allowed: the bound counts this many roundings more.
LIBRARY_ULPS = {"exp": 2, "log": 2, "sin": 2, "cos": 2, "tanh": 2, "pow": 8, "rsqrt": 1}


def _bounded_function(fn: str, args: list, u: float, np) -> tuple:
    """(value, error bound) of a function of bounded values (see `eval_numpy_bounded`): its
    slope times the arguments' errors (over the interval they span where the slope varies
    much), its rounding, and its library's ulps. A comparison, `sign` or a selection whose
    outcome the arguments' errors could flip is allowed the whole jump."""
    (a, ea), rest = args[0], args[1:]
    extra = u * LIBRARY_ULPS.get(fn, 0)
    if fn == "exp":
        v = np.exp(a)
        return v, np.abs(v) * np.expm1(ea) + (u + extra) * np.abs(v)
    if fn == "log":
        v = np.log(a)
        e = np.where(ea < a, -np.log1p(-ea / np.where(a > 0, a, 1)), np.inf)
        return v, e + (u + extra) * np.abs(v)
    if fn == "rsqrt":
        v = 1.0 / np.sqrt(a)
        e = np.where(ea < a, v * (np.sqrt(a / np.where(a > ea, a - ea, 1)) - 1), np.inf)
        return v, e + (2 * u + extra) * np.abs(v)
    if fn in ("sin", "cos"):
        v = np.sin(a) if fn == "sin" else np.cos(a)
        return v, np.minimum(ea, 2.0) + u * np.abs(v) + extra
    if fn == "tanh":
        v = np.tanh(a)
        return v, np.minimum(ea, 2.0) + (u + extra) * np.abs(v)
    if fn == "sign":
        v = np.sign(a)
        return v, np.where(ea < np.abs(a), 0.0, np.where(ea > 0, 2.0, 0.0))
    if fn == "not":
        return apply_function(fn, [a], np), np.where(ea > 0, 1.0, 0.0)
    if fn in ("min", "max", "clamp"):
        v = apply_function(fn, [a, *(x for x, _ in rest)], np)
        return v, np.maximum.reduce([ea, *(e for _, e in rest)])
    if fn == "pow":
        (b, eb), = rest
        v = np.power(a, b)
        spread = np.where(ea < np.abs(a), np.abs(b) * ea / np.where(np.abs(a) > ea, np.abs(a) - ea, 1)
                          + np.abs(np.log(np.abs(a) + ea)) * eb, np.inf)
        return v, np.abs(v) * np.expm1(spread) + (u + extra) * np.abs(v)
    if fn in COMPARISONS or fn in ("and", "or"):
        (b, eb), = rest
        v = apply_function(fn, [a, b], np)
        if fn in ("and", "or"):
            could_flip = (ea > 0) | (eb > 0)
        else:
            could_flip = ~(np.abs(a - b) > ea + eb)
        return v, np.where(could_flip & ((ea > 0) | (eb > 0)), 1.0, 0.0)
    if fn == "select":
        (x, ex), (y, ey) = rest
        v = np.where(a != 0, x, y)
        taken = np.where(a != 0, ex, ey)
        return v, np.where(ea > 0, np.abs(x - y) + ex + ey, taken)
    raise ValueError(f"no error bound for {fn}")


# --- Vectorized evaluation --------------------------------------------------
#
# The reference of a whole batch evaluates the definition itself, not its per-entry trees:
# every subexpression is an array over the batch and its free indices (named axes), a sum of
# products is one `einsum`, and the batch goes through in chunks that bound the temporaries.
# It gives the trees' values up to the order of additions (tests compare the two); the trees
# stay what the flop counts and the generated code are made from.

CHUNK = 1 << 15  # elements per chunk: a (chunk, 5, 5, 5) float64 temporary is 33 MB


@dataclass
class _Axes:
    """An array shaped (batch or 1, *one axis per index in `axes`), and whether it only
    selects (entries exactly 0 or 1, from `delta`): a product with a selector's 0 is 0 even
    where the other factor is NaN, as the trees fold it."""

    array: object
    axes: tuple[str, ...]
    selector: bool = False


class BatchEvaluator:
    """Evaluates a definition on batched operands ((N, *shape) arrays) with NumPy."""

    def __init__(self, definition: Definition, operand_names: list[str], ranges: dict[str, int],
                 result_shape: tuple[int, ...]):
        self.d = definition
        self.names = {n: k for k, n in enumerate(operand_names)}
        self.ranges = ranges
        self.result_shape = result_shape

    def __call__(self, operands: list) -> object:
        import numpy as np

        n = operands[0].shape[0] if operands else 0
        dtype = np.result_type(*operands) if operands else np.float64
        out = np.empty((n, *self.result_shape), dtype=dtype)
        for lo in range(0, n, CHUNK):
            hi = min(n, lo + CHUNK)
            out[lo:hi] = self._result([a[lo:hi] for a in operands], hi - lo, dtype)
        return out

    def _result(self, operands: list, n: int, dtype) -> object:
        import numpy as np

        v = self._eval(self.d.expr, operands, dtype)
        target = self.d.target_indices
        a = self._aligned(v, target)
        return np.broadcast_to(a, (n, *self.result_shape)).astype(dtype, copy=False)

    def _aligned(self, v: _Axes, axes: tuple[str, ...]) -> object:
        """v's array with its axes in the order `axes` (missing ones of length 1)."""
        import numpy as np

        order = [v.axes.index(a) + 1 for a in axes if a in v.axes]
        a = np.transpose(v.array, [0, *order]) if v.axes else v.array
        shape = [a.shape[0], *(self.ranges[x] if x in v.axes else 1 for x in axes)]
        return a.reshape(shape)

    def _eval(self, e: Expr, operands: list, dtype) -> _Axes:
        import numpy as np

        if isinstance(e, Num):
            return _Axes(np.full((1,), e.value, dtype=dtype), (), e.value in (0.0, 1.0))
        if isinstance(e, Ref):
            a = operands[self.names[e.name]]
            picks = tuple(int(i) if i.isdigit() else slice(None) for i in e.indices)
            a = a[(slice(None), *picks)]
            names = [i for i in e.indices if not i.isdigit()]
            unique = tuple(dict.fromkeys(names))
            if len(unique) != len(names):  # a repeated index (A[i,i]): the diagonal
                letters = {x: chr(ord("a") + k) for k, x in enumerate(unique)}
                a = np.einsum("..." + "".join(letters[x] for x in names) + "->..."
                              + "".join(letters[x] for x in unique), a)
            return _Axes(a, unique)
        if isinstance(e, Delta):
            i, j = e.i, e.j
            if i.isdigit() and j.isdigit():
                return _Axes(np.full((1,), float(i == j), dtype=dtype), (), True)
            if i.isdigit() or j.isdigit():
                name, value = (j, int(i)) if i.isdigit() else (i, int(j))
                vec = np.zeros((1, self.ranges[name]), dtype=dtype)
                vec[0, value] = 1.0
                return _Axes(vec, (name,), True)
            if i == j:
                return _Axes(np.ones((1, self.ranges[i]), dtype=dtype), (i,), True)
            return _Axes(np.eye(self.ranges[i], self.ranges[j], dtype=dtype)[None], (i, j), True)
        if isinstance(e, Neg):
            v = self._eval(e.arg, operands, dtype)
            return _Axes(-v.array, v.axes)
        if isinstance(e, Func):
            v = self._eval(e.arg, operands, dtype)
            with np.errstate(all="ignore"):
                return _Axes(apply_function(e.fn, [v.array], np), v.axes)
        if isinstance(e, Call):
            values = [self._eval(a, operands, dtype) for a in e.args]
            axes = tuple(dict.fromkeys(x for v in values for x in v.axes))
            arrays = [self._aligned(v, axes) for v in values]
            with np.errstate(all="ignore"):
                return _Axes(np.asarray(apply_function(e.fn, arrays, np), dtype=dtype), axes)
        if isinstance(e, Bin):
            return self._binary(e.op, self._eval(e.lhs, operands, dtype), self._eval(e.rhs, operands, dtype))
        if isinstance(e, Sum):
            factors = self._factors(e.body)
            values = [self._eval(f, operands, dtype) for f in factors]
            keep = tuple(dict.fromkeys(x for v in values for x in v.axes if x not in e.indices))
            if len(values) == 2 and not any(v.selector for v in values):
                product = self._matmul(values[0], values[1], e.indices)
                if product is not None:
                    return product
            if len(values) > 1 and not any(v.selector for v in values):
                # A sum of products: one contraction, as NumPy's einsum does it.
                everything = tuple(dict.fromkeys(x for v in values for x in v.axes))
                letters = {x: chr(ord("a") + k) for k, x in enumerate(everything)}
                spec = ",".join("..." + "".join(letters[x] for x in v.axes) for v in values)
                spec += "->..." + "".join(letters[x] for x in keep)
                return _Axes(np.einsum(spec, *(v.array for v in values)), keep)
            body = values[0]
            for v in values[1:]:
                body = self._binary("*", body, v)
            summed = tuple(k + 1 for k, x in enumerate(body.axes) if x in e.indices)
            return _Axes(body.array.sum(axis=summed) if summed else body.array,
                         tuple(x for x in body.axes if x not in e.indices))
        raise DefinitionError(f"unexpected node {e!r}")

    def _matmul(self, a: _Axes, b: _Axes, summed: tuple[str, ...]) -> _Axes | None:
        """`sum(k) a[i,k] * b[k,j]` (or with a vector on either side) as a batched matrix
        product: `np.matmul` on finite values, else one broadcast multiply-add per k (matmul
        hands small stacks to BLAS, whose sums with infinities and NaN need not be IEEE's;
        the loop is the trees' arithmetic, in their order); the same loop again for the
        elements whose product is not finite (BLAS's fused multiply-adds can turn what IEEE
        sums make NaN, +inf plus -inf, into an infinity); None for other shapes."""
        import numpy as np

        if len(summed) != 1 or summed[0] not in a.axes or summed[0] not in b.axes:
            return None
        k = summed[0]
        left, right = [x for x in a.axes if x != k], [x for x in b.axes if x != k]
        if len(left) > 1 or len(right) > 1 or set(left) & set(right):
            return None
        x = self._aligned(a, (*left, k))  # (batch, [i,] k)
        y = self._aligned(b, (k, *right))  # (batch, k[, j])
        if not left:
            x = x[:, None, :]
        if not right:
            y = y[:, :, None]
        def in_order(x, y):
            with np.errstate(all="ignore"):
                out = x[:, :, 0, None] * y[:, None, 0, :]
                for kk in range(1, x.shape[2]):
                    out = out + x[:, :, kk, None] * y[:, None, kk, :]
            return out

        if np.isfinite(x).all() and np.isfinite(y).all():
            with np.errstate(over="ignore", invalid="ignore"):
                out = np.matmul(x, y)  # (batch, i or 1, j or 1)
            overflowed = ~np.isfinite(out).reshape(out.shape[0], -1).all(axis=1)
            if overflowed.any():
                out[overflowed] = in_order(x[overflowed], y[overflowed])
        else:
            out = in_order(x, y)
        out = out.reshape(out.shape[0], *(out.shape[1:2] if left else ()), *(out.shape[2:3] if right else ()))
        return _Axes(out, (*left, *right))

    @staticmethod
    def _factors(e: Expr) -> list:
        """The factors of a product (a term of `*`s), else [e]."""
        if isinstance(e, Bin) and e.op == "*":
            return BatchEvaluator._factors(e.lhs) + BatchEvaluator._factors(e.rhs)
        return [e]

    def _binary(self, op: str, a: _Axes, b: _Axes) -> _Axes:
        import numpy as np

        axes = tuple(dict.fromkeys((*a.axes, *b.axes)))
        x, y = self._aligned(a, axes), self._aligned(b, axes)
        with np.errstate(all="ignore"):
            if op == "*" and (a.selector or b.selector):
                sel, other = (x, y) if a.selector else (y, x)
                # Exact zeros where the selector is 0, whatever the other factor holds.
                return _Axes(np.where(sel != 0, other * sel, 0.0).astype(other.dtype, copy=False), axes,
                             a.selector and b.selector)
            fn = {"+": np.add, "-": np.subtract, "*": np.multiply, "/": np.divide}[op]
            out = fn(x, y)
            # A sum or difference of selections that is still 0 or 1 everywhere (1 - delta)
            # selects too, as the trees fold it.
            selects = op in "+-" and a.selector and b.selector and bool(np.isin(out, (0.0, 1.0)).all())
            return _Axes(out, axes, selects)
