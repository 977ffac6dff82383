"""`irfuse.dask.apply` on Dask arrays chunked along the batch axis, on a local cluster of
worker processes with NumPy chunks on the CPU backend: the results of one call, bit for bit."""

import os
import pickle

import numpy as np
import pytest

import irfuse
from conftest import EXAMPLES
from irfuse.runtime.reference import random_inputs

da = pytest.importorskip("dask.array")
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


def test_a_uniform_input_goes_whole_to_every_task_and_reductions_are_refused(client):
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
    energy = irfuse.compile(example("strain_energy.kas"), backend="cpu")
    with pytest.raises(irfuse.UsageError, match="strain_energy reduces over the batch"):
        irfuse.dask.apply(energy, da.zeros((10, 6)), da.zeros(10), np.zeros((6, 6), np.float32))
