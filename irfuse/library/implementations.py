"""Implementations of library ops: thread mappings derived from the definitions, and hand-written ones.

An implementation fixes how the `bx` threads of one element share its work;
`by` (elements per block) stays free, with `recommended_by` as default.
Derived from every op's index-notation definition:

- `elem`: one thread computes the whole element (`bx = 1`);
- `row`: thread `tx` computes output row `tx` (`bx` = rows of the result);
- `entry`: thread `tx` computes output entry `tx` (`bx` = entries);
- `line`: thread `tx` computes one line along the result's first index (`bx` = entries over
  the first extent; results of three indices or more), and for a vector made of one value of
  three axes or more (an element's tensor reshaped into its vector) the vector's words of
  that value's line `tx` (`_vector_lines`);
- `line1`, `line2`, ...: the same along the result's axis m, for a contraction that sums along
  another axis than the first (`_summed_line_axis`: `jb,kba->kja` along j, each thread reading
  its line of `kba` once for the line of its results, where a line along k reads 56 words for
  8). Offered for calls whose smaller operands are tables fixed when compiling
  (`Implementation.along_tables`), whose words the thread then reads as constants.

(`row` and `entry` exist only where they differ from the ones before.) A delta of an index
bound to the thread is a test at run time unless it selects, over every value of the index,
terms alike but for offsets stepping evenly with it (`_fold_selections`: a reshape's entries).

Each implementation has an access pattern (`AccessPattern`, shown as
`#fuse.ap`) for every operand and for the result, computed from the words
each thread actually reads and writes; an operand read in a shape an AP
cannot state exactly gets the conservative whole-element pattern.

Device functions are called as ``f(tx, ty, operand bases..., result base)``
and come in variants, one letter per operand and result: ``s`` when the
value is in shared memory (the base is the value's shared storage and the
AP start expression is added, as the seeds' APIN/APOUT placeholders were),
``r`` when it is in registers (the base is the thread's own register array,
indexed from 0), and for an operand ``u`` when it is the block's one copy of a
uniform value (the base is that copy, every element reading the same words: the
AP start with ``ty`` taken as 0).  All outputs are computed before any is written, so a
result may share storage with an operand.
"""

from __future__ import annotations

import itertools
import re
from fractions import Fraction
from dataclasses import field

from irfuse.artifact.records import record
from irfuse.dialects.access_pattern import AccessPattern, fit_pattern
from irfuse.library.indexexpr import (Const, Definition, Expander, Leaf, SBin, SCall, SUn, fold_bin, make_call,
                                      parse_definition)
from irfuse.library.ops import OpDef

# --- Affine offsets over thread-bound index variables -----------------------


@record(frozen=True)
class Affine:
    coeffs: tuple[tuple[str, int], ...] = ()
    const: int = 0

    @staticmethod
    def of(var: str | None = None, coeff: int = 1, const: int = 0) -> "Affine":
        return Affine(((var, coeff),) if var and coeff else (), const)

    def __add__(self, other: "Affine") -> "Affine":
        d = dict(self.coeffs)
        for v, c in other.coeffs:
            d[v] = d.get(v, 0) + c
        return Affine(tuple(sorted((v, c) for v, c in d.items() if c)), self.const + other.const)

    def scale(self, k: int) -> "Affine":
        return Affine(tuple((v, c * k) for v, c in self.coeffs if c * k), self.const * k)

    def __sub__(self, other: "Affine") -> "Affine":
        return self + other.scale(-1)

    @property
    def linear(self) -> tuple[tuple[str, int], ...]:
        return self.coeffs

    def c_expr(self, var_exprs: dict[str, str]) -> str:
        terms = []
        for v, c in self.coeffs:
            e = var_exprs[v]
            e = e if re.fullmatch(r"\w+", e) else f"({e})"
            terms.append(e if c == 1 else f"{e}*{c}")
        if self.const or not terms:
            terms.append(str(self.const))
        return " + ".join(terms).replace("+ -", "- ")


