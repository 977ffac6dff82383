"""The verification rule: each entry against what an honest evaluation in the run's precision
loses on its element, never against a norm over the batch; overflow, NaN and infinities judged
as what they are."""

import numpy as np
import pytest

from irfuse.driver.compile import compile_program
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import random_inputs, run_references
from irfuse.verification.verify import ROUNDING_FACTOR, check_output, check_outputs

POWER = """matrix3x3 A; vector3 x; scalar n;
input A, x;
loop 100 { x = mvmul33(A, x); n = venorm3(x); n = srcp(n); x = svmul3(x, n); }
return x;
"""


def _run_on_cpu(tmp_path, src: str, inputs=None, n: int = 300, dtype: str = "f32"):
    path = tmp_path / "p.kas"
    path.write_text(src)
    plan, _ = compile_program(str(path), None, dtype, compile_gpu=False)
    program = plan.reference_program
    inputs = inputs or random_inputs(program, n, 3, np.float32 if dtype == "f32" else np.float64)
    got = Executor(plan, CpuDevice(plan)).run(inputs, n).outputs
    return got, run_references(program, inputs, dtype, n), inputs


def test_a_converging_iteration_is_verified(tmp_path):
    rng = np.random.default_rng(0)
    m = rng.uniform(-1, 1, (300, 3, 3))
    spd = (m @ m.transpose(0, 2, 1) + 3 * np.eye(3)).astype(np.float32)  # symmetric: it converges
    x = rng.uniform(-1, 1, (300, 3)).astype(np.float32)
    got, refs, _ = _run_on_cpu(tmp_path, POWER, {"A": spd, "x": x})
    (check,) = check_outputs(got, refs, "f32")
    assert check.ok and check.worst < 0.05, check.describe()


def _non_converging(n: int, seed: int = 0):
    """Matrices whose eigenvalues are tiny and of nearly one magnitude (eps, -eps, eps/2) in a
    non-normal, rotated basis: every product cancels, and the iteration never settles. Any
    float32 evaluation departs from float64 on many of them, by O(1)."""
    rng = np.random.default_rng(seed)
    a = np.zeros((n, 3, 3))
    for k in range(n):
        q, _ = np.linalg.qr(rng.normal(size=(3, 3)))
        eps = 10 ** rng.uniform(-4, -1)
        a[k] = q @ np.array([[eps, 1, 0], [0, -eps, 1], [0, 0, eps / 2]]) @ q.T
    return {"A": a.astype(np.float32), "x": rng.uniform(-1, 1, (n, 3)).astype(np.float32)}


def test_a_non_converging_iteration_is_as_good_as_float32_allows(tmp_path):
    got, refs, _ = _run_on_cpu(tmp_path, POWER, _non_converging(64), n=64)
    honest = np.abs(refs.run_precision["x"].astype(np.float64) - refs.float64["x"]).max(axis=1)
    assert (honest > 1e-2).sum() >= 8  # the case is real: float32 itself departs on many elements
    (check,) = check_outputs(got, refs, "f32")
    assert check.ok, check.describe()
    # Without the honest allowance (a float64-only rule) the same correct kernel would be called wrong.
    assert not check_outputs(got, refs.float64, "f32")[0].ok
    # And a wrong kernel is still caught on the elements that float32 evaluates well.
    wrong = {"x": got["x"].copy()}
    calm = int(np.argmin(honest))
    wrong["x"][calm, 1] *= 1.5
    bad = check_outputs(wrong, refs, "f32")[0]
    assert not bad.ok and bad.first_bad == (calm, 1), bad.describe()


