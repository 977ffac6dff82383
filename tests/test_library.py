"""The op catalogue: each op's reference against an independent NumPy formula."""

import numpy as np
import pytest

from irfuse.dialects.kas import MatrixType, ScalarType, VectorType
from irfuse.library.catalogue import Library, default_library
from irfuse.library.indexexpr import DefinitionError
from irfuse.verification.op_evaluation import evaluate, evaluate_by_entries

LIB = default_library()
rng = np.random.default_rng(7)


def rand(*shape):
    return rng.uniform(-1, 1, size=(5, *shape))


def independent(name: str, n: int | None):
    """Formulas written directly in NumPy, not derived from the definitions."""
    f = {
        "madd": lambda a, b: a + b, "msub": lambda a, b: a - b, "mmul": lambda a, b: a @ b,
        "mtrans": lambda a: np.swapaxes(a, 1, 2), "mvmul": lambda m, v: np.einsum("nij,nj->ni", m, v),
        "smmul": lambda m, s: m * s[:, None, None],
        "smimul": lambda s: s[:, None, None] * np.eye(n)[None],
        "vadd": lambda v, w: v + w, "vsub": lambda v, w: v - w, "svmul": lambda v, s: v * s[:, None],
        "vdot": lambda v, w: np.sum(v * w, axis=1), "vvmulabs": lambda v, w: np.abs(np.sum(v * w, axis=1)),
        "venorm": lambda v: np.linalg.norm(v, axis=1), "vouter": lambda v, w: v[:, :, None] * w[:, None, :],
        "ttmul411": lambda t, v: np.einsum("nijkl,nl->nijk", t, v),
        "ttmul3212": lambda t, m: np.einsum("nijl,nlk->nijk", t, m),
        "ttmul311": lambda t, v: np.einsum("nijk,nk->nij", t, v),
        "sadd": np.add, "ssub": np.subtract, "smul": np.multiply, "sdiv": np.divide,
        "ssqrt": lambda a: np.sqrt(np.abs(a)), "sabs": np.abs, "sneg": np.negative, "mneg": np.negative, "vneg": np.negative, "srcp": lambda a: 1 / a,
    }
    return f[name]


@pytest.mark.parametrize("op", list(LIB), ids=lambda o: o.name)
def test_reference_matches_independent_formula(op):
    stem = op.name.rstrip("0123456789") if not op.name.startswith("tt") else op.name
    n = op.result_type.shape[0] if op.result_type.shape else None
    args = [rand(*t.shape) for t in op.operand_types]
    if op.name == "ssqrt":
        args = [np.abs(a) for a in args]
    want = independent(stem, n)(*args)
    got = evaluate(op, *args)
    assert got.shape == (5, *op.result_type.shape)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_catalogue_has_every_family_size():
    for n in range(2, 7):
        for fam in ("madd", "msub", "mmul", "mtrans", "mvmul", "smmul", "smimul"):
            assert LIB.get(f"{fam}{n}{n}") is not None
        for fam in ("vadd", "vsub", "svmul", "vdot", "vvmulabs", "venorm", "vouter"):
            assert LIB.get(f"{fam}{n}") is not None


def test_flop_counts_follow_the_definition():
    assert LIB.get("mmul33").flops == 27 + 18  # 27 products, 2 additions per entry
    assert LIB.get("venorm3").flops == 3 + 2 + 1
    assert LIB.get("smimul33").flops == 0  # delta folds to copies and zeros
    assert LIB.get("ttmul3212").flops == 27 * 5
    assert LIB.get("mmul33").bytes() == 4 * 27


def test_closest_names():
    assert LIB.closest("mmul3")[0] == "mmul33"
    assert LIB.closest("zzzz") == []


@pytest.mark.parametrize("definition, message", [
    ("C[i,j] = A[i,k]", "index 'k' is neither an output index nor summed over"),
    ("C[i] = A[i,i]", "target has 1 indices but the result has rank 2"),
    ("C[i,j] = X[i,j]", "unknown operand 'X'"),
    ("C[i,j] = A[i,j] +", "unexpected end"),
    ("C[i,j] = A[i,3]", "constant index 3 of .A. is out of range 0..2"),
    ("C[i,j] = A[j,i] * B[i]", "indexed with 1 indices"),
])
def test_bad_definitions_are_rejected(definition, message):
    lib = Library()
    m = MatrixType(3, 3)
    with pytest.raises(DefinitionError, match=message.replace("(", r"\(").replace("[", r"\[")):
        lib.define("bad", [("A", m), ("B", m)], m, definition)


