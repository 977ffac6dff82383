import glob
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EXAMPLES = sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas")))


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory):
    """Compile caches of a test session live in a fresh directory."""
    old = os.environ.get("IRFUSE_CACHE_DIR")
    os.environ["IRFUSE_CACHE_DIR"] = str(tmp_path_factory.mktemp("irfuse-cache"))
    yield
    if old is None:
        os.environ.pop("IRFUSE_CACHE_DIR", None)
    else:
        os.environ["IRFUSE_CACHE_DIR"] = old


def has_gpu() -> bool:
    try:
        from irfuse.runtime.cuda_device import gpu_available

        return gpu_available()
    except Exception:
        return False


requires_gpu = pytest.mark.skipif(not has_gpu(), reason="needs an NVIDIA GPU with pycuda")


def check_top_plans_on_cpu(path: str, top: int, dtype: str, n: int, seed: int = 0) -> int:
    """Runs plan 0..top-1 of the search on the CPU against the reference; returns how many exist."""
    from irfuse.diagnostics import CompileError
    from irfuse.pipeline import compile_program
    from irfuse.runtime.executor import CpuDevice, Executor
    from irfuse.runtime.reference import DTYPES, random_inputs, run_reference
    from irfuse.runtime.verify import check_outputs
    from irfuse.tools.tune import partition_pipeline

    for k in range(top):
        try:
            plan, _ = compile_program(path, partition_pipeline(top, k, 8, 1 << 22, "h100", dtype), dtype,
                                      compile_gpu=False)
        except CompileError as e:
            assert "distinct plans exist" in str(e)
            return k
        inputs = random_inputs(plan.reference_program, n, seed + k, DTYPES[dtype])
        got = Executor(plan, CpuDevice(plan)).run(inputs, n).outputs
        checks = check_outputs(got, run_reference(plan.reference_program, inputs), dtype)
        assert all(c.ok for c in checks), (path, k, [c.describe() for c in checks])
    return top
