"""Reverse mode (`kas-vjp`, `irfuse.vjp`, `irfuse.grad`): the dot-product test against forward
mode on random programs of every generator (loops unrolled, batch-wide values and reductions,
element codes, meshes); gradients against central differences; a gradient and its
Hessian-vector product compiled (sm_90 and the CPU) and run; the API and the declarations."""

import numpy as np
import pytest

import irfuse
from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import CallOp, program_of
from irfuse.testing import derivatives as derivative_checks
from irfuse.testing.derivatives import (GENERATORS, NEO_HOOKEAN_ENERGY as ENERGY, random_differentiable_programs,
                                        vjp_against_jvp)


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

    def wrong(program, wrt, library, of=None, prefix=None, who="kas-vjp"):
        derived = real(program, wrt, library, of, prefix, who)
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
    from irfuse.frontend.python import compile_function

    declared = program_of(compile_function(_energy.fn).module)
    assert declared.outputs == ["E", "grad_F"] and declared.sym_name.data.endswith("_grad")
    with pytest.raises(UsageError, match="'W' is not an output"):
        irfuse.grad(ENERGY, of="W", wrt="F")
    with pytest.raises(UsageError, match="of takes an output's name"):
        irfuse.grad(ENERGY, of=("E",), wrt="F")
    with pytest.raises(UsageError, match="'grad' takes the output's name as of="):
        irfuse.derivative("vjp", wrt="F", of="E")
    with pytest.raises(UsageError, match="'grad' takes the output's name as of="):
        irfuse.derivative("grad", wrt="F")


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
