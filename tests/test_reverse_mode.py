"""Reverse mode (`kas-vjp`, `irfuse.vjp`, `irfuse.grad`): the dot-product test against forward
mode on random programs of every generator (loops unrolled, batch-wide values and reductions,
element codes, meshes); loops taped (histories, checkpointed segments) against the same test,
against unrolling and against central differences; gradients against central differences; a
gradient and its Hessian-vector product compiled (sm_90 and the CPU) and run; the API and the
declarations."""

import numpy as np
import pytest

import irfuse
from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import CallOp, program_of
from irfuse.testing import derivatives as derivative_checks
from irfuse.testing.derivatives import (GENERATORS, NEO_HOOKEAN_ENERGY as ENERGY, NODAL_AFTER_SCATTER, SCALAR_LOOP,
                                        TIME_LOOP, random_differentiable_programs, vjp_against_jvp)


@pytest.mark.parametrize("kind", GENERATORS)
def test_reverse_and_forward_derivatives_of_random_programs_pass_the_dot_product_test(kind):
    made = 0
    for seed in range(10):
        src = random_differentiable_programs(kind, seed)
        dots = vjp_against_jvp(src, n=24, seed=seed)
        if dots.made:
            made += 1
            assert dots.agree(), (src, dots)
    assert made >= 7


def test_the_dot_product_test_finds_a_wrong_reverse_derivative(monkeypatch):
    real = derivative_checks.reverse_derivative

    def wrong(program, wrt, library, of=None, prefix=None, who="kas-vjp", loops="auto", judge=None):
        derived = real(program, wrt, library, of, prefix, who, loops, judge)
        for op in derived.walk():
            if isinstance(op, CallOp) and op.op_name == "vjp_0__exp_s":
                op.properties["callee"] = type(op.callee)("vjp_0__sin_s")
        return derived

    monkeypatch.setattr(derivative_checks, "reverse_derivative", wrong)
    src = "scalar x, y, z; input x; y = exp(x); z = scale(y, 2); return z;"
    dots = vjp_against_jvp(src, n=16)
    assert dots.made and not dots.agree()


def _states(n, seed=0):
    rng = np.random.default_rng(seed)
    return np.eye(3) + 0.3 * rng.uniform(-1, 1, (n, 3, 3)), rng.uniform(-1, 1, (n, 3, 3))


def test_the_gradient_of_an_energy_matches_central_differences_and_compiles():
    """The gradient of a Neo-Hookean energy by F and the material parameters, declared by a
    `derivative` line: compiled for sm_90 (NVRTC) without spills and run on the CPU in float64
    against the reference (`check`) and against central differences of E; then its
    Hessian-vector product (`jvp` of the gradient) against differences of the gradient."""
    from irfuse.driver.compile import compile_text

    declared = ENERGY + "derivative grad of E wrt F, mu, lam;\n"
    plan, _ = compile_text(declared, "energy.kas", dtype="f64", compile_gpu=True, arch="sm_90")
    assert all(r.spill_stores == r.spill_loads == 0 for r in plan.cubin.resources.values())
    gradient = irfuse.compile(declared, dtype="f64", backend="cpu")
    energy = irfuse.compile(ENERGY, dtype="f64", backend="cpu")
    assert gradient.outputs == ("E", "grad_F", "grad_mu", "grad_lam")
    F, dF = _states(200)
    mu, lam = np.array(1.3), np.array(0.8)
    assert gradient.check(F=F, mu=mu, lam=lam).ok
    out = gradient(F=F, mu=mu, lam=lam)
    h = 1e-6
    fd = (energy(F=F + h * dF, mu=mu, lam=lam)["E"] - energy(F=F - h * dF, mu=mu, lam=lam)["E"]) / (2 * h)
    np.testing.assert_allclose(np.sum(out["grad_F"] * dF), fd, rtol=1e-7)
    fd_mu = (energy(F=F, mu=mu + h, lam=lam)["E"] - energy(F=F, mu=mu - h, lam=lam)["E"]) / (2 * h)
    np.testing.assert_allclose(out["grad_mu"], fd_mu, rtol=1e-7)
    hvp = irfuse.compile(irfuse.jvp(irfuse.grad(ENERGY, of="E", wrt="F"), wrt="F"), dtype="f64", backend="cpu")
    first = irfuse.compile(irfuse.grad(ENERGY, of="E", wrt="F"), dtype="f64", backend="cpu")
    got = hvp(F=F, mu=mu, lam=lam, dF=dF)["dgrad_F"]
    want = (first(F=F + h * dF, mu=mu, lam=lam)["grad_F"] - first(F=F - h * dF, mu=mu, lam=lam)["grad_F"]) / (2 * h)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)


