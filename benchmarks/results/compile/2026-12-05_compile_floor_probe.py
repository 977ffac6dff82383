"""What a cold compile cannot go under, measured on the machine it runs on: the imports (NumPy,
xDSL's IR and builtin dialect, then the rest of irfuse's compiler, each in a fresh process,
bytecode written first) and NVRTC alone (an empty kernel, irfuse's prelude with an empty kernel,
SyncTest's module as emitted; sm_90, irfuse's options, one compile at a time, best of five);
then SyncTest, J2 and hex8 in float64 compiled cold in fresh processes (fresh caches), with
compiles side by side as the driver chooses and one at a time (`driver.compile.WIDTH = 1`).
Usage: python3 2026-12-05_compile_floor_probe.py [rounds]   (from the project root)."""
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
IMPORTS = r"""
import time
t0 = time.perf_counter(); import numpy
t1 = time.perf_counter(); import xdsl.irdl, xdsl.dialects.builtin
t2 = time.perf_counter(); import irfuse.driver.compile, irfuse.api
t3 = time.perf_counter()
print(f"imports: numpy {t1 - t0:.3f} s, xDSL's IR and builtin {t2 - t1:.3f} s, the rest of irfuse's compiler {t3 - t2:.3f} s")
"""
NVRTC = r"""
import time, warnings
warnings.simplefilter("ignore")
import irfuse
from irfuse.backend import nvrtc
from irfuse.backend.cuda_emit import prelude
def best(text):
    out = 1e9
    for _ in range(5):
        s = time.perf_counter(); nvrtc.compile_cubin(text, "sm_90", use_cache=False); out = min(out, time.perf_counter() - s)
    return out
empty = 'extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }\n'
with_prelude = prelude() + empty
synctest = irfuse.compile("examples/synctest.kas", backend="cuda", arch="sm_90").source
print(f"NVRTC: an empty kernel {best(empty):.3f} s, the prelude and an empty kernel {best(with_prelude):.3f} s, "
      f"SyncTest's module {best(synctest):.3f} s")
"""
COLD = r"""
import sys, time, warnings
warnings.simplefilter("ignore")
t0 = time.perf_counter()
import irfuse
import irfuse.driver.compile as dc
if sys.argv[3] == "1":
    dc.WIDTH = 1
irfuse.compile(sys.argv[1], backend="cuda", arch="sm_90", dtype=sys.argv[2])
print(f"{time.perf_counter() - t0:.3f}")
"""


def python(code, *args, cache=None):
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["IRFUSE_CACHE_DIR"] = cache or tempfile.mkdtemp()
    done = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, env=env, cwd=ROOT)
    return done.stdout.strip() or done.stderr.strip()[-300:]


if __name__ == "__main__":
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    python(IMPORTS)  # (bytecode written once)
    for _ in range(rounds):
        print(python(IMPORTS), flush=True)
    print(python(NVRTC), flush=True)
    rows = {}
    for _ in range(rounds):
        for path, dtype in (("examples/synctest.kas", "f32"), ("examples/j2_return.kas", "f32"), ("examples/hex8.kas", "f64")):
            for width in ("driver", "1"):
                rows.setdefault(f"{path} {dtype}, compiles side by side: {width}", []).append(
                    float(python(COLD, path, dtype, width)))
    for name, times in rows.items():
        print(f"cold (import irfuse included) {name}: {', '.join(f'{t:.3f}' for t in times)} s")
    print(json.dumps({"cpus": os.cpu_count(), "load": os.getloadavg()}))
