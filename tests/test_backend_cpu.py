"""Every example through the whole pipeline, executed on the CPU from the generated CUDA C."""

import os

import numpy as np
import pytest

from conftest import EXAMPLES
from irfuse.backend.cuda_emit import KernelInfo
from irfuse.backend.host_compile import HostModule
from irfuse.driver.compile import compile_program
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.runtime.reference import DTYPES, random_inputs, run_reference, run_references
from irfuse.runtime.verify import check_outputs

_plans = {}


def plan_for(path, dtype, pipeline=None):
    key = (path, dtype, pipeline)
    if key not in _plans:
        plan, _ = compile_program(path, pipeline, dtype, compile_gpu=False)
        _plans[key] = (plan, CpuDevice(plan))
    return _plans[key]


def run_and_check(path, dtype, n, pipeline=None, seed=0):
    plan, dev = plan_for(path, dtype, pipeline)
    inputs = random_inputs(plan.reference_program, n, seed, DTYPES[dtype])
    got = Executor(plan, dev).run(inputs, n).outputs
    want = run_references(plan.reference_program, inputs, dtype)
    checks = check_outputs(got, want, dtype)
    assert all(c.ok for c in checks), [c.describe() for c in checks]
    return got, want.float64


@pytest.mark.parametrize("n", [1, 97, 1000])
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_matches_reference_f32(path, n):
    run_and_check(path, "f32", n)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_matches_reference_f64(path):
    got, want = run_and_check(path, "f64", 97)
    for name in want:
        assert got[name].dtype == np.float64


@pytest.mark.parametrize("variant", ["fuse-promote-registers{inputs=true outputs=true}",
                                     "fuse-allocate-shared{pad-banks=false}"])
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_matches_reference_through_pass_variants(path, variant):
    """The non-default pass options emit correct kernels too (loads and stores from registers;
    unpadded shared values)."""
    from irfuse.passes.registry import DEFAULT_PIPELINE

    name = variant.split("{")[0]
    run_and_check(path, "f32", 97, DEFAULT_PIPELINE.replace(name, variant, 1))


@pytest.mark.parametrize("n", [63, 64, 65, 129])
def test_tail_blocks(n):
    # by=64: exactly one block, one element short, one over, two blocks and one element.
    path = next(p for p in EXAMPLES if p.endswith("stvenant.kas"))
    run_and_check(path, "f32", n, pipeline="kas-dce,fuse-each{by=64}")


def test_nan_and_infinity_propagate_like_the_reference():
    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))
    plan, dev = plan_for(path, "f32")
    inputs = random_inputs(plan.reference_program, 10, 0, np.float32)
    inputs["A"][3, 1, 1] = np.nan
    inputs["A"][5, 0, 0] = np.inf
    got = Executor(plan, dev).run(inputs, 10).outputs["F"]
    want = run_reference(plan.reference_program, inputs)["F"]
    assert np.isnan(got[3, 1, 1]) and np.isinf(got[5, 0, 0])
    assert all(c.ok for c in check_outputs({"F": got}, {"F": want}, "f32"))


def test_shared_memory_no_thread_wrote_reads_as_nan():
    # A hand-made kernel reads shared word `1` that only thread 0 of a *different* block would
    # write; the host runtime fills shared memory with NaN before every block.
    src = """
typedef float real_t;
extern "C" __global__ void probe(const real_t* in, real_t* out, const long long n) {
  IRFUSE_SHARED_STATIC(real_t, smem, 4);
  if (threadIdx.y == 0 && blockIdx.x == 0) smem[1] = 1.0f;
  __syncthreads();
  out[blockIdx.x * 2 + threadIdx.y] = smem[1] + in[0];
}
"""
    k = KernelInfo("probe", 1, 2, 4, ["in"], ["out"], [1], [1])
    mod = HostModule(src, [k], 4)
    out = np.zeros(4, dtype=np.float32)
    mod.launch("probe", [np.zeros(1, dtype=np.float32), out], 4)
    assert out[0] == 1.0 and out[1] == 1.0
    assert np.isnan(out[2]) and np.isnan(out[3])


def test_missing_barrier_shows_as_wrong_results():
    # Without the barrier between the load and the call, threads read operands other threads
    # have not loaded yet: NaN (poisoned shared memory) or stale values reach the outputs.
    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))
    plan, _ = compile_program(path, None, "f32", compile_gpu=False)
    plan.source = plan.source.replace("__syncthreads();\n  // madd33", "  // madd33")
    bad = CpuDevice(plan)
    inputs = random_inputs(plan.reference_program, 4096, 0, np.float32)
    got = Executor(plan, bad).run(inputs, 4096).outputs
    want = run_reference(plan.reference_program, inputs)
    assert not all(c.ok for c in check_outputs(got, want, "f32"))