@pytest.mark.parametrize("dtype, big", [("f32", 1e3), ("f64", 1e100), ("f64", 1e300)])
def test_one_wrong_element_among_large_ones_is_caught(dtype, big):
    rng = np.random.default_rng(1)
    want = rng.uniform(-1, 1, (50, 3, 3))
    want[7] *= big  # one large element: it must not widen what another may get wrong
    got = want.astype(np.float32 if dtype == "f32" else np.float64)
    assert check_output("M", got, want, dtype).ok
    got = got.copy()
    got[20, 2, 1] *= 1.5
    c = check_output("M", got, want, dtype)
    assert not c.ok and c.first_bad == (20, 2, 1) and c.status == "MISMATCH", c.describe()
    assert "element 20 entry [2, 1]" in c.describe()


def test_a_float32_overflow_is_reported_as_overflow_not_as_a_wrong_kernel(tmp_path):
    src = "scalar a, b, c; input a, b; c = smul(a, b); return c;"
    a = np.full(8, 1e20, np.float32)
    a[3] = 1.0
    got, refs, _ = _run_on_cpu(tmp_path, src, {"a": a, "b": a.copy()}, n=8)
    (c,) = check_outputs(got, refs, "f32")
    assert c.ok and c.status == "overflow" and c.overflow == 7
    assert "7 entries overflow the run's precision" in c.describe()
    # A NaN, or a finite value, where the float64 result overflows float32 is still wrong;
    # and so is an infinity of the wrong sign.
    for wrong in (np.nan, 1.0, -np.inf):
        g = got["c"].copy()
        g[0] = wrong
        bad = check_output("c", g, refs.float64["c"], "f32", refs.run_precision["c"])
        assert not bad.ok and bad.first_bad == (0,)


def test_nan_and_infinities_only_where_the_reference_has_them():
    want = np.array([1.0, np.nan, np.inf, -np.inf, 2.0])
    assert check_output("v", want.astype(np.float32), want, "f32").ok
    for k, wrong in [(0, np.nan), (1, 1.0), (2, -np.inf), (3, np.nan), (4, np.inf)]:
        got = want.astype(np.float32)
        got[k] = wrong
        c = check_output("v", got, want, "f32")
        assert not c.ok and c.first_bad == (k,), (k, wrong)


def test_inputs_beyond_the_run_precision_are_refused(tmp_path):
    """float64 inputs that float32 cannot hold would turn into infinities (and a NumPy warning
    from inside irfuse): refused, naming the input and what to do."""
    import subprocess
    import sys

    src = tmp_path / "p.kas"
    src.write_text("scalar a, c; input a; c = sabs(a); return c;")
    data = tmp_path / "in.npz"
    np.savez(data, a=np.array([1.0, 1e300, 2.0]))
    p = subprocess.run([sys.executable, "-W", "error", "-m", "irfuse.tools.cli", "run", str(src), "--backend", "cpu",
                        "--inputs", str(data)], capture_output=True, text=True)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    assert "input 'a' holds 1 values beyond the float32 range (first: 1e+300 at element 1); run with --dtype f64" \
        in p.stderr
    ok = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", str(src), "--backend", "cpu",
                         "--inputs", str(data), "--dtype", "f64"], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_an_intermediate_overflow_of_the_run_precision_is_not_a_wrong_kernel():
    """a*b - c*d with both products beyond float32 but their difference small: float64 gives a
    finite value, any float32 evaluation NaN. Reported as an overflow, not as a mismatch; a
    wrong value where float32 can evaluate is still caught."""
    want = np.array([1.0e30, 2.0, 3.0])  # entry 0: finite in float64 (and within float32)
    run = np.array([np.nan, 2.0, 3.0], dtype=np.float32)  # the honest float32 evaluation
    got = np.array([np.nan, 2.0, 3.0], dtype=np.float32)
    c = check_output("v", got, want, "f32", run)
    assert c.ok and c.status == "overflow" and c.overflow == 1
    got[1] = 2.5
    assert not check_output("v", got, want, "f32", run).ok



