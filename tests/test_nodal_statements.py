"""Nodal statements: statements on nodal values run once per node, before the elements (a
value they gather) or after them (on a scatter's sums), as passes of their own
(`irfuse.transforms.node_phases`, `irfuse.api.staged_programs`) on the CPU backend."""

from __future__ import annotations

import pickle
from pathlib import Path

import numpy as np
import pytest

import irfuse
from irfuse.api.staged_programs import StagedProgram
from irfuse.diagnostics import UsageError
from irfuse.mesh import box_tetrahedra

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "mesh"
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)

# Reductions on both sides: a sum over the nodes before the elements, a maximum over the
# elements after them, each read per node.
REDUCING = """
nodal vector3 X, r, y; nodal scalar q;
index4 conn; matrix4x3 Xe; scalar e; uniform scalar E, Q;
input X, conn;
q = vdot3(X, X);
Q = sum(q);
y = svmul3(X, Q);
Xe = gather(y, conn);
e = norm(Xe);
E = max(e);
r = scatter(Xe, conn);
r = svmul3(r, E);
return r, E, Q;
"""


@pytest.fixture(scope="module")
def step():
    return irfuse.compile(str(EXAMPLES / "explicit_step.kas"), backend="cpu")


def step_inputs(nx=4, seed=0):
    X, conn = box_tetrahedra(nx)[:2]
    rng = np.random.default_rng(seed)
    X = (X + 0.02 / nx * rng.standard_normal(X.shape)).astype(np.float32)
    u = (1e-2 * rng.standard_normal(X.shape)).astype(np.float32)
    v = rng.standard_normal(X.shape).astype(np.float32)
    mass = irfuse.compile(str(EXAMPLES / "lumped_mass.kas"), backend="cpu")
    m = mass(X, conn, DN, np.full(4, 0.25, np.float32), np.float32(2.0)).m
    return dict(X=X, u=u, v=v, m=m, conn=conn, dN=DN, lam=np.float32(1.5), mu=np.float32(0.7), dt=np.float32(1e-3))


def test_the_explicit_step_runs_its_nodal_statements_around_the_elements(step):
    """u1 = u + dt v per node, r = K u1 by the elements, v1 = v - dt r / m per node: against
    the residual example run on u1 and the update in NumPy, and against the reference."""
    assert isinstance(step, StagedProgram)
    assert [p.over for p in step.stages] == ["nodes", "elements", "nodes"]
    a = step_inputs()
    out = step(**a, verify=True)
    u1 = a["u"] + a["v"] * a["dt"]
    np.testing.assert_allclose(out.u1, u1, rtol=1e-6, atol=1e-7)
    residual = irfuse.compile(str(EXAMPLES / "p1_residual.kas"), backend="cpu")
    r = residual(a["X"], out.u1, a["conn"], DN, a["lam"], a["mu"]).r
    v1 = a["v"] - r / a["m"][:, None] * a["dt"]
    np.testing.assert_allclose(out.v1, v1, rtol=1e-5, atol=1e-6 * np.abs(v1).max())
    assert step.check(**a).ok


def test_nodal_statements_give_one_calls_bits_in_chunks_on_dask_and_after_pickling(step):
    a = step_inputs(3, seed=1)
    whole = step(**a)
    chunked = step(**a, memory_budget=40_000)
    again = pickle.loads(pickle.dumps(step))
    assert again is step  # (compiled again where unpickled: in this process the same program)
    dask = pytest.importorskip("dask")
    import dask.array as da

    import irfuse.dask

    arrays = {k: da.from_array(v, chunks=(29, *v.shape[1:])) if k == "conn" else v for k, v in a.items()}
    lazy = irfuse.dask.apply(step, **arrays)
    with dask.config.set(scheduler="synchronous"):
        computed = dask.compute(*lazy)
    for name, w, c, d in zip(step.outputs, whole, chunked, computed):
        assert w.tobytes() == c.tobytes() == np.asarray(d).tobytes(), name


def test_reductions_over_the_nodes_and_the_elements_feed_nodal_statements():
    prog = irfuse.compile(REDUCING, backend="cpu")
    X, conn = box_tetrahedra(3)[:2]
    X = X.astype(np.float32)
    out = prog(X, conn, verify=True)
    Q = np.sum(np.einsum("ij,ij->i", X.astype(np.float64), X))
    assert out.Q == pytest.approx(Q, rel=1e-5)
    Xe = (X * np.float32(out.Q))[conn]
    assert out.E == pytest.approx(np.linalg.norm(Xe.reshape(len(conn), -1), axis=1).max(), rel=1e-5)


