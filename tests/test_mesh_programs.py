"""Programs over a mesh on the CPU backend: gathers through a connectivity, the element code,
and the deterministic scatter, checked against the float64 reference, against an independent
finite element library (scikit-fem) and against themselves run after run."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from conftest import RecordingDevice

import irfuse
from irfuse.diagnostics import UsageError
from irfuse.mesh import Connectivity, box_tetrahedra, scatter_add

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "mesh"
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]])

SCALED = """
nodal vector3 X, r;
index4 conn;
uniform scalar s;
matrix4x3 Xe, fe;
input X, conn, s;
Xe = gather(X, conn);
fe = scale(Xe, s);
r = scatter(fe, conn);
return r;
"""

WEIGHTED = SCALED.replace("uniform scalar s;", "scalar s;")


def mesh(nx=3, ny=3, nz=2, jitter=0.02, seed=0, dtype=np.float32):
    coords, conn = box_tetrahedra(nx, ny, nz)[:2]
    rng = np.random.default_rng(seed)
    spacing = 1.0 / max(nx, ny, nz)
    X = (coords + jitter * spacing * rng.standard_normal(coords.shape)).astype(dtype)
    return X, conn


@pytest.fixture(scope="module")
def residual():
    return irfuse.compile(str(EXAMPLES / "p1_residual.kas"), backend="cpu")


def test_p1_residual_matches_scikit_fem(residual):
    skfem = pytest.importorskip("skfem")
    from skfem.models.elasticity import linear_elasticity

    X, conn = mesh(4, 3, 3)
    rng = np.random.default_rng(1)
    u = rng.standard_normal(X.shape).astype(np.float32)
    lam, mu = 1.5, 0.7
    got = residual(X, u, conn, DN.astype(np.float32), np.float32(lam), np.float32(mu), verify=True).r
    m = skfem.MeshTet(X.T.astype(np.float64), conn.T.astype(np.int64))
    basis = skfem.Basis(m, skfem.ElementVector(skfem.ElementTetP1()))
    K = skfem.asm(linear_elasticity(lam, mu), basis)
    flat = np.zeros(basis.N)
    flat[basis.nodal_dofs.T.ravel()] = u.astype(np.float64).ravel()
    want = (K @ flat)[basis.nodal_dofs.T]
    assert np.abs(got - want).max() <= 1e-4 * np.abs(want).max()
    assert np.abs(want).max() > 1.0  # (a residual worth comparing)


def test_p1_residual_float64_matches_scikit_fem():
    skfem = pytest.importorskip("skfem")
    from skfem.models.elasticity import linear_elasticity

    prog = irfuse.compile(str(EXAMPLES / "p1_residual.kas"), backend="cpu", dtype="f64")
    X, conn = mesh(3, 2, 2, dtype=np.float64)
    u = np.random.default_rng(2).standard_normal(X.shape)
    got = prog(X, u, conn, DN.astype(np.float64), np.float64(2.0), np.float64(0.5)).r
    basis = skfem.Basis(skfem.MeshTet(X.T, conn.T.astype(np.int64)), skfem.ElementVector(skfem.ElementTetP1()))
    flat = np.zeros(basis.N)
    flat[basis.nodal_dofs.T.ravel()] = u.ravel()
    want = (skfem.asm(linear_elasticity(2.0, 0.5), basis) @ flat)[basis.nodal_dofs.T]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12 * np.abs(want).max())


def test_scatter_is_deterministic_and_in_ascending_order(residual):
    """Every call gives the same bits, those of the fixed-order sum of the per-element rows
    (float32 rows added in ascending (element, position) order); the same rows added in the
    reverse order give other bits, so the test can tell the orders apart."""
    X, conn = mesh(4, 4, 3, seed=3)
    order = np.random.default_rng(3).permutation(len(X))  # a numbering with no locality
    X, conn = X[np.argsort(order)], order[conn].astype(np.int32)
    prog = irfuse.compile(WEIGHTED, backend="cpu")
    w = (10.0 ** np.random.default_rng(4).uniform(-3, 3, len(conn))).astype(np.float32)  # six decades
    first = prog(X, conn, w).r
    for _ in range(5):
        assert np.array_equal(prog(X, conn, w).r, first)
    rows = X[conn] * w[:, None, None]
    assert np.array_equal(first, scatter_add(rows, conn, len(X)))
    backwards = scatter_add(rows[::-1], conn[::-1], len(X))
    assert not np.array_equal(backwards, first)


def test_connectivity_prepared_once_gives_the_same_bits(residual):
    X, conn = mesh(3, 3, 3, seed=4)
    u = np.random.default_rng(4).standard_normal(X.shape).astype(np.float32)
    args = (DN.astype(np.float32), np.float32(1.0), np.float32(1.0))
    prepared = Connectivity(conn, len(X))
    assert prepared.shape == conn.shape and prepared.seconds >= 0
    assert np.array_equal(residual(X, u, prepared, *args).r, residual(X, u, conn.astype(np.int64), *args).r)
    with pytest.raises(UsageError, match="Connectivity of 64 nodes; the call's nodal arrays hold 27"):
        residual(X[:27], u[:27], Connectivity(conn, 64), *args)


def test_neo_hookean_residual_and_lumped_mass():
    X, conn = mesh(3, 3, 2, seed=5)
    u = (0.01 * np.random.default_rng(5).standard_normal(X.shape)).astype(np.float32)
    nh = irfuse.compile(str(EXAMPLES / "neo_hookean_residual.kas"), backend="cpu")
    r = nh(X, u, conn, DN.astype(np.float32), np.float32(1.2), np.float32(0.8), verify=True).r
    assert r.shape == X.shape and np.isfinite(r).all()
    # Zero displacement: no stress, no force.
    assert np.abs(nh(X, np.zeros_like(u), conn, DN.astype(np.float32), np.float32(1.2), np.float32(0.8)).r).max() < 1e-6
    mass = irfuse.compile(str(EXAMPLES / "lumped_mass.kas"), backend="cpu")
    m = mass(X, conn, DN.astype(np.float32), np.full(4, 0.25, np.float32), np.float32(2.0), verify=True).m
    Xe = X[conn].astype(np.float64)
    volume = np.abs(np.linalg.det(Xe[:, 1:] - Xe[:, :1])).sum() / 6
    assert m.shape == (len(X),) and abs(m.sum() - 2.0 * volume) < 1e-5 * volume
    # `check` of a program over a mesh: every element and node, either layout
    report = mass.check(X, conn, DN.astype(np.float32), np.full(4, 0.25, np.float32), np.float32(2.0))
    assert report.ok and "m: ok" in str(report)
    assert mass.check(X.T.copy(), conn, DN.astype(np.float32), np.full(4, 0.25, np.float32), np.float32(2.0)).ok


def test_the_derived_residual_of_the_energy_example_is_the_written_one():
    """examples/mesh/neo_hookean_energy.kas's `derivative grad of E wrt u` gives the residual
    neo_hookean_residual.kas writes by hand (float64 references of both programs, no compile)."""
    from irfuse.dialects.kas import program_of
    from irfuse.driver.front import module_of
    from irfuse.verification.reference import run_reference

    X, conn = mesh(3, 2, 2, seed=7)
    u = 0.02 * np.random.default_rng(7).standard_normal(X.shape)
    args = {"X": X.astype(np.float64), "u": u, "conn": conn, "dN": DN.astype(np.float64), "lam": np.float64(1.3),
            "mu": np.float64(0.6)}
    derived = program_of(module_of(str(EXAMPLES / "neo_hookean_energy.kas")))
    written = program_of(module_of(str(EXAMPLES / "neo_hookean_residual.kas")))
    assert derived.outputs == ["E", "grad_u"]
    got = run_reference(derived, args, len(conn), nodes=len(X))
    want = run_reference(written, args, len(conn), nodes=len(X))
    np.testing.assert_allclose(got["grad_u"], want["r"], rtol=1e-12, atol=1e-15 * np.abs(want["r"]).max())


def test_edge_meshes():
    """A node no element names gets 0; a node named twice in one element gets both rows; one
    element; one node."""
    prog = irfuse.compile(SCALED, backend="cpu")
    X = np.arange(18, dtype=np.float32).reshape(6, 3)
    conn = np.array([[0, 1, 1, 2], [2, 3, 0, 0]], dtype=np.int32)  # node 4, 5 unused
    r = prog(X, conn, np.float32(1.0), verify=True).r
    want = np.zeros_like(X)
    for e in range(2):
        for a in range(4):
            want[conn[e, a]] += X[conn[e, a]]
    assert np.array_equal(r, want) and not r[4:].any()
    one = prog(X[:1], np.zeros((1, 4), np.int32), np.float32(2.0)).r
    assert np.array_equal(one, 8 * X[:1])


def test_bad_arguments_are_refused_by_name():
    prog = irfuse.compile(SCALED, backend="cpu")
    X = np.zeros((5, 3), np.float32)
    s = np.float32(1)
    bad = np.array([[0, 1, 2, 3], [0, 1, 5, 2]], np.int32)
    with pytest.raises(UsageError, match=r"input 'conn': element 1, position 2 names node 5, outside \[0, 5\)"):
        prog(X, bad, s)
    with pytest.raises(UsageError, match="input 'conn': element 0, position 0 names node -1"):
        prog(X, np.full((1, 4), -1, np.int64), s)
    with pytest.raises(UsageError, match="connectivity of float32 values; it takes int32 or int64"):
        prog(X, np.zeros((2, 4), np.float32), s)
    with pytest.raises(UsageError, match=r"has shape \(2, 3\); a connectivity of 4 nodes per element"):
        prog(X, np.zeros((2, 3), np.int32), s)
    with pytest.raises(UsageError, match="beyond int32"):
        prog(X, np.full((2, 4), 2**40, np.int64), s)
    with pytest.raises(UsageError, match="nodes=3 disagrees with nodal input 'X', which holds 5 nodes"):
        prog(X, np.zeros((2, 4), np.int32), s, nodes=3)
    with pytest.raises(UsageError, match=r"budget of 100 bytes cannot hold the mesh's nodal values and node offsets"):
        prog(X, np.zeros((2, 4), np.int32), s, memory_budget=100)
    with pytest.raises(UsageError, match="memory_budget= takes a whole number of bytes, not 'x'"):
        prog(X, np.zeros((2, 4), np.int32), s, memory_budget="x")


def test_out_arrays_of_a_mesh_call_are_checked_like_any_others():
    """A uniform output's out= entry given a number or a read-only array ended in an
    AttributeError or in NumPy's own error; two outputs in one memory were taken."""
    from irfuse.testing.contracts import MESH_TOTAL

    prog = irfuse.compile(MESH_TOTAL, backend="cpu", dtype="f64")
    X, conn = box_tetrahedra(2)
    u = np.random.default_rng(4).standard_normal(X.shape)
    want = prog(u, conn)
    with pytest.raises(UsageError, match="out= array for 'S' is a float; with inputs in host memory out= takes "
                                         "NumPy arrays"):
        prog(u, conn, out={"S": 1.5})
    frozen = np.zeros(())
    frozen.flags.writeable = False
    with pytest.raises(UsageError, match="out= array for 'S' is read-only"):
        prog(u, conn, out={"S": frozen})
    r = np.empty_like(u)
    with pytest.raises(UsageError, match="out= array for 'r' overlaps the out= array for 'S'"):
        prog(u, conn, out={"S": r[0, 0, ...], "r": r})
    S = np.empty(())
    got = prog(u, conn, out={"S": S, "r": r})
    assert got.S is S and got.r is r and S == want.S and np.array_equal(r, want.r)


