"""A mesh in parts on a local Dask cluster (`irfuse.dask.PartedMesh`, `irfuse.dask.apply`,
`irfuse.dask.time_loop`): NumPy blocks, the CPU backend, worker processes; every result
assembled from the parts is the one call's (or the sequential loop's) bits, whatever the
parts and the workers."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pytest

import irfuse
from irfuse.diagnostics import UsageError
from irfuse.mesh import box_tetrahedra

distributed = pytest.importorskip("distributed")
import irfuse.dask  # noqa: E402
from irfuse.dask import Parted, PartedMesh  # noqa: E402
from irfuse.dask.parts import cluster_workers  # noqa: E402

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "mesh"
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
LAM, MU, DT = np.float32(1.5), np.float32(0.7), np.float32(1e-3)
CARRY = {"u": "u1", "v": "v1"}

PER_ELEMENT = """
nodal vector3 X, r;
index4 conn;
scalar s, t;
matrix4x3 Xe, fe;
input X, conn, s;
Xe = gather(X, conn);
fe = scale(Xe, s);
r = scatter(fe, conn);
t = smul(s, s);
return r, t;
"""


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as c:
        # (the client's view of the cluster, which the tests name workers from, holds every
        # worker only once they have registered: on a loaded machine a test once read none)
        c.wait_for_workers(3)
        yield c
    cluster.close()


@pytest.fixture(scope="module")
def programs():
    return {name: irfuse.compile(str(EXAMPLES / f"{name}.kas"), backend="cpu")
            for name in ("p1_residual", "explicit_step", "lumped_mass")}


@pytest.fixture(scope="module")
def problem():
    X, conn = box_tetrahedra(4, 3, 3)[:2]
    rng = np.random.default_rng(0)
    X = (X + 0.02 * rng.standard_normal(X.shape)).astype(np.float32)
    u = (0.01 * rng.standard_normal(X.shape)).astype(np.float32)
    v = (0.01 * rng.standard_normal(X.shape)).astype(np.float32)
    return X, conn, u, v


def _steps(step, X, conn, u, v, m, count):
    for _ in range(count):
        u, v = step(X, u, v, m, conn, DN, LAM, MU, DT)
    return u, v


@pytest.mark.parametrize("parts, workers, exchange", [
    (1, 1, "auto"), (5, 1, "shared"), ("uneven", 2, "shared"), (3, 3, "shared"), (4, 3, "dask")])
def test_a_parted_mesh_gives_the_one_calls_bits(client, programs, problem, parts, workers, exchange):
    """Residual, lumped mass and three explicit steps on parts spread over 1, 2 and 3 worker
    processes (several parts a worker too), the ghost rows exchanged through shared memory
    or Dask queues: the assembled results are the one call's bits. Uneven parts: one of one
    element, one of 60, the rest."""
    X, conn, u, v = problem
    if parts == "uneven":
        parts = [1, 60, len(conn) - 61]
    names = cluster_workers(client)[:workers]
    mesh = PartedMesh(conn, parts, client, workers=names)
    assert len(set(mesh.worker_of)) == workers
    residual, lumped, step = programs["p1_residual"], programs["lumped_mass"], programs["explicit_step"]
    r = mesh.assemble(irfuse.dask.apply(residual, X, u, mesh, DN, LAM, MU).r)
    assert r.tobytes() == residual(X, u, conn, DN, LAM, MU).r.tobytes()
    quarter = np.full(4, 0.25, np.float32)
    m_parted = irfuse.dask.apply(lumped, X=mesh.nodal(X), conn=mesh, dN=DN, quarter=quarter, rho=np.float32(2)).m
    m = lumped(X, conn, DN, quarter, np.float32(2)).m
    assert mesh.assemble(m_parted).tobytes() == m.tobytes()
    timings: dict = {}
    end = irfuse.dask.time_loop(step, 3, CARRY, X, u, v, m_parted, mesh, DN, LAM, MU, DT, exchange=exchange,
                                timings=timings)
    assert sorted(timings) == names and all(0 < t["queued"] <= t["seconds"] for t in timings.values())
    want = _steps(step, X, conn, u, v, m, 3)
    assert mesh.assemble(end.u1).tobytes() == want[0].tobytes()
    assert mesh.assemble(end.v1).tobytes() == want[1].tobytes()


def test_ghost_rows_hold_their_owners_values(client, programs, problem):
    """Every block of a nodal result, ghost rows included, is the whole result's rows of the
    part's nodes: after apply (the scatter's sums) and after a time loop (the exchanged
    velocity)."""
    X, conn, u, v = problem
    mesh = PartedMesh(conn, 3, client)
    residual, step = programs["p1_residual"], programs["explicit_step"]
    r = irfuse.dask.apply(residual, X, u, mesh, DN, LAM, MU).r
    whole = residual(X, u, conn, DN, LAM, MU).r
    for part, block in zip(mesh.parts, client.gather(r.blocks)):
        assert block.tobytes() == whole[part.nodes].tobytes()
    m = np.ones(len(X), np.float32)
    end = irfuse.dask.time_loop(step, 2, CARRY, X, u, v, m, mesh, DN, LAM, MU, DT)
    want = _steps(step, X, conn, u, v, m, 2)[1]
    for part, block in zip(mesh.parts, client.gather(end.v1.blocks)):
        assert block.tobytes() == want[part.nodes].tobytes()


def test_per_element_values_and_arrays_made_on_the_workers(client, problem):
    """A per-element input given whole, as a Dask array (each part's rows computed on its
    worker) or made on each part's worker from its element numbers; a per-element output
    assembled from each part's own range; a nodal input made on the workers from the node
    numbers."""
    X, conn, _, _ = problem
    prog = irfuse.compile(PER_ELEMENT, backend="cpu")
    s = np.linspace(0.5, 1.5, len(conn), dtype=np.float32)
    mesh = PartedMesh(conn, [7, 100, len(conn) - 107], client)
    one = prog(X, conn, s)
    import dask.array as da

    for given in (s, lambda elements: s[elements], da.from_array(s, chunks=50)):
        out = irfuse.dask.apply(prog, mesh.nodal(lambda nodes: X[nodes]), mesh, mesh.per_element(given))
        assert mesh.assemble(out.r).tobytes() == one.r.tobytes()
        assert mesh.assemble(out.t).tobytes() == one.t.tobytes()


def test_nodes_no_element_names_come_out_zero(client, programs):
    X, conn = box_tetrahedra(2, 2, 1)[:2]
    X = np.concatenate([X, np.ones((2, 3))]).astype(np.float32)  # two nodes of no element
    u = np.ones_like(X)
    mesh = PartedMesh(conn, 2, client, nodes=len(X))
    r = mesh.assemble(irfuse.dask.apply(programs["p1_residual"], X, u, mesh, DN, LAM, MU).r)
    whole = programs["p1_residual"](X, u, conn, DN, LAM, MU).r
    assert r[:-2].tobytes() == whole[:-2].tobytes() and not r[-2:].any()


def test_a_failing_worker_stops_the_loop_instead_of_hanging_it(client, programs, problem):
    """A part whose block is wrong fails its worker's first step; the other workers stop
    (shared memory: at once; Dask queues: at the timeout) and the error comes back."""
    X, conn, u, v = problem
    step = programs["explicit_step"]
    mesh = PartedMesh(conn, 3, client)
    good = mesh.nodal(u)
    bad = Parted(mesh, "nodal", [good.blocks[0], client.submit(lambda: np.zeros((2, 3), np.float32)),
                                 good.blocks[2]])
    m = np.ones(len(X), np.float32)
    want = _steps(step, X, conn, u, v, m, 2)
    for exchange in ("shared", "dask"):
        start = time.monotonic()
        with pytest.raises(UsageError, match="input 'u'"):
            irfuse.dask.time_loop(step, 3, CARRY, X, bad, v, m, mesh, DN, LAM, MU, DT, exchange=exchange,
                                  timeout=1.5)
        assert time.monotonic() - start < 60
        end = irfuse.dask.time_loop(step, 2, CARRY, X, good, v, m, mesh, DN, LAM, MU, DT, exchange=exchange)
        assert mesh.assemble(end.v1).tobytes() == want[1].tobytes()  # the mesh still runs loops


def test_the_workers_are_asked_of_the_scheduler_not_read_from_the_clients_view(client, programs, problem, monkeypatch):
    """`Client.scheduler_info()` returns an attribute the client's periodic update may have
    replaced by a view listing no workers (a test once read none while the scheduler had
    three): a parted mesh and its close ask the scheduler itself (`cluster_workers`), so a
    view of no workers changes nothing."""
    import os

    X, conn, u, v = problem
    names = cluster_workers(client)
    assert len(names) == 3
    monkeypatch.setattr(client, "scheduler_info", lambda *a, **k: {"workers": {}})
    mesh = PartedMesh(conn, 2, client, workers=names[:2])
    r = irfuse.dask.time_loop(programs["p1_residual"], 1, {"u": "r"}, X, u, mesh, DN, LAM, MU)
    assert mesh.assemble(r.r).shape == X.shape
    directory = mesh._directory
    mesh.close()  # (its exchanges dropped on the workers the scheduler names)
    assert directory is not None and not os.path.exists(directory)


def test_loops_on_a_mesh_go_on_from_each_other_and_close_lets_go(client, programs, problem):
    """Time loops on one mesh keep their exchange on the workers (opened once): a loop of
    two steps then one of one give the three steps' bits, a loop of another program between
    them included; `close` lets go of the workers' exchanges and the shared directory."""
    import os

    X, conn, u, v = problem
    step = programs["explicit_step"]
    m = np.ones(len(X), np.float32)
    mesh = PartedMesh(conn, 3, client, workers=cluster_workers(client)[:2])
    first = irfuse.dask.time_loop(step, 2, CARRY, X, u, v, m, mesh, DN, LAM, MU, DT)
    directory = mesh._directory
    assert directory is not None and os.path.isdir(directory)
    scaled = irfuse.compile(str(EXAMPLES / "p1_residual.kas"), backend="cpu")
    irfuse.dask.time_loop(scaled, 2, {"u": "r"}, X, u, mesh, DN, LAM, MU)  # another kind on the same mesh
    end = irfuse.dask.time_loop(step, 1, CARRY, X, first.u1, first.v1, m, mesh, DN, LAM, MU, DT)
    want = _steps(step, X, conn, u, v, m, 3)
    assert mesh.assemble(end.u1).tobytes() == want[0].tobytes()
    assert mesh.assemble(end.v1).tobytes() == want[1].tobytes()

    def kept(directory):
        from irfuse.dask.exchange import KEPT

        return sum(key[0] == directory for key in KEPT)

    assert sum(client.run(kept, directory).values()) == 4  # two kinds on two workers
    mesh.close()
    assert not os.path.exists(directory) and sum(client.run(kept, directory).values()) == 0