@irfuse.derivative("grad", of="E", wrt="F")
@irfuse.program
def _energy(F: irfuse.Matrix[3, 3], mu: irfuse.Uniform[irfuse.Scalar]):
    W = irfuse.ops.smul(irfuse.ops.log(irfuse.ops.det(F)), mu)
    E = irfuse.sum(W)
    return E


def test_vjp_and_grad_take_every_source_and_refuse_what_does_not_fit():
    m = program_of(irfuse.vjp(ENERGY, wrt=("F", "mu")))
    assert m.inputs == ["F", "mu", "lam", "bar_E"] and m.outputs == ["E", "bar_F", "bar_mu"]
    g = program_of(irfuse.grad(ENERGY, of="E", wrt="F", prefix="g"))
    assert g.inputs == ["F", "mu", "lam"] and g.outputs == ["E", "gF"]
    # the derivatives alone: the energy's sum, which only the output E needed, is gone
    alone = program_of(irfuse.vjp(ENERGY, wrt=("F", "mu"), with_outputs=False))
    assert alone.inputs == m.inputs and alone.outputs == ["bar_F", "bar_mu"]

    def sums(p):
        return sum(op.name == "kas.reduce" for op in p.body.walk())
    assert sums(alone) == sums(m) - 1
    tangents = program_of(irfuse.jvp(ENERGY, wrt="F", with_outputs=False))
    assert tangents.outputs == ["dE"]
    from irfuse.driver.front import module_of

    declared = program_of(module_of(_energy))
    assert declared.outputs == ["E", "grad_F"] and declared.sym_name.data.endswith("_grad")
    with pytest.raises(UsageError, match="'W' is not an output"):
        irfuse.grad(ENERGY, of="W", wrt="F")
    with pytest.raises(UsageError, match="of takes an output's name"):
        irfuse.grad(ENERGY, of=("E",), wrt="F")
    with pytest.raises(UsageError, match="'grad', 'jacobian' and 'hessian' take the output's name as of="):
        irfuse.derivative("vjp", wrt="F", of="E")
    with pytest.raises(UsageError, match="'grad', 'jacobian' and 'hessian' take the output's name as of="):
        irfuse.derivative("grad", wrt="F")


@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["jvp", "vjp"])
def test_derivative_programs_run_through_their_plans_and_compile_for_sm90(mode, tmp_path):
    """A random program's derivative (a loop, several outputs) through its two best plans on
    the CPU against the reference, each compiled for sm_90 too: what `benchmarks/fuzz.py
    --derivatives` runs over many programs."""
    from irfuse.frontend.irgen import compile_source
    from irfuse.testing.derivatives import differentiable_inputs
    from irfuse.testing.differential import Budget, check_source
    from irfuse.testing.random_programs import random_program

    src = random_program(3, 5)
    assert "loop" in src
    wrt = differentiable_inputs(program_of(compile_source(src, "random.kas").module))
    out = check_source(src + f"\nderivative {mode} wrt {', '.join(wrt)};\n", Budget(top=2, n=61, seed=3, nvrtc=True),
                       str(tmp_path))
    assert out.ok and out.plans == 2, (out.failure, out.detail)