def test_nodes_given_when_no_nodal_input():
    prog = irfuse.compile("""
nodal scalar m; index4 conn; vector4 w;
input conn, w;
m = scatter(w, conn);
return m;""", backend="cpu")
    conn = np.array([[0, 1, 2, 3], [3, 4, 5, 6]], np.int32)
    w = np.arange(8, dtype=np.float32).reshape(2, 4)
    with pytest.raises(UsageError, match="pass nodes=M"):
        prog(conn, w)
    m = prog(conn, w, nodes=9).m
    assert np.array_equal(m, np.array([0, 1, 2, 3 + 4, 5, 6, 7, 0, 0], np.float32))


def test_host_plan_round_trips_with_scatter():
    from irfuse.artifact.host_plan import HostPlan, Scatter

    prog = irfuse.compile(SCALED, backend="cpu")
    plan = prog.artifact.host
    again = HostPlan.from_json(plan.to_json())
    assert again.to_json() == plan.to_json()
    assert any(isinstance(s, Scatter) for s in again.steps)
    assert again.nodal_names() == {"X", "r"} and again.index_names() == {"conn"}


@pytest.mark.usefixtures("emulated_gpu")
def test_a_scatters_rows_in_registers_are_staged_and_summed_in_the_same_groups(residual):
    """Rows stored from registers (`fuse-promote-registers{outputs=true}`) are staged in a
    shared array of their own before the group sums: the generated CUDA, run block by block
    on the CPU, gives the bits of the default plan, whose rows the sums read in place."""
    from irfuse.passes.registry import DEFAULT_PIPELINE

    pipeline = DEFAULT_PIPELINE.replace("fuse-promote-registers", "fuse-promote-registers{outputs=true}")
    staged = irfuse.compile(str(EXAMPLES / "p1_residual.kas"), backend="cpu", pipeline=pipeline)
    assert "irf_sct0" in staged.source and "irf_sct0" not in residual.source
    X, conn = mesh(4, 3, 3, seed=3)
    u = np.random.default_rng(3).standard_normal(X.shape).astype(np.float32)
    args = (X, u, conn, DN.astype(np.float32), np.float32(1.5), np.float32(0.7))
    assert staged(*args, verify=True).r.tobytes() == residual(*args).r.tobytes()