@record(frozen=True)
class SLeaf:
    """Operand `operand` at an affine word offset within its element."""
    operand: int
    offset: Affine


@record(frozen=True)
class SCond:
    """1 when two affine index values are equal, else 0 (a symbolic delta)."""
    a: Affine
    b: Affine


def _row_major_offset(idx, shape: tuple[int, ...]) -> Affine:
    """The word at index `idx` (each an int, or an Affine in the thread's variables) of a
    row-major array of `shape`. Summed in place rather than through `Affine` sums: the expansion
    asks it for every operand word a thread reads, tens of thousands for a high-order element's
    contractions."""
    const, coeffs, stride = 0, {}, 1
    for n, v in reversed(list(zip(shape, idx))):
        if isinstance(v, int):
            const += v * stride
        else:
            const += v.const * stride
            for var, c in v.coeffs:
                coeffs[var] = coeffs.get(var, 0) + c * stride
        stride *= n
    return Affine(tuple(sorted((v, c) for v, c in coeffs.items() if c)), const)


class _SymbolicExpander(Expander):
    """Unrolls a definition with some indices bound to thread variables: operand words
    become affine offsets, and a delta over a thread variable a runtime condition, or 0 where
    `ranges` (a thread variable's values, 0 to its range less one) says it never holds."""

    def __init__(self, op: OpDef, ranges: dict[str, int] | None = None):
        super().__init__(parse_definition(op.definition), op.operand_names,
                         [t.shape for t in op.operand_types], op.result_type.shape)
        self.thread_ranges = ranges or {}

    def expand(self, e, env: dict[str, int | Affine]):
        return self._expand(e, env)

    @staticmethod
    def _affine(v: int | Affine) -> Affine:
        return Affine.of(const=v) if isinstance(v, int) else v

    def leaf(self, operand: int, idx: tuple) -> SLeaf:
        return SLeaf(operand, _row_major_offset(idx, self.shapes[operand]))

    def delta(self, a, b):
        a, b = self._affine(a), self._affine(b)
        diff = a - b
        if not diff.coeffs:
            return Const(1.0 if diff.const == 0 else 0.0)
        if len(diff.coeffs) == 1 and diff.coeffs[0][1] in (1, -1) and diff.coeffs[0][0] in self.thread_ranges:
            # (a thread variable against a value it never takes, in 0 .. its range - 1: never equal)
            var, k = diff.coeffs[0]
            if not 0 <= -diff.const * k < self.thread_ranges[var]:
                return Const(0.0)
        return SCond(a, b)


def _assume(t, cond: SCond, value: float):
    """The tree with a runtime delta replaced by 1 or 0 and folded again, as the definition
    expands where the delta's indices are constants (so 0 * NaN is 0 there too)."""
    if t == cond:
        return Const(value)
    if isinstance(t, SBin):
        return fold_bin(t.op, _assume(t.lhs, cond, value), _assume(t.rhs, cond, value))
    if isinstance(t, SUn):
        arg = _assume(t.arg, cond, value)
        return Const(-arg.value) if t.fn == "neg" and isinstance(arg, Const) else SUn(t.fn, arg)
    if isinstance(t, SCall):
        return make_call(t.fn, tuple(_assume(a, cond, value) for a in t.args))
    return t


def _affine_leaves(t):
    """An entry of an op expanded with every index a constant (`OpDef.trees`), its operand
    words as affine offsets: what the symbolic expansion makes of it where no index is a
    thread's (expanding the definition again took BP1's example 0.05 s of its 0.07 s of
    derivations)."""
    if isinstance(t, Leaf):
        return SLeaf(t.operand, Affine(const=t.offset))
    if isinstance(t, SBin):
        return SBin(t.op, _affine_leaves(t.lhs), _affine_leaves(t.rhs))
    if isinstance(t, SUn):
        return SUn(t.fn, _affine_leaves(t.arg))
    if isinstance(t, SCall):
        return SCall(t.fn, tuple(_affine_leaves(a) for a in t.args))
    return t


