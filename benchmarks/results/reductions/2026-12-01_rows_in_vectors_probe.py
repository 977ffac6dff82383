"""Times programs' default GPU plans (h100 profile, as a GPU compile makes them) as whole runs:
    PYTHONPATH=CODE python3 ab_one.py N DTYPE VARIANTS FILE.kas [...]   (JSON lines)"""
import os, sys, statistics, json, hashlib
import numpy as np
from irfuse.driver.compile import compile_program, PlanningOptions
from irfuse.transforms.in_kernel import IN_KERNEL_STEPS
from irfuse.verification.reference import effective_bytes, random_inputs
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
import irfuse.driver.compile as _dc
if os.environ.get('SPILL'):
    _dc.SPILL_BYTES_KEPT = int(os.environ['SPILL'])
STEPS = ",".join(step.pass_name for step in IN_KERNEL_STEPS)
VARIANTS = {"default": None, "nooutputs": "kas-dce,fuse-partition," + STEPS.replace("fuse-promote-registers", "fuse-promote-registers{outputs=false}"), "outputs": "kas-dce,fuse-partition," + STEPS.replace("fuse-promote-registers", "fuse-promote-registers{outputs=true}")}
n, dtype = int(sys.argv[1]), sys.argv[2]
copy = None
for path in sys.argv[4:]:
    for vname in sys.argv[3].split(","):
        try:
            plan, _ = compile_program(path, VARIANTS[vname], dtype, compile_gpu=True, planning=PlanningOptions(profile=os.environ['PROFILE']) if os.environ.get('PROFILE') else None)
        except Exception as e:
            print(json.dumps(dict(prog=path, variant=vname, err=str(e)[:200])), flush=True); continue
        prog = plan.reference_program
        np_t = np.float32 if dtype == "f32" else np.float64
        inputs = random_inputs(prog, n, 1, np_t)
        nbytes = effective_bytes(prog, n, np.dtype(np_t).itemsize)
        dev = CudaDevice(plan)
        try:
            if copy is None:
                copy = measure_copy_bandwidth(dev.drv)
            rec = Executor(plan, dev).prepare(inputs, n)
            for _ in range(5):
                rec.replay()
            t = min(statistics.median(rec.time_once() for _ in range(30)) for _r in range(3))
        finally:
            dev.close()
        print(json.dumps(dict(prog=os.path.basename(path), dtype=dtype, variant=vname, us=round(t * 1e6, 2),
                              of_copy=round(nbytes / t / copy, 4), src=hashlib.sha256(plan.source.encode()).hexdigest()[:10],
                              code=os.environ.get("PYTHONPATH", "")[-12:])), flush=True)
