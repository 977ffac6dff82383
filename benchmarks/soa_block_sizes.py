"""Structure-of-arrays kernels of three seed workloads with other block sizes than the
planner's, and with cache-streaming hints (`__ldcs`/`__stcs`) on their global accesses.

    python benchmarks/soa_block_sizes.py

Each row: the default SoA plan with every kernel's `by` forced, the in-kernel passes run
again, device time of 10 runs back to back (median of 20) as a fraction of the 1 GiB copy.
Prints one line per variant; an experiment behind a note in NOTES.md, not a peer comparison.
"""
import os
import re
import sys

import numpy as np
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import ROOT, WORKLOADS  # noqa: E402
from irfuse.dialects.layouts import from_aos
from irfuse.driver.compile import build, run_pipeline
from irfuse.frontend.irgen import compile_file
from irfuse.dialects.element_types import set_module_element_type, element_type
from irfuse.dialects.layouts import set_module_layout
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.verification.reference import effective_bytes, random_inputs
from irfuse.transforms.in_kernel import IN_KERNEL_STEPS
from xdsl.dialects.builtin import IntAttr

n = 1 << 22
bw = None
for wl in ("SyncTest", "StVenantInner", "BigFusion"):
    path = os.path.join(ROOT, "examples", WORKLOADS[wl])
    res = []
    for by in (64, 128, 256, 512):
        for hint in ("", "cs"):
            fr = compile_file(path)
            set_module_element_type(fr.module, element_type("f32"))
            set_module_layout(fr.module, "soa")
            reference = fr.module.clone()
            m = run_pipeline(fr.module, "kas-dce,fuse-partition")
            for op in m.ops:
                if op.name == "fuse.kernel":
                    op.by = IntAttr(by)
            m = run_pipeline(m, ",".join(s.pass_name for s in IN_KERNEL_STEPS) + ",fuse-verify-races")
            plan = build(m, compile_gpu=True)  # ptxas' spill retry, as compile_program does
            plan.reference_module = reference
            if hint:
                src = plan.source
                src = re.sub(r"(v_\w+\[\d+\]) = (g_\w+)\[([^\]]+)\];", r"\1 = __ldcs(&\2[\3]);", src)
                src = re.sub(r"(g_\w+)\[([^\]]+)\] = (r_\w+\[\d+\]);", r"__stcs(&\1[\2], \3);", src)
                plan.source = src
                plan.cubin = None  # compiled again from the hinted source
            dev = CudaDevice(plan)
            if bw is None:
                bw = measure_copy_bandwidth(dev.drv)
            ref = plan.reference_program
            host = random_inputs(ref, n, 1, np.float32)
            rec = Executor(plan, dev).prepare({k: from_aos(v, "soa") for k, v in host.items()}, n)
            for _ in range(3):
                rec.time_once(10)
            t = float(np.median([rec.time_once(10) for _ in range(20)]))
            regs = [plan.resources(k.name).registers for k in plan.kernels]
            res.append((by, hint, effective_bytes(ref, n, 4) / t / bw, regs))
            dev.close()
    for r in res:
        print(wl, "by=%d" % r[0], r[1] or "plain", "%.1f%%" % (100 * r[2]), r[3])
