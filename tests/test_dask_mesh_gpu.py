"""A parted mesh on two GPUs (`irfuse.dask.PartedMesh(gpu=True)`): CuPy blocks on each
worker's GPU, the residual and a time loop whose ghost rows are exchanged between the GPUs
(CUDA IPC) or through Dask queues, assembled into the bits of one call on one GPU. Skipped
without two NVIDIA GPUs, CuPy and distributed."""

from pathlib import Path

import numpy as np
import pytest

from conftest import gpu_count, has_gpu

cupy = pytest.importorskip("cupy")
distributed = pytest.importorskip("distributed")

import irfuse  # noqa: E402
import irfuse.dask  # noqa: E402
from irfuse.dask.cluster import local_gpu_cluster  # noqa: E402
from irfuse.mesh import box_tetrahedra  # noqa: E402

MESH = Path(__file__).resolve().parents[1] / "examples" / "mesh"
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
LAM, MU, DT = np.float32(1.5), np.float32(0.7), np.float32(1e-3)


pytestmark = pytest.mark.skipif(not has_gpu() or gpu_count() < 2, reason="needs two NVIDIA GPUs")


@pytest.fixture(scope="module")
def client():
    with local_gpu_cluster(2) as cluster, distributed.Client(cluster) as c:
        c.wait_for_workers(2)
        yield c


@pytest.mark.parametrize("exchange", ["shared", "dask"])
def test_two_gpus_give_one_gpus_bits(client, exchange):
    X, conn = box_tetrahedra(12, 10, 9)[:2]
    rng = np.random.default_rng(3)
    X = (X + 0.01 * rng.standard_normal(X.shape)).astype(np.float32)
    u = (0.01 * rng.standard_normal(X.shape)).astype(np.float32)
    v = (0.01 * rng.standard_normal(X.shape)).astype(np.float32)
    residual = irfuse.compile(str(MESH / "p1_residual.kas"))
    lumped = irfuse.compile(str(MESH / "lumped_mass.kas"))
    step = irfuse.compile(str(MESH / "explicit_step.kas"))
    quarter, rho = np.full(4, 0.25, np.float32), np.float32(2)
    mesh = irfuse.dask.PartedMesh(conn, [100, 2000, len(conn) - 2100], client, gpu=True)
    assert len(set(mesh.worker_of)) == 2
    r = irfuse.dask.apply(residual, X, u, mesh, DN, LAM, MU).r
    assert client.submit(lambda b: type(b).__module__.split(".")[0], r.blocks[0]).result() == "cupy"
    gX, gu, gv, gconn = (cupy.asarray(a) for a in (X, u, v, conn))
    assert mesh.assemble(r).tobytes() == residual(gX, gu, gconn, DN, LAM, MU).r.get().tobytes()
    m = irfuse.dask.apply(lumped, X, mesh, DN, quarter, rho).m
    gm = lumped(gX, gconn, DN, quarter, rho).m
    assert mesh.assemble(m).tobytes() == gm.get().tobytes()
    carry = {"u": "u1", "v": "v1"}  # four steps as two loops: the second reuses the first's exchange
    end = irfuse.dask.time_loop(step, 2, carry, X, u, v, m, mesh, DN, LAM, MU, DT, exchange=exchange)
    end = irfuse.dask.time_loop(step, 2, carry, X, end.u1, end.v1, m, mesh, DN, LAM, MU, DT, exchange=exchange)
    for _ in range(4):
        gu, gv = step(gX, gu, gv, gm, gconn, DN, LAM, MU, DT)
    assert mesh.assemble(end.u1).tobytes() == gu.get().tobytes()
    assert mesh.assemble(end.v1).tobytes() == gv.get().tobytes()
    mesh.close()
