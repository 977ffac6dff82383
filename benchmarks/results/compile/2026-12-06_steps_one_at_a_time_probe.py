"""A spilling kernel's steps compiled one at a time (`_width` 1, what the one-minute load
average gave for a minute after other work on the 2-core machine) against side by side (2):
each compile round's resident blocks, time, and the planned kernel's registers and spilled
bytes, then the whole cold compile. Run from the project root:
python3 benchmarks/results/compile/2026-12-06_steps_one_at_a_time_probe.py"""
import os, sys, tempfile, time, warnings
warnings.simplefilter("ignore")
sys.path.insert(0, os.getcwd())
import irfuse, irfuse.driver.compile as dc

real_each = dc._compile_each

def each(emitted_once, element, levels, arch):
    t = time.perf_counter()
    out = real_each(emitted_once, element, levels, arch)
    planned = [k for k in levels[0] if not k.startswith("irf_")]
    print("  round", [{k[:10]: lv[k] for k in planned} for lv in levels], f"{time.perf_counter() - t:.3f} s",
          [(c.resources[k].registers, c.resources[k].spill_stores + c.resources[k].spill_loads)
           for _, c in out for k in planned])
    return out

dc._compile_each = each
if len(sys.argv) == 4:  # (one compile, in a fresh process and cache)
    path, dtype, width = sys.argv[1], sys.argv[2], int(sys.argv[3])
    dc._width = lambda: width
    t = time.perf_counter()
    irfuse.compile(path, backend="cuda", dtype=dtype, arch="sm_90")
    print(f"{path} {dtype} width {width}: {time.perf_counter() - t:.3f} s", flush=True)
else:
    import subprocess
    for path, dtype in (("examples/highorder/bp3.kas", "f32"), ("examples/highorder/bp1.kas", "f32"),
                        ("examples/hex8.kas", "f64"), ("examples/hex8.kas", "f32")):
        for width in ("1", "2"):
            env = dict(os.environ, IRFUSE_CACHE_DIR=tempfile.mkdtemp())
            subprocess.run([sys.executable, __file__, path, dtype, width], env=env, check=True)
