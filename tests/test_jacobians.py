"""Per-element Jacobians and Hessians (`irfuse.jacobian`, `irfuse.hessian`, KAS `derivative
jacobian of y wrt x;`, pass `kas-jacobian`): compiled and run on the CPU backend against
central differences and closed forms in float64, and, for random programs, entry by entry
against the forward derivative along each unit direction."""

import re

import numpy as np
import pytest

import irfuse
from conftest import ROOT
from irfuse.testing.derivatives import jacobian_against_jvp, random_differentiable_programs

EXAMPLES_DIR = f"{ROOT}/examples"
J2 = f"{EXAMPLES_DIR}/j2_return.kas"


def _j2_state(n: int, seed: int):
    """Stresses and strain increments of which about half yield, none within 1 of the yield
    surface (f = q - sy: no point within the differences' step of a branch's edge)."""
    rng = np.random.default_rng(seed)
    sig = 60.0 * rng.standard_normal((2 * n, 3, 3))
    sig = 0.5 * (sig + np.swapaxes(sig, 1, 2))
    deps = 5e-4 * rng.standard_normal((2 * n, 3, 3))
    deps = 0.5 * (deps + np.swapaxes(deps, 1, 2))
    ep = rng.uniform(0.0, 0.01, 2 * n)
    dev = sig - np.trace(sig, axis1=1, axis2=2)[:, None, None] * np.eye(3) / 3
    dev += 2 * 80e3 * (deps - np.trace(deps, axis1=1, axis2=2)[:, None, None] * np.eye(3) / 3)
    f = 1.224744871391589 * np.sqrt((dev * dev).sum(axis=(1, 2))) - (250.0 + 1e3 * ep)
    far = np.flatnonzero(np.abs(f) >= 1.0)[:n]
    return {"sig": sig[far], "deps": deps[far], "ep": ep[far], "G": 80e3, "K": 160e3, "sy0": 250.0, "H": 1e3}


def test_the_consistent_tangent_of_the_j2_return_matches_central_differences():
    """d sig / d eps of the radial return, both branches (elastic and plastic points), against
    central differences of the program itself, in float64."""
    jac = irfuse.compile(irfuse.jacobian(J2, of="sig", wrt="deps"), backend="cpu", dtype="f64")
    plain = irfuse.compile(J2, backend="cpu", dtype="f64")
    args = _j2_state(400, 1)
    out = jac(**args)
    assert out.dsig_ddeps.shape == (400, 3, 3, 3, 3)
    base = plain(**args)
    assert np.array_equal(out.sig, base.sig) and np.array_equal(out.ep, base.ep)
    plastic = out.ep > args["ep"]
    assert 100 < plastic.sum() < 300  # (both branches met)
    h = 1e-7
    for k in range(3):
        for m in range(3):
            step = np.zeros((3, 3))
            step[k, m] = h
            up = plain(**{**args, "deps": args["deps"] + step}).sig
            down = plain(**{**args, "deps": args["deps"] - step}).sig
            fd = (up - down) / (2 * h)
            np.testing.assert_allclose(out.dsig_ddeps[:, :, :, k, m], fd, rtol=1e-5, atol=1e-3 * 80e3 * 1e-5)
    # Elastic points: the isotropic elastic tensor, 2G (sym - vol) + K I x I on a symmetric step.
    e = ~plastic
    eye = np.eye(3)
    t = 2 * 80e3 * (np.einsum("ik,jl->ijkl", eye, eye) - np.einsum("ij,kl->ijkl", eye, eye) / 3) \
        + 160e3 * np.einsum("ij,kl->ijkl", eye, eye)
    np.testing.assert_allclose(out.dsig_ddeps[e], np.broadcast_to(t, (e.sum(), 3, 3, 3, 3)), rtol=1e-12, atol=1e-6)


def test_a_jacobian_of_a_product_is_its_matrix_and_a_hessian_of_a_quadratic_energy_its_sum():
    """y = A x: dy/dx is A and dy/dA[i, :, k, l] is delta_ik x_l, bit for bit; E = sum x.Ax:
    each element's Hessian block is A + A^T, beside the energy and its gradient."""
    src = """
matrix3x3 A; vector3 x, y; scalar e; uniform scalar E;
input A, x;
y = mvmul33(A, x);
e = vdot3(x, y);
E = sum(e);
return y, E;
"""
    rng = np.random.default_rng(2)
    A, x = rng.standard_normal((50, 3, 3)), rng.standard_normal((50, 3))
    out = irfuse.compile(irfuse.jacobian(src, of="y", wrt=("x", "A")), backend="cpu", dtype="f64")(A, x)
    assert np.array_equal(out.dy_dx, A)
    want = np.einsum("ik,nl->nikl", np.eye(3), x)
    assert np.array_equal(out.dy_dA, want)
    hess = irfuse.compile(irfuse.hessian(src, of="E", wrt="x"), backend="cpu", dtype="f64")(A, x)
    np.testing.assert_allclose(hess.d2E_dx2, A + np.swapaxes(A, 1, 2), rtol=1e-14)
    np.testing.assert_allclose(hess.grad_x, np.einsum("nij,nj->ni", A + np.swapaxes(A, 1, 2), x), rtol=1e-13)


