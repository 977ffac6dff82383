"""The generic ops (`irfuse.library.families`) against NumPy, written here independently of
their index definitions: every family on shapes square and not, run by the CPU backend in
float64 and float32 and checked by `Program.check` against the ops' own float64 reference;
then NaN, infinities and singular matrices, which must come out as IEEE arithmetic gives them
(never a crash) with the verification saying so."""

import numpy as np
import pytest

import irfuse
from irfuse.driver.compile import compile_text


def _t(a):  # the transpose of each element's matrix
    return np.swapaxes(a, -1, -2)


def _eye(n):
    return np.eye(n)[None]


def _spell(shape):
    if shape == ():
        return "scalar"
    return {1: "vector", 2: "matrix"}.get(len(shape), "tensor") + "x".join(map(str, shape))


# (family, operand shapes, NumPy of the batch (axis 0 the element), operand domain)
CASES = [
    ("add", [(4, 3), (4, 3)], np.add, None), ("add", [(2, 5), ()], lambda a, s: a + s[:, None, None], None),
    ("sub", [(3,), (3,)], np.subtract, None), ("neg", [(2, 3, 2)], np.negative, None),
    ("scale", [(3, 2), ()], lambda a, s: a * s[:, None, None], None),
    ("emul", [(5,), (5,)], np.multiply, None), ("ediv", [(2, 2), (2, 2)], np.divide, "away"),
    ("pow", [(3,), (3,)], np.power, "positive"), ("pow", [(), ()], np.power, "positive"),
    ("min", [(4,), (4,)], np.minimum, None), ("max", [(2, 3), ()], lambda a, s: np.maximum(a, s[:, None, None]), None),
    ("clamp", [(6,), (), ()], lambda a, lo, hi: np.minimum(np.maximum(a, lo[:, None]), hi[:, None]), None),
    ("exp", [(3, 3)], np.exp, None), ("log", [(4,)], np.log, "positive"), ("sqrt", [()], np.sqrt, "positive"),
    ("rsqrt", [(2,)], lambda a: 1 / np.sqrt(a), "positive"), ("sin", [(3,)], np.sin, None),
    ("cos", [(2, 2)], np.cos, None), ("tanh", [(3, 3, 3)], np.tanh, None), ("abs", [(4,)], np.abs, None),
    ("sign", [(5,)], np.sign, None), ("floor", [(2, 3)], np.floor, "steps"),
    ("floordiv", [(3,), ()], lambda a, s: np.floor_divide(a, s[:, None]), "away"),
    ("mod", [(2, 2), (2, 2)], np.remainder, "away"), ("mod", [(), ()], np.remainder, "away"),
    ("mmul", [(4, 3), (3, 2)], np.matmul, None), ("mmul", [(2, 5), (5, 5)], np.matmul, None),
    ("mtmul", [(4, 3), (4, 2)], lambda a, b: _t(a) @ b, None),
    ("mmult", [(2, 3), (4, 3)], lambda a, b: a @ _t(b), None),
    ("mvmul", [(4, 3), (3,)], lambda a, v: np.einsum("nij,nj->ni", a, v), None),
    ("mtvmul", [(4, 3), (4,)], lambda a, v: np.einsum("nji,nj->ni", a, v), None),
    ("outer", [(3,), (5,)], lambda a, b: np.einsum("ni,nj->nij", a, b), None),
    ("dot", [(7,), (7,)], lambda a, b: np.einsum("ni,ni->n", a, b), None),
    ("ddot", [(2, 4), (2, 4)], lambda a, b: np.einsum("nij,nij->n", a, b), None),
    ("norm", [(3, 2)], lambda a: np.sqrt(np.einsum("nij,nij->n", a, a)), None),
    ("norm", [(6,)], lambda a: np.linalg.norm(a, axis=1), None),
    ("transpose", [(2, 5)], _t, None), ("trace", [(4, 4)], lambda a: np.trace(a, axis1=1, axis2=2), None),
    ("sym", [(3, 3)], lambda a: (a + _t(a)) / 2, None), ("skew", [(2, 2)], lambda a: (a - _t(a)) / 2, None),
    ("dev", [(3, 3)], lambda a: a - np.trace(a, axis1=1, axis2=2)[:, None, None] / 3 * _eye(3), None),
    ("det", [(2, 2)], np.linalg.det, None), ("det", [(3, 3)], np.linalg.det, None),
    ("cof", [(3, 3)], lambda a: _t(np.linalg.inv(a)) * np.linalg.det(a)[:, None, None], "regular"),
    ("cof", [(2, 2)], lambda a: _t(np.linalg.inv(a)) * np.linalg.det(a)[:, None, None], "regular"),
    ("inv", [(3, 3)], np.linalg.inv, "regular"), ("inv", [(2, 2)], np.linalg.inv, "regular"),
    ("lt", [(), ()], np.less, None), ("le", [(), ()], np.less_equal, None), ("gt", [(), ()], np.greater, None),
    ("ge", [(), ()], np.greater_equal, None), ("eq", [(), ()], np.equal, None),
    ("ne", [(), ()], np.not_equal, None),
]


