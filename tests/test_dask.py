"""`irfuse.dask.apply` on Dask arrays chunked along the batch axis, on a local cluster of
worker processes with NumPy chunks on the CPU backend: the results of one call, bit for bit."""

import os
import pickle

import numpy as np
import pytest

import irfuse
from conftest import EXAMPLES, LONG
from irfuse.verification.reference import random_inputs

da = pytest.importorskip("dask.array")
dask = pytest.importorskip("dask")
distributed = pytest.importorskip("distributed")
import irfuse.dask  # noqa: E402


def example(name: str) -> str:
    return next(p for p in EXAMPLES if os.path.basename(p) == name)


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as c:
        yield c
    cluster.close()


def test_a_program_pickles_as_what_it_was_compiled_from():
    prog = irfuse.compile(open(example("synctest.kas")).read(), backend="cpu", filename="pickled.kas")
    assert pickle.loads(pickle.dumps(prog)) is prog  # compiled again: this process keeps it
    soa = prog.for_layout("soa")
    assert pickle.loads(pickle.dumps(soa)) is soa
    _, spec = prog._spec
    assert spec["source"].startswith("// SyncTest") and spec["backend"] == "cpu"


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_apply_on_a_cluster_gives_the_results_of_one_call(client, layout):
    prog = irfuse.compile(example("stvenant.kas"), backend="cpu")
    n = 1001
    aos = random_inputs(prog.compiled.reference_program, n, 4, np.float32)
    host = aos if layout == "aos" else {k: np.ascontiguousarray(np.moveaxis(v, 0, -1)) for k, v in aos.items()}
    want = prog(**host)
    axis = 0 if layout == "aos" else -1
    chunks = (1, 300, 400, 299, 1)  # uneven, single elements among them
    arrays = {}
    for k, v in host.items():
        c = [(c,) for c in [v.shape[d] for d in range(v.ndim)]]
        c[axis % v.ndim] = chunks
        arrays[k] = da.from_array(v, chunks=tuple(c))
    # One input chunked along a value axis too: rechunked whole along it.
    name = next(k for k in prog.inputs if len(prog.shapes[k]) >= 1 and prog.shapes[k][0] > 1)
    arrays[name] = arrays[name].rechunk({1 if layout == "aos" else 0: 1})
    outs = irfuse.dask.apply(prog, **arrays)
    assert isinstance(outs[prog.outputs[0]], da.Array)
    for k in prog.outputs:
        assert outs[k].chunks[axis % outs[k].ndim] == chunks
        got = outs[k].compute()
        np.testing.assert_array_equal(got, want[k])
    # A batch equal to one chunk, by position.
    whole = [da.from_array(host[k]) for k in prog.inputs]
    for k, o in zip(prog.outputs, irfuse.dask.apply(prog, *whole)):
        np.testing.assert_array_equal(o.compute(), want[k])


def test_apply_refuses_what_it_cannot_take():
    prog = irfuse.compile(example("synctest.kas"), backend="cpu")
    with pytest.raises(irfuse.UsageError, match="input 'A' is a ndarray, not a Dask array"):
        irfuse.dask.apply(prog, np.zeros((4, 3, 3), np.float32))
    with pytest.raises(irfuse.UsageError, match="takes a Program"):
        irfuse.dask.apply("synctest.kas", da.zeros((4, 3, 3)))


def test_a_uniform_input_goes_whole_to_every_task(client):
    src = ("vector3 x, y; uniform vector3 c; uniform scalar s, t; input x, c, s;\n"
           "y = vadd3(x, c);\nt = smul(s, 2);\nreturn y, t;")
    prog = irfuse.compile(src, backend="cpu", filename="shifted.kas")
    x = np.arange(3000, dtype=np.float32).reshape(1000, 3)
    c = np.array([1, 2, 3], np.float32)
    s = np.array(1.5, np.float32)
    outs = irfuse.dask.apply(prog, da.from_array(x, chunks=((300, 300, 400), (3,))), da.from_array(c), s)
    np.testing.assert_array_equal(outs.y.compute(), x + c)
    assert outs.t.shape == () and outs.t.compute() == 3.0
    with pytest.raises(irfuse.UsageError, match="input 'c' has shape \\(1000, 3\\); it holds one value"):
        irfuse.dask.apply(prog, da.from_array(x), da.from_array(x), s)
    # a uniform scalar as a number, as a call takes it: converted to the program's type
    for number in (1.5, np.float64(1.5), 3 / 2):
        again = irfuse.dask.apply(prog, da.from_array(x, chunks=((300, 300, 400), (3,))), da.from_array(c), number)
        np.testing.assert_array_equal(again.y.compute(), x + c)
        assert again.t.compute() == 3.0 and again.t.dtype == np.float32
    with pytest.raises(irfuse.UsageError, match="input 's' is a bool"):
        irfuse.dask.apply(prog, da.from_array(x), da.from_array(c), True)
    with pytest.raises(irfuse.UsageError, match="input 's' is 1e\\+300, beyond the float32 range"):
        irfuse.dask.apply(prog, da.from_array(x), da.from_array(c), 1e300)