def test_a_call_of_a_program_with_nodal_statements_refuses_what_it_does_not_take(step):
    a = step_inputs(2)
    with pytest.raises(UsageError, match="nodes=5 disagrees with nodal input 'X'"):
        step(**a, nodes=5)
    with pytest.raises(UsageError, match="out_layout="):
        step(**a, out_layout="soa")
    bad = dict(a, conn=a["conn"] + 1000)
    with pytest.raises(UsageError, match="element 0, position 0 names node 1000"):
        step(**bad)
    with pytest.raises(UsageError, match="arrays of structures only"):
        step.for_layout("soa")


def _random_mesh(elements: int, nodes: int, k: int = 4, seed: int = 0):
    rng = np.random.default_rng(seed)
    return rng.integers(0, nodes, (elements, k)).astype(np.int32), rng


@pytest.mark.parametrize("kind", ["sum", "max", "min"])
@pytest.mark.parametrize("elements, nodes", [(300, 120), (100, 400)])
def test_a_reduction_of_a_nodal_input_or_of_a_scatters_sums_runs_over_the_nodes(kind, elements, nodes):
    """A reduction taken directly of a nodal input or of a scatter's sums, with no nodal
    statement between, reduces over the M nodes (it once ran over the E elements: reading past
    the nodal array where E > M, dropping nodes where E < M), on meshes with E > M and E < M,
    in both precisions: against NumPy and the reference, the same bits call after call."""
    src = f"""
    nodal vector3 X, r; index4 conn; matrix4x3 Xe; uniform vector3 Q, R;
    input X, conn;
    Q = {kind}(X);
    Xe = gather(X, conn);
    r = scatter(Xe, conn);
    R = {kind}(r);
    return Q, R, r;
    """
    conn, rng = _random_mesh(elements, nodes)
    for dtype, np_type in (("f32", np.float32), ("f64", np.float64)):
        prog = irfuse.compile(src, backend="cpu", dtype=dtype)
        assert [p.over for p in prog.stages] == ["nodes", "elements", "nodes"]
        X = rng.uniform(-1, 1, (nodes, 3)).astype(np_type)
        out = prog(X, conn)
        r = np.zeros((nodes, 3))
        np.add.at(r, conn, X.astype(np.float64)[conn])
        reduce = getattr(np, kind)
        np.testing.assert_allclose(out.Q, reduce(X.astype(np.float64), axis=0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(out.R, reduce(r, axis=0), rtol=1e-5, atol=1e-4)
        again = prog(X, conn)
        assert all(a.tobytes() == b.tobytes() for a, b in zip(out, again))
        assert prog.check(X, conn).ok


def test_the_check_of_a_nodal_reduction_finds_a_wrong_value():
    """The reference reduces a nodal value over the nodes: a result over another count (what
    the kernels once gave) is a mismatch, not `ok`."""
    from irfuse.api.mesh_calls import mesh_verification

    prog = irfuse.compile("nodal scalar r; index4 conn; uniform scalar S; vector4 re; scalar y;\n"
                          "input r, conn; S = sum(r); re = gather(r, conn); y = vdot4(re, re); return S, y;",
                          backend="cpu")
    conn, rng = _random_mesh(300, 120)
    r = rng.random(120).astype(np.float32)
    out = prog(r, conn)
    assert prog.check(r, conn).ok
    wrong = irfuse.Outputs(prog.outputs, [np.float32(r.sum() + np.float32(r[:3].sum())), out.y])
    assert not mesh_verification(prog, {"r": r, "conn": conn}, wrong, 300, 120).ok


def test_a_gather_of_a_value_made_from_a_scatters_sums_runs_a_second_pass_over_the_elements():
    """Smoothing twice: r = K x by the elements, t = r * r per node, then t gathered again
    (a second pass over the elements, reading the first's per-element value as an array),
    its sums summed over the nodes: against NumPy, and bit-equal in chunks."""
    src = """
    nodal vector3 X, r, t, q; index4 conn; matrix4x3 Xe, fe, Te, ge; uniform vector3 S;
    input X, conn;
    Xe = gather(X, conn);
    fe = scale(Xe, 0.5);
    r = scatter(fe, conn);
    t = emul(r, r);
    Te = gather(t, conn);
    ge = add(Te, fe);
    q = scatter(ge, conn);
    S = sum(q);
    return q, S;
    """
    prog = irfuse.compile(src, backend="cpu", dtype="f64")
    assert [p.over for p in prog.stages] == ["elements", "nodes", "elements", "nodes"]
    X, conn = box_tetrahedra(3)[:2]
    fe = 0.5 * X[conn]
    r = np.zeros_like(X)
    np.add.at(r, conn, fe)
    q = np.zeros_like(X)
    np.add.at(q, conn, (r * r)[conn] + fe)
    out = prog(X, conn, verify=True)
    np.testing.assert_allclose(out.q, q, rtol=1e-12)
    np.testing.assert_allclose(out.S, q.sum(axis=0), rtol=1e-12)
    chunked = prog(X, conn, memory_budget=20_000)
    assert out.q.tobytes() == chunked.q.tobytes() and out.S.tobytes() == chunked.S.tobytes()

    def twice(X: irfuse.Nodal[irfuse.Vector[3]], conn: irfuse.Index[4]):  # (the same in Python)
        fe = irfuse.gather(X, conn) * 0.5
        r = irfuse.scatter(fe, conn)
        t = irfuse.ops.emul(r, r)
        q = irfuse.scatter(irfuse.gather(t, conn) + fe, conn)
        return q, irfuse.sum(q)

    again = irfuse.compile(twice, backend="cpu", dtype="f64")(X, conn)
    assert again.q.tobytes() == out.q.tobytes() and again.out1.tobytes() == out.S.tobytes()


def test_statements_after_the_scatter_run_in_the_kernel_that_adds_its_sums(step):
    """The explicit step's pass over the nodes after the elements (v1 = v - dt r / m) also runs
    as the elements stage's launch over the nodes that adds each node's partials of r itself
    (`irfuse.driver.fused_stages`): two stages where there were three, no array of r. A call
    in one piece runs them, with the bits of the stages one by one, in chunks and with
    atomics; the kernel compiles with NVRTC."""
    from irfuse.artifact.host_plan import NodeLaunch, Scatter
    from irfuse.driver.binaries import build_cubin

    fused = step.artifact.fused
    assert [s.over for s in fused] == ["nodes", "elements"] and fused[0] is step.stages[0]
    merged = fused[1]
    assert set(merged.inputs) == {"X", "conn", "dN", "lam", "mu", "u1", "v", "m", "dt"} and merged.outputs == ("v1",)
    (launch,) = [s for s in merged.artifact.host.steps if isinstance(s, NodeLaunch)]
    (scatter,) = [s for s in merged.artifact.host.steps if isinstance(s, Scatter)]
    assert launch.kernel.endswith("__sums") and [launch.args[k] for k in launch.sums] == [scatter.result]
    assert launch.kernel in build_cubin(merged.artifact.source, "sm_90").resources
    a = step_inputs(5, seed=3)
    calls: list = []
    bound = dict(a)
    ran = step._run_passes(bound, {}, None, "aos", len(a["X"]), {}, None, False, "ordered", calls)
    assert [c[0] for c in calls] == step.fused_programs
    one_by_one = step._run_stages(step.stages, step.programs, bound, {}, None, "aos", len(a["X"]), {}, None, False,
                                  "ordered", None)
    chunked = step(**a, memory_budget=40_000)
    atomic = step(**a, scatter="atomic")
    for name in step.outputs:
        assert ran[name].tobytes() == one_by_one[name].tobytes() == chunked[name].tobytes() == \
            atomic[name].tobytes(), name
    assert step(**a, verify=True).v1.tobytes() == ran["v1"].tobytes()


def test_sums_the_program_returns_are_not_added_again_by_the_node_kernel():
    """Where the scatter's sums are an output too, they are written by the scatter: no fused
    stages (the same where a pass over the nodes reduces over them)."""
    returned = (EXAMPLES / "explicit_step.kas").read_text().replace("return u1, v1;", "return u1, v1, r;")
    prog = irfuse.compile(returned, backend="cpu")
    assert [s.over for s in prog.stages] == ["nodes", "elements", "nodes"] and prog.artifact.fused is None
    reducing = irfuse.compile(REDUCING, backend="cpu")
    assert [s.over for s in reducing.artifact.fused] == ["nodes", "elements"]  # (r read after, E returned)
    X, conn = box_tetrahedra(3)[:2]
    X = X.astype(np.float32)
    out = reducing(X, conn, verify=True)
    chunked = reducing(X, conn, memory_budget=20_000)
    assert all(out[k].tobytes() == chunked[k].tobytes() for k in reducing.outputs)


def _scaled_residual() -> str:
    """The Neo-Hookean residual example gathering w = s u, a nodal statement only the gather
    reads, instead of u."""
    text = (EXAMPLES / "neo_hookean_residual.kas").read_text()
    return (text.replace("nodal vector3 X, u, r;", "nodal vector3 X, u, r, w;\nuniform scalar s;")
            .replace("input X, u, conn, dN, lam, mu;", "input X, u, conn, dN, lam, mu, s;\nw = svmul3(u, s);")
            .replace("ue = gather(u, conn);", "ue = gather(w, conn);"))


def test_statements_before_the_gathers_are_recomputed_where_the_cost_model_prices_it_lower():
    """A nodal statement only gathers read is planned both ways: its own pass over the nodes,
    or recomputed row by row where gathered (`kas-recompute-gathered`). For the Neo-Hookean
    residual (an element kernel bound by its arithmetic) the GPU profiles recompute it, one
    program over the mesh; the CPU profile keeps the pass; the same bits, both against the
    reference. The explicit step's u1, were it not returned, keeps its pass on the GPU profile
    (another gathered array costs the element kernel more than the pass)."""
    text = _scaled_residual()
    X, conn = box_tetrahedra(4, numbering="random", seed=3)[:2]
    rng = np.random.default_rng(1)
    a = dict(X=X.astype(np.float32), u=(0.01 * rng.standard_normal(X.shape)).astype(np.float32), conn=conn, dN=DN,
             lam=np.float32(1.5), mu=np.float32(0.7), s=np.float32(0.9))
    recomputed = irfuse.compile(text, backend="cpu", profile="h200")
    passes = irfuse.compile(text, backend="cpu", profile="cpu")
    assert not isinstance(recomputed, StagedProgram) and "item_0_4x3" in recomputed.source
    assert isinstance(passes, StagedProgram) and [s.over for s in passes.stages] == ["nodes", "elements"]
    assert recomputed(**a, verify=True).r.tobytes() == passes(**a, verify=True).r.tobytes()
    unreturned = (EXAMPLES / "explicit_step.kas").read_text().replace("return u1, v1;", "return v1;")
    step = irfuse.compile(unreturned, backend="cpu", profile="h200")
    assert [s.over for s in step.stages] == ["nodes", "elements", "nodes"]


def test_a_kernel_of_several_threads_an_element_cannot_add_a_scatters_sums():
    """`emit_sums_kernel` renders kernels whose threads each add their own nodes' partials: a
    kernel of three threads an element is refused by name (the compiler fuses only kernels of
    one row of threads an element)."""
    from irfuse.backend.cuda_emit import emit_sums_kernel, kernels_of
    from irfuse.diagnostics import CompileError
    from irfuse.dialects.context import parse_module

    module = parse_module("""
builtin.module {
  fuse.kernel @k block(bx = 3, by = 4) (%A: !kas.matrix<3x3>) -> (%B: !kas.matrix<3x3>) {
    %a = fuse.load %A into shared[0] : !kas.matrix<3x3>
    fuse.barrier
    %b = fuse.call @mtrans33[row](%a) into shared[36] : (!kas.matrix<3x3>) -> !kas.matrix<3x3>
    fuse.barrier
    fuse.store %b to %B : !kas.matrix<3x3>
  }
}""")
    with pytest.raises(CompileError, match=r"kernel @k: a scatter's sums are read by a row of threads an element "
                                           r"\(bx 1\), not 3"):
        emit_sums_kernel(kernels_of(module)[0], 4, (0,), "k__sums")


def test_nodes_of_any_kind_are_refused_by_name_in_calls_made_again(step):
    """`nodes=` that is no positive whole number (an array, a bool, a float, text, 0) is refused
    by name, also once a call has been made again (its fast path compared `nodes=` with its own
    first, which an array cannot answer: a NumPy ValueError the API fuzzer found), for a
    program over a mesh and for one of passes over the nodes and the elements."""
    args = step_inputs(2)
    residual = irfuse.compile(str(EXAMPLES / "p1_residual.kas"), backend="cpu")
    plain = {k: args[k] for k in ("X", "u", "conn", "dN", "lam", "mu")}
    for program, given in ((residual, plain), (step, args)):
        want = program(**given)
        for _ in range(2):  # (the second call is one made again)
            assert all(np.array_equal(a, b) for a, b in zip(program(**given), want))
        assert all(np.array_equal(a, b) for a, b in zip(program(**given, nodes=np.int64(len(args["X"]))), want))
        for bad in (np.zeros((2, 2)), np.array([5]), True, 2.5, "5", 0, -1):
            with pytest.raises(UsageError, match="nodes= takes the mesh's number of nodes, a positive whole number"):
                program(**given, nodes=bad)


# An entry of a scatter's sums and of a nodal input read per node (also `tests/test_gpu.py`'s).
ENTRY_OF_SUMS = """
nodal vector3 X, r; nodal scalar z, q; index4 conn; matrix4x3 Xe;
input X, conn;
q = X[1];
Xe = gather(X, conn);
Xe = scale(Xe, 2.0);
r = scatter(Xe, conn);
z = r[2];
return z, q;
"""


@pytest.mark.parametrize("renderer", ["loop", "emulate"])
def test_an_entry_of_a_nodal_value_is_nodal_and_a_node_kernel_keeps_the_sums_words_it_reads(renderer, monkeypatch):
    """`z = r[2]` of a scatter's sums and `q = X[1]` of a nodal input are nodal statements (they
    were refused, their value taken for one per element), in KAS and in Python; the kernel
    adding r keeps the one word its reader takes, and a reader of no word (`zeros(r)`, as the
    forward derivative of a value whose derivative is 0 holds, which `irfuse.linear_operator`
    took of another output) none: both kernels were refused for their registers not
    holding all of r's words. Against the sums made in NumPy, the generated CUDA run block by
    block on the host too (`emulate`)."""
    if renderer == "emulate":
        monkeypatch.setenv("IRFUSE_CPU_RENDERER", "emulate")
    X, conn = box_tetrahedra(3, numbering="random", seed=5)[:2]
    X = np.random.default_rng(2).standard_normal(X.shape)
    r = np.zeros_like(X)
    np.add.at(r, conn, 2.0 * X[conn])

    def twin(X: irfuse.Nodal[irfuse.Vector[3]], conn: irfuse.Index[4]):
        r = irfuse.scatter(irfuse.gather(X, conn) * 2.0, conn)
        return r[2], X[1]

    kas = irfuse.compile(ENTRY_OF_SUMS, backend="cpu", dtype="f64")(X, conn, verify=True)
    python = irfuse.compile(twin, backend="cpu", dtype="f64")(X, conn, verify=True)
    np.testing.assert_allclose(kas.z, r[:, 2], rtol=1e-13, atol=1e-13)
    assert kas.q.tobytes() == X[:, 1].copy().tobytes()
    assert python.out0.tobytes() == kas.z.tobytes() and python.out1.tobytes() == kas.q.tobytes()
    zeros = ENTRY_OF_SUMS.replace("nodal scalar z, q;", "nodal scalar q; nodal vector3 z;").replace(
        "z = r[2];", "z = zeros(r);")
    out = irfuse.compile(zeros, backend="cpu", dtype="f64")(X, conn, verify=True)
    assert np.all(out.z == 0) and out.z.shape == X.shape
    # d r2 / d X of a program whose other output r3 does not depend on X: the forward derivative
    # returns d r3 = zeros(r3), read per node where r3's sums are added.
    two = """
nodal vector2 X2, r2; nodal vector3 Y, r3; index4 conn; matrix4x3 Ye; matrix4x2 Xe;
input X2, Y, conn;
Xe = gather(X2, conn);
Ye = gather(Y, conn);
Xe = cos(Xe);
Ye = tanh(Ye);
r3 = scatter(Ye, conn);
r2 = scatter(Xe, conn);
return r3, r2;
"""
    X2 = X[:, :2].copy()
    operator = irfuse.linear_operator(irfuse.compile(two, backend="cpu", dtype="f64"), X2, X, conn, wrt="X2", of="r2")
    v = np.random.default_rng(3).standard_normal(X2.shape)
    Av = np.zeros_like(X2)
    np.add.at(Av, conn, -np.sin(X2[conn]) * v[conn])
    np.testing.assert_allclose(operator.matvec(v.reshape(-1)), Av.reshape(-1), rtol=1e-12, atol=1e-12)
