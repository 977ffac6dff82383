"""Derivatives of the ops, derived from their index definitions (never written by hand).

An op's result entries are scalar trees over its operands' entries (`indexexpr`: `Leaf`,
`Const`, `SBin`, `SUn`, `SCall`). `tangent` differentiates a tree in forward mode: its value's
change for a change of the operands, a tree over the operands and their tangents (the
tangent of operand k's entry j is `Leaf(n + k, j)` with n operands). `tangent_trees(op)` does
it for every result entry: the op's Jacobian-vector product, from which the program
transformations build forward mode and, transposed (`partials`), reverse mode.

Where a function is not differentiable the derivative is a documented choice, never NaN where
the function is differentiable:
- `sqrt(a)` at a = 0 (and below): 0, so a norm `sqrt(x.x)` has derivative 0 at x = 0 (a
  subgradient) where the chain rule would give 0/0; `rsqrt` keeps its formula (the function
  itself is infinite there);
- `abs(a)` at 0: 0 (`sign(a)`); `sign`, comparisons, `and`, `or`, `not`: 0 everywhere (steps);
- `min(a, b)` and `max(a, b)`: the derivative of the side they take, `a` on a tie (min takes a
  where a <= b, max where a >= b), so results stay deterministic; `clamp(a, lo, hi)` is
  `min(max(a, lo), hi)` and differentiates as such;
- `select(c, x, y)`: the taken side's derivative (the condition's change does not count);
- `pow(a, b)`: `b a^(b-1) da + a^b log(a) db`, the second term 0 where a <= 0 (where log is
  not defined) or where b does not change.
Trees are folded as they are built (`fold_bin`: a product with a zero tangent vanishes), so a
constant operand costs nothing."""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from irfuse.library.indexexpr import Const, Leaf, SBin, SCall, SUn, Scalar, entries_definition, fold_bin, make_call

ZERO, ONE = Const(0.0), Const(1.0)

# Functions whose value steps: their derivative is 0 everywhere it exists (and taken as 0).
STEPS = ("sign", "floor", "floordiv", "not", "lt", "le", "gt", "ge", "eq", "ne", "and", "or", "xor")


def _mul(a: Scalar, b: Scalar) -> Scalar:
    return fold_bin("*", a, b)


def _add(a: Scalar, b: Scalar) -> Scalar:
    return fold_bin("+", a, b)


def _sub(a: Scalar, b: Scalar) -> Scalar:
    if isinstance(a, Const) and a.value == 0 and not isinstance(b, Const):
        return _neg(b)  # (a negation, not a subtraction from 0: one operation fewer)
    return fold_bin("-", a, b)


def _div(a: Scalar, b: Scalar) -> Scalar:
    if isinstance(a, Const) and a.value == 0:
        return ZERO
    return fold_bin("/", a, b)


def _neg(a: Scalar) -> Scalar:
    if isinstance(a, Const):
        return Const(-a.value)
    return SUn("neg", a)


def _select(c: Scalar, x: Scalar, y: Scalar) -> Scalar:
    if isinstance(x, Const) and isinstance(y, Const) and x.value == y.value:
        return x
    return make_call("select", (c, x, y))


def tangent(t: Scalar, operands: int, wrt: frozenset[int] | None = None) -> Scalar:
    """The forward derivative of tree `t` over `operands` operands: a tree over them and their
    tangents (operand k's at index operands + k, the same offsets); `wrt`: the operands whose
    tangents are taken (None: all; the others are constants)."""
    def d(u: Scalar) -> Scalar:
        if isinstance(u, Leaf):
            if u.operand < operands and (wrt is None or u.operand in wrt):
                return Leaf(operands + u.operand, u.offset)
            return ZERO
        if isinstance(u, Const):
            return ZERO
        if isinstance(u, SBin):
            da, db = d(u.lhs), d(u.rhs)
            a, b = u.lhs, u.rhs
            if u.op == "+":
                return _add(da, db)
            if u.op == "-":
                return _sub(da, db)
            if u.op == "*":
                return _add(_mul(da, b), _mul(a, db))
            # (a / b)' = da / b - (a / b) db / b
            return _sub(_div(da, b), _div(_mul(u, db), b))
        if isinstance(u, SUn):
            return _unary(u, d(u.arg))
        assert isinstance(u, SCall)
        return _call(u, [d(a) for a in u.args])
    return d(t)