def test_a_jacobian_of_uniform_factors_alone_is_still_one_an_element():
    """y = A x with A uniform: dy/dx is A at every element, shaped (N, 3, 3) as every
    per-element Jacobian is (the tangent along a unit direction is made of uniform values
    alone, and is added to zeros of y to be one an element); over a mesh, r = scatter(Ke ue)
    with Ke uniform: the scatter of per-slot blocks and the diagonal's program take such blocks
    too, the matrix both ways the same, the diagonal each node's count of Ke's diagonal."""
    import os

    from irfuse.mesh import Connectivity

    src = "uniform matrix3x3 A;\nvector3 x, y;\ninput x, A;\ny = mvmul33(A, x);\nreturn y;\n"
    A, x = np.arange(9.0).reshape(3, 3), np.ones((5, 3))
    out = irfuse.compile(irfuse.jacobian(src, of="y", wrt="x"), backend="cpu", dtype="f64")(x, A)
    assert np.shape(out.dy_dx) == (5, 3, 3) and np.array_equal(out.dy_dx, np.broadcast_to(A, (5, 3, 3)))
    mesh = irfuse.compile("nodal scalar u, r;\nindex3 conn;\nuniform matrix3x3 Ke;\nvector3 ue, fe;\n"
                          "input u, conn, Ke;\nue = gather(u, conn);\nfe = mvmul33(Ke, ue);\n"
                          "r = scatter(fe, conn);\nreturn r;\n", backend="cpu", dtype="f64")
    rng = np.random.default_rng(0)
    conn = np.array([rng.permutation(30)[:3] for _ in range(50)], np.int32)  # (no element names a node twice)
    prepared, Ke, u = Connectivity(conn, 30), rng.standard_normal((3, 3)), rng.standard_normal(30)
    rows = irfuse.tangent_matrix(mesh, u, prepared, Ke, wrt="u")
    os.environ["IRFUSE_TANGENT_ROWS"] = "0"
    try:
        blocks = irfuse.tangent_matrix(mesh, u, prepared, Ke, wrt="u")
    finally:
        del os.environ["IRFUSE_TANGENT_ROWS"]
    np.testing.assert_allclose(blocks.toarray(), rows.toarray(), rtol=1e-14, atol=1e-14)
    want = np.zeros(30)
    np.add.at(want, conn, np.broadcast_to(np.diag(Ke), conn.shape))
    np.testing.assert_allclose(irfuse.diagonal(mesh, u, prepared, Ke, wrt="u"), want, rtol=1e-14, atol=1e-14)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_j2_tangent_compiles_for_the_gpu(dtype):
    """Its kernels compile with NVRTC (no GPU needed)."""
    jac = irfuse.jacobian(J2, of="sig", wrt="deps")
    gpu = irfuse.compile(jac, backend="cuda", dtype=dtype)
    assert gpu.kernels and gpu.outputs == ("sig", "ep", "dsig_ddeps")


def test_the_j2_tangent_is_written_where_it_goes_as_each_direction_is_made():
    """The nine unit directions are literals (folded into each direction's steps, not held in
    shared memory), and the tangent, a stack of the nine 3x3 tangents with its axes permuted,
    is built in place (`analysis.placements`): each direction's tangent written into the
    staging where its entries go as soon as it is made, the stacks and the permutation run
    nowhere, and the stress stored before. So no thread holds the 81 entries: in float32 the
    kernel needs no more registers than five blocks of 128 allow (its shared memory holds five
    an SM), unspilled, and `build` asks for five after the eight it first asks for spill; the
    CPU twin's results pass the NumPy reference's check."""
    from irfuse.driver.compile import compile_program

    plan, _ = compile_program(irfuse.jacobian(J2, of="sig", wrt="deps"), None, "f32", compile_gpu=True, arch="sm_90")
    (k,) = plan.kernels
    gpu = plan.source[plan.source.index(f"{k.name}("):plan.source.index("#elif defined(IRFUSE_CPU_LOOP)")]
    for d in range(9):  # (entry (q, d) of the 81 is word 9 q + d of its element)
        assert f"(ty) * 81 + {d}] = " in gpu and f"(ty) * 81 + {72 + d}] = " in gpu
    assert "irf_contract_mnij_ijmn_3x3x3x3_elem" not in gpu and "irf_stack_3_3x3x3" not in gpu
    assert gpu.index("store into sig") < gpu.index("(ty) * 81 + 0] = ")
    assert "irf_stack_3_s_s_s_elem_uuur" in gpu and not re.search(r"irf_stack_3_(s_s_s|3_3_3)_elem_\w*s\(", gpu)
    r = plan.resources(k.name)
    assert k.min_blocks == 5 and r.spill_stores == r.spill_loads == 0 and r.registers * 128 * 5 <= 65536
    assert 4 * (k.total_shared_bytes(4) + 1024) <= 228 * 1024 < 6 * (k.total_shared_bytes(4) + 1024)
    prog = irfuse.compile(irfuse.jacobian(J2, of="sig", wrt="deps"), backend="cpu", dtype="f32")
    args = {k: v.astype(np.float32) if isinstance(v, np.ndarray) else v for k, v in _j2_state(257, 3).items()}
    assert prog.check(**args).ok