@pytest.mark.usefixtures("emulated_gpu")
def test_a_block_without_room_for_its_scatter_order_reads_it_where_it_lies(residual, monkeypatch, tmp_path):
    """The element kernel stages its block's stretch of the scatter order in shared memory
    where it fits (`irf_ord0`); where it would not (the limit lowered here), the sums read the
    order from global memory: the generated CUDA, run block by block on the CPU, gives the same
    bits either way, in shared and register-staged rows."""
    from irfuse.backend import cuda_emit
    from irfuse.passes.registry import DEFAULT_PIPELINE

    X, conn = mesh(4, 3, 3, seed=4)
    u = np.random.default_rng(4).standard_normal(X.shape).astype(np.float32)
    args = (X, u, conn, DN.astype(np.float32), np.float32(1.5), np.float32(0.7))
    assert "irf_ord0" in residual.source
    want = residual(*args).r.tobytes()
    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path))  # (compiled again: another text, another cache)
    monkeypatch.setattr(cuda_emit, "STAGED_ORDER_LIMIT", 0)
    registers = DEFAULT_PIPELINE.replace("fuse-promote-registers", "fuse-promote-registers{outputs=true}")
    text = (EXAMPLES / "p1_residual.kas").read_text() + "// (the order read where it lies)\n"
    for pipeline in (None, registers):
        unstaged = irfuse.compile(text, backend="cpu", pipeline=pipeline)
        assert "irf_ord0" not in unstaged.source and "irf_firsts0[irf_p0 + irf_i]" in unstaged.source
        assert unstaged(*args, verify=True).r.tobytes() == want


