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

import functools
import itertools
import math
import re
from typing import Union

from irfuse.artifact.records import record

FUNCTIONS = {"sqrt": 1, "abs": 1, "rcp": 1, "exp": 1, "log": 1, "rsqrt": 1, "sin": 1, "cos": 1, "tanh": 1,
             "sign": 1, "floor": 1, "not": 1, "pow": 2, "floordiv": 2, "mod": 2, "min": 2, "max": 2, "lt": 2,
             "le": 2, "gt": 2, "ge": 2, "eq": 2, "ne": 2, "and": 2, "or": 2, "xor": 2, "select": 3, "clamp": 3}
UNARY = tuple(f for f, k in FUNCTIONS.items() if k == 1)
COMPARISONS = ("lt", "le", "gt", "ge", "eq", "ne")


class DefinitionError(ValueError):
    """An op definition that does not parse or does not fit its signature."""


# --- Source-level AST -------------------------------------------------------


@record(frozen=True)
class Num:
    value: float


@record(frozen=True)
class Ref:
    name: str
    indices: tuple[str, ...]


@record(frozen=True)
class Bin:
    op: str
    lhs: "Expr"
    rhs: "Expr"


@record(frozen=True)
class Neg:
    arg: "Expr"


@record(frozen=True)
class Func:
    fn: str
    arg: "Expr"


@record(frozen=True)
class Call:
    """A function of two or three values (`FUNCTIONS`)."""

    fn: str
    args: tuple["Expr", ...]


@record(frozen=True)
class Sum:
    indices: tuple[str, ...]
    body: "Expr"


@record(frozen=True)
class Delta:
    i: str
    j: str


Expr = Union[Num, Ref, Bin, Neg, Func, Call, Sum, Delta]


@record(frozen=True)
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


@functools.lru_cache(maxsize=4096)
def parse_definition(text: str) -> Definition:
    """The definition's tree (immutable: one per text, parsed once a process: an op's
    definition is read where the op is defined and again by each implementation derived from
    it, 159 parses for the Neo-Hookean code's compile)."""
    return _Parser(text).definition()


# --- Expanded scalar trees --------------------------------------------------


@record(frozen=True)
class Leaf:
    operand: int
    offset: int


@record(frozen=True)
class Const:
    value: float


@record(frozen=True)
class SBin:
    op: str
    lhs: "Scalar"
    rhs: "Scalar"


@record(frozen=True)
class SUn:
    fn: str  # "neg", or a function of one value (`UNARY`)
    arg: "Scalar"


@record(frozen=True)
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

    def expanded_size(self, e: Expr | None = None) -> float:
        """How many nodes the trees of every output entry hold at most, before folding:
        what `expand` would build (found on the definition alone). A product whose first
        factor is a delta of an output index and a constant (`delta(i0,2)*X`) builds X only
        for the entries where the delta is 1 (`_expand` stops at a first factor of 0), one in
        the index's range: counted so, as an average over the entries (a reshape's selections,
        nested axis by axis, build one entry's term of the 729 of a 9x9x9 tensor)."""
        if e is None:
            return math.ceil(math.prod(self.result_shape) * self.expanded_size(self.d.expr))
        if isinstance(e, Bin):
            rhs = self.expanded_size(e.rhs)
            if e.op == "*" and isinstance(e.lhs, Delta):
                rhs /= self._selected_one_in(e.lhs)
            return 1 + self.expanded_size(e.lhs) + rhs
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

    def _selected_one_in(self, d: Delta) -> int:
        """For a delta of an output index and a constant, the index's range (the delta is 1 for
        one entry in that many); else 1."""
        pair = (d.i, d.j)
        target = [i for i in pair if i in self.d.target_indices]
        if len(target) == 1 and any(i.isdigit() for i in pair):
            return max(1, self.ranges.get(target[0], 1))
        return 1

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
            lhs = self._expand(e.lhs, env)
            if e.op == "*" and isinstance(lhs, Const) and lhs.value == 0:
                return Const(0.0)  # (what `fold_bin` makes of it, the other factor not built)
            return fold_bin(e.op, lhs, self._expand(e.rhs, env))
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


def operands_read(trees: list[Scalar]) -> frozenset[int]:
    """The operands whose entries the trees read (`zeros` reads none of its operand's)."""
    read, work = set(), list(trees)
    while work:
        t = work.pop()
        if isinstance(t, Leaf):
            read.add(t.operand)
        elif isinstance(t, SBin):
            work += (t.lhs, t.rhs)
        elif isinstance(t, SUn):
            work.append(t.arg)
        elif isinstance(t, SCall):
            work += t.args
    return frozenset(read)


def moved_words(trees: list[Scalar]) -> tuple[tuple[int, int], ...] | None:
    """(operand, word) for each entry where every entry is an operand's entry (the trees all
    `Leaf`s: `stack`, a permuting `contract`, `reshape`), else None."""
    if not trees or not all(isinstance(t, Leaf) for t in trees):
        return None
    return tuple((t.operand, t.offset) for t in trees)


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
# each; a power is a logarithm and an exponential; a floor division and a remainder an fmod,
# a loop over the exponents' difference, and a division).
SLOW_FUNCTIONS = {"sqrt": 1, "rcp": 1, "rsqrt": 2, "exp": 1, "log": 1, "sin": 1, "cos": 1, "tanh": 1, "pow": 2,
                  "floordiv": 2, "mod": 2}


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