def _reverse(src, wrt, loops, of=None):
    from irfuse.frontend.irgen import compile_source
    from irfuse.library.catalogue import default_library
    from irfuse.planner.loop_forms import LOOP_JUDGE
    from irfuse.transforms.reverse_mode import reverse_derivative

    program = program_of(compile_source(src, "loops.kas").module)
    return program, reverse_derivative(program, wrt, default_library(), of, loops=loops, judge=LOOP_JUDGE)


def _loops(program):
    from irfuse.dialects.kas import LoopOp

    return [op for op in program.walk() if isinstance(op, LoopOp)]


def _history_rows(program) -> int:
    """The rows of the longest history a taped derivative keeps (0: none)."""
    from irfuse.library.catalogue import default_library

    lib = default_library()
    return max((lib.get(op.op_name).result_type.shape[0] for op in program.walk()
                if isinstance(op, CallOp) and op.op_name.startswith("repeat_")), default=0)


@pytest.mark.heavy
def test_taped_loops_pass_the_dot_product_test_and_give_the_unrolled_cotangents():
    """Random programs whose loops carry values (`carried`), differentiated with every loop
    taped: the dot-product test against forward mode, and the cotangents of unrolling (float64
    reference, the same up to rounding: the same arithmetic in another order of additions)."""
    from irfuse.frontend.irgen import compile_source
    from irfuse.testing.derivatives import differentiable_inputs
    from irfuse.transforms.reverse_mode import _tapeable
    from irfuse.verification.reference import random_inputs, run_reference

    taped = 0
    for seed in range(12):
        src = random_differentiable_programs("carried", seed)
        dots = vjp_against_jvp(src, n=24, seed=seed, loops="tape")
        assert not dots.made or dots.agree(), (src, dots)
        program = program_of(compile_source(src, "loops.kas").module)
        wrt = differentiable_inputs(program)
        _, tape = _reverse(src, wrt, "tape")
        _, unrolled = _reverse(src, wrt, "unroll")
        assert not _loops(unrolled)
        taped += sum(_tapeable(op) for op in _loops(program))
        if any(_tapeable(op) for op in _loops(program)):
            assert _loops(tape)
        inputs = random_inputs(program, 24, seed, np.float64)
        base = run_reference(program, inputs, 24)
        rng = np.random.default_rng(seed)
        seeds = {"bar_" + k: rng.uniform(-1, 1, np.shape(base[k])) for k in program.outputs}
        with np.errstate(all="ignore"):
            a = run_reference(tape, {**inputs, **seeds}, 24)
            b = run_reference(unrolled, {**inputs, **seeds}, 24)
        for k in b:
            np.testing.assert_allclose(np.asarray(a[k]), np.asarray(b[k]), rtol=1e-9, atol=1e-12, err_msg=k)
    assert taped >= 12