def test_what_parts_cannot_take_is_refused_by_name(client, programs, problem):
    X, conn, u, v = problem
    mesh = PartedMesh(conn, 2, client)
    other = PartedMesh(conn, 3, client)
    residual, step = programs["p1_residual"], programs["explicit_step"]
    reduces = irfuse.compile(PER_ELEMENT.replace("scalar s, t;", "scalar s, t;\nuniform scalar T;")
                             .replace("return r, t;", "T = sum(t);\nreturn r, T;"), backend="cpu")
    squares = irfuse.compile("scalar a, b;\ninput a;\nb = smul(a, a);\nreturn b;\n", backend="cpu",
                             filename="squares.kas")
    s = np.ones(len(conn), np.float32)
    m = np.ones(len(X), np.float32)
    cases = [
        (lambda: irfuse.dask.apply(reduces, X, mesh, s), "reduces over the batch"),
        (lambda: irfuse.dask.apply(residual, other.nodal(X), u, mesh, DN, LAM, MU), "not a nodal array of another"),
        (lambda: irfuse.dask.apply(residual, X, mesh, mesh, DN, LAM, MU), "input 'u' is nodal values, not the mesh"),
        (lambda: irfuse.dask.apply(residual, X[:-1], u, mesh, DN, LAM, MU), "has 80 rows"),
        (lambda: irfuse.dask.apply(residual, X, u, mesh, DN, LAM, MU, nodes=5), "nodes= is the PartedMesh's"),
        (lambda: irfuse.dask.time_loop(step, 0, CARRY, X, u, v, m, mesh, DN, LAM, MU, DT), "steps is a positive"),
        (lambda: irfuse.dask.time_loop(step, 2, {"u": "w"}, X, u, v, m, mesh, DN, LAM, MU, DT), "maps an input"),
        (lambda: irfuse.dask.time_loop(step, 2, {"m": "u1"}, X, u, v, m, mesh, DN, LAM, MU, DT), "feeds nodal"),
        (lambda: irfuse.dask.time_loop(step, 2, CARRY, X, u, v, m, mesh, DN, LAM, MU, DT, exchange="mpi"),
         "exchange= is one of"),
        (lambda: PartedMesh(conn, 2, client, workers=["tcp://nowhere:1"]), "names workers of the client"),
        (lambda: PartedMesh(conn, [3, 4], client), "summing to the 216 elements"),
        (lambda: irfuse.dask.time_loop(squares, 2, {"a": "b"}, s), "squares has no connectivity input: "
         "irfuse.dask.time_loop runs a program over a mesh given as a PartedMesh"),
    ]
    for call, message in cases:
        with pytest.raises(UsageError, match=message):
            call()
    assert (len(X), len(conn)) == (80, 216)  # (the counts the refusals above name)


