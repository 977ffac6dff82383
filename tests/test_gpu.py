"""GPU-only: every example on the real device at N = 4194304 and with tails. Skipped without a GPU."""

import os

import numpy as np
import pytest

from conftest import EXAMPLES, requires_gpu

pytestmark = requires_gpu


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_on_gpu(path, dtype):
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.runtime.reference import DTYPES, random_inputs, run_references
    from irfuse.runtime.verify import check_outputs

    plan, _ = compile_program(path, None, dtype)
    dev = CudaDevice(plan)
    try:
        for n in (1, 97, 4_194_304 if dtype == "f32" else 1_000_003):
            inputs = random_inputs(plan.reference_program, n, n, DTYPES[dtype])
            got = Executor(plan, dev).run(inputs, n).outputs
            want = run_references(plan.reference_program, inputs, dtype)
            checks = check_outputs(got, want, dtype)
            assert all(c.ok for c in checks), [c.describe() for c in checks]
    finally:
        dev.close()


def test_batch_over_two_to_the_31_floats():
    """64-bit offsets: synctest on 2^31/9 + 4097 elements, checked at both ends of the batch."""
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor

    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))
    plan, _ = compile_program(path, None, "f32")
    n = 2**31 // 9 + 4097
    assert n * 9 > 2**31
    a = np.random.default_rng(0).random((n, 3, 3), dtype=np.float32)
    dev = CudaDevice(plan)
    try:
        got = Executor(plan, dev).run({"A": a}, n).outputs["F"]
    finally:
        dev.close()
    for sl in (slice(0, 4096), slice(n - 4096, n)):
        want = 5 * a[sl].astype(np.float64)  # F = A + (A + (A + (A + A)))
        np.testing.assert_allclose(got[sl], want, rtol=1e-6)
    assert not np.isnan(got).any()


def test_a_run_is_one_cuda_graph_that_computes_what_the_launches_compute():
    """rotation_loop one op per kernel: the loop unrolls into launches (and the copy of R into
    the loop; between iterations R trades buffers instead), captured as one graph (one node
    per step) whose results equal those of the same steps launched one by one, bit for bit,
    over outputs poisoned before each replay."""
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.cuda_graph import CudaGraph
    from irfuse.runtime.executor import Executor
    from irfuse.runtime.reference import random_inputs, run_reference
    from irfuse.runtime.verify import check_outputs

    path = next(p for p in EXAMPLES if p.endswith("rotation_loop.kas"))
    plan, _ = compile_program(path, "kas-dce,fuse-each", "f32")
    n = 100_003
    inputs = random_inputs(plan.reference_program, n, 3, np.float32)
    results = {}
    for graphs in (False, True):
        dev = CudaDevice(plan, graphs=graphs)
        try:
            rec = Executor(plan, dev).prepare(inputs, n)
            if graphs:
                # 4 iterations of 3 launches, then venorm3; R copied into the loop
                assert isinstance(rec.replay, CudaGraph) and rec.replay.nodes == 4 * 3 + 1 + 1
            for buf, shape in rec.results.values():
                dev.drv.memset_d8(buf, 0xFF, int(np.prod(shape)) * 4)
            rec.replay()
            results[graphs] = rec.outputs()
        finally:
            dev.close()
    assert all(c.ok for c in check_outputs(results[True], run_reference(plan.reference_program, inputs), "f32"))
    for name in results[False]:
        assert np.array_equal(results[True][name], results[False][name]), name


def test_calibrate_measures_and_saves_a_profile(tmp_path, monkeypatch):
    from rich.console import Console

    from irfuse.planner.cost import load_profile
    from irfuse.tools.calibrate import calibrate

    monkeypatch.setenv("IRFUSE_PROFILE_DIR", str(tmp_path))
    p = calibrate(Console(), save=True)
    assert 1e11 < p.bandwidth < 1e14 and 0 < p.launch_overhead < 1e-3 and p.sms > 0
    assert load_profile(p.name) == p  # found again by the GPU's name


def test_tune_on_gpu_times_verifies_and_saves_the_fastest(tmp_path):
    import json

    from test_cli import irfuse

    path = next(p for p in EXAMPLES if p.endswith("stvenant_inner.kas"))
    out, best = tmp_path / "t.json", tmp_path / "best"
    p = irfuse("tune", path, "--top", "3", "--n", str(1 << 20), "--repeat", "6", "--rounds", "2",
               "--json", str(out), "--save-best", str(best), "--plot", str(tmp_path / "t.png"))
    assert p.returncode == 0, p.stdout + p.stderr
    d = json.loads(out.read_text())
    assert d["backend"] == "cuda" and d["device"] and len(d["plans"]) == 3
    for r in d["plans"]:
        assert r["verified"] and len(r["times_s"]) == 6
        assert 1e-6 < r["measured_s"] < 1.0 and 0 <= r["spread"] < 1.0
    assert d["best"]["measured_s"] == min(r["measured_s"] for r in d["plans"])
    import importlib.util

    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    p = irfuse("run", "--plan", str(best), "--n", str(1 << 20))
    assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr
