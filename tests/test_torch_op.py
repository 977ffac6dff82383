"""irfuse programs as PyTorch operators (`irfuse.torch.op`) on CPU tensors: the results are the
program's, gradients pass `torch.autograd.gradcheck` in float64 (per-element, uniform and
nodal inputs, masks, branches, a maximum over the batch), `torch.compile` traces forward and
backward in one graph, and bad calls are refused by name. The CUDA side is in `test_gpu.py`."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import irfuse  # noqa: E402
import irfuse.torch  # noqa: E402
from irfuse.testing.derivatives import NEO_HOOKEAN_ENERGY  # noqa: E402

ROOT = __import__("os").path.dirname(__import__("os").path.dirname(__file__))
LUMPED_MASS = f"{ROOT}/examples/mesh/lumped_mass.kas"

# Branches on a mask input, a maximum over the batch, a mask among the outputs.
BRANCHES = """
scalar x, y; mask m, big; uniform scalar a, s;
input x, m, a;
if (m) { y = smul(x, a); } else { y = exp(x); }
s = max(y);
big = gt(y, a);
return y, big, s;
"""


def _deformations(n: int, dtype, seed: int = 0):
    rng = np.random.default_rng(seed)
    return torch.tensor(np.eye(3) + 0.2 * rng.standard_normal((n, 3, 3)), dtype=dtype)


def test_the_operator_gives_the_programs_results_and_its_gradients_pass_gradcheck_in_float64():
    energy = irfuse.torch.op(NEO_HOOKEAN_ENERGY, name="neo_hookean_energy")
    F = _deformations(6, torch.float64).requires_grad_()
    mu = torch.tensor(1.3, dtype=torch.float64, requires_grad=True)
    lam = torch.tensor(0.7, dtype=torch.float64, requires_grad=True)
    E = energy(F, mu, lam)
    want = irfuse.compile(NEO_HOOKEAN_ENERGY, dtype="f64", backend="cpu")(F.detach().numpy(), mu.detach().numpy(),
                                                                                     lam.detach().numpy())
    assert E.shape == () and E.item() == want.E.item()  # the program's bits
    E.backward()
    grads = irfuse.compile(irfuse.grad(NEO_HOOKEAN_ENERGY, of="E", wrt=("F", "mu", "lam")), dtype="f64",
                           backend="cpu")(F.detach().numpy(), mu.detach().numpy(), lam.detach().numpy())
    np.testing.assert_array_equal(F.grad.numpy(), grads.grad_F)
    assert mu.grad.item() == grads.grad_mu.item() and lam.grad.item() == grads.grad_lam.item()
    assert torch.autograd.gradcheck(energy, (F, mu, lam))
    assert irfuse.torch.op(NEO_HOOKEAN_ENERGY, name="neo_hookean_energy") is energy  # registered once


def test_masks_branches_and_a_maximum_over_the_batch():
    op = irfuse.torch.op(BRANCHES)
    x = torch.linspace(-1.1, 1.3, 9, dtype=torch.float64, requires_grad=True)
    m = torch.tensor([1, 0, 1, 0, 1, 0, 0, 1, 0], dtype=torch.float64)
    a = torch.tensor(0.4, dtype=torch.float64, requires_grad=True)
    y, big, s = op(x, m, a)
    xs = x.detach().numpy()
    np.testing.assert_allclose(y.detach().numpy(), np.where(m.numpy() != 0, xs * 0.4, np.exp(xs)), rtol=1e-15)
    assert s.item() == y.max().item() and not big.requires_grad  # a mask has no gradient
    np.testing.assert_array_equal(big.numpy(), (y.detach().numpy() > 0.4).astype(np.float64))
    assert torch.autograd.gradcheck(lambda x, a: op(x, m, a)[::2], (x, a))


def test_gradients_through_gather_and_scatter_over_a_mesh():
    mass = irfuse.torch.op(LUMPED_MASS)
    rng = np.random.default_rng(1)
    X = torch.tensor(rng.random((6, 3)), requires_grad=True)
    conn = torch.tensor([[0, 1, 2, 3], [1, 2, 3, 4], [2, 3, 4, 5]])  # int64 node numbers
    dN = torch.tensor([[-1.0, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], dtype=torch.float64)
    quarter = torch.full((4,), 0.25, dtype=torch.float64)
    rho = torch.tensor(2.5, dtype=torch.float64, requires_grad=True)
    m = mass(X, conn, dN, quarter, rho)
    assert m.shape == (6,)
    want = irfuse.compile(LUMPED_MASS, dtype="f64", backend="cpu")(X.detach().numpy(), conn.numpy(), dN.numpy(),
                                                                   quarter.numpy(), rho.detach().numpy())
    np.testing.assert_array_equal(m.detach().numpy(), want.m)
    assert torch.autograd.gradcheck(lambda X, rho: mass(X, conn, dN, quarter, rho), (X, rho))


def test_torch_compile_traces_forward_and_backward_without_a_graph_break():
    energy = irfuse.torch.op(NEO_HOOKEAN_ENERGY, name="neo_hookean_energy")

    def loss(F, mu):
        return energy(F * 1.01, mu, mu * 0.5) ** 2

    compiled = torch.compile(loss, fullgraph=True, backend="aot_eager")  # a break would raise
    F = _deformations(5, torch.float32, seed=2).requires_grad_()
    mu = torch.tensor(1.1, requires_grad=True)
    got = compiled(F, mu)
    got.backward()
    g_compiled = F.grad.clone(), mu.grad.clone()
    F.grad = mu.grad = None
    want = loss(F, mu)
    want.backward()
    assert got.item() == want.item()
    assert torch.equal(g_compiled[0], F.grad) and torch.equal(g_compiled[1], mu.grad)


def test_numbers_for_uniform_scalars_give_the_results_and_gradients_of_0d_tensors():
    """A Python number, a NumPy scalar or a 0-d array for a uniform scalar is made a 0-d tensor
    of the tensors' type on their device, as the program's own calls take numbers: the same
    bits and gradients as 0-d tensors of those values, also under torch.compile."""
    energy = irfuse.torch.op(NEO_HOOKEAN_ENERGY, name="neo_hookean_energy")
    for dtype in (torch.float32, torch.float64):
        F = _deformations(7, dtype, seed=3).requires_grad_()
        want = energy(F, torch.tensor(1.3, dtype=dtype), torch.tensor(0.7, dtype=dtype))
        want.backward()
        g_want, F.grad = F.grad.clone(), None
        for mu, lam in ((1.3, 0.7), (np.float64(1.3), np.array(0.7)), (torch.tensor(1.3, dtype=dtype), 0.7)):
            got = energy(F, mu, lam)
            assert got.dtype == dtype and torch.equal(got, want)
            got.backward()
            assert torch.equal(F.grad, g_want)
            F.grad = None
    compiled = torch.compile(lambda F: energy(F, 1.3, 0.7), fullgraph=True, backend="aot_eager")
    assert torch.equal(compiled(F.detach()), energy(F.detach(), 1.3, 0.7))
    for named in (energy(F.detach(), mu=1.3, lam=0.7), energy(lam=0.7, F=F.detach(), mu=1.3)):  # (by name too)
        assert torch.equal(named, energy(F.detach(), 1.3, 0.7))
    with pytest.raises(irfuse.UsageError, match="input 'mu' is given twice, by position and by name"):
        energy(F.detach(), 1.3, mu=1.3, lam=0.7)
    with pytest.raises(irfuse.UsageError, match="unknown input 'nu'"):
        energy(F.detach(), 1.3, nu=0.7)


def test_bad_calls_are_refused_by_name():
    energy = irfuse.torch.op(NEO_HOOKEAN_ENERGY, name="neo_hookean_energy")
    F = _deformations(3, torch.float64)
    mu = torch.tensor(1.0, dtype=torch.float64)
    with pytest.raises(irfuse.UsageError, match="'F' must be shaped \\(N, 3, 3\\)"):
        energy(F[:, :2], mu, mu)
    with pytest.raises(irfuse.UsageError, match="'mu' holds float32 and 'F' float64"):
        energy(F, mu.float(), mu)
    with pytest.raises(irfuse.UsageError, match="'lam' holds int32"):
        energy(F, mu, torch.tensor(1, dtype=torch.int32))
    with pytest.raises(irfuse.UsageError, match="takes 3 tensors \\(F, mu, lam\\), not 2"):
        energy(F, mu)
    with pytest.raises(irfuse.UsageError, match="dtype= is decided by the arrays"):
        irfuse.torch.op(NEO_HOOKEAN_ENERGY, dtype="f64")
    with pytest.raises(irfuse.UsageError, match="'F' is a ndarray; it takes a tensor$"):
        energy(F.numpy(), mu, 1.0)
    with pytest.raises(irfuse.UsageError, match="'mu' is a str; it takes a tensor or a number .a uniform scalar."):
        energy(F, "1", 1.0)
    with pytest.raises(irfuse.UsageError, match="'mu' is 1e\\+300, beyond the float32 range"):
        energy(F.float(), 1e300, 1.0)
    with pytest.raises(irfuse.UsageError, match="'mu' is a bool"):
        energy(F, True, 1.0)
    with pytest.raises(irfuse.UsageError, match="at least one a tensor"):
        energy(np.eye(3)[None], 1.0, 1.0)
    with pytest.raises(irfuse.UsageError, match="profil is not an option of irfuse.compile .these are: pipeline, n, "):
        irfuse.torch.op(NEO_HOOKEAN_ENERGY, profil="h100")
    with pytest.raises(irfuse.UsageError, match="name must be an identifier"):
        irfuse.torch.op(NEO_HOOKEAN_ENERGY, name="a::b")
    other = irfuse.torch.op(NEO_HOOKEAN_ENERGY.replace("0.5", "0.25"), name="neo_hookean_energy")
    assert other.name == "irfuse::neo_hookean_energy_1"  # another program: the name is not reused
