"""The access-pattern value type: which words of a value's shared storage a thread touches.

An AP is ``start, block, stride, count, noreg`` (the seeds' section 1):
thread ``(tx, ty)`` touches, for ``s < count`` and ``b < block``, the word
``start(tx, ty, BX, BY) + s*stride + b`` of a value's shared storage
(``by`` elements, element after element).  `start` is an integer
expression over ``tx, ty, BX, BY`` with ``+ - * / %`` (C semantics on
non-negative operands) and parentheses.

This is the value the `#fuse.ap` attribute carries and implementations are
described with; what follows from APs for a block (per-thread words,
compatibility) is analysis, in `irfuse.analysis.access_patterns`.
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
        """As written inside `#fuse.ap<...>`: `"start", block, stride, count[, noreg]`."""
        return f'"{self.start}", {self.block}, {self.stride}, {self.count}' + (", noreg" if self.noreg else "")

    def start_of(self, tx: int, ty: int, bx: int, by: int) -> int:
        return compile_start(self.start)(tx, ty, bx, by)

    def relative(self) -> frozenset[int]:
        """The words the pattern touches, relative to its start (the planner asks this of every
        call of thousands of candidate kernels: made once per shape)."""
        return _relative(self.block, self.stride, self.count)

    def words(self) -> int:
        return len(self.relative())


@functools.lru_cache(maxsize=4096)
def _relative(block: int, stride: int, count: int) -> frozenset[int]:
    return frozenset(s * stride + b for s in range(count) for b in range(block))



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
