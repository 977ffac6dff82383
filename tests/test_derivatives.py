"""Derivatives of every op of the catalogue, from their index definitions
(`irfuse.library.derivatives`), against central finite differences in float64: every op the
catalogue defines and every family on the shapes `test_generic_ops` runs (and the families
it leaves out: masks, selection, contraction, items); the partial derivatives (what reverse
mode multiplies by) against the same products; the documented choices where a function is
not differentiable."""

import zlib

import numpy as np
import pytest

from test_generic_ops import CASES, _operand

from irfuse.dialects.kas import MaskType, kas_type_of_shape
from irfuse.library.catalogue import Library, define_catalogue
from irfuse.library.derivatives import jvp_name, partials, tangent_trees
from irfuse.library.families import FAMILIES
from irfuse.verification.op_evaluation import eval_numpy, evaluate, evaluate_by_entries

N = 40
# (family, operand shapes (None: a mask), domain, parameters) beyond test_generic_ops' cases.
MORE = [("select", [None, (3,), (3,)], None, ()), ("and", [None, None], None, ()), ("or", [None, None], None, ()),
        ("xor", [None, None], None, ()), ("not", [None], None, ()),
        ("contract", [(2, 3), (3, 4)], None, ("ij", "jk", "ik")),
        ("item", [(4, 3)], None, ("2",)), ("put", [(3, 2), (2,)], None, ("1",)),
        ("stack", [(2,), (2,), (2,)], None, ("3",)), ("clamp", [(4,), (4,), (4,)], "apart", ()),
        ("pow", [(2,), ()], "positive", ()), ("ifeq", [(3,), (3,), (3,), (3,)], None, ()),
        ("zeros", [(2, 2)], None, ()), ("repeat", [(3,)], None, ("4",)), ("push", [(4, 3), (3,)], None, ()),
        ("pop", [(3, 2)], None, ()), ("push", [(3,), ()], None, ()), ("reshape", [(2, 3)], None, ("3x2",)),
        ("reshape", [(8,)], None, ("2x2x2",))]


def _library():
    """The built-in catalogue in a library of this module's own: the family instances made here
    stay out of the default library, whose ops other test modules list when they are collected."""
    lib = Library()
    define_catalogue(lib)
    return lib


LIBRARY = _library()


def _cases():
    lib = LIBRARY
    out = [(op.name, op, [t.shape for t in op.operand_types], None) for op in lib]
    for fam, shapes, domain, params in [(c[0], c[1], c[3], ()) for c in CASES] + MORE:
        types = [MaskType() if s is None else kas_type_of_shape(s) for s in shapes]
        op = lib.resolve(fam, types, params)
        out.append((f"{fam}{shapes}", op, [() if s is None else s for s in shapes], domain))
    return out


CATALOGUE = _cases()


def test_every_family_is_differentiated():
    assert {name.split("[")[0] for name, *_ in CATALOGUE} >= set(FAMILIES)


def _operands(rng, op, shapes, domain):
    if domain == "steps":  # (off a floor's whole numbers: its steps, which central differences see)
        domain = None
    ops = []
    for t, shape in zip(op.operand_types, shapes):
        if isinstance(t, MaskType):
            ops.append((rng.uniform(0, 1, N) < 0.5).astype(np.float64))
        elif domain == "apart":  # clamp: lo below a below hi, far from the kinks
            ops.append(rng.uniform(-1, 1, (N, *shape)) + 3 * (len(ops) - 1) * (len(ops) > 0))
        else:
            ops.append(_operand(rng, shape, domain, N))
    if op.name.startswith(("sdiv", "srcp")):
        ops = [np.where(np.abs(a) < 0.3, a + 0.6, a) for a in ops]
    if op.name.startswith(("ssqrt",)):
        ops = [np.abs(a) + 0.1 for a in ops]
    return ops


def _evaluate(op, operands):
    return evaluate_by_entries(op, *operands).reshape(N, -1)


def _jvp(op, operands, tangents):
    flat = [a.reshape(N, -1) for a in operands] + [d.reshape(N, -1) for d in tangents]
    trees = tangent_trees(op.trees, len(operands))
    return np.stack([np.broadcast_to(eval_numpy(t, flat), (N,)) for t in trees], axis=1)


@pytest.mark.parametrize("name, op, shapes, domain", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_derivatives_match_central_differences_in_float64(name, op, shapes, domain):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    operands = _operands(rng, op, shapes, domain)
    masks = [isinstance(t, MaskType) for t in op.operand_types]
    tangents = [np.zeros_like(a) if m else rng.uniform(-1, 1, a.shape) for a, m in zip(operands, masks)]
    got = _jvp(op, operands, tangents)
    h = 1e-6
    plus = _evaluate(op, [a + h * d for a, d in zip(operands, tangents)])
    minus = _evaluate(op, [a - h * d for a, d in zip(operands, tangents)])
    want = (plus - minus) / (2 * h)
    assert not np.isnan(got).any(), name
    scale = np.abs(_evaluate(op, operands)).max() + np.abs(want).max() + 1
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6 * scale, err_msg=name)
    # The op derived from these trees by its name (`jvp_<mask>__<op>`, its definition written
    # from them as text) gives the same bits from its trees, and its batched reference agrees.
    derived = LIBRARY.get(jvp_name(op.name, [not m for m in masks])) if not all(masks) else None
    if derived is not None and not isinstance(op.result_type, MaskType):
        read = [a for a, n in zip(operands, op.operand_names) if n in derived.operand_names]
        moved = read + [d for d, m in zip(tangents, masks) if not m]
        np.testing.assert_array_equal(_evaluate(derived, moved), got, err_msg=name)
        batched = evaluate(derived, *moved).reshape(N, -1)
        np.testing.assert_allclose(batched, got, rtol=1e-12, atol=1e-12 * scale, err_msg=name)
    # Reverse mode's partial derivatives give the same products, entry by entry.
    flat = [a.reshape(N, -1) for a in operands]
    sizes = [int(np.prod(s)) for s in shapes]
    for i, t in enumerate(op.trees[:4]):
        total = np.zeros(N)
        for (k, j), p in partials(t, len(operands), sizes).items():
            total += np.broadcast_to(eval_numpy(p, flat), (N,)) * tangents[k].reshape(N, -1)[:, j]
        np.testing.assert_allclose(total, got[:, i], rtol=1e-12, atol=1e-12 * scale, err_msg=f"{name} entry {i}")


