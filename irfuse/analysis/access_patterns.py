"""Access patterns for a block shape: which shared-memory words each thread touches.

The AP value type is `irfuse.dialects.access_pattern.AccessPattern`. Two APs are
*compatible* for a block shape when every thread touches the same words in both:
then a value written through one and read through the other never crosses threads,
so it can live in registers and needs no barrier between the two accesses.
`start_set`/`access_set` give the seeds' enumeration; `thread_addresses` gives the
exact per-thread sets that the in-kernel passes decide on.
"""

from __future__ import annotations

import ast
import functools

import numpy as np

from irfuse.dialects.access_pattern import AccessPattern, compile_start


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


@functools.lru_cache(maxsize=4096)
def _parsed_start(start: str) -> ast.Expression:
    compile_start(start)  # validates
    return ast.parse(start, mode="eval")


def starts_array(ap: AccessPattern, tx, ty, bx: int, by: int):
    """Each thread's start, for the threads given by the arrays (tx, ty)."""
    starts = _eval_array(_parsed_start(ap.start), {"tx": tx, "ty": ty, "BX": bx, "BY": by})
    return np.broadcast_to(np.asarray(starts, dtype=np.int64), np.shape(tx))


def words_array(ap: AccessPattern, tx, ty, bx: int, by: int):
    """Words touched, one row per thread given by the arrays (tx, ty): shape (threads, words)."""
    starts = starts_array(ap, tx, ty, bx, by)
    rel = np.array(sorted(ap.relative()), dtype=np.int64)
    return starts[:, None] + rel[None, :]


@functools.lru_cache(maxsize=16384)  # (the planner asks it of the same patterns in thousands of candidates)
def reads_within(held: AccessPattern, read: AccessPattern, bx: int, by: int) -> bool:
    """Whether every thread reads through `read` only words it holds through `held`, `read`
    starting the same number of words (`read_shift`) after `held` in every thread: a register
    value written through `held` can then be read through `read`, the reader handed the
    thread's register array that many words on (a thread's register array is indexed from
    its start). A reader may take fewer words than the writer holds (`trace` of a product
    reads its diagonal, a row `item_1_3x3` words 3-5 of a matrix); `compatible_fast` is the
    case of equal words."""
    shift = read_shift(held, read, bx, by)
    return shift is not None and {shift + w for w in read.relative()} <= held.relative()


def read_shift(held: AccessPattern, read: AccessPattern, bx: int, by: int) -> int | None:
    """How many words after `held`'s start `read` starts, the same in every thread of a block
    of `bx` x `by`; None where it is not the same, is negative, or either pattern is `noreg`."""
    if held.noreg or read.noreg:
        return None
    ty, tx = np.divmod(np.arange(bx * by), bx)
    shifts = starts_array(read, tx, ty, bx, by) - starts_array(held, tx, ty, bx, by)
    shift = int(shifts[0])
    return shift if shift >= 0 and bool(np.all(shifts == shift)) else None


@functools.lru_cache(maxsize=16384)  # (the planner asks it of the same patterns in thousands of candidates)
def compatible_fast(a: AccessPattern, b: AccessPattern, bx: int, by: int) -> bool:
    """`compatible`, computed on arrays (the same answer, for large blocks)."""
    if a.noreg or b.noreg or a.relative() != b.relative():
        return False
    ty, tx = np.divmod(np.arange(bx * by), bx)
    return bool(np.array_equal(words_array(a, tx, ty, bx, by), words_array(b, tx, ty, bx, by)))