def _operand(rng, shape, domain, n):
    a = rng.uniform(-1, 1, (n, *shape))
    if domain == "positive":
        return rng.uniform(0.25, 2, (n, *shape))
    if domain == "away":
        return np.where(a < 0, a - 0.5, a + 0.5)
    if domain == "steps":  # (whole numbers and values between: a floor's steps)
        return np.where(rng.random((n, *shape)) < 0.3, np.round(2 * a), 2 * a)
    if domain == "regular":
        return a + 3 * np.eye(shape[0])  # diagonally dominant
    return a


def _compile(cases, dtype):
    """A KAS program applying each case's family to inputs of its own (its result's type as
    the catalogue resolves the family for those operands)."""
    from irfuse.dialects.kas import kas_type_of_shape
    from irfuse.library.catalogue import default_library

    decls, inputs, lines = [], [], []
    for k, (fam, shapes, _, _) in enumerate(cases):
        names = [f"a{k}_{j}" for j in range(len(shapes))]
        decls += [f"{_spell(s)} {x};" for x, s in zip(names, shapes)]
        inputs += names
        result = default_library().resolve(fam, [kas_type_of_shape(s) for s in shapes]).result_type
        decls.append(f"{result.spelling()} r{k};")
        lines.append(f"r{k} = {fam}({', '.join(names)});")
    outs = ", ".join(f"r{k}" for k in range(len(cases)))
    src = "\n".join([*decls, f"input {', '.join(inputs)};", *lines, f"return {outs};", ""])
    return irfuse.compile(src, backend="cpu", dtype=dtype), src


GROUPS = [CASES[k:k + 12] for k in range(0, len(CASES), 12)]


@pytest.mark.parametrize("dtype", ["f64", "f32"])
@pytest.mark.parametrize("group", range(len(GROUPS)))
def test_every_family_agrees_with_numpy(group, dtype):
    cases = GROUPS[group]
    prog, src = _compile(cases, dtype)
    rng = np.random.default_rng(group)
    n = 67
    args, wants = {}, {}
    for k, (fam, shapes, fn, domain) in enumerate(cases):
        ops = [_operand(rng, s, domain, n) for s in shapes]
        # The operands the kernel gets, and NumPy the same values (rounded to the run's type).
        ops = [o.astype(np.float32).astype(np.float64) if dtype == "f32" else o for o in ops]
        args.update({f"a{k}_{j}": o.astype(np.float32 if dtype == "f32" else np.float64) for j, o in enumerate(ops)})
        wants[f"r{k}"] = np.asarray(fn(*ops), dtype=np.float64)
    got = prog(**args)
    tol = 1e-12 if dtype == "f64" else 2e-5
    for k, (fam, shapes, _, _) in enumerate(cases):
        g, w = np.asarray(getattr(got, f"r{k}"), np.float64), wants[f"r{k}"]
        scale = np.max(np.abs(w)) + 1
        np.testing.assert_allclose(g, w, rtol=tol, atol=tol * scale, err_msg=f"{fam}{shapes}\n{src}")
    assert prog.check(**args).ok


UNARY = {"exp": np.exp, "log": np.log, "sqrt": np.sqrt, "rsqrt": lambda a: 1 / np.sqrt(a), "sin": np.sin,
         "cos": np.cos, "tanh": np.tanh, "abs": np.abs, "sign": np.sign, "neg": np.negative, "floor": np.floor}