def test_every_parted_call_with_each_argument_spoiled_returns_or_is_refused_by_name():
    """The API contract for the calls on parts (some 750, about 10 s, on an in-process
    cluster): a uniform input given as a list was indexed part by part (an IndexError), a
    client=, workers=, gpu=, exchange= or timeout= of another kind ended in an AttributeError,
    TypeError or NumPy's ambiguous truth value, a tensor that requires grad in PyTorch's error,
    and `apply` on parts took anything for the program; the Outputs of Parted arrays did not print."""
    from irfuse.testing.contracts import check_api_call, every_parted_call

    failures = []
    with distributed.Client(processes=False, n_workers=2, threads_per_worker=1, dashboard_address=None) as local:
        for what, call in every_parted_call(str(EXAMPLES.parent), local):
            try:
                check_api_call(call)
            except Exception as e:  # noqa: BLE001 -- (each failure listed with its case)
                failures.append(f"{what}: {type(e).__name__}: {str(e)[:200]}")
        assert not failures, "\n".join(failures[:20])
        assert repr(irfuse.dask.apply(irfuse.compile(EXAMPLES / "p1_residual.kas", backend="cpu", dtype="f64"),
                                      *_parted_residual_args(local))).startswith("Outputs(r=<Parted nodal array")


def _parted_residual_args(client):
    X, conn = box_tetrahedra(2)
    mesh = PartedMesh(conn, 2, client)
    dN = np.array([[-1.0, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
    return mesh.nodal(X), mesh.nodal(np.zeros_like(X)), mesh, dN, 1.0, 1.0


def test_a_worker_killed_during_a_loop_ends_it_with_irfuses_error_naming_the_worker_and_the_step(programs, problem):
    """A worker process killed mid-loop once ended the loop with Dask's FuturesCancelledError
    (irfuse's own error, naming the worker and the step, only in a worker's log); the loop now
    raises irfuse's ExecutionError naming the lost worker and where the others stopped. (A
    cluster of its own: the killed worker comes back under another address.)"""
    import os
    import signal
    import threading

    from irfuse.diagnostics import ExecutionError

    X, conn, u, v = problem
    step = programs["explicit_step"]
    m = np.ones(len(X), np.float32)
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    with distributed.Client(cluster) as client:
        mesh = PartedMesh(conn, 2, client)
        pids = client.run(os.getpid)
        victim = sorted(pids)[1]
        killer = threading.Timer(3.0, os.kill, (pids[victim], signal.SIGKILL))
        killer.start()
        start = time.monotonic()
        with pytest.raises(ExecutionError, match=rf"worker {victim} left the cluster during the loop.*"
                                                 r"\(at step \d+ of 1000000\)"):
            irfuse.dask.time_loop(step, 1_000_000, CARRY, X, u, v, m, mesh, DN, LAM, MU, DT, timeout=2.0)
        killer.join()
        assert time.monotonic() - start < 60
    cluster.close()