def _family(name, *shapes):
    return LIBRARY.resolve(name, [kas_type_of_shape(s) for s in shapes])


def test_the_choices_where_a_function_is_not_differentiable():
    """A norm at the zero vector has derivative 0 (sqrt's, taken as 0 at 0), never NaN; abs at 0
    gives 0; max and min on a tie take the first operand's derivative; select takes the chosen
    side's; a comparison's derivative is 0."""
    def jvp(op, operands, tangents):
        return _jvp(op, [np.asarray(a, np.float64).reshape(N, -1) for a in operands],
                    [np.asarray(d, np.float64).reshape(N, -1) for d in tangents])

    zero = np.zeros((N, 3))
    ones = np.ones((N, 3))
    assert (jvp(_family("norm", (3,)), [zero], [ones]) == 0).all()
    assert (jvp(_family("abs", ()), [np.zeros(N)], [np.ones(N)]) == 0).all()
    a, da, db = np.full(N, 0.5), np.full(N, 2.0), np.full(N, 3.0)
    assert (jvp(_family("max", (), ()), [a, a], [da, db]) == 2.0).all()
    assert (jvp(_family("min", (), ()), [a, a], [da, db]) == 2.0).all()
    assert (jvp(_family("max", (), ()), [a, a + 1], [da, db]) == 3.0).all()
    select = LIBRARY.resolve("select", [MaskType(), kas_type_of_shape(()), kas_type_of_shape(())])
    mask = (np.arange(N) % 2).astype(np.float64)
    got = jvp(select, [mask, a, a], [np.zeros(N), da, db])[:, 0]
    np.testing.assert_array_equal(got, np.where(mask != 0, 2.0, 3.0))
    assert (jvp(_family("lt", (), ()), [a, a + 1], [da, db]) == 0).all()


@pytest.mark.parametrize("name, op, shapes, domain", CATALOGUE, ids=[c[0] for c in CATALOGUE])
def test_an_op_with_known_words_is_the_op_on_operands_holding_them(name, op, shapes, domain):
    """`known_<words>__<op>` (`library.known_words`, what a Jacobian's unit directions make of
    the ops they reach), for about a third of every operand's words known 0 or 1 at random:
    defined from its name alone, it reads only the operands whose words it still needs, and
    gives the op's value on operands holding those words, bit for bit but for the sign of a
    zero, wherever that value is finite (a known 0 is a structural zero: a product with it is
    0 where IEEE arithmetic would make a NaN of an infinite factor)."""
    from irfuse.library.known_words import known_name, parse_known_name

    if isinstance(op.result_type, MaskType):
        return
    rng = np.random.default_rng(zlib.crc32(name.encode()) + 1)
    operands = _operands(rng, op, shapes, domain)
    known = []
    for t, a in zip(op.operand_types, operands):
        size = int(np.prod(t.shape, dtype=np.int64))
        picked = [] if isinstance(t, MaskType) else sorted(rng.choice(size, size // 3, replace=False).tolist())
        words = {w: float(rng.integers(0, 2)) for w in picked}
        flat = a.reshape(N, -1)
        for w, v in words.items():
            flat[:, w] = v
        known.append(words)
    if not any(known):
        return
    fixed = known_name(op.name, known)
    assert parse_known_name(fixed) == (op.name, tuple(dict(sorted(w.items())) for w in known))
    derived = LIBRARY.get(fixed)
    want = _evaluate(op, operands)
    if derived is None:  # (every entry a literal once the words are in: no op reads nothing)
        assert np.array_equal(want, np.broadcast_to(want[:1], want.shape), equal_nan=True), name
        return
    kept = [a for a, n in zip(operands, op.operand_names) if n in derived.operand_names]
    assert [n for n in op.operand_names if n in derived.operand_names] == derived.operand_names
    got = _evaluate(derived, kept)
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[finite] + 0.0, want[finite] + 0.0, err_msg=f"{name} as {fixed}")


@pytest.mark.parametrize("name", ["known_z1o1__neg_3", "known_z0o0__neg_3",
                                  "known_z10o0__neg_3", "known_n__neg_3", "known_z1o0__nosuchop_3",
                                  "known_z1o0_n__neg_3", "known_z7o0__neg_3"])
def test_a_known_words_name_not_in_its_one_spelling_or_of_no_op_names_none(name):
    """A word known both 0 and 1, a token of no word, a leading zero, no word known at all (the
    op itself), an unknown op, a token too many, every word known (a literal, no op): none of
    these names an op, so every op has one name (the program cache and the CUDA function names
    rest on it)."""
    from irfuse.library.catalogue import default_library

    assert default_library().get(name) is None
    assert default_library().get("known_z1o0__neg_3").operand_names == ["A"]
    assert default_library().get("known_z0o1__neg_3") is not None