def test_atomic_scatter_is_asked_by_name_and_on_the_cpu_adds_in_the_fixed_order():
    """`scatter="atomic"` runs the scatter without the inverse; the CPU backend's twin adds in
    slot order, so there it gives the ordered bits. Bad modes and programs without a mesh
    refuse it by name."""
    X, conn = mesh(4, 3, 3, seed=5)
    prog = irfuse.compile(WEIGHTED, backend="cpu")
    args = (X, conn, (10.0 ** np.random.default_rng(5).uniform(-3, 3, len(conn))).astype(np.float32))
    ordered = prog(*args).r
    atomic = prog(*args, scatter="atomic", verify=True).r
    assert atomic.tobytes() == ordered.tobytes()
    with pytest.raises(UsageError, match="scatter= is one of 'ordered', 'atomic', not 'fast'"):
        prog(*args, scatter="fast")
    plain = irfuse.compile("matrix3x3 A, B; input A; B = add(A, A); return B;", backend="cpu")
    with pytest.raises(UsageError, match="scatter= chooses how scatters add of a program over a mesh"):
        plain(np.zeros((2, 3, 3), np.float32), scatter="atomic")


@pytest.mark.parametrize("scatter", ["ordered", "atomic"])
def test_a_plain_connectivity_written_between_calls_is_checked_again(scatter):
    """A connectivity given as a plain array may be written between calls: a call made again
    with it checks its node numbers again and reads the new ones. With `scatter="atomic"` the
    call was kept for its fast path with the array as it was, so a node number written past
    the nodes was read and added to out of bounds (the process crashed), for a program and
    for a program of passes, with `out=` and without."""
    X, conn = box_tetrahedra(2)[:2]
    X = X.astype(np.float64)
    u = 1e-3 * np.random.default_rng(0).standard_normal(X.shape)
    residual = irfuse.compile(str(EXAMPLES / "p1_residual.kas"), backend="cpu", dtype="f64")
    step = irfuse.compile(str(EXAMPLES / "explicit_step.kas"), backend="cpu", dtype="f64")
    calls = [lambda c, **o: residual(X, u, c, DN.astype(float), 1.5, 0.75, scatter=scatter, **o),
             lambda c, **o: step(X, u, np.zeros_like(X), np.ones(len(X)), c, DN.astype(float), 1.5, 0.75, 1e-3,
                                 scatter=scatter, **o)]
    for call, outputs in zip(calls, (residual.outputs, step.outputs)):
        for out in (None, {name: np.zeros_like(X) for name in outputs}):
            given = {} if out is None else {"out": out}
            c = conn.astype(np.int32)
            for _ in range(3):
                call(c, **given)
            c[3, 1] = 10**6
            with pytest.raises(UsageError, match="element 3, position 1 names node 1000000"):
                call(c, **given)
            c[3] = conn[5]
            got = {name: np.array(v) for name, v in zip(outputs, call(c, **given))}
            want = call(c.copy())
            for name in outputs:
                assert got[name].tobytes() == np.asarray(want[name]).tobytes(), name