def _nodes(t, kind: type):
    """Every node of a tree of type `kind`, in order of appearance (repeats included)."""
    if isinstance(t, kind):
        yield t
    if isinstance(t, SBin):
        yield from _nodes(t.lhs, kind)
        yield from _nodes(t.rhs, kind)
    elif isinstance(t, SUn):
        yield from _nodes(t.arg, kind)
    elif isinstance(t, SCall):
        for a in t.args:
            yield from _nodes(a, kind)


def _same_but_offsets(a, b, steps: list) -> bool:
    """Whether trees `a` and `b` are alike but for their operands' offsets, each leaf of `b`
    a constant from `a`'s; those constants appended to `steps` leaf by leaf."""
    if isinstance(a, SLeaf):
        if not isinstance(b, SLeaf) or a.operand != b.operand or (b.offset - a.offset).coeffs:
            return False
        steps.append((b.offset - a.offset).const)
        return True
    if type(a) is not type(b):
        return False
    if isinstance(a, SBin):
        return a.op == b.op and _same_but_offsets(a.lhs, b.lhs, steps) and _same_but_offsets(a.rhs, b.rhs, steps)
    if isinstance(a, SUn):
        return a.fn == b.fn and _same_but_offsets(a.arg, b.arg, steps)
    if isinstance(a, SCall):
        return a.fn == b.fn and len(a.args) == len(b.args) and all(
            _same_but_offsets(x, y, steps) for x, y in zip(a.args, b.args))
    return a == b


def _shifted(t, var: str, steps: list, at: list):
    """`t` with its k-th leaf's offset moved by `steps[k]` times thread variable `var`."""
    if isinstance(t, SLeaf):
        at[0] += 1
        return SLeaf(t.operand, t.offset + Affine.of(var, steps[at[0] - 1]))
    if isinstance(t, SBin):
        return SBin(t.op, _shifted(t.lhs, var, steps, at), _shifted(t.rhs, var, steps, at))
    if isinstance(t, SUn):
        return SUn(t.fn, _shifted(t.arg, var, steps, at))
    if isinstance(t, SCall):
        return SCall(t.fn, tuple(_shifted(a, var, steps, at) for a in t.args))
    return t


def _selected_term(t) -> tuple[str, int, object] | None:
    """(thread variable, value, term) of a product `delta(var, value) * term`, else None."""
    if not (isinstance(t, SBin) and t.op == "*"):
        return None
    cond, term = (t.lhs, t.rhs) if isinstance(t.lhs, SCond) else (t.rhs, t.lhs)
    if not isinstance(cond, SCond) or isinstance(term, SCond):
        return None
    d = cond.a - cond.b
    if len(d.coeffs) != 1 or d.coeffs[0][1] not in (1, -1):
        return None
    var, k = d.coeffs[0]
    return var, -d.const * k, term