def _unary(u: SUn, da: Scalar) -> Scalar:
    a, fn = u.arg, u.fn
    if isinstance(da, Const) and da.value == 0 or fn in STEPS:
        return ZERO
    if fn == "neg":
        return _neg(da)
    if fn == "sqrt":  # 0 where a <= 0 (see the module's docstring)
        return _select(make_call("gt", (a, ZERO)), _div(da, _mul(Const(2.0), u)), ZERO)
    if fn == "rsqrt":  # -a^(-3/2) / 2 = -rsqrt(a) / (2 a)
        return _neg(_div(_mul(u, da), _mul(Const(2.0), a)))
    if fn == "rcp":
        return _neg(_mul(_mul(u, u), da))
    if fn == "abs":
        return _mul(SUn("sign", a), da)
    if fn == "exp":
        return _mul(u, da)
    if fn == "log":
        return _div(da, a)
    if fn == "sin":
        return _mul(SUn("cos", a), da)
    if fn == "cos":
        return _neg(_mul(SUn("sin", a), da))
    if fn == "tanh":
        return _mul(_sub(ONE, _mul(u, u)), da)
    raise ValueError(f"no derivative of the function '{fn}'")


def _call(u: SCall, ds: list[Scalar]) -> Scalar:
    fn, args = u.fn, u.args
    if fn in STEPS or all(isinstance(x, Const) and x.value == 0 for x in ds):
        return ZERO
    if fn == "min":
        return _select(make_call("le", (args[0], args[1])), ds[0], ds[1])
    if fn == "max":
        return _select(make_call("ge", (args[0], args[1])), ds[0], ds[1])
    if fn == "clamp":  # min(max(a, lo), hi)
        a, lo, hi = args
        inner = make_call("max", (a, lo))
        d_inner = _select(make_call("ge", (a, lo)), ds[0], ds[1])
        return _select(make_call("le", (inner, hi)), d_inner, ds[2])
    if fn == "select":
        return _select(args[0], ds[1], ds[2])
    if fn == "mod":  # a - b floordiv(a, b), floordiv a step
        a, b = args
        da, db = ds
        return _sub(da, _mul(make_call("floordiv", (a, b)), db))
    if fn == "pow":
        a, b = args
        da, db = ds
        first = _mul(_mul(b, make_call("pow", (a, _sub(b, ONE)))), da)
        if isinstance(db, Const) and db.value == 0:
            return first
        second = _select(make_call("gt", (a, ZERO)), _mul(_mul(u, SUn("log", a)), db), ZERO)
        return _add(first, second)
    raise ValueError(f"no derivative of the function '{fn}'")


def tangent_trees(trees: list[Scalar], operands: int, wrt: frozenset[int] | None = None) -> list[Scalar]:
    """The tangent of each result entry (`tangent`): an op's Jacobian-vector product."""
    return [tangent(t, operands, wrt) for t in trees]


def partials(t: Scalar, operands: int, sizes: list[int]) -> dict[tuple[int, int], Scalar]:
    """The nonzero partial derivatives of tree `t` by each operand entry ((operand, offset) ->
    tree over the operands alone): the tangent with one entry's tangent 1 and the others 0,
    what reverse mode multiplies cotangents by."""
    out: dict[tuple[int, int], Scalar] = {}
    tan = tangent(t, operands)
    zeros = [dict.fromkeys(range(size), 0.0) for size in sizes]
    for k, size in enumerate(sizes):
        for j in range(size):
            known = [{}] * operands + [{**z, j: 1.0} if m == k else z for m, z in enumerate(zeros)]
            (p,) = put_in([tan], known)
            if not (isinstance(p, Const) and p.value == 0):
                out[(k, j)] = p
    return out