@pytest.mark.heavy
def test_a_long_loop_is_taped_in_checkpointed_segments_and_its_gradient_is_right():
    """The time loop's gradient with its loop taped as the planner prices it: split into
    checkpointed segments (no loop of 40 iterations, none of more than 6); the same gradient
    as unrolled, and as central differences of E; its Hessian-vector product (jvp of the taped
    gradient) the unrolled one's."""
    from irfuse.verification.reference import run_reference

    program, tape = _reverse(TIME_LOOP, ["A", "x", "h"], "tape", of="E")
    _, unrolled = _reverse(TIME_LOOP, ["A", "x", "h"], "unroll", of="E")
    trips = sorted(op.trip_count.data for op in _loops(tape))
    assert 40 not in trips and _history_rows(tape) <= 6, (trips, _history_rows(tape))
    rng = np.random.default_rng(0)
    n = 32
    inputs = {"A": 0.4 * rng.uniform(-1, 1, (n, 3, 3)), "x": rng.uniform(-1, 1, (n, 3)), "h": np.array(0.1)}
    got, want = run_reference(tape, inputs, n), run_reference(unrolled, inputs, n)
    for k in ("grad_A", "grad_x", "grad_h"):
        np.testing.assert_allclose(got[k], want[k], rtol=1e-11, atol=1e-14, err_msg=k)
    d = {"A": rng.uniform(-1, 1, (n, 3, 3)), "x": rng.uniform(-1, 1, (n, 3)), "h": np.array(0.7)}
    step = 1e-6
    moved = [run_reference(program, {k: v + s * step * d[k] for k, v in inputs.items()}, n)["E"] for s in (1, -1)]
    fd = (moved[0] - moved[1]) / (2 * step)
    exact = sum(np.sum(got["grad_" + k] * d[k]) for k in d)
    np.testing.assert_allclose(exact, fd, rtol=1e-7)
    hvp_tape = program_of(irfuse.jvp(irfuse.grad(TIME_LOOP, of="E", wrt=("x", "h"), loops="tape"), wrt="x"))
    hvp_unrolled = program_of(irfuse.jvp(irfuse.grad(TIME_LOOP, of="E", wrt=("x", "h"), loops="unroll"), wrt="x"))
    args = {**inputs, "dx": d["x"]}
    a, b = run_reference(hvp_tape, args, n), run_reference(hvp_unrolled, args, n)
    for k in ("dgrad_x", "dgrad_h"):
        np.testing.assert_allclose(a[k], b[k], rtol=1e-10, atol=1e-13, err_msg=k)


@pytest.mark.heavy
def test_how_often_a_taped_loop_is_split_is_the_planners_price():
    """The taped forms of a 40-step loop, by levels of splitting: whole (one history of 40
    rows), split once (4 + 6 x 6), then into segments of 2-3 iterations; `reverse_derivative`
    takes the one its judge prices lowest among those whose kernels fit the registers (ties:
    fewer levels; none fits: the lowest price) and stops once nothing more splits. Judges
    that count loops show each choice; the planner's own price (`taped_price`) splits the
    40-step scalar loop twice (measured on an H200: 0.114 ms in segments of 2-3 iterations,
    0.820 whole), predicting the whole history slower; both give the same gradient."""
    from irfuse.frontend.irgen import compile_source
    from irfuse.library.catalogue import default_library
    from irfuse.planner.loop_forms import LOOP_JUDGE, taped_price, unrolled_fits
    from irfuse.transforms.reverse_mode import LoopJudge, reverse_derivative
    from irfuse.verification.reference import run_reference

    program = program_of(compile_source(SCALAR_LOOP, "loops.kas").module)
    seen = []

    def fewest_loops(p):
        return True, float(len(_loops(p)))

    def derive(price):
        def priced(p):
            seen.append(_history_rows(p))
            return price(p)
        seen.clear()
        derived = reverse_derivative(program, ["x", "a", "h"], default_library(), "E", loops="tape",
                                     judge=LoopJudge(unrolled_fits, priced))
        return _history_rows(derived)

    assert derive(fewest_loops) == 40  # (the whole)
    assert seen == [40, 6, 3], seen  # (whole; split once: 4 + 6 x 6; again: segments of 2-3)
    assert derive(lambda p: (True, -float(len(_loops(p))))) == 3
    assert derive(lambda p: (_history_rows(p) != 40, 0.0)) == 6  # (the whole does not fit)
    assert derive(lambda p: (_history_rows(p) == 40, 1.0)) == 40  # (only the whole fits)
    assert derive(lambda p: (False, 1.0)) == 40  # (none fits, a tie: fewer levels)
    assert derive(taped_price) == 3
    whole = reverse_derivative(program, ["x", "a", "h"], default_library(), "E", loops="tape",
                               judge=LoopJudge(unrolled_fits, fewest_loops))
    split = reverse_derivative(program, ["x", "a", "h"], default_library(), "E", loops="tape", judge=LOOP_JUDGE)
    assert taped_price(split)[1] < taped_price(whole)[1]
    rng = np.random.default_rng(1)
    inputs = {"x": rng.uniform(-1, 1, 16), "a": rng.uniform(-1, 1, 16), "h": np.array(0.05)}
    a, b = run_reference(whole, inputs, 16), run_reference(split, inputs, 16)
    for k in ("grad_x", "grad_a", "grad_h"):
        np.testing.assert_allclose(a[k], b[k], rtol=1e-11, atol=1e-14, err_msg=k)