def test_chunks_give_the_bits_of_one_call():
    """A budget that holds a few hundred elements at a time: every chunk's scatter goes on
    from the sums of the chunks before it, so the nodal output has the bits of one call (and
    the per-element outputs are the same too); progress is told of each chunk; atomics in
    chunks (on the CPU, the same order) too."""
    X, conn = mesh(6, 5, 4, seed=7)
    order = np.random.default_rng(7).permutation(len(X))  # elements of a chunk reach any node
    X, conn = X[np.argsort(order)], order[conn].astype(np.int32)
    prog = irfuse.compile(WEIGHTED.replace("return r;", "return r, fe;"), backend="cpu")
    w = (10.0 ** np.random.default_rng(8).uniform(-3, 3, len(conn))).astype(np.float32)
    whole = prog(X, conn, w)
    budget = len(X) * 3 * 4 * 2 + (len(X) + 1) * 8 + 300 * 100  # nodal values, offsets, ~300 elements
    seen = []
    chunked = prog(X, conn, w, memory_budget=budget, progress=lambda done, total: seen.append((done, total)))
    assert len(seen) > 2 and seen[-1][0] == seen[-1][1] == len(seen)
    for name in prog.outputs:
        assert chunked[name].tobytes() == whole[name].tobytes(), name
    atomic = prog(X, conn, w, memory_budget=budget, scatter="atomic", verify=True)
    assert atomic.r.tobytes() == whole.r.tobytes()


@pytest.mark.parametrize("seed", range(4))
def test_random_mesh_programs_in_chunks_give_the_bits_of_one_call(seed):
    """Random programs over meshes (`random_mesh_program`) on random meshes of each kind, one
    call against chunks of one scatter group (64 elements of four nodes, 256 of one): the same
    bits, nodal and per-element outputs."""
    import warnings

    from irfuse.runtime.mesh_runs import mesh_chunk_elements
    from irfuse.testing.differential import random_mesh_inputs
    from irfuse.testing.random_programs import random_mesh_program

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = irfuse.compile(random_mesh_program(100 + seed, 6), backend="cpu")
    elements = prog if not hasattr(prog, "stages") else next(  # (nodal statements: the pass over the elements)
        p for p, s in zip(prog.programs, prog.stages) if s.over == "elements")
    align = elements.artifact.host.align
    inputs, nodes = random_mesh_inputs(prog.compiled.reference_program, 8 * align + 29, seed, np.float32)
    whole = prog(**inputs, nodes=nodes)
    # the least budget of chunks of one group (the sizing probed by bisection)
    n = len(inputs[sorted(elements.index_inputs)[0]])
    low, high = 1, 10**9
    while low < high:
        mid = (low + high) // 2
        try:
            fits = mesh_chunk_elements(elements.artifact, n, nodes, mid) >= align
        except UsageError:
            fits = False
        low, high = (low, mid) if fits else (mid + 1, high)
    seen = []
    chunked = prog(**inputs, nodes=nodes, memory_budget=low, progress=lambda done, total: seen.append(total))
    assert seen[-1] >= 8
    for name in prog.outputs:
        assert chunked[name].tobytes() == whole[name].tobytes(), name


def test_the_connectivity_check_kernel_finds_the_first_entry_outside():
    """`irf_check_index` (what a call on GPU arrays runs before anything reads through a
    connectivity), here through its CPU twin, blocks side by side: the least bad slot; and
    `irf_check_index64`, which also narrows int64 node numbers into an int32 copy."""
    prog = irfuse.compile(SCALED, backend="cpu")
    assert any(k.name == "irf_check_index" for k in prog.artifact.kernels)
    conn = np.random.default_rng(0).integers(0, 5, (100000, 4)).astype(np.int32)
    for bad in ([], [(777, 2, 9), (5000, 1, -3)], [(99999, 3, 5)]):
        c = conn.copy()
        for e, k, v in bad:
            c[e, k] = v
        flag = np.array([2**63 - 1], np.int64)
        prog.opened_device().module.launch("irf_check_index", [c, np.array([5], np.int64), flag], c.size)
        assert flag[0] == (min(e * 4 + k for e, k, _ in bad) if bad else 2**63 - 1)
        # int64 node numbers: the same check, and each narrowed into irfuse's int32 copy
        wide, narrowed, flag = c.astype(np.int64), np.zeros(c.shape, np.int32), np.array([2**63 - 1], np.int64)
        wide[99998, 0] = 2**40  # (only beyond int32: outside [0, 5) all the same)
        prog.opened_device().module.launch("irf_check_index64", [wide, np.array([5], np.int64), flag, narrowed],
                                            c.size)
        assert flag[0] == min([e * 4 + k for e, k, _ in bad] + [99998 * 4])
        assert np.array_equal(np.delete(narrowed.ravel(), 99998 * 4), np.delete(c.ravel(), 99998 * 4))


