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

from irfuse.library.indexexpr import Const, Leaf, SBin, SCall, SUn, Scalar, fold_bin, make_call

ZERO, ONE = Const(0.0), Const(1.0)

# Functions whose value steps: their derivative is 0 everywhere it exists (and taken as 0).
STEPS = ("sign", "not", "lt", "le", "gt", "ge", "eq", "ne", "and", "or")


def _mul(a: Scalar, b: Scalar) -> Scalar:
    return fold_bin("*", a, b)


def _add(a: Scalar, b: Scalar) -> Scalar:
    return fold_bin("+", a, b)


def _sub(a: Scalar, b: Scalar) -> Scalar:
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
    for k, size in enumerate(sizes):
        for j in range(size):
            p = _substitute(tan, operands, (k, j))
            if not (isinstance(p, Const) and p.value == 0):
                out[(k, j)] = p
    return out


def _substitute(t: Scalar, operands: int, one: tuple[int, int]) -> Scalar:
    """`t` with the tangent leaf of entry `one` replaced by 1 and every other tangent by 0."""
    if isinstance(t, Leaf):
        if t.operand >= operands:
            return ONE if (t.operand - operands, t.offset) == one else ZERO
        return t
    if isinstance(t, Const):
        return t
    if isinstance(t, SBin):
        a, b = _substitute(t.lhs, operands, one), _substitute(t.rhs, operands, one)
        return _div(a, b) if t.op == "/" else fold_bin(t.op, a, b)
    if isinstance(t, SUn):
        a = _substitute(t.arg, operands, one)
        if t.fn == "neg":
            return _neg(a)
        return SUn(t.fn, a)
    return _select_or_call(t.fn, tuple(_substitute(a, operands, one) for a in t.args))


def _select_or_call(fn: str, args: tuple) -> Scalar:
    if fn == "select":
        return _select(*args)
    return make_call(fn, args)