@pytest.mark.heavy
def test_loops_auto_unrolls_what_fits_the_registers_and_tapes_the_rest_and_a_taped_gradient_runs(tmp_path):
    """loops=auto, the planner's decision (`planner.loop_forms`): 8 steps of the time loop
    unrolled; a loop carrying one scalar unrolled at 40 steps (160 statements: few values live
    at once); the time loop unrolled at 40 steps (measured on an H200: 1.29x faster than
    taped) and taped at 60 (its unrolled kernel needs more registers than a thread has: the
    power iteration's so measured 2.3x slower than taped); 1,100 steps (4,400 statements) taped where
    loops=unroll refuses; a 12-step time loop's gradient declared with `loops tape` run
    through its best plan on the CPU against the reference (both CPU renderings) and compiled
    for sm_90; a loop carrying a mask is unrolled even with loops=tape; a mode that does not
    exist is refused, in the API and at the declaration."""
    from irfuse.diagnostics import CompileError
    from irfuse.library.catalogue import default_library
    from irfuse.planner.loop_forms import LOOP_JUDGE, unrolled_fits
    from irfuse.testing.differential import Budget, check_source
    from irfuse.transforms.reverse_mode import LoopJudge, reverse_derivative

    _, short = _reverse(TIME_LOOP.replace("loop 40", "loop 8"), ["x"], "auto", of="E")
    assert not _loops(short)
    assert not _loops(_reverse(SCALAR_LOOP, ["x", "a", "h"], "auto", of="E")[1])
    for steps, fits in ((40, True), (60, False)):
        program, unrolled = _reverse(TIME_LOOP.replace("loop 40", f"loop {steps}"), ["A", "x", "h"], "unroll", of="E")
        judged = []  # (the straight-code derivative the judge was shown, its answer)

        def recording(candidate, judged=judged):
            judged.append((str(candidate), unrolled_fits(candidate)))
            return judged[-1][1]

        auto = reverse_derivative(program, ["A", "x", "h"], default_library(), "E", loops="auto",
                                  judge=LoopJudge(recording, LOOP_JUDGE.taped_price))
        assert judged == [(str(unrolled), fits)], steps
        assert bool(_loops(auto)) is not fits, steps
    for loops in ("auto", "tape"):
        with pytest.raises(ValueError, match=f"loops='{loops}' needs the planner's answers"):
            reverse_derivative(program, ["x"], default_library(), "E", loops=loops)
    long = TIME_LOOP.replace("loop 40", "loop 1100")
    assert _loops(_reverse(long, ["x"], "auto", of="E")[1])
    with pytest.raises(CompileError, match="loops=auto or loops=tape runs it with a history"):
        _reverse(long, ["x"], "unroll", of="E")
    # (12 steps: a history of 36 words, one loop each way; the planner's search over the split
    # loops' kernels takes a minute, their arithmetic is checked on the reference above)
    declared = TIME_LOOP.replace("loop 40", "loop 12") + "derivative grad of E wrt A, x, h loops tape;\n"
    out = check_source(declared, Budget(top=1, n=37, seed=2, nvrtc=True), str(tmp_path))
    assert out.ok and out.plans == 1 and out.in_kernel_loops, (out.failure, out.detail)
    masked = """
vector3 x; mask m; scalar s;
input x;
s = vdot3(x, x);
m = gt(s, 0.5);
loop 3 {
  x = svmul3(x, s);
  m = not(m);
}
x = select(m, x, x);
return x;
"""
    _, fallback = _reverse(masked, ["x"], "tape")
    assert not _loops(fallback)
    with pytest.raises(UsageError, match="loops='sometimes' is not one of auto, unroll, tape"):
        irfuse.grad(TIME_LOOP, of="E", wrt="x", loops="sometimes")
    with pytest.raises(UsageError, match="loops=\\['tape'\\] is not one of auto, unroll, tape"):
        irfuse.grad(TIME_LOOP, of="E", wrt="x", loops=["tape"])
    with pytest.raises(UsageError, match="with_outputs is True or False, not 1"):
        irfuse.vjp(TIME_LOOP, wrt="x", with_outputs=1)
    with pytest.raises(CompileError, match="loops='sometimes' is not one of auto, unroll, tape"):
        irfuse.compile(TIME_LOOP + "derivative grad of E wrt x loops sometimes;\n", backend="cpu")
    with pytest.raises(CompileError, match="'loops' says how reverse mode differentiates loops"):
        irfuse.compile(TIME_LOOP + "derivative jvp wrt x loops tape;\n", backend="cpu")
    with pytest.raises(UsageError, match="loops takes 'auto', 'unroll' or 'tape'"):
        irfuse.derivative("grad", of="E", wrt="x", loops="always")