def _fold_selections(t, ranges: dict[str, int]):
    """The tree with every sum that selects, by runtime deltas of one thread variable against
    each of its values, terms alike but for operand offsets stepping evenly with that value,
    made the one term at offsets affine in the variable: `delta(i,0)*A[0] + delta(i,1)*A[1]`
    with `i` a thread's coordinate in 0..1 reads `A[i]`. Exactly one term is selected for every
    thread, as where the definition expands with constants, so the entry is the same bits; a
    reshape's definition, which selects each entry so, then maps to rows and lines that read
    their words directly instead of testing every value."""
    if isinstance(t, SUn):
        return SUn(t.fn, _fold_selections(t.arg, ranges))
    if isinstance(t, SCall):
        return SCall(t.fn, tuple(_fold_selections(a, ranges) for a in t.args))
    if not isinstance(t, SBin):
        return t
    if t.op != "+":
        return SBin(t.op, _fold_selections(t.lhs, ranges), _fold_selections(t.rhs, ranges))
    terms, left = [], t  # a left-nested chain of sums, its terms in order (walked, not recursed)
    while isinstance(left, SBin) and left.op == "+":
        terms.append(left.rhs)
        left = left.lhs
    terms = [_fold_selections(x, ranges) for x in [left, *reversed(terms)]]
    chosen = [_selected_term(x) for x in terms]
    if all(chosen) and len({v for v, _, _ in chosen}) == 1:
        var = chosen[0][0]
        by_value = {value: term for _, value, term in chosen}
        if len(by_value) == len(chosen) and sorted(by_value) == list(range(ranges.get(var, -1))):
            base, steps = by_value[0], None
            for value in range(1, len(by_value)):
                found: list = []
                if not _same_but_offsets(base, by_value[value], found):
                    break
                steps = found if steps is None else steps  # (value 1's offsets from value 0's: the steps)
                if found != [s * value for s in steps]:
                    break
            else:
                return base if steps is None else _shifted(base, var, steps, [0])  # (one value: the term)
    acc = terms[0]
    for x in terms[1:]:
        acc = SBin("+", acc, x)
    return acc


# --- Implementations ---------------------------------------------------------


def _start_text(size: int, rel: Affine, var_exprs: dict[str, str]) -> str:
    base = "ty" if size == 1 else f"ty*{size}"
    tail = rel.c_expr(var_exprs)
    return base if tail == "0" else f"{base} + {tail}"


@record(eq=False)
class Implementation:
    """One way to run an op: `bx` threads per element and the APs of its operands and result."""

    op: OpDef
    name: str
    bx: int
    recommended_by: int
    operand_aps: list[AccessPattern]
    result_ap: AccessPattern
    origin: str = "generated"
    # Offered for a call whose operands smaller than its largest are all tables fixed when
    # compiling (`kas.table`): a search takes it there, and only there, where it is no wider
    # than the width asked (`planner.search._impl_choices`); read from shared memory, the
    # tables' words it reads for each line cost more than its fewer reads of the largest
    # operand save (benchmarks/NOTES.md, High-order elements, 2026-12-04 (night)).
    along_tables: bool = False

    @property
    def function_name(self) -> str:
        return f"irf_{self.op.name}_{self.name}"

    @property
    def aps(self) -> list[AccessPattern]:
        return [*self.operand_aps, self.result_ap]

    def shared_variant(self) -> str:
        return "s" * (len(self.operand_aps) + 1)

    def variant_name(self, variant: str) -> str:
        return f"{self.function_name}_{variant}"

    def parameters(self) -> str:
        """The C parameters of its device functions: thread coordinates, operands, result."""
        return _params(self)

    def device_source(self, variant: str | None = None) -> str:
        raise TypeError(f"{type(self).__name__} must generate its device source")  # both kinds below do


def _variant_check(impl: Implementation, variant: str) -> None:
    if len(variant) != len(impl.operand_aps) + 1 or set(variant[:-1]) - {"s", "r", "u"} \
            or variant[-1] not in "sr":
        raise ValueError(f"variant '{variant}' of {impl.function_name}: one 's', 'r' or 'u' per operand and "
                         "'s' or 'r' for the result")


def element_start(ap: AccessPattern) -> str:
    """An element-major AP's start within one element (`ty` taken as 0): where a thread's
    words are in a value that every element shares."""
    return re.sub(r"\bty\b", "0", ap.start)


def _operand_base(impl: Implementation, k: int, letter: str) -> str:
    if letter == "s":
        return impl.operand_aps[k].start
    return element_start(impl.operand_aps[k]) if letter == "u" else ""


def _params(impl: Implementation) -> str:
    names = impl.op.operand_names
    ps = ["int tx", "int ty"] + [f"const real_t* __restrict__ {n}" for n in names] + ["real_t* irf_result"]
    return ", ".join(ps)


