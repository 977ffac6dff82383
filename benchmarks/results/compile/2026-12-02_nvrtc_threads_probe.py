import time, statistics
from concurrent.futures import ThreadPoolExecutor
from irfuse.driver.compile import compile_program
from cuda.bindings import nvrtc
def one(src, opts):
    err, prog = nvrtc.nvrtcCreateProgram(src.encode(), b"k.cu", 0, [], [])
    t = time.perf_counter(); (e,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts); return time.perf_counter() - t
for ex, dt in [("synctest", "f32"), ("neo_hookean", "f32"), ("hex8", "f64")]:
    r = compile_program(f"examples/{ex}.kas", compile_gpu=False, dtype=dt)
    p = r[0] if isinstance(r, tuple) else r
    src = p.source
    opts = [b"--gpu-architecture=sm_90", b"--ptxas-options=-v", b"--std=c++17", b"--no-cache", b"-minimal"]
    try:
        one(src, opts)
    except Exception:
        opts = opts[:-2]
    alone = [one(src, opts) for _ in range(3)]
    res = {}
    for width in (2, 4):
        walls = []
        for _ in range(3):
            t = time.perf_counter()
            with ThreadPoolExecutor(width) as pool:
                list(pool.map(lambda _: one(src, opts), range(width)))
            walls.append(time.perf_counter() - t)
        res[width] = round(statistics.median(walls), 3)
    print(ex, dt, "alone", round(statistics.median(alone), 3), "parallel walls", res, flush=True)