BINARY = {"add": np.add, "sub": np.subtract, "emul": np.multiply, "ediv": np.divide, "pow": np.power,
          "min": np.minimum, "max": np.maximum, "floordiv": np.floor_divide, "mod": np.remainder, "lt": np.less,
          "le": np.less_equal, "gt": np.greater,
          "ge": np.greater_equal, "eq": np.equal, "ne": np.not_equal}


# Functions whose results the C library and NumPy may round differently: NumPy takes some of
# them from vector libraries where the CPU has AVX-512 (pow(2.5, 2.5) in float64 one unit in
# the last place from glibc's), so their finite results are compared to within two units.
LIBRARY_ROUNDED = {"exp", "log", "sin", "cos", "tanh", "pow"}


def _same_entries(got: np.ndarray, want: np.ndarray, name: str) -> None:
    """NaN where `want` is NaN, the same infinities and zeros (signed zeros equal), and the
    other entries equal (within two units in the last place for `LIBRARY_ROUNDED`)."""
    got = got.astype(want.dtype)
    special = ~np.isfinite(want) | (want == 0)
    np.testing.assert_array_equal(got[special], want[special], err_msg=name)
    if name in LIBRARY_ROUNDED:
        assert np.isfinite(got[~special]).all(), name
        np.testing.assert_array_max_ulp(got[~special], want[~special], maxulp=2)
    else:
        np.testing.assert_array_equal(got[~special], want[~special], err_msg=name)


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_nan_infinities_and_zeros_give_what_ieee_arithmetic_gives(dtype):
    """Entry by entry through every elementwise family, the masks' logic and select: NaN for
    NaN, the same infinities, signed zeros compared equal; select never lets the side it does not
    take through (NaN or not); the verification counts the special entries and passes."""
    names = list(UNARY) + list(BINARY)
    lines = [f"u{k} = {f}(x);" for k, f in enumerate(UNARY)]
    lines += [f"b{k} = {f}(x, y);" for k, f in enumerate(BINARY)]
    lines += ["c = clamp(x, -1, y);", "m = gt(x, y);", "k = le(y, 0);", "p = and(m, k);", "q = or(m, k);",
              "z = not(m);", "s = select(m, x, y);", "e = xor(m, k);"]
    outs = [f"u{k}" for k in range(len(UNARY))] + [f"b{k}" for k in range(len(BINARY))] + list("cmkpqzse")
    masks = [f"b{k}" for k, f in enumerate(BINARY) if f in ("lt", "le", "gt", "ge", "eq", "ne")]
    numbers = [o for o in outs[:len(names)] if o not in masks]
    src = "\n".join(["scalar x, y, c, s, " + ", ".join(numbers) + ";",
                     "mask m, k, p, q, z, e, " + ", ".join(masks) + ";",
                     "input x, y;", *lines, f"return {', '.join(outs)};", ""])
    prog = irfuse.compile(src, backend="cpu", dtype=dtype)
    values = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -1.0, 1.0, 2.5, -3.0, 0.5])
    x, y = (a.ravel() for a in np.meshgrid(values, values))  # every pair
    npdt = np.float64 if dtype == "f64" else np.float32
    got = prog(x=x.astype(npdt), y=y.astype(npdt))
    with np.errstate(all="ignore"):
        for k, (f, fn) in enumerate(UNARY.items()):
            _same_entries(np.asarray(getattr(got, f"u{k}")), fn(x).astype(npdt), f)
        for k, (f, fn) in enumerate(BINARY.items()):
            _same_entries(np.asarray(getattr(got, f"b{k}")), np.asarray(fn(x, y), np.float64).astype(npdt), f)
        np.testing.assert_array_equal(got.c, np.minimum(np.maximum(x, -1), y))
        m, kk = x > y, y <= 0
        for name, want in (("m", m), ("k", kk), ("p", m & kk), ("q", m | kk), ("z", ~m), ("e", m ^ kk)):
            np.testing.assert_array_equal(np.asarray(getattr(got, name)), want.astype(np.float64), err_msg=name)
        np.testing.assert_array_equal(got.s, np.where(m, x, y))
    report = prog.check(x=x.astype(npdt), y=y.astype(npdt))
    assert report.ok, report
    assert "NaN or infinite, as in the float64 reference" in str(report)
    # (the same functions' kernel for the GPU: NVRTC compiles it, the prelude's helpers included)
    plan, _ = compile_text(src, "special.kas", dtype=dtype, compile_gpu=True, arch="sm_90")
    assert plan.cubin.cubin[:4] == b"\x7fELF" and set(plan.cubin.resources) == {k.name for k in plan.kernels}