@record(eq=False)
class GeneratedImplementation(Implementation):
    var_exprs: dict[str, str] = field(default_factory=dict)
    outputs: list = field(default_factory=list)  # (Affine offset, tree)
    operand_rel: list[Affine] = field(default_factory=list)
    result_rel: Affine = field(default_factory=Affine)
    mapping_doc: str = ""

    def operand_word(self, variant: str, k: int, off: Affine, array: str | None = None) -> str:
        """C for the word at offset `off` of operand `k` in `variant` (through `array` in place
        of the operand's parameter name where given)."""
        base = _operand_base(self, k, variant[k])
        return _index(array or self.op.operand_names[k], f"({base})" if variant[k] == "u" else base,
                      off - self.operand_rel[k], self.var_exprs)

    def result_word(self, variant: str, off: Affine) -> str:
        """C for the result's word at offset `off` in `variant`."""
        return _index("irf_result", self.result_ap.start if variant[-1] == "s" else "", off - self.result_rel,
                      self.var_exprs)

    def entry_text(self, variant: str, t) -> str:
        """C for an output's tree in `variant`; a tree with runtime deltas (indices bound to the
        thread) as a selection between its foldings, so that every mapping gives the entry the
        definition gives."""
        conds = list(dict.fromkeys(_nodes(t, SCond)))  # the distinct runtime deltas
        if conds:
            c = conds[0]
            test = f"{c.a.c_expr(self.var_exprs)} == {c.b.c_expr(self.var_exprs)}"
            return (f"(({test}) ? {self.entry_text(variant, _assume(t, c, 1.0))} : "
                    f"{self.entry_text(variant, _assume(t, c, 0.0))})")
        if isinstance(t, SLeaf):
            return self.operand_word(variant, t.operand, t.offset)
        if isinstance(t, Const):
            return f"(real_t)({t.value!r})"
        if isinstance(t, SBin):
            return f"({self.entry_text(variant, t.lhs)} {t.op} {self.entry_text(variant, t.rhs)})"
        if isinstance(t, SUn):
            return c_function(t.fn, [self.entry_text(variant, t.arg)])
        if isinstance(t, SCall):
            return c_function(t.fn, [self.entry_text(variant, a) for a in t.args])
        raise ValueError(t)

    def device_source(self, variant: str | None = None) -> str:
        variant = variant or self.shared_variant()
        _variant_check(self, variant)
        lines = [f"// {self.op.name}: {self.op.definition}  [{self.name}: {self.mapping_doc}; variant {variant}]",
                 f"__device__ __forceinline__ void {self.variant_name(variant)}({_params(self)})", "{"]
        lines.append("  (void)tx; (void)ty;")
        for j, (_, tree) in enumerate(self.outputs):
            lines.append(f"  const real_t r{j} = {self.entry_text(variant, tree)};")
        for j, (off, _) in enumerate(self.outputs):
            lines.append(f"  {self.result_word(variant, off)} = r{j};")
        lines.append("}")
        return "\n".join(lines)


# C for each function of the index notation (`indexexpr.FUNCTIONS`), the same text on the GPU
# and the host (`irf_*` helpers in irfuse_prelude.h; the math library's overloads for real_t).
_C_FUNCTIONS = {
    "neg": "(-{0})", "sqrt": "sqrt({0})", "abs": "fabs({0})", "rcp": "((real_t)1 / {0})",
    "rsqrt": "((real_t)1 / sqrt({0}))", "exp": "exp({0})", "log": "log({0})", "sin": "sin({0})",
    "cos": "cos({0})", "tanh": "tanh({0})", "sign": "irf_sign({0})", "not": "((real_t)({0} == (real_t)0))",
    "pow": "irf_pow({0}, {1})", "floor": "floor({0})", "floordiv": "irf_floordiv({0}, {1})",
    "mod": "irf_mod({0}, {1})", "min": "irf_min({0}, {1})", "max": "irf_max({0}, {1})",
    "lt": "((real_t)({0} < {1}))", "le": "((real_t)({0} <= {1}))", "gt": "((real_t)({0} > {1}))",
    "ge": "((real_t)({0} >= {1}))", "eq": "((real_t)({0} == {1}))", "ne": "((real_t)({0} != {1}))",
    "and": "((real_t)({0} != (real_t)0 && {1} != (real_t)0))",
    "or": "((real_t)({0} != (real_t)0 || {1} != (real_t)0))",
    "xor": "((real_t)(({0} != (real_t)0) != ({1} != (real_t)0)))",
    "select": "({0} != (real_t)0 ? {1} : {2})", "clamp": "irf_min(irf_max({0}, {1}), {2})",
}