def _tree(kind, values, every):
    """The order irfuse.dask combines partials in, spelt out: groups of `every` consecutive
    ones, each pairwise left to right, then the groups' values the same way."""
    op = {"sum": np.add, "max": np.maximum, "min": np.minimum}[kind]

    def pairwise(vs):
        while len(vs) > 1:
            vs = [op(vs[k], vs[k + 1]) if k + 1 < len(vs) else vs[k] for k in range(0, len(vs), 2)]
        return vs[0]
    while len(values) > 1:
        values = [pairwise(values[k:k + every]) for k in range(0, len(values), every)]
    return values[0]


def _dask_inputs(host: dict, chunks: tuple) -> dict:
    return {k: da.from_array(v, chunks=(chunks, *v.shape[1:])) if v.ndim and v.shape[0] == sum(chunks) else v
            for k, v in host.items()}


@pytest.mark.parametrize("chunks", [(1, 300, 400, 299, 1), (50,) * 19 + (51,)])
def test_a_sum_over_the_batch_combines_the_chunks_partials_in_a_fixed_tree(client, chunks):
    prog = irfuse.compile(example("strain_energy.kas"), backend="cpu")
    n = sum(chunks)
    host = random_inputs(prog.compiled.reference_program, n, 7, np.float32)
    want = prog(**host)
    outs = irfuse.dask.apply(prog, **_dask_inputs(host, chunks))
    assert isinstance(outs.U, da.Array) and outs.U.shape == ()
    got = outs.U.compute()
    # Per element: the one call's bits. The sum: the chunks' own sums (each the program on its
    # chunk) combined in the documented order; the same bits again on a second run; within
    # float32 summation error of the one call's.
    for k in ("sig", "e"):
        np.testing.assert_array_equal(outs[k].compute(), want[k])
    starts = np.cumsum((0,) + chunks)
    parts = [prog(**{k: v[a:b] if v.ndim and v.shape[0] == n else v for k, v in host.items()}).U
             for a, b in zip(starts[:-1], starts[1:])]
    assert got.tobytes() == _tree("sum", parts, irfuse.dask.COMBINE_EVERY).tobytes()
    assert irfuse.dask.apply(prog, **_dask_inputs(host, chunks)).U.compute().tobytes() == got.tobytes()
    exact = want.e.astype(np.float64).sum()
    assert abs(float(got) - exact) <= 1e-5 * np.abs(want.e.astype(np.float64)).sum()


def test_statements_after_a_maximum_run_in_a_second_phase_with_the_one_calls_results(client):
    prog = irfuse.compile(example("cfl_step.kas"), backend="cpu")
    chunks = (1, 300, 400, 299, 1)
    host = random_inputs(prog.compiled.reference_program, sum(chunks), 3, np.float32)
    want = prog(**host)
    outs = irfuse.dask.apply(prog, **_dask_inputs(host, chunks))
    assert outs.xn.chunks[0] == chunks
    # A maximum does not depend on the order: every output is the one call's, bit for bit.
    np.testing.assert_array_equal(outs.xn.compute(), want.xn)
    assert outs.dt.compute().tobytes() == want.dt.tobytes()