def put_in(trees: Sequence[Scalar], known: Sequence[Mapping[int, float]]) -> list[Scalar]:
    """`trees` (an op's entries over its operands) with operand k's words `known[k]` (word ->
    value) put in as literals and every node over them folded (a product with a 0 is 0, a sum
    with a 0 the other term: the op library's semantics of a structural zero): the ops with
    known words (`known_words`) and the partial derivatives (`partials`: a tangent with one
    entry's tangent 1 and the others 0)."""
    done: dict[int, Scalar] = {}  # (trees share subtrees: each folded once, by identity)

    def fold(t: Scalar) -> Scalar:
        key = id(t)
        if key in done:
            return done[key]
        if isinstance(t, Leaf):
            value = known[t.operand].get(t.offset) if t.operand < len(known) else None
            out: Scalar = t if value is None else Const(value)
        elif isinstance(t, Const):
            out = t
        elif isinstance(t, SBin):
            a, b = fold(t.lhs), fold(t.rhs)
            out = t if a is t.lhs and b is t.rhs else _folded_bin(t.op, a, b)
        elif isinstance(t, SUn):
            a = fold(t.arg)
            out = t if a is t.arg else _folded_unary(t.fn, a)
        else:
            args = tuple(fold(a) for a in t.args)
            out = t if all(a is b for a, b in zip(args, t.args)) else _folded_call(t.fn, args)
        done[key] = out
        return out
    return [fold(t) for t in trees]


def _folded_bin(op: str, a: Scalar, b: Scalar) -> Scalar:
    """`a op b` with what its operands being literals folds (`fold_bin`; 0 - b is -b, 0 / b
    is 0): a node of a tree whose leaves were replaced."""
    return {"/": _div, "-": _sub}.get(op, lambda x, y: fold_bin(op, x, y))(a, b)


def _folded_unary(fn: str, a: Scalar) -> Scalar:
    """`fn(a)`, a negation of a literal folded (no other function is evaluated here: the
    kernels' own give the value)."""
    return _neg(a) if fn == "neg" else SUn(fn, a)


def _folded_call(fn: str, args: tuple) -> Scalar:
    """`fn(*args)`, a selection whose sides are one literal, or whose condition is a literal,
    folded."""
    if fn == "select":
        return _select(*args)
    return make_call(fn, args)


# --- the ops derived from an op's trees -----------------------------------------------------
#
# `jvp_<mask>__<op>` is the forward derivative of op `<op>` along the tangents of the operands
# whose digit in `<mask>` is 1 (one digit per operand): its operands are those of `<op>`'s that
# the derivative reads (a linear op's derivative reads none), then the picked operands'
# tangents in order; its result, `<op>`'s change (the same type as `<op>`'s result).
# Defined from `tangent_trees` as definition text (`entries_definition`), it is an op as any
# other: its reference, flop count and CUDA implementations come from that text, and the name
# alone defines it in every process (`Library.get`).

JVP_NAME = re.compile(r"jvp_([01]+)__(\w+)")


def jvp_name(op_name: str, mask: Sequence[bool]) -> str:
    return f"jvp_{''.join('1' if m else '0' for m in mask)}__{op_name}"


def parse_jvp_name(name: str) -> tuple[str, tuple[bool, ...]] | None:
    """(the op differentiated, which operands' tangents) of a derived op's name, or None."""
    m = JVP_NAME.fullmatch(name)
    if m is None:
        return None
    return m.group(2), tuple(c == "1" for c in m.group(1))


def tangent_names(names: Sequence[str], mask: Sequence[bool]) -> list[str]:
    """Names for the tangents of the operands `mask` picks: `d<name>`, made distinct from
    every operand's name."""
    taken = set(names)
    out = []
    for name, m in zip(names, mask):
        if m:
            t = "d" + name
            while t in taken:
                t = "d" + t
            taken.add(t)
            out.append(t)
    return out