def test_structures_of_arrays_give_the_bits_of_arrays_of_structures(residual):
    """Nodal and per-element arrays shaped (*shape, count), transposed on the way in and out:
    the bits of the call on arrays of structures, in one piece, in chunks into out= arrays in
    that layout, and through a program with nodal statements; arrays in both layouts at once
    are refused by name."""
    X, conn = mesh(3, 3, 2)
    u = np.random.default_rng(2).standard_normal(X.shape).astype(np.float32)
    args = (DN.astype(np.float32), np.float32(1.5), np.float32(0.7))
    want = residual(X, u, conn, *args).r
    got = residual(X.T, u.T, conn, *args, verify=True).r
    assert got.shape == (3, len(X)) and got.tobytes() == np.ascontiguousarray(want.T).tobytes()
    out = np.empty((3, len(X)), np.float32)
    assert residual(X.T, u.T, conn, *args, out=out, memory_budget=20000).r is out
    assert out.tobytes() == got.tobytes()
    with pytest.raises(UsageError, match="input 'X' has shape .* pass every argument in one layout"):
        residual(X.T, u, conn, *args)
    step = irfuse.compile(str(EXAMPLES / "explicit_step.kas"), backend="cpu")
    m = np.ones(len(X), np.float32)
    aos = step(X, u, u, m, conn, *args, np.float32(1e-3))
    soa = step(X.T, u.T, u.T, m, conn, *args, np.float32(1e-3), verify=True)
    for a, s in zip(aos, soa):
        assert np.ascontiguousarray(a.T).tobytes() == s.tobytes()


def test_the_kernels_that_rearrange_structures_of_arrays_give_back_what_they_took():
    """`irf_rows_of_columns` and `irf_columns_of_rows` (how a call on GPU arrays in structures
    of arrays runs kernels that read arrays of structures), here through their CPU twins."""
    prog = irfuse.compile(SCALED, backend="cpu")
    module = prog.opened_device().module
    columns = np.random.default_rng(3).standard_normal((3, 1001)).astype(np.float32)
    rows = np.zeros((1001, 3), np.float32)
    module.launch("irf_rows_of_columns", [columns, np.array([3], np.int64), rows], columns.size)
    assert np.array_equal(rows, columns.T)
    back = np.zeros_like(columns)
    module.launch("irf_columns_of_rows", [rows, np.array([3], np.int64), back], columns.size)
    assert np.array_equal(back, columns)


@pytest.mark.parametrize("parts, elements", [(1, None), (2, None), (3, None), (7, None), (5, 5)])
def test_each_part_of_a_partition_gives_the_whole_meshs_sums_at_its_own_nodes(residual, parts, elements):
    """`irfuse.mesh.partition`: every named node owned by one part; a part's call over its
    elements (its own and the ghost ones around its nodes) gives, at the nodes it owns, the
    one call's sums bit for bit; each ghost node read from its owner. Uneven parts, and five
    elements in five parts of one element each."""
    from irfuse.mesh import partition

    X, conn = mesh(3, 3, 2)
    conn = conn[:elements]
    u = np.random.default_rng(4).standard_normal(X.shape).astype(np.float32)
    args = (DN.astype(np.float32), np.float32(1.5), np.float32(0.7))
    whole = residual(X, u, conn, *args).r
    pieces = partition(conn, parts, nodes=len(X))
    owners = np.zeros(len(X), int)
    for p, part in enumerate(pieces):
        owners[part.owned_nodes] += 1
        local = residual(X[part.nodes], u[part.nodes], part.conn, *args).r
        assert local[part.owned].tobytes() == whole[part.owned_nodes].tobytes(), p
        for q, where in part.reads.items():
            assert np.all(np.isin(part.nodes[where], pieces[q].owned_nodes)), (p, q)
            owner = pieces[q]  # what q sends, picked by p, is p's ghost nodes
            assert np.array_equal(owner.nodes[owner.sends][part.picks[q]], part.nodes[where]) and \
                owner.owned[owner.sends].all(), (p, q)
        assert np.all(np.diff(part.elements) > 0) and np.array_equal(part.nodes[part.conn], conn[part.elements])
    assert np.array_equal(owners, np.isin(np.arange(len(X)), conn).astype(int))  # named nodes: one owner each
    own = np.concatenate([part.elements[part.own_elements] for part in pieces])
    assert np.array_equal(own, np.arange(len(conn)))  # the own ranges tile the elements in order
    with pytest.raises(UsageError, match="at most one part an element"):
        partition(conn[:3], 4)
    lengths = [1, 2, len(conn) - 3]
    assert [part.span for part in partition(conn, lengths)] == [(0, 1), (1, 3), (3, len(conn))]
    for bad in ([1, 2], [0, len(conn)], "two", [1.5, len(conn) - 1.5]):
        with pytest.raises(UsageError, match="lengths of the parts' ranges"):
            partition(conn, bad)