def c_function(fn: str, args: list[str]) -> str:
    return _C_FUNCTIONS[fn].format(*args)


def _index(array: str, base: str, rel: Affine, var_exprs: dict[str, str]) -> str:
    tail = rel.c_expr(var_exprs)
    if not base:
        return f"{array}[{tail}]"
    return f"{array}[{base}]" if tail == "0" else f"{array}[{base} + {tail}]"


def recommended_elements_per_block(bx: int) -> int:
    """Elements per block for about 128 threads: enough warps per block, small shared footprint."""
    by = 1
    while by * 2 * bx <= 128:
        by *= 2
    return max(by, 1)


def _thread_vars(mapping: str, target: tuple[str, ...], shape: tuple[int, ...]) -> tuple[dict, dict]:
    """Index bindings of one thread: index name -> Affine var; var -> C expression of tx."""
    if mapping == "elem" or not target:
        return {}, {}
    if mapping == "row":
        v = f"ix_{target[0]}"
        return {target[0]: Affine.of(v)}, {v: "tx"}
    axis = line_axis(mapping)
    if axis is not None:  # the line's index stays in the thread: bind the others
        target, shape = target[:axis] + target[axis + 1:], shape[:axis] + shape[axis + 1:]
    env, exprs = {}, {}
    for m, (name, n) in enumerate(zip(target, shape)):
        inner = 1
        for d in shape[m + 1:]:
            inner *= d
        e = "tx" if inner == 1 else f"tx/{inner}"
        if m > 0:
            e = f"{e}%{n}" if inner == 1 else f"({e})%{n}"
        v = f"ix_{name}"
        env[name] = Affine.of(v)
        exprs[v] = e
    return env, exprs


def line_axis(mapping: str) -> int | None:
    """The result axis a line mapping runs along (`line`: 0, `line2`: 2), None for the others."""
    if mapping == "line":
        return 0
    return int(mapping[4:]) if mapping.startswith("line") and mapping[4:].isdigit() else None


def _summed_line_axis(op: OpDef) -> int:
    """For an op of three indices or more with operands smaller than its largest (a
    contraction's tables), the first result axis along which a thread reads fewer words of
    the largest operands for each result it computes than along the first axis (their distinct
    offsets in the thread's entries, over the line's length), the fewest; 0 where none does
    (element-wise ops read one word a result along any axis)."""
    top = max(t.size for t in op.operand_types)
    largest = [k for k, t in enumerate(op.operand_types) if t.size == top]
    if len(largest) == len(op.operand_types):
        return 0
    d = parse_definition(op.definition)
    exp = _SymbolicExpander(op)
    reads = []
    for axis in range(len(op.result_type.shape)):
        envs = _thread_entries(op, "line" if axis == 0 else f"line{axis}", d.target_indices)[0]
        words = {(lf.operand, lf.offset) for env in envs for lf in _nodes(exp.expand(d.expr, env), SLeaf)
                 if lf.operand in largest}
        reads.append(Fraction(len(words), op.result_type.shape[axis]))
    return reads.index(min(reads))


def _vector_lines(op: OpDef) -> int:
    """For a vector made of a value of three axes or more (a reshape of an element's tensor into
    its vector), the first extent of that value: the vector's `line` mapping gives thread `tx`
    the entries `k * (size / extent) + tx`, the words of the operand's line `tx` (0 otherwise)."""
    shape = op.result_type.shape
    if len(shape) != 1 or len(op.operand_types) != 1 or len(op.operand_types[0].shape) < 3:
        return 0
    first = op.operand_types[0].shape[0]
    return first if shape[0] % first == 0 and first < shape[0] else 0


