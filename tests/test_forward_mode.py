"""Forward mode (`kas-jvp`, `irfuse.jvp`): derivative programs of random programs (straight,
batch-wide values and reductions, element codes with branches and indexed loops, meshes)
against central differences of the programs themselves in float64; the API on each kind of
source, composed with itself; a derivative program compiled and run as any program."""

import numpy as np
import pytest

import irfuse
from irfuse.diagnostics import UsageError
from irfuse.dialects.kas import CallOp, program_of
from irfuse.testing import derivatives as derivative_checks
from irfuse.testing.derivatives import GENERATORS, jvp_against_differences, random_differentiable_programs


@pytest.mark.parametrize("kind", GENERATORS)
def test_random_programs_derivatives_match_central_differences(kind):
    compared = 0
    for seed in range(10):
        src = random_differentiable_programs(kind, seed)
        out = jvp_against_differences(src, n=24, seed=seed)
        assert not out.mismatches, (src, out.mismatches)
        compared += out.compared
        assert out.compared >= out.skipped, (src, "most entries should be smooth")
    assert compared > 1000


def test_the_check_finds_a_wrong_derivative(monkeypatch):
    """The check is not vacuous: a derivative program whose exp's derivative is replaced by
    sin's (the same signature) is caught."""
    real = derivative_checks.forward_derivative

    def wrong(program, wrt, library, prefix="d"):
        derived = real(program, wrt, library, prefix)
        for op in derived.walk():
            if isinstance(op, CallOp) and op.op_name == "jvp_1__exp_s":
                op.properties["callee"] = type(op.callee)("jvp_1__sin_s")
        return derived

    monkeypatch.setattr(derivative_checks, "forward_derivative", wrong)
    src = "scalar x, y, z; input x; y = exp(x); z = scale(y, 2); return z;"
    out = jvp_against_differences(src, n=16)
    assert out.mismatches and out.mismatches[0].startswith("dz[")
    monkeypatch.setattr(derivative_checks, "forward_derivative", real)
    assert not jvp_against_differences(src, n=16).mismatches


SOURCE = """
matrix3x3 F; scalar J, W; uniform scalar mu; uniform scalar E;
input F, mu;
J = det(F);
W = log(J);
W = smul(W, mu);
E = sum(W);
return W, E;
"""


def _python_energy(F: irfuse.Matrix[3, 3], mu: irfuse.Uniform[irfuse.Scalar]):
    W = irfuse.ops.smul(irfuse.ops.log(irfuse.ops.det(F)), mu)
    return W


def test_jvp_takes_text_files_functions_and_modules_and_composes(tmp_path):
    path = tmp_path / "energy.kas"
    path.write_text(SOURCE)
    for source in (SOURCE, path, str(path)):
        program = program_of(irfuse.jvp(source, wrt="F"))
        assert program.inputs == ["F", "mu", "dF"] and program.outputs == ["W", "E", "dW", "dE"]
    from_function = program_of(irfuse.jvp(_python_energy, wrt=("F", "mu")))
    assert from_function.inputs[-2:] == ["dF", "dmu"] and from_function.uniform == ["mu", "dmu"]
    once = irfuse.jvp(SOURCE, wrt="F")
    twice = program_of(irfuse.jvp(once, wrt="F", prefix="e"))  # a second derivative along F
    assert twice.inputs == ["F", "mu", "dF", "eF"] and twice.outputs[-1] == "edE"
    assert program_of(once).inputs == ["F", "mu", "dF"]  # the module given is not changed
    with pytest.raises(UsageError, match="'G' is not an input"):
        irfuse.jvp(SOURCE, wrt="G")
    with pytest.raises(UsageError, match="the tangent 'dF' would have the name of an input"):
        irfuse.jvp(once, wrt="F")
    with pytest.raises(UsageError, match="wrt takes an input's name or a list of names, not \\[1\\]"):
        irfuse.jvp(SOURCE, wrt=[1])
    for derive, default in ((irfuse.jvp, "d"), (irfuse.vjp, "bar_")):  # (an empty prefix is no name: not the default)
        with pytest.raises(UsageError, match=f"prefix is empty, so each would have its value's name; give one "
                                             f"\\(the default: '{default}'\\)"):
            derive(SOURCE, wrt="F", prefix="")
    with pytest.raises(UsageError, match="the default: 'grad_'"):
        irfuse.grad(SOURCE, of="E", wrt="F", prefix="")