# Random mesh program 27 (long mode), shrunk: one kernel writes the rows of r17 (through c1)
# and of r19 (through c2), its outputs in another order than its stores.
TWO_CONNECTIVITIES = """
scalar e1, v10, v14;
uniform scalar u2;
nodal scalar r17, r18, r19, x1, x2;
vector3 g4, v7, v12, v16;
vector4 g5, g6, v15;
matrix4x3 v8, v11, v13;
index3 c1;
index4 c2;
input x1, x2, c1, c2, e1, u2;
g4 = gather(x2, c1);
g5 = gather(x1, c2);
g6 = gather(x1, c2);
v7 = abs(g4);
v8 = outer(g6, g4);
v10 = dot(g5, g5);
v11 = abs(v8);
v12 = min(g4, g4);
v13 = add(v11, u2);
v14 = add(e1, v10);
v15 = mvmul(v13, v7);
v16 = max(v12, g4);
r17 = scatter(v16, c1);
r18 = scatter(v12, c1);
r19 = scatter(v15, c2);
return r17, r18, r19, v14;
"""


@pytest.mark.parametrize("renderer", ["loop", "emulate"])
def test_a_kernel_summing_rows_through_two_connectivities_takes_each_ones_scatter_order(renderer, monkeypatch):
    """A kernel writing the rows of scatters through two connectivities numbered each one's
    group parameters (`irf_members{j}`, ...) in the order of its stores, while a launch passes
    them in the order of the kernel's outputs: rows through one connectivity were summed by the
    other's scatter order, a wrong result (on the GPU, reads past the other's members). Now
    both orders are the outputs': the sums match the reference and the atomic scatter's bits,
    in both CPU renderings (the CUDA kernel's text is the twin's)."""
    monkeypatch.setenv("IRFUSE_CPU_RENDERER", renderer)
    prog = irfuse.compile(TWO_CONNECTIVITIES, backend="cpu", filename="two_connectivities.kas")
    assert any(len({k for k in info.grouped if k}) == 2 for info in prog.artifact.kernels)
    rng = np.random.default_rng(27)
    elements, nodes = 300, 41
    args = dict(x1=rng.uniform(-1, 1, nodes).astype(np.float32), x2=rng.uniform(-1, 1, nodes).astype(np.float32),
                c1=rng.integers(0, nodes, (elements, 3)).astype(np.int32),
                c2=rng.integers(0, nodes, (elements, 4)).astype(np.int32),
                e1=rng.uniform(-1, 1, elements).astype(np.float32), u2=np.float32(-0.19))
    ordered = prog(**args, verify=True)
    atomic = prog(**args, scatter="atomic", verify=True)
    for name in prog.outputs:
        assert getattr(ordered, name).tobytes() == getattr(atomic, name).tobytes(), name


TWICE = """
nodal vector3 r1, r2; matrix4x3 q, w; index4 c1, c2; uniform scalar a;
input q, c1, c2, a;
w = scale(q, a);
r1 = scatter(w, c1);
r2 = scatter(w, c2);
return r1, r2;
"""


@pytest.mark.parametrize("renderer", ["loop", "emulate"])
@pytest.mark.parametrize("elements, nodes", [(300, 120), (100, 400)])
def test_one_computed_value_scattered_through_two_connectivities_is_summed_by_each(renderer, elements, nodes,
                                                                                  monkeypatch):
    """`r1 = scatter(w, c1); r2 = scatter(w, c2)` with `w` computed in the program: the kernel
    once wrote w summed in c1's groups alone and both scatters read those sums (NaN or garbage in
    r1). Rows scattered through two connectivities are written as they are now: each sum
    against NumPy, ordered and atomic the same bits, on meshes with E > M and E < M."""
    monkeypatch.setenv("IRFUSE_CPU_RENDERER", renderer)
    prog = irfuse.compile(TWICE, backend="cpu", dtype="f64")
    rng = np.random.default_rng(5)
    c1 = rng.integers(0, nodes, (elements, 4)).astype(np.int32)
    c2 = rng.integers(0, nodes, (elements, 4)).astype(np.int32)
    q = rng.uniform(-1, 1, (elements, 4, 3))
    ordered = prog(q, c1, c2, 2.0 * np.ones(()), nodes=nodes, verify=True)
    atomic = prog(q, c1, c2, 2.0 * np.ones(()), nodes=nodes, scatter="atomic")
    for name, conn in (("r1", c1), ("r2", c2)):
        want = np.zeros((nodes, 3))
        np.add.at(want, conn, 2 * q)
        np.testing.assert_allclose(getattr(ordered, name), want, rtol=1e-12, atol=1e-12)
        assert getattr(ordered, name).tobytes() == getattr(atomic, name).tobytes(), name




