"""A probe (kept for its results, 2026-12-01_loads_in_registers_h200.txt): the top K plans of
programs (fuse-partition{top=K keep=KEEP plan=j profile=PROFILE n=N}) and variants of the
in-kernel steps' register promotion, each timed as whole runs on the GPU.

    GPU=1 PLANS=0,7 VARIANTS=default,none PROFILE=h200 python PROBE.py K KEEP N FILE.kas [...]
    (from the repository's root; without GPU=1 it lists the plans; EPT=2,4,8,16: the elements a
    thread the search offers, as for the record of What bounds CflStep at 4 M elements)"""
import os, sys, statistics, json
import numpy as np
sys.path.insert(0, os.path.join(os.getcwd(), "benchmarks"))
from irfuse.driver.compile import compile_program
import irfuse.planner.search as _S
if os.environ.get('EPT'):
    _S.ELEMENTS_PER_THREAD = tuple(int(x) for x in os.environ['EPT'].split(','))
from irfuse.transforms.in_kernel import IN_KERNEL_STEPS
from irfuse.verification.reference import effective_bytes, random_inputs
STEPS = ",".join(step.pass_name for step in IN_KERNEL_STEPS)
VARIANTS = {"default": STEPS, "inputs": STEPS.replace("fuse-promote-registers", "fuse-promote-registers{inputs=true}"), "outputs": STEPS.replace("fuse-promote-registers", "fuse-promote-registers{outputs=true}"), "both": STEPS.replace("fuse-promote-registers", "fuse-promote-registers{inputs=true outputs=true}"), "none": STEPS.replace("fuse-promote-registers", "fuse-promote-registers{inputs=false}")}
PLANS = [int(x) for x in os.environ.get("PLANS", "").split(",") if x]
K, KEEP, n = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
gpu = os.environ.get("GPU") == "1"
if gpu:
    from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
    from irfuse.runtime.executor import Executor
rows, copy = [], None
for path in sys.argv[4:]:
    seen = set()
    for j, vname in [(j, v) for j in (PLANS or range(K)) for v in (os.environ.get("VARIANTS", "default").split(","))]:
        pipe = f"kas-dce,fuse-partition{{top={K} keep={KEEP} plan={j} profile={os.environ.get('PROFILE', 'h100')} n={n}}},{VARIANTS[vname]}"
        try:
            plan, _ = compile_program(path, pipe, "f32", compile_gpu=gpu)
        except Exception as e:
            print(path, j, "ERR", str(e)[:100]); continue
        desc = " | ".join(f"threads={k.threads} blocks/SM={k.min_blocks}" for k in plan.kernels)
        src_key = plan.source
        if src_key in seen:
            continue
        seen.add(src_key)
        import re
        shapes = re.findall(r"blockIdx.x \* (\d+);", plan.source)
        pt = re.findall(r"irf_e < (\d+);", plan.source)
        row = dict(prog=os.path.basename(path), plan=j, variant=vname, kernels=desc, per_block=shapes, per_thread=sorted(set(pt)))
        if gpu:
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
                t = min(statistics.median(rec.time_once() for _ in range(30)) for _r in range(3))
            finally:
                dev.close()
            row.update(us=t * 1e6, of_copy=nbytes / t / copy)
        rows.append(row)
        print(json.dumps(row), flush=True)
print("copy GB/s", copy and copy / 1e9)