@pytest.mark.parametrize("how", ["grad", "vjp", "line"])
def test_reverse_derivatives_of_nonlinear_nodal_statements_after_the_scatter_run_a_second_element_pass(how):
    """`irfuse.grad`, `irfuse.vjp` and a `derivative grad` line of a mesh program whose nodal
    statements on a scatter's sums are nonlinear once raised xDSL's VerifyException (the
    reverse pass gathers the sums' cotangent). They run as passes elements, nodes, elements
    now: against central differences of the program (float64, CPU) and the dot-product test."""
    from irfuse.mesh import box_tetrahedra

    X, conn = box_tetrahedra(2)[:2]
    rng = np.random.default_rng(3)
    u = rng.uniform(-0.3, 0.3, X.shape)
    k = np.float64(1.7)
    if how == "grad":
        derived = irfuse.compile(irfuse.grad(NODAL_AFTER_SCATTER, of="E", wrt=("u", "k")), backend="cpu", dtype="f64")
    elif how == "line":
        derived = irfuse.compile(NODAL_AFTER_SCATTER + "derivative grad of E wrt u, k;", backend="cpu", dtype="f64")
    else:
        derived = irfuse.compile(irfuse.vjp(NODAL_AFTER_SCATTER, wrt=("u", "k")), backend="cpu", dtype="f64")
    assert [p.over for p in derived.stages] == ["elements", "nodes", "elements"]
    args = (u, conn, k) if how != "vjp" else (u, conn, k, np.float64(1.0), np.zeros_like(u))
    out = derived(*args, verify=True)
    gu, gk = (out.grad_u, out.grad_k) if how != "vjp" else (out.bar_u, out.bar_k)
    program = irfuse.compile(NODAL_AFTER_SCATTER, backend="cpu", dtype="f64")
    d = rng.standard_normal(u.shape)
    h = 1e-6
    along = (program(u + h * d, conn, k).E - program(u - h * d, conn, k).E) / (2 * h)
    assert np.sum(gu * d) == pytest.approx(along, rel=1e-6)
    by_k = (program(u, conn, k + h).E - program(u, conn, k - h).E) / (2 * h)
    assert gk == pytest.approx(by_k, rel=1e-6)
    dots = vjp_against_jvp(NODAL_AFTER_SCATTER, n=24, seed=1)
    assert dots.made and dots.agree()