def test_reductions_that_read_reductions_take_one_phase_each(client):
    src = ("vector3 v, w;\nscalar s, d, q;\nuniform scalar m, t, u, r;\ninput v;\n"
           "s = vdot3(v, v);\nm = max(s);\nw = svmul3(v, m);\nd = vdot3(w, v);\nt = sum(d);\n"
           "u = sdiv(t, m);\nq = smul(s, u);\nr = min(q);\nreturn w, u, r, m;")
    prog = irfuse.compile(src, backend="cpu", filename="levels.kas")
    assert len(prog.phase_plan().phases) == 3
    chunks = (7, 93, 100)
    v = np.random.default_rng(5).uniform(-1, 1, (200, 3)).astype(np.float32)
    want = prog(v)
    outs = irfuse.dask.apply(prog, da.from_array(v, chunks=(chunks, 3)))
    np.testing.assert_array_equal(outs.m.compute(), want.m)  # a maximum: exact
    np.testing.assert_array_equal(outs.w.compute(), want.w)  # reads only the maximum
    np.testing.assert_allclose(outs.u.compute(), want.u, rtol=1e-5)  # reads a sum
    np.testing.assert_allclose(outs.r.compute(), want.r, rtol=1e-5)
    s = (v.astype(np.float64) ** 2).sum(axis=1)
    t = (v.astype(np.float64) * s.max() * v).sum()
    np.testing.assert_allclose(outs.r.compute(), (s * (t / s.max())).min(), rtol=1e-5)


def test_chained_applications_of_a_one_output_program_fuse_into_one_task_per_chunk():
    """A time loop over Dask arrays (each step's output the next step's input): each chunk's
    steps run as one task, so a step costs Dask no task of its own (what the scheduler's
    per-task cost and round trips would add to every step)."""
    import dask

    prog = irfuse.compile(example("synctest.kas"), backend="cpu")
    a = np.random.default_rng(3).random((1000, 3, 3), dtype=np.float32)
    x = da.from_array(a, chunks=((250, 250, 499, 1), 3, 3))
    y = x
    for _ in range(5):
        y = irfuse.dask.apply(prog, y).F
    (fused,) = dask.optimize(y)
    assert len(dict(fused.__dask_graph__())) == 2 * 4  # the input's blocks, then one task a chunk
    want = a
    for _ in range(5):
        want = prog(want).F
    np.testing.assert_array_equal(y.compute(scheduler="sync"), want)


def test_a_task_hands_the_program_its_chunks_blocks_without_copying_them(monkeypatch):
    prog = irfuse.compile(example("synctest.kas"), backend="cpu")
    a = np.random.default_rng(4).random((100, 3, 3), dtype=np.float32)
    shared = []
    call = irfuse.Program.__call__

    def spy(self, *args, **named):
        shared.append(np.shares_memory(args[0], a))
        return call(self, *args, **named)
    monkeypatch.setattr(irfuse.Program, "__call__", spy)
    import dask
    view = dask.delayed(lambda start, stop: a[start:stop])  # chunks that are views of `a`
    x = da.concatenate([da.from_delayed(view(k, k + 25), shape=(25, 3, 3), dtype=a.dtype) for k in range(0, 100, 25)])
    got = irfuse.dask.apply(prog, x).F.compute(scheduler="sync")
    assert len(shared) >= 4 and all(shared)  # each chunk's block as it is, not a concatenated copy
    np.testing.assert_array_equal(got, call(prog, a).F)


@pytest.mark.heavy
def test_random_programs_with_reductions_give_the_one_calls_results_in_chunks():
    """Random programs with uniform inputs, literals and reductions (some read by later
    per-element statements: two phases) on uneven chunks: every output of the one call, to
    float32 rounding of the sums' other order, NaN and infinity where it has them."""
    import warnings

    from irfuse.testing.random_programs import random_program

    phases = []
    # Two-phase programs among them: 6, 7 and 14 (`IRFUSE_FUZZ_LONG=1` runs all sixteen seeds).
    for seed in range(16) if LONG else (0, 1, 6, 7, 14):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unused random inputs
            prog = irfuse.compile(random_program(seed, 10, batch_wide=True), backend="cpu", filename=f"r{seed}.kas")
        phases.append(len(prog.phase_plan().phases))
        host = random_inputs(prog.compiled.reference_program, 301, seed, np.float32)
        want = prog(**host)
        chunks = (1, 100, 150, 50)
        arrays = {k: v if k in prog.uniform else da.from_array(v, chunks=(chunks, *v.shape[1:]))
                  for k, v in host.items()}
        outs = irfuse.dask.apply(prog, **arrays)
        for k in prog.outputs:
            got = np.asarray(outs[k].compute(scheduler="sync"))
            assert got.shape == want[k].shape
            np.testing.assert_array_equal(np.isfinite(got), np.isfinite(want[k]))
            fin = np.isfinite(got)
            if fin.any():
                scale = np.abs(want[k][fin]).max()
                assert np.abs(got[fin] - want[k][fin]).max() <= 1e-5 * scale, (seed, k)
    assert phases.count(2) >= 2 and phases.count(1) >= 2