@pytest.mark.parametrize("renderer", ["loop", "emulate"])
@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_a_power_of_2_1_or_minus_1_is_its_product_to_the_bit(dtype, renderer, monkeypatch):
    """`pow(x, 2)` is x*x, `pow(x, 1)` x and `pow(x, -1)` 1/x to the bit, NaN, infinities,
    signed zeros, subnormals and overflow included (one rounding of the product: the correctly
    rounded power, NumPy's `x ** 2`), with the exponent a literal or a uniform input given at
    the call; another exponent is the math library's pow. Both CPU renderings: the emulated
    one runs the GPU's code."""
    monkeypatch.setenv("IRFUSE_CPU_RENDERER", renderer)
    npdt = np.float64 if dtype == "f64" else np.float32
    src = ("scalar x, sq, same, inv, cube, given; uniform scalar b;\ninput x, b;\nsq = pow(x, 2);\n"
           "same = pow(x, 1);\ninv = pow(x, -1);\ncube = pow(x, 3);\ngiven = pow(x, b);\n"
           "return sq, same, inv, cube, given;\n")
    prog = irfuse.compile(src, backend="cpu", dtype=dtype)
    info = np.finfo(npdt)
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 3.0, 0.1, -7.25, info.tiny / 8, -info.tiny,
                  info.max, -np.sqrt(info.max) * 2, 1 / info.max], npdt)
    x = np.concatenate([x, np.random.default_rng(3).standard_normal(200).astype(npdt) * 1e3])
    with np.errstate(all="ignore"):
        for b, want in ((2, x * x), (1, x), (-1, npdt(1) / x)):
            got = prog(x=x, b=npdt(b))
            np.testing.assert_array_equal(got.given, want, err_msg=f"b = {b} given at the call")
        got = prog(x=x, b=npdt(3))
        np.testing.assert_array_equal(got.sq, x * x)
        np.testing.assert_array_equal(got.same, x)
        np.testing.assert_array_equal(got.inv, npdt(1) / x)
        assert np.array_equal(np.signbit(got.sq), np.signbit(x * x)) and np.array_equal(np.signbit(got.inv), np.signbit(1 / x))
        finite = np.isfinite(x) & (np.abs(x) < 1e10)
        np.testing.assert_array_max_ulp(got.cube[finite], np.power(x, npdt(3))[finite], maxulp=4)
        np.testing.assert_array_equal(got.given, got.cube)


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_singular_matrices_invert_to_infinities_or_nan_and_the_verification_says_so(dtype):
    """det of an exactly singular matrix is 0; inv divides its cofactors by that 0, which IEEE
    arithmetic makes infinities (a nonzero cofactor) or NaN (a zero one). Matrices with NaN or
    infinite entries go through the same way; regular ones beside them stay exact."""
    src = """matrix3x3 A, Ai, Ac; matrix2x2 B, Bi; scalar d, e;
    input A, B;
    d = det(A); Ai = inv(A); Ac = cof(A); e = det(B); Bi = inv(B);
    return d, Ai, Ac, e, Bi;"""
    prog = irfuse.compile(src, backend="cpu", dtype=dtype)
    npdt = np.float64 if dtype == "f64" else np.float32
    rng = np.random.default_rng(5)
    A = rng.uniform(-1, 1, (8, 3, 3)) + 3 * np.eye(3)
    A[0] = [[1, 2, 3], [2, 4, 6], [0, 1, 0]]  # rank 2
    A[1] = 0  # rank 0: every cofactor 0 too
    A[2] = [[1, 1, 1], [1, 1, 1], [1, 1, 1]]  # rank 1
    A[3, 0, 0] = np.nan
    A[4, 1, 2] = np.inf
    B = rng.uniform(-1, 1, (8, 2, 2)) + 3 * np.eye(2)
    B[0] = [[2, 4], [1, 2]]
    B[1] = 0
    A, B = A.astype(npdt), B.astype(npdt)
    got = prog(A=A, B=B)
    assert got.d[0] == 0 and got.d[1] == 0 and got.d[2] == 0 and got.e[0] == 0 and got.e[1] == 0
    for Ai, mat in ((got.Ai, A), (got.Bi, B)):
        assert not np.isfinite(Ai[0]).any() and np.isnan(Ai[1]).all()
        # where the cofactor is nonzero the entry is an infinity; where it is 0, NaN
        cof = np.asarray(got.Ac[0]) if mat is A else None
        if cof is not None:
            np.testing.assert_array_equal(np.isinf(Ai[0]), cof.T != 0)
            np.testing.assert_array_equal(np.isnan(Ai[0]), cof.T == 0)
    assert np.isnan(got.d[3]) and np.isnan(got.Ai[3]).any()
    tol = 1e-12 if dtype == "f64" else 1e-5
    np.testing.assert_allclose(got.Ai[5:], np.linalg.inv(A[5:].astype(np.float64)), rtol=tol, atol=tol)
    np.testing.assert_allclose(got.Bi[2:], np.linalg.inv(B[2:].astype(np.float64)), rtol=tol, atol=tol)
    report = prog.check(A=A, B=B)
    assert report.ok, report
    text = str(report)
    assert "Ai: ok" in text and "NaN or infinite, as in the float64 reference" in text