def jvp_definition(names: Sequence[str], shapes: Sequence[tuple[int, ...]], result_shape: tuple[int, ...],
                   trees: list[Scalar], mask: Sequence[bool]) -> tuple[list[int], list[str], str]:
    """(the operands the derivative reads, its tangent operands' names, its definition) for an
    op of operands `names` of `shapes` whose result entries are `trees`, differentiated along
    the operands `mask` picks; ValueError if the mask does not fit the op or picks no operand."""
    n = len(names)
    if len(mask) != n or not any(mask):
        raise ValueError(f"a derivative's mask needs one digit per operand ({n}) and at least one 1")
    picked = [k for k in range(n) if mask[k]]
    tangents = tangent_trees(trees, n, frozenset(picked))
    # Operand k's tangent is Leaf(n + k) in the tangent trees; the derived op has only the
    # picked operands' tangents, in order.
    read = sorted({leaf.operand for t in tangents for leaf in _leaves(t) if leaf.operand < n})
    place = {k: j for j, k in enumerate(read)} | {n + k: len(read) + j for j, k in enumerate(picked)}
    moved = [renumber(t, place) for t in tangents]
    extra = tangent_names(names, mask)
    kept_names = [names[k] for k in read] + extra
    all_shapes = [tuple(shapes[k]) for k in read] + [tuple(shapes[k]) for k in picked]
    return read, extra, entries_definition(moved, result_shape, kept_names, all_shapes)


# `vjp_<k>__<op>` is the reverse derivative of op `<op>` for its operand k: given the operands
# the derivative reads and the result's cotangent `b<result>` (the result's type), operand k's
# share of the cotangent (operand k's type): entry j is the sum over the result's entries i of
# b[i] times the partial derivative of entry i by entry j of operand k (`partials`).

VJP_NAME = re.compile(r"vjp_(\d+)__(\w+)")


def vjp_name(op_name: str, operand: int) -> str:
    return f"vjp_{operand}__{op_name}"


def parse_vjp_name(name: str) -> tuple[str, int] | None:
    """(the op differentiated, the operand) of a reverse derivative's name, or None."""
    m = VJP_NAME.fullmatch(name)
    if m is None:
        return None
    return m.group(2), int(m.group(1))


def vjp_definition(names: Sequence[str], shapes: Sequence[tuple[int, ...]], result_shape: tuple[int, ...],
                   trees: list[Scalar], operand: int) -> tuple[list[int], str, str]:
    """(the operands the derivative reads, the cotangent operand's name, the definition) of
    the reverse derivative for `operand` of an op of operands `names` of `shapes` whose
    result entries are `trees`; ValueError for an operand the op does not have."""
    n = len(names)
    if not 0 <= operand < n:
        raise ValueError(f"the op has {n} operands, not an operand {operand}")
    sizes = [_size(s) for s in shapes]
    ct = n  # the cotangent's leaves, renumbered below
    entries: list[Scalar] = [ZERO] * sizes[operand]
    for i, t in enumerate(trees):
        for (k, j), p in partials(t, n, sizes).items():
            if k == operand:
                entries[j] = _add(entries[j], _mul(Leaf(ct, i), p))
    read = sorted({leaf.operand for t in entries for leaf in _leaves(t) if leaf.operand < n})
    place = {k: j for j, k in enumerate(read)} | {ct: len(read)}
    cotangent = "b" + "r"
    while cotangent in names:
        cotangent = "b" + cotangent
    definition = entries_definition([renumber(t, place) for t in entries], tuple(shapes[operand]),
                                    [names[k] for k in read] + [cotangent],
                                    [tuple(shapes[k]) for k in read] + [tuple(result_shape)])
    return read, cotangent, definition


def _size(shape: Sequence[int]) -> int:
    size = 1
    for d in shape:
        size *= d
    return size


def _leaves(t: Scalar):
    if isinstance(t, Leaf):
        yield t
    elif isinstance(t, SBin):
        yield from _leaves(t.lhs)
        yield from _leaves(t.rhs)
    elif isinstance(t, SUn):
        yield from _leaves(t.arg)
    elif isinstance(t, SCall):
        for a in t.args:
            yield from _leaves(a)


def renumber(t: Scalar, place: dict[int, int]) -> Scalar:
    """`t` with operand k's leaves made operand `place[k]`'s (the others' kept)."""
    if isinstance(t, Leaf):
        return Leaf(place.get(t.operand, t.operand), t.offset)
    if isinstance(t, Const):
        return t
    if isinstance(t, SBin):
        return SBin(t.op, renumber(t.lhs, place), renumber(t.rhs, place))
    if isinstance(t, SUn):
        return SUn(t.fn, renumber(t.arg, place))
    return SCall(t.fn, tuple(renumber(a, place) for a in t.args))