def test_a_jacobian_line_in_kas_is_the_api_s_program():
    src = open(J2).read() + "\nderivative jacobian of sig wrt deps;\n"
    line = irfuse.compile(src, backend="cpu", dtype="f64")
    api = irfuse.compile(irfuse.jacobian(J2, of="sig", wrt="deps"), backend="cpu", dtype="f64")
    args = _j2_state(64, 3)
    assert line.outputs == api.outputs == ("sig", "ep", "dsig_ddeps")
    assert np.array_equal(line(**args).dsig_ddeps, api(**args).dsig_ddeps)
    hess = irfuse.compile(open(J2).read().replace("return sig, ep;", "w = ddot(sig, sig);\nE = sum(w);\n"
                                                  "return sig, ep, E;").replace("scalar ep,", "scalar w, ep,")
                          .replace("uniform scalar g2", "uniform scalar E, g2")
                          + "\nderivative hessian of E wrt deps;\n", backend="cpu", dtype="f64")
    assert hess.shapes["d2E_ddeps2"] == (3, 3, 3, 3)


@pytest.mark.parametrize("call, said", [
    (lambda: irfuse.jacobian(f"{EXAMPLES_DIR}/mesh/p1_residual.kas", of="r", wrt="u"), "nodal"),
    (lambda: irfuse.jacobian(J2, of="nope", wrt="deps"), "'nope' is not an output"),
    (lambda: irfuse.jacobian(J2, of="sig", wrt="nope"), "nope"),
    (lambda: irfuse.jacobian(J2, of=3, wrt="deps"), "of takes an output's name"),
    (lambda: irfuse.hessian(J2, of="sig", wrt=("deps", "sig")), "a Hessian is by one input"),
    (lambda: irfuse.hessian(f"{EXAMPLES_DIR}/strain_energy.kas", of="U", wrt="C"),
     "'C' is uniform \\(one value for the whole batch\\); a per-element Hessian is by a per-element input"),
    (lambda: irfuse.compile("vector3 x, y; input x;\nloop 3 {\n  x = vadd3(x, x);\n}\ny = vadd3(x, x);\n"
                            "return y;\nderivative jacobian of y wrt x;\n"), "does not go through a loop"),
])
def test_a_jacobian_that_cannot_be_taken_is_refused_by_name(call, said):
    with pytest.raises((irfuse.UsageError, irfuse.CompileError), match=said):
        call()


@pytest.mark.parametrize("derive", ["jvp", "vjp", "grad", "jacobian", "hessian"])
@pytest.mark.parametrize("wrt", [3, None, {"deps"}, ("deps", 3), b"deps"])
def test_a_derivative_by_names_of_the_wrong_type_is_refused_by_name(derive, wrt):
    """`wrt` is a name or a list or tuple of names (a set, whose order would set the
    derivative's inputs' order differently from run to run, is refused too) and `prefix` a
    string, for every derivative of the API: a UsageError naming the argument, never a
    TypeError from inside."""
    of = {"grad": {"of": "E"}, "hessian": {"of": "E"}, "jacobian": {"of": "sig"}}.get(derive, {})
    source = open(J2).read().replace("return sig, ep;", "w = ddot(sig, sig);\nE = sum(w);\nreturn sig, ep, E;") \
        .replace("scalar ep,", "scalar w, ep,").replace("uniform scalar g2", "uniform scalar E, g2")
    with pytest.raises(irfuse.UsageError, match="wrt takes an input's name or a list of names, not "):
        getattr(irfuse, derive)(source, wrt=wrt, **of)
    for prefix in (3, ["d"], b"d"):
        with pytest.raises(irfuse.UsageError, match="prefix takes a string"):
            getattr(irfuse, derive)(source, wrt="deps", prefix=prefix, **of)


@pytest.mark.parametrize("kind", ["batch_wide", "element", "loops"])
def test_random_programs_jacobians_are_their_forward_derivatives_along_each_direction(kind):
    compared, refused = 0, []
    # (twenty programs a kind: among them Jacobians of uniform factors alone, in the element
    # and batch-wide kinds, which came back one for the batch before 2026-12-06)
    for seed in range(20):
        check = jacobian_against_jvp(random_differentiable_programs(kind, seed), seed=seed)
        assert not check.mismatches, (seed, check.mismatches)
        compared += check.compared
        refused += check.refused
    assert compared >= 10
    assert all(any(why in r for why in ("does not go through", "is not per element", "axes")) for r in refused), refused