@pytest.mark.parametrize("dtype", ["f64", "f32"])
def test_reshape_is_numpys_row_major_reshape_and_its_derivative_moves_entries_back(dtype):
    """`reshape("shape", v)`: the same entries in row-major order in another shape (vector64
    as the tensor4x4x4 a sum-factorized element reads, a matrix as its transpose's shape, a
    vector of one as a scalar), compared with NumPy's reshape written here; its forward and
    reverse derivatives from its definition, against each other."""
    from irfuse.testing.derivatives import vjp_against_jvp

    src = """vector64 v; tensor4x4x4 t; matrix2x3 a; matrix3x2 b; vector1 w; scalar s; vector64 back;
input v, a, w;
t = reshape("4x4x4", v);
b = reshape("3x2", a);
s = reshape("s", w);
back = reshape("64", t);
return t, b, s, back;
"""
    prog = irfuse.compile(src, backend="cpu", dtype=dtype)
    rng = np.random.default_rng(0)
    v, a, w = rng.standard_normal((9, 64)), rng.standard_normal((9, 2, 3)), rng.standard_normal((9, 1))
    out = prog(v.astype(prog.dtype), a.astype(prog.dtype), w.astype(prog.dtype))
    assert np.array_equal(out.t, v.astype(prog.dtype).reshape(9, 4, 4, 4))
    assert np.array_equal(out.b, a.astype(prog.dtype).reshape(9, 3, 2))
    assert np.array_equal(out.s, w.astype(prog.dtype)[:, 0]) and np.array_equal(out.back, v.astype(prog.dtype))
    if dtype == "f64":
        check = vjp_against_jvp(src)
        assert check.made and abs(check.forward - check.reverse) <= 1e-12 * check.magnitude


@pytest.mark.parametrize("line, said", [
    ('t = reshape("4x4x3", v);', "'reshape' does not take vector64: 64 entries cannot fill 4x4x3"),
    ('t = reshape(v);', "'reshape' takes the new shape first, as a string: reshape(\"4x4x4\", v)"),
    ('t = reshape("4by4", v);', "reshape: '4by4' is not a shape such as \"4x4x4\""),
    ('t = reshape("4x4x4", v, v);', "reshape takes the new shape and one value, got 2 value(s)"),
    ('t = add("4x4x4", v);', "a string is only the first operand of 'contract'"),
])
def test_a_reshape_that_cannot_be_made_is_refused_at_its_line(line, said):
    src = f"vector64 v; tensor4x4x4 t;\ninput v;\n{line}\nreturn t;\n"
    with pytest.raises(irfuse.CompileError) as e:
        irfuse.compile(src, backend="cpu")
    assert said in str(e.value) and ":3:" in str(e.value), str(e.value)


