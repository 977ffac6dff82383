"""Ad hoc: random programs compiled for structure-of-arrays data, run on the GPU (full blocks staged
in 16-byte runs, a direct tail) and checked against the float64 reference."""
import json, os, sys, tempfile, time, traceback
import numpy as np
import torch
from irfuse.dialects.layouts import arrays_from_aos, arrays_to_aos
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import random_inputs, run_references, uniform_names
from irfuse.runtime.verify import check_outputs
from irfuse.testing.random_programs import random_program

torch.zeros(1, device="cuda")
first, budget = int(sys.argv[1]), float(sys.argv[2])
t0 = time.time()
rows, findings = [], []
tmp = tempfile.mkdtemp()
seed = first
while time.time() - t0 < budget:
    src = random_program(seed, 3 + seed % 10, loops=seed % 3 == 0, batch_wide=seed % 4 == 0)
    path = os.path.join(tmp, f"p{seed}.kas")
    open(path, "w").write(src)
    row = {"seed": seed}
    try:
        plan, _ = compile_program(path, None, "f32", layout="soa")
        row["staged"] = plan.source.count("irf_load_runs16<")
        whole = uniform_names(plan.reference_program)
        dev = CudaDevice(plan)
        try:
            for n in (4100, 1):
                inputs = random_inputs(plan.reference_program, n, seed, np.float32)
                got = arrays_to_aos(Executor(plan, dev).run(arrays_from_aos(inputs, "soa", whole), n).outputs, "soa", whole)
                checks = check_outputs(got, run_references(plan.reference_program, inputs, "f32", n, plan.sum_by), "f32")
                bad = [c.describe() for c in checks if not c.ok]
                if bad:
                    findings.append({"seed": seed, "n": n, "bad": bad, "src": src})
                    print("FINDING", seed, n, bad[:2], flush=True)
        finally:
            dev.close()
    except Exception as e:  # noqa: BLE001
        row["error"] = f"{type(e).__name__}: {str(e)[:300]}"
        if "CompileError" not in type(e).__name__ and "NoSuchPlan" not in type(e).__name__:
            findings.append({"seed": seed, "error": traceback.format_exc()[-2000:], "src": src})
            print("ERROR", seed, row["error"], flush=True)
    rows.append(row)
    seed += 1
summary = {"gpu": torch.cuda.get_device_name(), "programs": len(rows), "first_seed": first,
           "with_staged_loads": sum(1 for r in rows if r.get("staged")), "errors": sum(1 for r in rows if "error" in r),
           "findings": findings, "rows": rows}
print({k: v for k, v in summary.items() if k not in ("rows",)}, flush=True)
json.dump(summary, open(os.path.join(os.environ.get("OUT", "."), "gpu_fuzz_soa.json"), "w"), indent=1)
