"""Access patterns (APs): which shared-memory words each thread of a block touches.

An AP is ``start, block, stride, count, noreg`` (the seeds' section 1):
thread ``(tx, ty)`` touches, for ``s < count`` and ``b < block``, the word
``start(tx, ty, BX, BY) + s*stride + b`` of a value's shared storage
(``by`` elements, element after element).  `start` is an integer
expression over ``tx, ty, BX, BY`` with ``+ - * / %`` (C semantics on
non-negative operands) and parentheses.

Two APs are *compatible* for a block shape when every thread touches the
same words in both: then a value written through one and read through the
other never crosses threads, so it can live in registers and needs no
barrier between the two accesses.  `start_set`/`access_set` give the
seeds' enumeration; `thread_addresses` gives the exact per-thread sets that
the in-kernel passes decide on.
"""

from __future__ import annotations

import ast
import functools
from dataclasses import dataclass

_ALLOWED_NAMES = ("tx", "ty", "BX", "BY")


class APError(ValueError):
    pass


@functools.lru_cache(maxsize=4096)
def compile_start(expr: str):
    """The start expression as a function of (tx, ty, BX, BY)."""
    try:
        tree = ast.parse(expr, mode="eval")
    except SyntaxError as e:
        raise APError(f"access-pattern start '{expr}' does not parse: {e.msg}") from None

    def ev(node, env):
        if isinstance(node, ast.Expression):
            return ev(node.body, env)
        if isinstance(node, ast.Constant) and isinstance(node.value, int) and not isinstance(node.value, bool):
            return node.value
        if isinstance(node, ast.Name):
            if node.id not in _ALLOWED_NAMES:
                raise APError(f"access-pattern start '{expr}' uses '{node.id}'; allowed: {', '.join(_ALLOWED_NAMES)}")
            return env[node.id]
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
            return -ev(node.operand, env)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left, env), ev(node.right, env)
            if isinstance(node.op, ast.Add):
                return a + b
            if isinstance(node.op, ast.Sub):
                return a - b
            if isinstance(node.op, ast.Mult):
                return a * b
            if isinstance(node.op, (ast.Div, ast.FloorDiv)):
                return int(a / b) if b else 0
            if isinstance(node.op, ast.Mod):
                return a - b * int(a / b) if b else 0
        raise APError(f"access-pattern start '{expr}' has an unsupported construct")

    # Validate the names once, eagerly.
    ev(tree, {n: 1 for n in _ALLOWED_NAMES})
    return lambda tx, ty, BX, BY: ev(tree, {"tx": tx, "ty": ty, "BX": BX, "BY": BY})


@dataclass(frozen=True)
class AccessPattern:
    start: str
    block: int = 1
    stride: int = 1
    count: int = 1
    noreg: bool = False

    def __post_init__(self) -> None:
        compile_start(self.start)
        if self.block < 1 or self.count < 1 or self.stride < 0:
            raise APError(f"access pattern needs block >= 1, count >= 1, stride >= 0: {self}")

    def text(self) -> str:
        return f'"{self.start}", {self.block}, {self.stride}, {self.count}, {int(self.noreg)}'

    def attr(self):
        """As the `#fuse.ap` attribute."""
        from irfuse.dialects.fuse import AccessPatternAttr

        return AccessPatternAttr(self.start, self.block, self.stride, self.count, self.noreg)

    def start_of(self, tx: int, ty: int, bx: int, by: int) -> int:
        return compile_start(self.start)(tx, ty, bx, by)

    def relative(self) -> frozenset[int]:
        return frozenset(s * self.stride + b for s in range(self.count) for b in range(self.block))

    def words(self) -> int:
        return len(self.relative())


def start_set(ap: AccessPattern, bx: int, by: int) -> tuple[int, ...]:
    """The start offset of every thread, in thread order (tid = ty*bx + tx)."""
    return tuple(ap.start_of(tx, ty, bx, by) for ty in range(by) for tx in range(bx))


