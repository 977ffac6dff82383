"""The float64 (and run-precision) evaluation of op definitions: what the NumPy reference of a
program computes (`reference`), and what the generated code's arithmetic gives in its order.

- `evaluate(op, *operands)`: an op's index definition evaluated on whole batches with NumPy
  (`BatchEvaluator`: the definition's sums as array contractions, not its per-entry trees);
- `evaluate_by_entries(op, *operands)`: its per-entry scalar trees (`library.indexexpr`), one
  NumPy operation per tree node, in the precision of the operands: the kernels' operations in
  their order;
- `bounded_by_entries(op, operands, errors, u)`: the same trees with a running bound on the
  rounding of an evaluation at unit roundoff `u` (`eval_numpy_bounded`).

The library defines ops (`library.ops.OpDef`: definition, trees, flops); evaluating them is the
verification's.
"""

from __future__ import annotations

import numpy as np

from irfuse.artifact.records import record
from irfuse.library.indexexpr import (COMPARISONS, Bin, Call, Const, Definition, DefinitionError, Delta, Expr, Func,
                                      Leaf, Neg, Num, Ref, SBin, SCall, Scalar, SUn, Sum)


def evaluate(op, *operands: np.ndarray) -> np.ndarray:
    """Batched evaluation of an op's definition (vectorized: `BatchEvaluator`): operands shaped
    (N, *shape); returns (N, *result shape)."""
    evaluator = _EVALUATORS.get(id(op))
    if evaluator is None or evaluator[0] is not op:
        evaluator = _EVALUATORS[id(op)] = (op, BatchEvaluator(op.parsed, op.operand_names, op.ranges,
                                                              op.result_type.shape))
    return evaluator[1]([np.asarray(a) for a in operands])


_EVALUATORS: dict[int, tuple] = {}  # id(op) -> (op, its evaluator): made once per op


def evaluate_by_entries(op, *operands: np.ndarray) -> np.ndarray:
    """The op's per-entry trees evaluated one NumPy operation per tree node: the generated
    code's arithmetic, in its order (tests compare the two evaluations)."""
    n = operands[0].shape[0] if operands else 0
    flat = [np.ascontiguousarray(a).reshape(n, -1) for a in operands]
    cols = [eval_numpy(t, flat) for t in op.trees]
    out = np.stack(cols, axis=1) if cols else np.zeros((n, 0))
    return out.reshape((n, *op.result_type.shape))


def bounded_by_entries(op, operands: list[np.ndarray], errors: list[np.ndarray],
                       u: float) -> tuple[np.ndarray, np.ndarray]:
    """The op's per-entry trees in float64 on operands known to within `errors`, and a bound on
    the error of the generated code's evaluation with unit roundoff `u` (`eval_numpy_bounded`);
    both shaped (N, *result shape)."""
    n = operands[0].shape[0] if operands else 0
    flat = [np.ascontiguousarray(a, dtype=np.float64).reshape(n, -1) for a in operands]
    flat_err = [np.ascontiguousarray(e, dtype=np.float64).reshape(n, -1) for e in errors]
    pairs = [eval_numpy_bounded(t, flat, flat_err, u) for t in op.trees]
    shape = (n, *op.result_type.shape)
    if not pairs:
        return np.zeros(shape), np.zeros(shape)
    return (np.stack([v for v, _ in pairs], axis=1).reshape(shape),
            np.stack([e for _, e in pairs], axis=1).reshape(shape))


def apply_function(fn: str, args: list, np) -> object:
    """`fn` of NumPy arrays (or NumPy scalars), in their own precision: what the reference
    and the run-precision evaluations compute (see the module's docstring for each)."""
    if fn == "neg":
        return -args[0]
    a = args[0]
    if fn in ("sqrt", "abs", "exp", "log", "sin", "cos", "tanh", "sign", "floor"):
        return {"sqrt": np.sqrt, "abs": np.abs, "exp": np.exp, "log": np.log, "sin": np.sin, "cos": np.cos,
                "tanh": np.tanh, "sign": np.sign, "floor": np.floor}[fn](a)
    one = np.ones_like(a)
    if fn == "rcp":
        return one / a
    if fn == "rsqrt":
        return one / np.sqrt(a)
    if fn == "not":
        return np.where(a == 0, one, 0 * one)
    if fn == "pow":
        return np.power(a, args[1])
    if fn == "floordiv":
        return np.floor_divide(a, args[1])
    if fn == "mod":
        return np.remainder(a, args[1])
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
             "or": lambda x, y: (x != 0) | (y != 0), "xor": lambda x, y: (x != 0) != (y != 0)}[fn](a, b)
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
            return v, _quotient_error(v, ea, b, eb, np) + u * np.abs(v)
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


def _quotient_error(q, ea, b, eb, np):
    """The error of the quotient q = a / b of values with errors ea and eb, before its own
    rounding: infinite where b is within its error of zero."""
    return np.where(eb < np.abs(b), (ea + np.abs(q) * eb) / (np.abs(b) - eb), np.inf)


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
    if fn == "floor":  # (exact; a whole number within the argument's error: the step to the next)
        v = np.floor(a)
        return v, np.where(np.isfinite(a), np.floor(a + ea) - np.floor(a - ea), 0.0)
    if fn in ("floordiv", "mod"):
        # The quotient's error (the operands', and a rounding in each of the run and the
        # reference); a whole number within it lets the result step: by 1 for the quotient
        # rounded down, by the divisor for the remainder, which moves with a and b between.
        (b, eb), = rest
        q = a / b
        eq = _quotient_error(q, ea, b, eb, np) + 2 * u * np.abs(q)
        steps = np.where(np.isfinite(q) & np.isfinite(eq), np.floor(q + eq) - np.floor(q - eq), np.inf)
        if fn == "floordiv":
            return np.floor_divide(a, b), steps
        v = np.remainder(a, b)
        return v, ea + np.abs(np.floor_divide(a, b)) * eb + steps * (np.abs(b) + eb) + 2 * u * (np.abs(v) + np.abs(b))
    if fn in ("min", "max", "clamp"):
        v = apply_function(fn, [a, *(x for x, _ in rest)], np)
        return v, np.maximum.reduce([ea, *(e for _, e in rest)])
    if fn == "pow":
        (b, eb), = rest
        v = np.power(a, b)
        spread = np.where(ea < np.abs(a), np.abs(b) * ea / np.where(np.abs(a) > ea, np.abs(a) - ea, 1)
                          + np.abs(np.log(np.abs(a) + ea)) * eb, np.inf)
        return v, np.abs(v) * np.expm1(spread) + (u + extra) * np.abs(v)
    if fn in COMPARISONS or fn in ("and", "or", "xor"):
        (b, eb), = rest
        v = apply_function(fn, [a, b], np)
        if fn in ("and", "or", "xor"):
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


@record
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
