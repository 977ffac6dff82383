"""`irfuse.dask.apply` on a `dask_cuda.LocalCUDACluster` of two GPUs, one worker each: CuPy
chunks resident on the GPUs and NumPy chunks in host memory, programs with and without
reductions over the batch. Skipped without two GPUs, CuPy and dask-cuda."""

import os

import numpy as np
import pytest

from conftest import EXAMPLES, gpu_count, has_gpu
from test_dask import _tree

cupy = pytest.importorskip("cupy")
da = pytest.importorskip("dask.array")
dask_cuda = pytest.importorskip("dask_cuda")
distributed = pytest.importorskip("distributed")


pytestmark = pytest.mark.skipif(not has_gpu() or gpu_count() < 2, reason="needs two NVIDIA GPUs")


def example(name: str) -> str:
    return next(p for p in EXAMPLES if os.path.basename(p) == name)


@pytest.fixture(scope="module")
def client():
    with dask_cuda.LocalCUDACluster(CUDA_VISIBLE_DEVICES="0,1", n_workers=2, threads_per_worker=1,
                                    dashboard_address=None) as cluster, distributed.Client(cluster) as c:
        yield c


def _chunked(host: dict, chunks: tuple, uniform, on_gpu: bool) -> dict:
    out = {}
    for k, v in host.items():
        if k in uniform:
            out[k] = v
        else:
            a = da.from_array(v, chunks=(chunks, *v.shape[1:]))
            out[k] = a.map_blocks(cupy.asarray, dtype=v.dtype) if on_gpu else a
    return out


def _devices_used(client, arrays) -> set:
    """The GPUs (by worker) that hold the chunks of persisted arrays."""
    who = client.who_has(arrays)
    return {w for workers in who.values() for w in workers}


@pytest.mark.parametrize("on_gpu", [True, False], ids=["cupy_chunks", "numpy_chunks"])
def test_two_gpus_give_the_results_of_one_call(client, on_gpu):
    import irfuse
    import irfuse.dask
    from irfuse.verification.reference import random_inputs

    prog = irfuse.compile(example("stvenant.kas"), backend="cuda")
    n = 200_003
    host = random_inputs(prog.compiled.reference_program, n, 2, np.float32)
    want = prog(**host)
    chunks = (50_000, 50_000, 50_000, 50_003)
    outs = irfuse.dask.apply(prog, **_chunked(host, chunks, prog.uniform, on_gpu))
    kept = client.persist(list(outs))
    distributed.wait(kept)
    assert len(_devices_used(client, kept)) == 2  # both workers ran tasks
    for k, o in zip(prog.outputs, kept):
        got = o.compute()
        assert isinstance(got, cupy.ndarray) == on_gpu  # chunks stay where they were
        np.testing.assert_array_equal(cupy.asnumpy(got) if on_gpu else got, want[k])


def test_reductions_on_two_gpus_combine_chunks_in_a_fixed_order(client):
    import irfuse
    import irfuse.dask
    from irfuse.verification.reference import random_inputs

    chunks = (100_000,) * 9 + (7,)
    n = sum(chunks)
    cfl = irfuse.compile(example("cfl_step.kas"), backend="cuda")
    host = random_inputs(cfl.compiled.reference_program, n, 4, np.float32)
    want = cfl(**host)
    outs = irfuse.dask.apply(cfl, **_chunked(host, chunks, cfl.uniform, True))
    np.testing.assert_array_equal(cupy.asnumpy(outs.xn.compute()), want.xn)  # a maximum: the one call's bits
    assert cupy.asnumpy(outs.dt.compute()).tobytes() == want.dt.tobytes()

    energy = irfuse.compile(example("strain_energy.kas"), backend="cuda")
    host = random_inputs(energy.compiled.reference_program, n, 5, np.float32)
    want = energy(**host)
    arrays = _chunked(host, chunks, energy.uniform, True)
    runs = [cupy.asnumpy(irfuse.dask.apply(energy, **arrays).U.compute()) for _ in range(3)]
    assert len({r.tobytes() for r in runs}) == 1  # the same bits every run, whichever GPU ran which chunk
    starts = np.cumsum((0, *chunks))
    parts = [energy(**{k: v if k in energy.uniform else v[a:b] for k, v in host.items()}).U
             for a, b in zip(starts[:-1], starts[1:])]
    total = _tree("sum", parts, irfuse.dask.COMBINE_EVERY)  # the documented order, spelt out
    assert runs[0].tobytes() == np.asarray(total, np.float32).tobytes()
    exact = want.e.astype(np.float64).sum()
    assert abs(float(runs[0]) - exact) <= 1e-5 * np.abs(want.e.astype(np.float64)).sum()
