"""One-kernel programs at every block size and elements a thread, on the GPU: what starting
blocks costs (`block_cost` in `irfuse/planner/cost.py`).

    python benchmarks/block_sizes.py FILE.kas [FILE.kas ...]     (env N: elements, OUT: JSON's folder)

Each program is compiled with `fuse-each{by=B per_thread=E}` (one kernel a call) for B in 64 to
1024 and E in 1 to 8 (at least 32 threads), run on random float32 data, and timed as a whole
run (median of 40); the table gives the blocks, the bytes a block moves, the time, the fraction
of the device-to-device copy bandwidth measured in the same run and the blocks started per
microsecond. A kernel bound by starting its blocks runs at the same blocks a microsecond
whatever its bytes.
"""
import os
import statistics
import sys

import numpy as np

from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.verification.reference import effective_bytes, random_inputs

from irfuse.transforms.in_kernel import IN_KERNEL_STEPS
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

STEPS = ",".join(step.pass_name for step in IN_KERNEL_STEPS)
n = int(os.environ.get("N", 4194304))
rows = []
copy = None
for path in sys.argv[1:]:
    for by in (64, 128, 256, 512, 1024):
        for e in (1, 2, 4, 8):
            if by // e < 32:
                continue
            plan, _ = compile_program(path, f"kas-dce,fuse-each{{by={by} per_thread={e}}},{STEPS}", "f32")
            prog = plan.reference_program
            inputs = random_inputs(prog, n, 1, np.float32)
            nbytes = effective_bytes(prog, n, 4)
            dev = CudaDevice(plan)
            try:
                if copy is None:
                    copy = measure_copy_bandwidth(dev.drv)
                rec = Executor(plan, dev).prepare(inputs, n)
                for _ in range(5):
                    rec.replay()
                t = statistics.median(rec.time_once() for _ in range(40))
            finally:
                dev.close()
            blocks = -(-n // by)
            rows.append(dict(prog=os.path.basename(path), by=by, per_thread=e, threads=by // e, blocks=blocks,
                             bytes_per_block=nbytes / blocks, us=t * 1e6, of_copy=nbytes / t / copy,
                             blocks_per_us=blocks / t / 1e6))
            r = rows[-1]
            print(f"{r['prog']:18s} by={by:5d} e={e} threads={by//e:5d} blocks={blocks:8d} "
                  f"B/block={r['bytes_per_block']:7.0f} {r['us']:8.1f} us {r['of_copy']:6.1%} {r['blocks_per_us']:7.0f} blocks/us", flush=True)
out = os.environ.get("OUT", ".")
with open(os.path.join(out, "block_sizes.json"), "w") as f:
    meta.dump({"copy": copy, "n": n, "rows": rows}, f, indent=1)
