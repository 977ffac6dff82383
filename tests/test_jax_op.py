"""irfuse programs as JAX functions (`irfuse.jax.op`) on the CPU: the results are the program's
under `jax.jit`, `jax.grad`/`jax.vjp` run the reverse derivative and `jax.jvp` the forward one
(checked against each other and against central differences in float64 by JAX's own
`check_grads`), outputs nobody differentiates pass symbolic zeros, and bad calls are refused by
name. The GPU side is in `test_gpu.py`."""

import numpy as np
import pytest

jax = pytest.importorskip("jax")
jax.config.update("jax_enable_x64", True)

import jax.numpy as jnp  # noqa: E402
from jax.test_util import check_grads  # noqa: E402

import irfuse  # noqa: E402
import irfuse.jax  # noqa: E402
from irfuse.testing.derivatives import NEO_HOOKEAN_ENERGY  # noqa: E402

ROOT = __import__("os").path.dirname(__import__("os").path.dirname(__file__))

# Several outputs, one per element and one for the batch, a branch on a comparison.
STRESS = """
matrix3x3 F, C, S; scalar J, w; uniform scalar mu, W;
input F, mu;
C = mtmul(F, F);
J = det(F);
if (J > 1) { S = scale(C, mu); } else { S = scale(C, J); }
w = trace(S);
W = sum(w);
return S, W;
"""


@pytest.fixture(autouse=True)
def _on_the_cpu():
    """JAX's arrays on its CPU device (on a machine with a GPU too): the CPU backend's bits."""
    with jax.default_device(jax.devices("cpu")[0]):
        yield


def _deformations(n: int, seed: int = 0) -> np.ndarray:
    rng = np.random.default_rng(seed)
    return np.eye(3) + 0.2 * rng.standard_normal((n, 3, 3))


def test_results_under_jit_are_the_programs_and_derivatives_pass_check_grads():
    f = irfuse.jax.op(NEO_HOOKEAN_ENERGY)
    F, mu, lam = _deformations(6), np.array(1.3), np.array(0.7)
    E = jax.jit(f)(F, mu, lam)
    want = irfuse.compile(NEO_HOOKEAN_ENERGY, dtype="f64", backend="cpu")(F, mu, lam)
    assert E.shape == () and float(E) == float(want.E)
    check_grads(f, (jnp.asarray(F), jnp.asarray(mu), jnp.asarray(lam)), order=1, modes=("fwd", "rev"))
    grads = jax.jit(jax.grad(f, argnums=(0, 1, 2)))(F, mu, lam)
    program = irfuse.compile(irfuse.grad(NEO_HOOKEAN_ENERGY, of="E", wrt=("F", "mu", "lam")), dtype="f64",
                             backend="cpu")(F, mu, lam)
    np.testing.assert_array_equal(grads[0], program.grad_F)
    assert float(grads[1]) == float(program.grad_mu) and float(grads[2]) == float(program.grad_lam)


def test_several_outputs_branches_and_symbolic_zeros():
    f = irfuse.jax.op(STRESS)
    F, mu = jnp.asarray(_deformations(8, seed=3)), jnp.asarray(1.7)
    check_grads(f, (F, mu), order=1, modes=("fwd", "rev"))
    # A cotangent for S alone (W's is a symbolic zero), and the other way round.
    (S, W), pullback = jax.vjp(f, F, mu)
    only_S = pullback((jnp.ones_like(S), jnp.zeros_like(W)))
    only_W = pullback((jnp.zeros_like(S), jnp.ones_like(W)))
    via_grad = jax.grad(lambda F, mu: f(F, mu)[0].sum(), argnums=(0, 1))(F, mu)
    np.testing.assert_array_equal(only_S[0], via_grad[0])
    np.testing.assert_allclose(only_W[0], jax.grad(lambda F: f(F, mu)[1])(F), rtol=1e-15)
    # linearize: the forward derivative's tangents, one tangent map applied twice
    _, tangent_map = jax.linearize(lambda F: f(F, mu), F)
    dF = jnp.asarray(np.random.default_rng(4).standard_normal((8, 3, 3)))
    dS, dW = tangent_map(dF)
    np.testing.assert_array_equal(dS, jax.jvp(lambda F: f(F, mu), (F,), (dF,))[1][0])