def test_an_overflow_whose_honest_evaluation_came_back_within_the_range_is_not_judged():
    """float64 beyond float32's range, float32's honest evaluation finite and small (an
    intermediate overflowed and was absorbed on the way; benchmarks/fuzz.py, random program
    seed 180147): the kernel's value is not judged there, the entry counted as an overflow.
    Where the honest evaluation is the overflow itself, a finite kernel value is still wrong,
    and so is a wrong value in range beside it."""
    want = np.array([4.580978438939684e38, 2.0, 3.0])
    run = np.array([-38918.3, 2.0, 3.0], dtype=np.float32)
    for g0 in (-38918.3, 7.0, np.inf):
        got = np.array([g0, 2.0, 3.0], dtype=np.float32)
        c = check_output("v", got, want, "f32", run)
        assert c.ok and c.status == "overflow" and c.overflow == 1, g0
    got = np.array([-38918.3, 2.5, 3.0], dtype=np.float32)
    assert not check_output("v", got, want, "f32", run).ok
    run[0] = np.inf
    got = np.array([-38918.3, 2.0, 3.0], dtype=np.float32)
    bad = check_output("v", got, want, "f32", run)
    assert not bad.ok and bad.first_bad == (0,)


def test_nan_where_float64_ran_past_its_range_and_the_run_precision_met_inf_minus_inf():
    """A matrix squared again and again in a loop (benchmarks/fuzz.py, random program seed 5287):
    float64 ends at an infinity where float32, past its range long before, meets inf - inf and
    gives NaN, as its honest evaluation does: not a wrong kernel. NaN where the honest float32
    evaluation is an infinity, or where float64 is finite, still is."""
    want = np.array([np.inf, -np.inf, 2.0])
    run = np.array([np.nan, -np.inf, 2.0], dtype=np.float32)
    got = np.array([np.nan, -np.inf, 2.0], dtype=np.float32)
    assert check_output("v", got, want, "f32", run).ok
    got[1] = np.nan  # the honest evaluation has -inf there
    assert not check_output("v", got, want, "f32", run).ok
    assert not check_output("v", np.array([np.nan, -np.inf, 2.0], dtype=np.float32), want, "f32").ok  # no run

def test_float64_runs_of_loops_allow_compounded_rounding_and_nothing_more():
    """A hundred power-iteration steps in float64: the kernels' order of operations departs from
    the reference's by rounding compounded over the iterations, which the per-entry float64
    reference shows as well (the allowance); a straight program keeps the plain allowance, and a
    wrong entry is still caught in both."""
    import os

    from conftest import EXAMPLES

    for name, looped in (("power_iteration.kas", True), ("synctest.kas", False)):
        path = next(p for p in EXAMPLES if os.path.basename(p) == name)
        plan, _ = compile_program(path, None, "f64", compile_gpu=False)
        inputs = random_inputs(plan.reference_program, 3000, 7, np.float64)
        want = run_references(plan.reference_program, inputs, "f64")
        assert (want.run_precision is not None) == looped
        got = Executor(plan, CpuDevice(plan)).run(inputs, 3000).outputs
        assert all(c.ok for c in check_outputs(got, want, "f64"))
        out = next(iter(got))
        got[out] = got[out].copy()
        got[out][1234] *= 1 + 1e-6
        assert not any(c.ok for c in check_outputs(got, want, "f64") if c.name == out)


DOT = "vector6 a, b; scalar w;\ninput a, b;\nw = vdot6(a, b);\nreturn w;\n"