def test_user_op_definition():
    lib = Library()
    v = VectorType(3)
    op = lib.define("vcross3", [("a", v), ("b", v)], v,
                    "r[i] = a[1]*b[2]*delta(i,0) - a[2]*b[1]*delta(i,0)"
                    " + a[2]*b[0]*delta(i,1) - a[0]*b[2]*delta(i,1)"
                    " + a[0]*b[1]*delta(i,2) - a[1]*b[0]*delta(i,2)")
    a, b = rand(3), rand(3)
    np.testing.assert_allclose(evaluate(op, a, b), np.cross(a, b), rtol=1e-12)
    with pytest.raises(DefinitionError, match="already defined"):
        lib.define("vcross3", [("a", v), ("b", v)], v, "r[i] = a[i]")
    assert op.signature() == "vcross3(vector3, vector3) -> vector3"
    assert op.named_signature() == "vcross3(a: vector3, b: vector3) -> vector3"  # (the names a call may give)
    assert ScalarType().spelling() == "scalar"


def test_matrix_products_whose_terms_overflow_give_what_the_trees_give():
    """Finite operands whose products overflow (1e200 squared): the trees add +inf and -inf
    terms into NaN, which a BLAS product's fused multiply-adds need not do; the reference's
    matrix product must follow the trees there (a fuzzed input file found it)."""
    rng = np.random.default_rng(3)
    op = default_library().get("mmul33")
    a = rng.uniform(-1, 1, (64, 3, 3)) * 1e200
    b = rng.uniform(-1, 1, (64, 3, 3)) * 1e200
    with np.errstate(all="ignore"):
        got, want = evaluate(op, a, b), evaluate_by_entries(op, a, b)
    assert np.isnan(want).any()
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(got[~np.isnan(want)], want[~np.isnan(want)])


@pytest.mark.parametrize("with_specials", [False, True], ids=["finite", "nan-inf"])
def test_the_vectorized_reference_agrees_with_the_per_entry_trees(with_specials):
    """Every op of the catalogue: the batch reference (contractions as matrix products and
    einsum, in chunks) gives what the scalar trees the kernels are generated from give, up
    to the order of additions; NaN and infinity go where the trees send them (a delta's
    zero stays an exact zero), and batches of one element and of several chunks work."""
    from irfuse.library.catalogue import define_catalogue
    from irfuse.verification import op_evaluation

    rng = np.random.default_rng(5)
    # The built-in catalogue and ops of each kind of family, made here: the process's default
    # library also holds every family op earlier tests in this worker made (the bake-off's
    # contractions of 8x8x8 tensors, reshapes of 729 entries), which made this test's time
    # depend on the tests run before it in the same worker (1.4 to 74 s).
    lib = Library(default_library().checker)
    define_catalogue(lib)
    for name in ("contract_kc_cba_kba_5x4_4x4x4", "contract_ia_kji_kja_5x4_5x5x5", "reshape_4x4x4_64",
                 "reshape_64_4x4x4", "reshape_2x3_6", "stack_3_3_3_3", "repeat_4_3", "item_2_3x3"):
        assert lib.get(name) is not None, name
    for name, op in lib.ops.items():
        for n in (1, 200, op_evaluation.CHUNK + 3):
            if n > 200 and with_specials:
                continue
            args = [rng.uniform(-1, 1, (n, *t.shape)) for t in op.operand_types]
            if with_specials:
                for a in args:
                    a.reshape(-1)[rng.integers(0, a.size, 4)] = np.nan
                    a.reshape(-1)[rng.integers(0, a.size, 4)] = -np.inf
            # Past a chunk, the trees (one NumPy pass an entry) are evaluated on the first and
            # last elements only, those of both chunks: the batch reference runs on all of them.
            some = slice(None) if n <= 200 else np.r_[0:3, n - 5:n]
            with np.errstate(all="ignore"):
                got, want = evaluate(op, *args), evaluate_by_entries(op, *[a[some] for a in args])
            assert got.shape == (n, *op.result_type.shape), name
            np.testing.assert_allclose(got[some], want, rtol=1e-12, atol=1e-13, equal_nan=True, err_msg=name)
