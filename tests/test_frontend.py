"""Frontend semantics checked through the reference: what the IR computes."""

import numpy as np
import pytest

from irfuse.diagnostics import CompileError
from irfuse.frontend.irgen import compile_source
from irfuse.verification.reference import find_program, random_inputs, run_reference


def run(src: str, n: int = 4, seed: int = 3):
    prog = find_program(compile_source(src, "t.kas").module)
    inputs = random_inputs(prog, n, seed, np.float64)
    return inputs, run_reference(prog, inputs)


def test_reassignment_makes_new_values():
    ins, out = run("matrix3x3 A, B; input A; B = madd33(A, A); B = mmul33(B, A); return B;")
    A = ins["A"]
    np.testing.assert_allclose(out["B"], (A + A) @ A)


def test_loop_carries_values_between_iterations():
    src = """matrix3x3 R, Q, T; vector3 x, v; scalar n;
             input R, Q, x;
             loop 4 { T = mmul33(R, Q); R = madd33(T, Q); v = mvmul33(R, x); }
             n = venorm3(v);
             return R, n;"""
    ins, out = run(src)
    R, Q, x = ins["R"], ins["Q"], ins["x"]
    for _ in range(4):
        R = R @ Q + Q
    np.testing.assert_allclose(out["R"], R, rtol=1e-12)
    np.testing.assert_allclose(out["n"], np.linalg.norm(np.einsum("nij,nj->ni", R, x), axis=1), rtol=1e-12)


def test_nested_loops():
    src = """matrix2x2 X, Y; input X, Y;
             loop 3 { X = madd22(X, Y); loop 2 { X = mmul22(X, Y); } }
             return X;"""
    ins, out = run(src)
    X, Y = ins["X"], ins["Y"]
    for _ in range(3):
        X = X + Y
        for _ in range(2):
            X = X @ Y
    np.testing.assert_allclose(out["X"], X, rtol=1e-12)


def test_value_read_in_loop_but_assigned_outside_is_not_carried():
    src = """scalar a, b; input a; loop 5 { b = sadd(a, a); } return b;"""
    ins, out = run(src)
    np.testing.assert_allclose(out["b"], 2 * ins["a"])


def test_returning_an_input_unchanged():
    ins, out = run("vector3 v; input v; return v;")
    np.testing.assert_array_equal(out["v"], ins["v"])


def test_warnings_name_unused_input_and_statement():
    res = compile_source("scalar a, b, c; input a, b; c = sneg(a); b = sabs(a); return c;", "w.kas")
    msgs = [(d.line, d.col, d.message) for d in res.warnings]
    assert (1, 26, "input 'b' is never used") in msgs
    assert any("the value assigned to 'b' by 'sabs' is never used" in m for _, _, m in msgs)


@pytest.mark.parametrize("src", ["", "input;", "scalar a; input a; return a", "scalar a;; input a; return a;",
                                 "scalar a; input a; a = sneg(a a); return a;", "\u00e9"])
def test_bad_programs_raise_compile_errors_with_positions(src):
    with pytest.raises(CompileError) as e:
        compile_source(src, "bad.kas")
    d = e.value.diagnostics[0]
    assert d.file == "bad.kas" and d.line >= 1 and d.col >= 1


def test_a_program_with_0_0_and_minus_0_0_keeps_both_constants():
    """`smul(a, -0.0)` and `smul(a, 0.0)` in one program are two constants: they are equal
    numbers, and the literals were kept by value, so `a * 0.0` read the -0.0 (the sign of a zero
    result flipped); found tracing `z = -0.0` and `a * 0.0` in one Python function."""
    import irfuse

    src = "scalar a, y, z;\ninput a;\ny = smul(a, -0.0);\nz = smul(a, 0.0);\nreturn y, z;\n"
    inputs, got = run(src)
    a = inputs["a"]
    assert np.array_equal(np.signbit(got["y"]), np.signbit(a * -0.0))
    assert np.array_equal(np.signbit(got["z"]), np.signbit(a * 0.0))
    assert np.signbit(a * -0.0).any() and not np.signbit(a * -0.0).all()  # (both signs of a drawn)
    prog = irfuse.compile(src, backend="cpu", dtype="f64")
    out = prog(a)
    assert np.array_equal(np.signbit(out.y), np.signbit(a * -0.0))
    assert np.array_equal(np.signbit(out.z), np.signbit(a * 0.0))