def test_random_programs_with_reductions_on_two_worker_processes_with_uneven_chunks(client):
    """Random programs with reductions (a two-phase one among them: seed 6) whose tasks'
    results move between two worker processes, on uneven chunks: the bits a run on one worker
    in the same chunks gives (the partials are combined in chunk order, whoever holds them)."""
    import warnings

    from irfuse.testing.random_programs import random_program

    for seed in (6, 9):
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # unused random inputs
            prog = irfuse.compile(random_program(seed, 10, batch_wide=True), backend="cpu", filename=f"w{seed}.kas")
        host = random_inputs(prog.compiled.reference_program, 301, seed, np.float32)
        chunks = (1, 100, 150, 50)
        arrays = {k: v if k in prog.uniform else da.from_array(v, chunks=(chunks, *v.shape[1:]))
                  for k, v in host.items()}
        outs = irfuse.dask.apply(prog, **arrays)
        on_cluster = dask.compute(*outs, scheduler=client.get)
        alone = dask.compute(*outs, scheduler="sync")
        for name, a, b in zip(prog.outputs, on_cluster, alone):
            np.testing.assert_array_equal(np.asarray(a), np.asarray(b), err_msg=f"seed {seed}, output {name}")


MESH = """
nodal vector3 X, r;
index4 conn;
scalar s;
matrix4x3 Xe, fe;
input X, conn, s;
Xe = gather(X, conn);
fe = scale(Xe, s);
r = scatter(fe, conn);
return r, fe;
"""


def _mesh_arrays(elements=1001, nodes=307, seed=5):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (nodes, 3)).astype(np.float32)
    conn = rng.integers(0, nodes - 7, size=(elements, 4)).astype(np.int32)  # the last 7 nodes unused
    conn[::5, 3] = conn[::5, 0]  # a node twice in an element
    s = (10.0 ** rng.uniform(-3, 3, elements)).astype(np.float32)  # six decades: the order shows
    return X, conn, s


def test_apply_on_a_mesh_chains_the_chunks_and_gives_the_bits_of_one_call(client):
    """Nodal input whole, connectivity and per-element input in uneven chunks on two worker
    processes: the nodal sums and per-element values of one call, bit for bit."""
    prog = irfuse.compile(MESH, backend="cpu", filename="mesh.kas")
    X, conn, s = _mesh_arrays()
    one = prog(X, conn, s)
    outs = irfuse.dask.apply(prog, X, da.from_array(conn, chunks=(250, 4)),
                             da.from_array(s, chunks=(100, 200, 301, 400)))
    r, fe = dask.compute(outs.r, outs.fe, scheduler=client.get)
    assert r.tobytes() == one.r.tobytes() and fe.tobytes() == one.fe.tobytes()
    assert outs.r.shape == X.shape and outs.fe.shape == (len(conn), 4, 3)
    whole = irfuse.dask.apply(prog, da.from_array(X, chunks=(100, 3)), da.from_array(conn, chunks=(333, 4)),
                              da.from_array(s, chunks=333), scatter="atomic")
    assert whole.r.compute(scheduler="sync").tobytes() == one.r.tobytes()  # (on the CPU, the same order)


def test_apply_on_a_mesh_refuses_what_it_cannot_take():
    prog = irfuse.compile(MESH, backend="cpu", filename="mesh.kas")
    X, conn, s = _mesh_arrays(40, 20)
    with pytest.raises(irfuse.UsageError, match="input 'conn' is a ndarray, not a Dask array"):
        irfuse.dask.apply(prog, X, conn, da.from_array(s))
    with pytest.raises(irfuse.UsageError, match=r"input 's' has shape \(39,\); its first axis must hold the 40"):
        irfuse.dask.apply(prog, X, da.from_array(conn), da.from_array(s[:39]))
    with pytest.raises(irfuse.UsageError, match="a program over a mesh needs at least one element"):
        irfuse.dask.apply(prog, X, da.from_array(conn[:0]), da.from_array(s[:0]))  # (as a call refuses it)
    bad = conn.copy()
    bad[17, 2] = 20
    out = irfuse.dask.apply(prog, X, da.from_array(bad, chunks=(10, 4)), da.from_array(s, chunks=10))
    with pytest.raises(irfuse.UsageError, match=r"element 17, position 2 names node 20, outside \[0, 20\)"):
        out.r.compute(scheduler="sync")