@irfuse.derivative("jvp", wrt="F", prefix="e")
@irfuse.derivative("jvp", wrt=("F", "mu"))
@irfuse.program
def _declared(F: irfuse.Matrix[3, 3], mu: irfuse.Uniform[irfuse.Scalar]):
    W = irfuse.ops.smul(irfuse.ops.log(irfuse.ops.det(F)), mu)
    return W


def test_a_python_program_declares_its_derivatives_as_kas_does():
    """`@irfuse.derivative` stacked: the one nearest the def first, as KAS `derivative` lines
    in order; bad declarations refused where they are made."""
    from irfuse.driver.front import module_of

    kas = SOURCE.replace("E = sum(W);", "").replace("return W, E;", "return W;")
    want = program_of(irfuse.jvp(irfuse.jvp(kas, wrt=("F", "mu")), wrt="F", prefix="e"))
    got = program_of(module_of(_declared))
    assert (got.inputs, got.outputs, got.uniform) == (want.inputs, want.outputs, want.uniform)
    assert [op.op_name for op in got.walk() if isinstance(op, CallOp)][:4] == [
        "det_3x3", "jvp_1__det_3x3", "jvp_1__det_3x3", "jvp_10__jvp_1__det_3x3"]
    with pytest.raises(UsageError, match="unknown mode 'hvp'"):
        irfuse.derivative("hvp", wrt="F")
    with pytest.raises(UsageError, match="wrt takes the names of inputs"):
        irfuse.derivative("jvp", wrt=())
    with pytest.raises(UsageError, match="unknown mode array"):
        irfuse.derivative(np.zeros(2), wrt="F")
    for wrt in (3, object(), {"F"}):
        with pytest.raises(UsageError, match="wrt takes the names of inputs"):
            irfuse.derivative("jvp", wrt=wrt)
    with pytest.raises(UsageError, match="loops takes 'auto', 'unroll' or 'tape'"):
        irfuse.derivative("vjp", wrt="F", loops=np.zeros(2))
    with pytest.raises(UsageError, match="applies to a function"):
        irfuse.derivative("jvp", wrt="F")(3)


def test_a_derivative_program_compiles_and_runs_as_any_program():
    """The second derivative of the energy along F, declared by `derivative` lines: compiled
    for sm_90 (NVRTC) without spills, and for the CPU in float64, its outputs checked against
    the reference run (`check`), d(dE) against the difference of dE along the second tangent."""
    from irfuse.driver.compile import compile_text

    declared = SOURCE + "derivative jvp wrt F;\nderivative jvp wrt F prefix e;\n"
    plan, _ = compile_text(declared, "energy.kas", dtype="f64", compile_gpu=True, arch="sm_90")
    assert plan.cubin.resources and all(r.spill_stores == r.spill_loads == 0 for r in plan.cubin.resources.values())
    program = irfuse.compile(declared, dtype="f64", backend="cpu")
    assert program.outputs == ("W", "E", "dW", "dE", "eW", "eE", "edW", "edE")
    first = irfuse.compile(irfuse.jvp(SOURCE, wrt="F"), dtype="f64", backend="cpu")
    rng = np.random.default_rng(3)
    n = 300
    F = np.eye(3) + 0.3 * rng.uniform(-1, 1, (n, 3, 3))
    dF, eF = rng.uniform(-1, 1, (2, n, 3, 3))
    mu = np.array(1.7)
    assert program.check(F=F, mu=mu, dF=dF, eF=eF).ok
    out = program(F=F, mu=mu, dF=dF, eF=eF)
    h = 1e-5
    up, down = first(F=F + h * eF, mu=mu, dF=dF), first(F=F - h * eF, mu=mu, dF=dF)
    np.testing.assert_allclose(out["edE"], (up["dE"] - down["dE"]) / (2 * h), rtol=1e-6)
    np.testing.assert_allclose(out["edW"], (up["dW"] - down["dW"]) / (2 * h), rtol=1e-6, atol=1e-8)
    np.testing.assert_array_equal(out["E"], first(F=F, mu=mu, dF=dF)["E"])
