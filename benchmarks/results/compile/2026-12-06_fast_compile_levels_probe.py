"""NVRTC's `--Ofast-compile` levels on the emitted module of every example, mesh and high-order
example (float32 and float64, sm_90, no GPU): each module's NVRTC time at the default and at
min, mid and max, and its planned kernels' registers and spilled bytes at each. Run from the
project root: python3 benchmarks/results/compile/2026-12-06_fast_compile_levels_probe.py"""
import glob, os, sys, tempfile, time, warnings
warnings.simplefilter("ignore")
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, ".")
from cuda.bindings import nvrtc
import irfuse
from irfuse.backend.nvrtc import parse_ptxas_report

def compile_once(src, opts):
    _, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"k.cu", 0, [], [])
    t = time.perf_counter()
    nvrtc.nvrtcCompileProgram(prog, len(opts), [o.encode() for o in opts])
    dt = time.perf_counter() - t
    _, n = nvrtc.nvrtcGetProgramLogSize(prog); log = b" " * n; nvrtc.nvrtcGetProgramLog(prog, log)
    return dt, parse_ptxas_report(log.decode(errors="replace"))

base = ["--std=c++17", "--no-cache", "--minimal", "--gpu-architecture=sm_90", "--ptxas-options=-v"]
total = {}
for path in sorted(glob.glob("examples/*.kas") + glob.glob("examples/mesh/*.kas") + glob.glob("examples/highorder/*.kas")):
    for dtype in ("f32", "f64"):
        program = irfuse.compile(path, backend="cuda", dtype=dtype, arch="sm_90")
        for i, part in enumerate(getattr(program, "programs", None) or [program]):
            res = {}
            for level in ("default", "min", "mid", "max"):
                res[level] = compile_once(part.source, base + ([] if level == "default" else [f"--Ofast-compile={level}"]))
                total[level] = total.get(level, 0.0) + res[level][0]
            planned = [k for k in res["default"][1] if not k.startswith("irf_")]
            moved = " ".join(f"{lv}:{res['default'][1][k].registers}->{res[lv][1][k].registers}r,"
                             f"{res['default'][1][k].spill_stores + res['default'][1][k].spill_loads}->"
                             f"{res[lv][1][k].spill_stores + res[lv][1][k].spill_loads}B"
                             for k in planned for lv in ("min", "mid", "max"))
            print(f"{path[9:]:32s} {dtype} {i}", " ".join(f"{lv} {res[lv][0]:.2f}" for lv in res), "|", moved, flush=True)
print("NVRTC s, all modules:", {lv: round(t, 2) for lv, t in total.items()})