def _thread_entries(op: OpDef, mapping: str, target: tuple[str, ...]) -> tuple[list[dict], dict, dict, int]:
    """What one thread of `mapping` computes: each of its result entries as its indices' values
    (ints, or Affine in the thread's variables), the variables' C expressions of tx, their
    ranges, and the threads an element (`bx`). A vector's `line` (`_vector_lines`) binds its
    one index to k * (size / lines) + tx for each k; every other mapping binds indices whole
    (`_thread_vars`) and runs the rest over their extents."""
    shape = op.result_type.shape
    lines = _vector_lines(op) if mapping == "line" and len(shape) == 1 else 0
    if lines:
        across = shape[0] // lines
        envs = [{target[0]: Affine.of("ix_line", 1, k * across)} for k in range(lines)]
        return envs, {"ix_line": "tx"}, {"ix_line": across}, across
    bound, var_exprs = _thread_vars(mapping, target, shape)
    var_ranges = {v.coeffs[0][0]: n for i, n in zip(target, shape) if (v := bound.get(i)) is not None}
    free = [(i, n) for i, n in zip(target, shape) if i not in bound]
    envs = [{**bound, **{i: v for (i, _), v in zip(free, vals)}}
            for vals in itertools.product(*(range(n) for _, n in free))]
    axis = line_axis(mapping)
    bx = (op.result_type.size // shape[axis] if shape else 1) if axis is not None else \
        {"elem": 1, "row": shape[0] if shape else 1, "entry": op.result_type.size}[mapping]
    return envs, var_exprs, var_ranges, bx


def _expanded_entries(op: OpDef, d: Definition, envs: list[dict], var_ranges: dict) -> list[tuple[Affine, object]]:
    """(offset, tree) of each result entry a thread computes, one for each of `envs` (its
    indices' values: ints, or Affine in the thread's variables), its definition expanded."""
    selects = bool(var_ranges) and "delta" in op.definition  # (only a delta makes a runtime test)
    # (a vector's lines leave every value of the vector's index a selection; those of values the
    # thread's variable never takes are dropped while expanding. Other mappings keep their
    # selections as they were: what they fold is what their plans were measured with.)
    exp = _SymbolicExpander(op, var_ranges if "ix_line" in var_ranges else None)
    outputs = []
    for env in envs:
        off = _row_major_offset([env[i] for i in d.target_indices], op.result_type.shape)
        tree = exp.expand(d.expr, env)
        if selects and next(_nodes(tree, SCond), None) is not None:
            tree = _fold_selections(tree, var_ranges)
        outputs.append((off, tree))
    return outputs


def _derive(op: OpDef, mapping: str, along_tables: bool = False) -> GeneratedImplementation:
    d = parse_definition(op.definition)
    envs, var_exprs, var_ranges, bx = _thread_entries(op, mapping, d.target_indices)
    if mapping == "elem":  # (every index a constant: the op's own expanded entries, in row-major order)
        outputs = [(Affine(const=k), _affine_leaves(tree)) for k, tree in enumerate(op.trees)]
    else:
        outputs = _expanded_entries(op, d, envs, var_ranges)

    def pattern(offsets: list[Affine], size: int) -> tuple[AccessPattern, Affine]:
        linear = {o.linear for o in offsets}
        if len(linear) == 1:
            fit = fit_pattern({o.const for o in offsets})
            if fit is not None:
                lo, block, stride, count = fit
                rel = Affine(next(iter(linear)), lo)
                return AccessPattern(_start_text(size, rel, var_exprs), block, stride, count), rel
        return AccessPattern(_start_text(size, Affine(), var_exprs), 1, 1, size), Affine()

    operand_aps, operand_rel = [], []
    leaves = [leaf for _, tree in outputs for leaf in _nodes(tree, SLeaf)]
    for k, t in enumerate(op.operand_types):
        offs = [lf.offset for lf in leaves if lf.operand == k]
        if not offs:  # an operand the definition never reads: nothing to touch
            offs = [Affine()]
        ap, rel = pattern(offs, t.size)
        operand_aps.append(ap)
        operand_rel.append(rel)
    result_ap, result_rel = pattern([o for o, _ in outputs], op.result_type.size)
    axis = line_axis(mapping)
    doc = {"elem": "one thread per element", "row": "one thread per output row",
           "entry": "one thread per output entry"}.get(mapping) or \
        ("one thread per line along the first index" if axis == 0 else f"one thread per line along index {axis}")
    return GeneratedImplementation(op, mapping, bx, recommended_elements_per_block(bx), operand_aps, result_ap,
                                   var_exprs=var_exprs, outputs=outputs, operand_rel=operand_rel,
                                   result_rel=result_rel, mapping_doc=doc, along_tables=along_tables)


@record(eq=False)
class HandImplementation(Implementation):
    """KAS-style: CUDA source with FUNC, APIN0..n and APOUT placeholders, and its APs."""

    source: str = ""

    def device_source(self, variant: str | None = None) -> str:
        variant = variant or self.shared_variant()
        _variant_check(self, variant)
        text = re.sub(r"\bFUNC\b", self.variant_name(variant), self.source)

        def ap_in(m: re.Match) -> str:
            k = int(m.group(1))
            if k >= len(self.operand_aps):
                raise ValueError(f"{self.function_name}: APIN{k} but the op has {len(self.operand_aps)} operands")
            return f"({_operand_base(self, k, variant[k]) or '0'})"

        text = re.sub(r"\bAPIN(\d+)\b", ap_in, text)
        text = re.sub(r"\bAPOUT\b", f"({self.result_ap.start})" if variant[-1] == "s" else "0", text)
        return f"// {self.op.name}: hand-written implementation '{self.name}', variant {variant}\n{text.strip()}"


def load_store_pattern(size: int, bx: int, by: int, vector_words: int = 1) -> AccessPattern:
    """How the block's threads copy its `by` elements of a value between global and shared
    memory: thread `tid` copies `vector_words` words at tid*vector_words, then every
    bx*by*vector_words words further (coalesced; 4 words = 16 bytes for float32)."""
    threads = bx * by
    start = "ty*BX + tx" if vector_words == 1 else f"(ty*BX + tx)*{vector_words}"
    count = -(-size * by // (threads * vector_words))
    return AccessPattern(start, vector_words, threads * vector_words, count)


_GENERATED: dict[int, list[Implementation]] = {}


# Runtime selections (deltas whose indices a thread's coordinates bind) a mapping may leave in
# an entry's tree: each doubles the code (`selected`), so a definition written entry by entry
# (cof, inv: a sum of `delta(i,a)*delta(j,b)*...`) keeps one thread an element only.
MAX_RUNTIME_SELECTIONS = 3


def generated_implementations(op: OpDef) -> list[Implementation]:
    key = id(op)
    if key not in _GENERATED:
        impls: list[Implementation] = [_derive(op, "elem")]
        shape = op.result_type.shape
        rows = shape[0] if shape else 1
        candidates = []
        if rows > 1:
            candidates.append(_derive(op, "row"))
        if op.result_type.size > rows:
            candidates.append(_derive(op, "entry"))
        if len(shape) >= 3 or _vector_lines(op):
            candidates.append(_derive(op, "line"))
        if len(shape) >= 3 and (axis := _summed_line_axis(op)):
            candidates.append(_derive(op, f"line{axis}", along_tables=True))
        for impl in candidates:
            conds = {c for _, tree in impl.outputs for c in _nodes(tree, SCond)}
            if len(conds) <= MAX_RUNTIME_SELECTIONS:
                impls.append(impl)
        _GENERATED[key] = impls
    return _GENERATED[key]