@pytest.mark.parametrize("source", ["p1_residual.kas", "two connectivities", "one value twice"])
def test_under_atomics_a_gpu_element_kernel_adds_its_rows_into_the_nodes_itself(source):
    """`scatter="atomic"` on a device whose element kernels add their rows themselves (the GPU):
    each scatter's sums set to 0 before the element kernel (not in a chunk after the first,
    which goes on from the sums so far), the kernel given the sums and the connectivity after
    each output's group parameters, and no kernel adding rows after it. Rows scattered through
    two connectivities are written as they are and added by the atomic scatter kernel, each
    through its own. On a device that does not (the CPU, whose atomic scatter adds in the fixed
    order) and when ordered, the kernel takes null sums and connectivity."""
    from irfuse.driver.compile import compile_program, compile_text
    from irfuse.runtime.executor import Executor

    if source.endswith(".kas"):
        plan, _ = compile_program(str(EXAMPLES / source), None, "f32", compile_gpu=False)
    else:
        text = TWO_CONNECTIVITIES if source == "two connectivities" else TWICE
        plan, _ = compile_text(text, "atomics.kas", None, "f32", compile_gpu=False)
    from irfuse.artifact.host_plan import NODAL, UNIFORM, Scatter

    rng = np.random.default_rng(3)
    elements, nodes = 500, 130
    inputs = {}
    for name, v in plan.host.inputs:
        value = plan.host.values[v]
        if value.integer:
            inputs[name] = rng.integers(0, nodes, (elements, *value.shape)).astype(np.int32)
        else:
            lead = {UNIFORM: (), NODAL: (nodes,)}.get(value.extent, (elements,))
            inputs[name] = rng.uniform(-1, 1, lead + value.shape).astype(np.float32)
    grouped = [k for k in plan.kernels if any(k.grouped)]
    assert bool(grouped) == (source != "one value twice")
    scatters = sum(1 for step in plan.host.steps if isinstance(step, Scatter))
    for in_kernel, scatter, onto in ((True, "atomic", False), (True, "atomic", True), (False, "atomic", False),
                                     (True, "ordered", False)):
        dev = RecordingDevice(finishes_in_kernel=False, atomics_in_kernel=in_kernel)
        Executor(plan, dev).prepare(inputs, elements, nodes=nodes, scatter=scatter, onto=onto)
        names = [k for k, _ in dev.launches]
        for k in grouped:
            at = names.index(k.name)
            extra = dev.launches[at][1][len(k.inputs) + len(k.outputs):]
            assert len(extra) == 5 * sum(1 for g in k.grouped if g)
            for j in range(0, len(extra), 5):
                members, sums, conn = extra[j], extra[j + 3], extra[j + 4]
                if scatter == "ordered" or not in_kernel:
                    assert isinstance(members, np.ndarray) == (scatter == "ordered") and sums == 0 and conn == 0
                    continue
                assert members == 0 and sums.shape[0] == nodes and conn.shape[0] == elements
                zeroed = [i for i, (name, b) in enumerate(dev.launches) if name.startswith("irf_zero_") and b[0] is sums]
                assert zeroed == ([] if onto else [zeroed[0]]) and all(i < at for i in zeroed)
        adds = [name for name in names if name.startswith("irf_scatter_atomic")]
        if scatter == "atomic":
            fused = sum(1 for k in grouped for g in k.grouped if g) if in_kernel else 0
            assert len(adds) == scatters - fused, (in_kernel, adds)


def test_rows_scattered_twice_through_one_connectivity_are_added_by_the_atomic_kernel():
    """`r1 = scatter(w, c); r2 = scatter(w, c)`: the kernel sums w in c's groups (one
    connectivity), but has one array of sums per output, so under atomics on a device that adds
    in kernels it writes the rows and each scatter adds them with the atomic kernel."""
    from irfuse.driver.compile import compile_text
    from irfuse.runtime.executor import Executor

    plan, _ = compile_text(TWICE.replace("scatter(w, c2)", "scatter(w, c1)"), "twice.kas", None, "f32",
                           compile_gpu=False)
    (k,) = [k for k in plan.kernels if any(k.grouped)]
    rng = np.random.default_rng(2)
    inputs = {"q": rng.uniform(-1, 1, (50, 4, 3)).astype(np.float32),
              "c1": rng.integers(0, 20, (50, 4)).astype(np.int32),
              "c2": rng.integers(0, 20, (50, 4)).astype(np.int32), "a": np.float32(2)}
    dev = RecordingDevice(finishes_in_kernel=False, atomics_in_kernel=True)
    Executor(plan, dev).prepare(inputs, 50, nodes=20, scatter="atomic")
    extra = next(b for name, b in dev.launches if name == k.name)[len(k.inputs) + len(k.outputs):]
    assert extra == [0, 0, 0, 0, 0]
    assert sum(name.startswith("irf_scatter_atomic") for name, _ in dev.launches) == 2