def test_rounding_in_another_honest_order_where_a_value_cancels_is_not_a_mismatch(tmp_path):
    """Terms near 1 that cancel to 1e-4: the generated code's order (as the float32 reference
    computes it) may happen to round luckily on an element where another honest float32 order
    (the same products summed last to first, as fused multiply-adds may) does not. The rounding
    bound of the kernels' arithmetic allows it; without the bound that is a false alarm, and a
    1% error on an element that does not cancel is still caught."""
    from dataclasses import replace

    n = 4000
    rng = np.random.default_rng(5)
    a = rng.uniform(0.5, 1.5, (n, 6))
    b = rng.uniform(-1, 1, (n, 6))
    b[:, 5] = (1e-4 - (a[:, :5] * b[:, :5]).sum(axis=1)) / a[:, 5]  # a . b = 1e-4 in float64
    b[: n // 2, 5] = rng.uniform(-1, 1, n // 2)  # the first half does not cancel
    inputs = {"a": a.astype(np.float32), "b": b.astype(np.float32)}
    _, refs, _ = _run_on_cpu(tmp_path, DOT, inputs, n)
    products = inputs["a"] * inputs["b"]  # float32 products, summed in float32 last to first
    other = products[:, 5]
    for k in range(4, -1, -1):
        other = (other + products[:, k]).astype(np.float32)
    (with_bound,) = check_outputs({"w": other}, refs, "f32")
    (without,) = check_outputs({"w": other}, replace(refs, rounding=None), "f32")
    assert with_bound.ok, with_bound.describe()
    assert not without.ok  # the luck of one order was all the old allowance had
    wrong = other.copy()
    wrong[7] *= 1.01
    (caught,) = check_outputs({"w": wrong}, refs, "f32")
    assert not caught.ok and caught.first_bad == (7,), caught.describe()


def test_rounding_bounds_hold_and_are_tight_on_a_sum_of_products():
    """R times the bound of a float32 dot product (as the verification allows) covers its error
    in every order tried, not only the generated code's, and the bound is within a small factor
    of u * sum|a_k b_k| (not a blanket allowance)."""
    from irfuse.frontend.irgen import compile_source
    from irfuse.verification.reference import find_program, rounding_bounds

    program = find_program(compile_source(DOT, "d.kas").module)
    rng = np.random.default_rng(1)
    a = rng.uniform(-1, 1, (500, 6)).astype(np.float32)
    b = rng.uniform(-1, 1, (500, 6)).astype(np.float32)
    bound = rounding_bounds(program, {"a": a, "b": b}, "f32")["w"]
    exact = (a.astype(np.float64) * b).sum(axis=1)
    for order in ([0, 1, 2, 3, 4, 5], [5, 4, 3, 2, 1, 0], [3, 0, 5, 1, 4, 2]):
        acc = np.zeros(500, np.float32)
        for k in order:
            acc = (acc + a[:, k] * b[:, k]).astype(np.float32)
        assert (np.abs(acc - exact) <= ROUNDING_FACTOR * bound).all()
    u = np.finfo(np.float32).eps / 2
    assert (bound <= 12 * u * np.abs(a.astype(np.float64) * b).sum(axis=1)).all()


def test_an_inverse_singular_to_within_rounding_is_not_judged_and_said_so(tmp_path):
    """inv of matrices whose determinant lies within its own float32 rounding error of zero:
    float32 does not determine the result (the GPU's fused multiply-adds gave 3x the float64
    value on such elements of the Neo-Hookean example), so no rounding bound holds and the
    entries are counted, not judged; a 1% error on a well-conditioned element beside them is
    still caught."""
    src = "matrix3x3 A, B;\ninput A;\nB = inv(A);\nreturn B;\n"
    n = 200
    rng = np.random.default_rng(2)
    A = rng.uniform(-1, 1, (n, 3, 3))
    A[:50, 2] = A[:50, 0] + A[:50, 1] + rng.uniform(-1, 1, (50, 3)) * 1e-7  # singular within rounding
    inputs = {"A": A.astype(np.float32)}
    got, refs, _ = _run_on_cpu(tmp_path, src, inputs, n)
    other = got["B"].copy()
    other[:50] *= 3  # what another honest order may give where nothing is determined
    (check,) = check_outputs({"B": other}, refs, "f32")
    assert check.ok and check.unbounded > 0, check.describe()
    assert "not judged: the run's precision does not determine them" in check.describe()
    wrong = other.copy()
    wrong[120, 1, 1] *= 1.01
    (caught,) = check_outputs({"B": wrong}, refs, "f32")
    assert not caught.ok and caught.first_bad == (120, 1, 1), caught.describe()
