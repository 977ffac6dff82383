import sys, hashlib, json, warnings
warnings.simplefilter("ignore")
from irfuse.testing.random_programs import random_program
from irfuse.driver.compile import compile_text, PlanningOptions
out = {}
for seed in range(40):
    size = (20, 40, 80, 200)[seed % 4]
    src = random_program(seed, size, loops=seed % 3 == 0, dense=seed % 2 == 0)
    for prof in ("h100", "h200", "cpu"):
        for dt in ("f32", "f64"):
            try:
                plan, _ = compile_text(src, f"r{seed}", None, dt, compile_gpu=False, planning=PlanningOptions(profile=prof))
                progs = getattr(plan, "stages", None)
                text = plan.source if hasattr(plan, "source") else str(plan)
                out[f"{seed}|{prof}|{dt}"] = hashlib.sha256(text.encode()).hexdigest()[:16]
            except Exception as e:
                out[f"{seed}|{prof}|{dt}"] = "error " + type(e).__name__
json.dump(out, open(sys.argv[1], "w"))
print(len(out), sum(v.startswith("error") for v in out.values()))