def test_float32_and_a_mesh_program():
    f = irfuse.jax.op(f"{ROOT}/examples/mesh/lumped_mass.kas")
    rng = np.random.default_rng(1)
    X = jnp.asarray(rng.random((6, 3)), dtype=jnp.float32)
    conn = jnp.asarray([[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]], dtype=jnp.int32)
    dN = jnp.asarray([[-1.0, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=jnp.float32)
    quarter, rho = jnp.full((4,), 0.25, dtype=jnp.float32), jnp.asarray(2.5, dtype=jnp.float32)
    m = jax.jit(f)(X, conn, dN, quarter, rho)
    assert m.dtype == jnp.float32 and m.shape == (6,)
    want = irfuse.compile(f"{ROOT}/examples/mesh/lumped_mass.kas", backend="cpu")(
        *[np.asarray(a) for a in (X, conn, dN, quarter, rho)])
    np.testing.assert_array_equal(m, want.m)
    g = jax.grad(lambda X: f(X, conn, dN, quarter, rho).sum())(X)  # the gather's adjoint: a scatter
    g64 = jax.grad(lambda X: f(X, conn, dN.astype(jnp.float64), quarter.astype(jnp.float64),
                               rho.astype(jnp.float64)).sum())(X.astype(jnp.float64))
    np.testing.assert_allclose(g, g64, rtol=2e-5, atol=2e-6)


def test_python_numbers_take_the_type_of_the_arrays_as_in_jax_arithmetic():
    """With x64 on, a Python number is a weakly typed float64 in JAX (`F32 * 1.3` is float32):
    float32 arrays with numbers for the uniform scalars were refused as mixing types. The
    numbers take the arrays' type, under `jax.jit` and `jax.grad` too; one beyond float32's
    range is refused by name."""
    f = irfuse.jax.op(NEO_HOOKEAN_ENERGY)
    F = _deformations(4, seed=3)
    F32 = jnp.asarray(F, dtype=jnp.float32)
    want = f(F32, jnp.float32(1.3), jnp.float32(0.7))
    got = f(F32, 1.3, 0.7)
    assert got.dtype == jnp.float32 and np.array_equal(got, want)
    assert np.array_equal(jax.jit(f)(F32, 1.3, 0.7), want)  # (traced numbers: weakly typed tracers)
    dmu = jax.grad(lambda mu: f(F32, mu, 0.7).sum())(1.3)
    np.testing.assert_allclose(dmu, jax.grad(lambda mu: f(jnp.asarray(F), mu, 0.7).sum())(1.3), rtol=1e-5)
    with pytest.raises(irfuse.UsageError, match="input 'mu' is 1e\\+39, beyond the float32 range"):
        f(F32, 1e39, 0.7)


def test_a_connectivity_naming_nodes_outside_the_mesh_is_refused_by_name():
    """Outside a trace it is checked before the call (it ended in JAX's `JaxRuntimeError`, a
    traceback before irfuse's message); under `jax.jit` the callback's check finds it, and
    JAX's error carries irfuse's message."""
    from irfuse.mesh import box_tetrahedra

    f = irfuse.jax.op(f"{ROOT}/examples/mesh/p1_residual.kas")
    X, conn = box_tetrahedra(2)
    bad = jnp.asarray(np.where(conn == 5, 10**6, conn))
    dN = jnp.asarray([[-1.0, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    args = (jnp.asarray(X), jnp.zeros(X.shape), bad, dN, 1.5, 0.75)
    message = "input 'conn': element 6, position 2 names node 1000000, outside \\[0, 27\\)"
    with pytest.raises(irfuse.UsageError, match=message):
        f(*args)
    with pytest.raises(irfuse.UsageError, match=message):  # (a NumPy array too)
        f(args[0], args[1], np.asarray(bad), *args[3:])
    with pytest.raises(irfuse.UsageError, match=message):
        jax.grad(lambda u: f(args[0], u, *args[2:]).sum())(args[1])
    with pytest.raises(jax.errors.JaxRuntimeError, match=message):
        jax.jit(f)(*args).block_until_ready()


def test_bad_calls_are_refused_by_name():
    f = irfuse.jax.op(NEO_HOOKEAN_ENERGY)
    F = _deformations(3)
    with pytest.raises(irfuse.UsageError, match="'F' must be shaped \\(N, 3, 3\\)"):
        f(F[:, :2], 1.0, 1.0)
    with pytest.raises(irfuse.UsageError, match="'mu' holds float32 and 'F' float64"):
        f(F, np.float32(1.0), 1.0)
    with pytest.raises(irfuse.UsageError, match="takes 3 arrays"):
        f(F, 1.0)
    assert np.array_equal(f(F, mu=1.3, lam=0.7), f(F, 1.3, 0.7))  # (inputs by name, as a program's call takes them)
    with pytest.raises(irfuse.UsageError, match="missing input 'lam'"):
        f(F, mu=1.3)
    with pytest.raises(irfuse.UsageError, match="backend= is decided by the arrays"):
        irfuse.jax.op(NEO_HOOKEAN_ENERGY, backend="cpu")
    with pytest.raises(irfuse.UsageError, match="input 'mu' is a str; it takes an array or a number"):
        f(F, "1.0", 1.0)
    with pytest.raises(irfuse.UsageError, match="input 'F' is a list; it takes an array$"):
        f(F.tolist(), 1.0, 1.0)
    with pytest.raises(irfuse.UsageError, match="pipline is not an option of irfuse.compile"):
        irfuse.jax.op(NEO_HOOKEAN_ENERGY, pipline="kas-dce,fuse-each")
    with pytest.raises(irfuse.UsageError, match="input 'mu' is 1000000000000000000000, beyond the 64-bit numbers"):
        f(F, 10**21, 1.0)  # (JAX's OverflowError from inside before)
    torch = pytest.importorskip("torch")
    with pytest.raises(irfuse.UsageError, match="input 'F' is a PyTorch tensor; a JAX function takes JAX or NumPy"):
        f(torch.from_numpy(np.asarray(F)), 1.0, 1.0)  # (JAX's TypeError from inside before)
