"""One run of what a user does, under whatever environment the parent set."""
import os, sys, traceback, importlib.util
import numpy as np

ROOT = os.environ["IRFUSE_PROBE_ROOT"]  # (the runs' working folder is a scratch one: a relative cache folder lands there)
try:
    import irfuse
    from irfuse.diagnostics import IrfuseError
except Exception as e:
    print("IMPORT-FAIL", type(e).__name__, e); raise SystemExit(0)
spec = importlib.util.spec_from_file_location("ex", os.path.join(ROOT, "examples/solve/elastic_cube_cg.py"))
ex = importlib.util.module_from_spec(spec); spec.loader.exec_module(ex)
try:
    direct, u, steps = ex.solve_assembled(3)
    y = irfuse.compile(open(os.path.join(ROOT, "examples/synctest.kas")).read(), backend="cpu")
    print("OK", f"{float(np.abs(direct).sum()):.9e}", f"{float(np.abs(u).sum()):.6e}", steps)
except IrfuseError as e:
    print("IRFUSE", type(e).__name__, " ".join(str(e).split())[:300])
except Exception:
    print("OTHER"); traceback.print_exc()
