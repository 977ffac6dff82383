"""A/B probe (kept for its record): examples whose kernels are mostly generated helper code,
timed alone (no reference, no peers) so that two packages (one by `PYTHONPATH`) can be compared
in one GPU call: each example's default plan, n elements, the median of `repeat` runs.

    python PROBE.py N REPEAT NAME:DTYPE ...   (from the repository's root, on a GPU)"""
import os
import sys
import tempfile

os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import irfuse  # noqa: E402
from irfuse.driver.compile import compile_program  # noqa: E402
from irfuse.runtime.cuda_device import CudaDevice  # noqa: E402
from irfuse.runtime.executor import Executor  # noqa: E402
from irfuse.verification.reference import DTYPES, random_inputs  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
n, repeat = int(sys.argv[1]), int(sys.argv[2])
print(irfuse.__file__)
for item in sys.argv[3:]:
    name, dtype = item.split(":")
    plan, _ = compile_program(os.path.join(ROOT, "examples", f"{name}.kas"), None, dtype)
    dev = CudaDevice(plan)
    try:
        inputs = random_inputs(plan.reference_program, n, 1, DTYPES[dtype])
        res = Executor(plan, dev).run(inputs, n, repeat=repeat, warmup=5)
    finally:
        dev.close()
    regs = ",".join(str(plan.resources(k.name).registers) for k in plan.kernels)
    print(f"{name:12s} {dtype} {res.median_s * 1e3:.4f} ms  registers {regs}")