def test_reshape_in_a_python_program_takes_the_shape_first():
    @irfuse.program
    def flat(v: irfuse.Vector[8]):
        t = irfuse.ops.reshape("2x4", v)
        return irfuse.ops.reshape("4x2", t)

    prog = irfuse.compile(flat, backend="cpu", dtype="f64")
    v = np.arange(24.0).reshape(3, 8)
    np.testing.assert_array_equal(prog(v)[0], v.reshape(3, 4, 2))


def test_a_reshape_of_729_entries_is_within_the_expansion_limit_and_numpys():
    """`reshape("9x9x9", v)` of a vector729 (a hexahedron of order 8's gathered values): its
    selections nested axis by axis, the product of a delta of an output index and a constant
    counted and built only where the delta is 1 (`indexexpr.expanded_size`, `_expand`), so it
    is made (written flat, 4.3 M operations and operands against the limit's 2.1 M), entry k of
    the result entry k of the vector; a definition that builds as much everywhere is still
    refused. (Compiled in a program it is: tests/test_highorder.py's order 8.)"""
    from irfuse.library.catalogue import default_library
    from irfuse.library.indexexpr import MAX_EXPANDED_NODES, Expander, Leaf, parse_definition

    op = default_library().get("reshape_9x9x9_729")
    e = Expander(parse_definition(op.definition), ["A"], [(729,)], (9, 9, 9))
    assert e.expanded_size() <= MAX_EXPANDED_NODES
    assert e.expand() == [Leaf(0, k) for k in range(729)]  # entry k of the result is entry k of A
    flat = " + ".join(f"delta(i,{k})*delta(j,{k})*A[{k}]" for k in range(729))  # (a delta of two output indices)
    e = Expander(parse_definition(f"C[i,j] = {flat}"), ["A"], [(729,)], (729, 729))
    assert e.expanded_size() > MAX_EXPANDED_NODES


def test_stack_written_in_a_program_takes_its_operands_count():
    """`stack(a, b, c)` in KAS and `ops.stack` in Python: an array of its operands, N given by
    how many there are (the transforms that make stacks pass N themselves)."""
    src = "vector3 a, b; matrix2x3 r; matrix3x3 s;\ninput a, b;\nr = stack(a, b);\ns = stack(a, b, a);\nreturn r, s;\n"
    prog = irfuse.compile(src, backend="cpu", dtype="f64")
    a, b = np.random.default_rng(0).normal(size=(2, 5, 3))
    r, s = prog(a, b)
    np.testing.assert_array_equal(r, np.stack([a, b], axis=1))
    np.testing.assert_array_equal(s, np.stack([a, b, a], axis=1))

    @irfuse.program
    def rows(a: irfuse.Vector[3], b: irfuse.Vector[3]):
        return irfuse.ops.stack(b, a)

    np.testing.assert_array_equal(irfuse.compile(rows, backend="cpu", dtype="f64")(a, b)[0], np.stack([b, a], axis=1))


@pytest.mark.parametrize("line, said", [
    ("r = item(a);", "'item' takes its entry from the program's syntax, not from a call: read entry K of an array as a[K]"),
    ("r = put(a, x);", "'put' takes its entry from the program's syntax, not from a call: replace entry K of an array "
                       "by assigning a[K] = ..."),
    ("r = repeat(a);", "'repeat' takes its count from the program's syntax, not from a call: stack(v, v, ...) makes "
                       "an array of copies"),
    ("r = stack(a, x);", "'stack' does not take vector3, scalar"),
    ("r = item(a, x);", "'item' takes 1 operand(s), got 2"),
    ("r = put(a);", "'put' takes 2 operand(s), got 1"),
])
def test_item_put_and_repeat_written_as_calls_are_refused_at_their_line(line, said):
    """Their entry or count is the transforms' to give (a program writes a[K], a[K] = v and
    stack): a call of one in a program is refused by name at its line, not a crash (the
    wrong number of operands too: a ValueError's traceback before)."""
    src = f"vector3 a; scalar x; matrix2x3 r;\ninput a, x;\n{line}\nreturn r;\n"
    with pytest.raises(irfuse.CompileError) as e:
        irfuse.compile(src, backend="cpu")
    assert said in str(e.value) and ":3:" in str(e.value), str(e.value)