def access_set(ap: AccessPattern) -> frozenset[int]:
    """Offsets relative to the start reached over the count steps."""
    return ap.relative()


def thread_addresses(ap: AccessPattern, bx: int, by: int) -> dict[tuple[int, int], frozenset[int]]:
    """The exact words each thread (tx, ty) touches."""
    rel = ap.relative()
    out = {}
    for ty in range(by):
        for tx in range(bx):
            s = ap.start_of(tx, ty, bx, by)
            out[(tx, ty)] = frozenset(s + r for r in rel)
    return out


def compatible(a: AccessPattern, b: AccessPattern, bx: int, by: int) -> bool:
    """True when every thread touches exactly the same words through both patterns."""
    if a.noreg or b.noreg:
        return False
    return thread_addresses(a, bx, by) == thread_addresses(b, bx, by)


def compatible_by_sets(a: AccessPattern, b: AccessPattern, bx: int, by: int) -> bool:
    """The seeds' test: equal StartSets (per thread) and equal AccessSets."""
    return start_set(a, bx, by) == start_set(b, bx, by) and access_set(a) == access_set(b)


def fit_pattern(offsets: set[int]) -> tuple[int, int, int, int] | None:
    """(min, block, stride, count) describing exactly `offsets`, or None.

    Contiguous runs of equal length at a constant stride: ``{0,1,2}`` is
    (0, 1, 1, 3) as the seeds write it; ``{0,3,6}`` is (0, 1, 3, 3); ``{0,1,4,5}`` is (0, 2, 4, 2).
    """
    if not offsets:
        return None
    xs = sorted(offsets)
    lo = xs[0]
    rel = [x - lo for x in xs]
    if rel == list(range(len(rel))):
        return lo, 1, 1, len(rel)
    runs: list[list[int]] = [[rel[0]]]
    for x in rel[1:]:
        if x == runs[-1][-1] + 1:
            runs[-1].append(x)
        else:
            runs.append([x])
    blk = len(runs[0])
    if any(len(r) != blk for r in runs):
        return None
    if len(runs) == 1:
        return lo, 1, 1, blk
    stride = runs[1][0] - runs[0][0]
    if any(runs[i][0] != i * stride for i in range(len(runs))):
        return None
    if blk == 1:
        return lo, 1, stride, len(runs)
    return lo, blk, stride, len(runs)


def _eval_array(node, env):
    if isinstance(node, ast.Expression):
        return _eval_array(node.body, env)
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.Name):
        return env[node.id]
    if isinstance(node, ast.UnaryOp):
        return -_eval_array(node.operand, env)
    a, b = _eval_array(node.left, env), _eval_array(node.right, env)
    op = node.op
    if isinstance(op, ast.Add):
        return a + b
    if isinstance(op, ast.Sub):
        return a - b
    if isinstance(op, ast.Mult):
        return a * b
    if isinstance(op, (ast.Div, ast.FloorDiv)):
        return a // b  # operands of start expressions are non-negative: C division
    return a % b


def words_array(ap: AccessPattern, tx, ty, bx: int, by: int):
    """Words touched, one row per thread given by the arrays (tx, ty): shape (threads, words)."""
    import numpy as np

    compile_start(ap.start)  # validates
    starts = _eval_array(ast.parse(ap.start, mode="eval"), {"tx": tx, "ty": ty, "BX": bx, "BY": by})
    starts = np.broadcast_to(np.asarray(starts, dtype=np.int64), np.shape(tx))
    rel = np.array(sorted(ap.relative()), dtype=np.int64)
    return starts[:, None] + rel[None, :]


def compatible_fast(a: AccessPattern, b: AccessPattern, bx: int, by: int) -> bool:
    """`compatible`, computed on arrays (the same answer, for large blocks)."""
    import numpy as np

    if a.noreg or b.noreg or a.relative() != b.relative():
        return False
    ty, tx = np.divmod(np.arange(bx * by), bx)
    return bool(np.array_equal(words_array(a, tx, ty, bx, by), words_array(b, tx, ty, bx, by)))
