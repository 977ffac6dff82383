"""A call's uniform operand in vectors made once per launch, for the CPU loop renderer.

An op with a uniform operand (every element reads the same words: a material's stiffness, a
quadrature table) computes each element's outputs from those words and the element's own.
GCC's SLP vectorizer packs neighbouring outputs into vectors and builds each vector of the
uniform operand's words from scalar loads and shuffles in every element: it cannot make them
once, since the host build has no `restrict` and an element's stores might, for all it knows,
change the uniform input. Here the outputs are taken a vector at a time (16 bytes: 4 float32
or 2 float64 outputs) where the vector's outputs have expressions of one shape, the same
operations at the same places, with a uniform word in every lane at one place or more. Such a
place becomes a vector made once, before the loop over blocks (`hoisted`); a place holding the
same element word in every lane is that word, broadcast; any other place a vector of the
lanes' words. Each lane runs the operations of its output in the order of the scalar code
(GCC's vector extensions, IEEE arithmetic per lane, no contraction under -ffp-contract=off),
so the bits are the scalar code's. Outputs left over, and vectors of other shapes, stay
scalar, as in the implementation's own function. StrainEnergy (a 6x6 stiffness times each
element's strain): 3.25-3.36 -> 2.52-2.55 ms on two cores, numba's loop 3.19-3.22
(benchmarks/NOTES.md, The CPU backend, 2026-11-27)."""

from __future__ import annotations

from irfuse.artifact.records import record
from irfuse.library.implementations import GeneratedImplementation, SLeaf
from irfuse.library.indexexpr import Const, SBin, SUn

VECTOR_BYTES = 16
VECTOR_TYPES = {4: "irf_f32x4", 8: "irf_f64x2"}  # by item size (irfuse_host.h)


@record
class HoistedForm:
    """The helper function of an implementation variant with its uniform words in vectors:
    `name(irf_h, <the implementation's parameters>)`, which uniform words each of its `irf_h`
    vectors holds, (operand, [each lane's word's offset in the operand]), and their C type."""

    name: str
    lines: list[str]
    vectors: list[tuple[int, list]]
    vtype: str


def hoisted_form(impl, variant: str, itemsize: int) -> HoistedForm | None:
    """The hoisted form of `impl` in `variant`, or None where no vector of its outputs has a
    uniform word in every lane of one place (or the implementation is not generated from the
    op's definition with one thread an element)."""
    if not isinstance(impl, GeneratedImplementation) or impl.bx != 1 or itemsize not in VECTOR_TYPES \
            or "u" not in variant[:-1]:
        return None
    lanes = VECTOR_BYTES // itemsize
    vtype = VECTOR_TYPES[itemsize]
    uniform = {k for k, letter in enumerate(variant[:-1]) if letter == "u"}
    vectors: list[tuple[int, list]] = []
    statements, stores = [], []
    outputs = impl.outputs
    whole = len(outputs) - len(outputs) % lanes
    for first in range(0, len(outputs), lanes):
        group = outputs[first:first + lanes]
        text = None
        if first < whole:
            made: list[tuple[int, list]] = []
            text = _vector_text([tree for _, tree in group], impl, variant, uniform, vtype, vectors, made)
            if text is not None and "irf_h[" in text:
                vectors += made
            else:
                text = None
        if text is None:
            for j, (off, tree) in enumerate(group, first):
                statements.append(f"  const real_t r{j} = {impl.entry_text(variant, tree)};")
                stores.append(f"  {impl.result_word(variant, off)} = r{j};")
        else:
            statements.append(f"  const {vtype} r{first}_{first + lanes - 1} = {text};")
            stores += [f"  {impl.result_word(variant, off)} = r{first}_{first + lanes - 1}[{lane}];"
                       for lane, (off, _) in enumerate(group)]
    if not vectors:
        return None
    name = f"{impl.variant_name(variant)}_hoisted"
    params = impl.parameters()
    # (defined once in a source whose kernels call it from several loop renderings)
    lines = [f"#ifndef IRF_DEFINED_{name}", f"#define IRF_DEFINED_{name}",
             f"// {impl.op.name} [{impl.name}; variant {variant}] with its uniform words in {len(vectors)} "
             f"vectors made once per launch (irf_h)",
             f"static inline void {name}(const {vtype}* irf_h, {params})", "{", "  (void)tx; (void)ty;",
             *statements, *stores, "}", "#endif"]
    return HoistedForm(name, lines, vectors, vtype)


def hoisted_vectors(form: HoistedForm, impl, variant: str, array: str, args: list[str]) -> str:
    """The declaration of a call site's vectors, `array`, from the call's operand expressions
    `args`: made before the loop over blocks."""
    made = []
    for k, offsets in form.vectors:
        words = [impl.operand_word(variant, k, off, f"({args[k]})") for off in offsets]
        made.append("{" + ", ".join(words) + "}")
    return f"const {form.vtype} {array}[{len(made)}] = {{{', '.join(made)}}};"


def _vector_text(trees: list, impl, variant: str, uniform: set[int], vtype: str, known: list, made: list) -> str | None:
    """C for the lanes' trees as one vector expression (see the module), or None where their
    shapes differ or hold what the vector extensions do not compute (functions other than
    negation). Uniform places append (operand, offsets) to `made` (`known` before them)."""
    t0 = trees[0]
    if all(isinstance(t, SLeaf) for t in trees):
        operands = {t.operand for t in trees}
        if len(operands) != 1:
            return None
        k = operands.pop()
        offsets = [t.offset for t in trees]
        if k in uniform:
            if (k, offsets) not in known + made:
                made.append((k, offsets))
            return f"irf_h[{(known + made).index((k, offsets))}]"
        if len(set(offsets)) == 1:
            return impl.operand_word(variant, k, offsets[0])  # broadcast by the vector operation
        return f"({vtype}){{{', '.join(impl.operand_word(variant, k, off) for off in offsets)}}}"
    if all(isinstance(t, Const) for t in trees):
        values = [t.value for t in trees]
        if len(set(values)) == 1:
            return f"(real_t)({values[0]!r})"
        return f"({vtype}){{{', '.join(f'(real_t)({v!r})' for v in values)}}}"
    if all(isinstance(t, SBin) and t.op == t0.op for t in trees):
        lhs = _vector_text([t.lhs for t in trees], impl, variant, uniform, vtype, known, made)
        rhs = _vector_text([t.rhs for t in trees], impl, variant, uniform, vtype, known, made) \
            if lhs is not None else None
        return None if rhs is None else f"({lhs} {t0.op} {rhs})"
    if all(isinstance(t, SUn) and t.fn == "neg" for t in trees):
        arg = _vector_text([t.arg for t in trees], impl, variant, uniform, vtype, known, made)
        return None if arg is None else f"(-{arg})"
    return None
