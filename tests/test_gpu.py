"""GPU-only: every example on the real device at N = 4194304 and with tails. Skipped without a GPU."""

import os

import numpy as np
import pytest

from conftest import EXAMPLES, requires_gpu

pytestmark = requires_gpu


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_on_gpu(path, dtype):
    from irfuse.pipeline import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.runtime.reference import DTYPES, random_inputs, run_reference
    from irfuse.runtime.verify import check_outputs

    plan, _ = compile_program(path, None, dtype)
    dev = CudaDevice(plan)
    try:
        for n in (1, 97, 4_194_304 if dtype == "f32" else 1_000_003):
            inputs = random_inputs(plan.reference_program, n, n, DTYPES[dtype])
            got = Executor(plan, dev).run(inputs, n).outputs
            want = run_reference(plan.reference_program, inputs)
            checks = check_outputs(got, want, dtype)
            assert all(c.ok for c in checks), [c.describe() for c in checks]
    finally:
        dev.close()
