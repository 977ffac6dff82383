"""Compile time as a user meets it: every example and mesh example compiled cold, then loaded
from the program cache, each in a fresh process.

    python benchmarks/compile_times.py [--backends cpu cuda] [--examples NAME ...] [--random 200]
                                       [--json out.json]

For each example (`examples/*.kas`, `examples/mesh/*.kas`, `examples/highorder/*.kas`; float32,
and hex8 in float64 too) and backend: a fresh Python process with an empty `IRFUSE_CACHE_DIR`
imports NumPy (what a user's script has already), then times `import irfuse` and
`irfuse.compile(path, backend=...)` (**cold**: the front end, the fusion search, the in-kernel
passes, NVRTC or the host compiler); a second fresh process on that cache times the same two
(**cached**: the program found in the cache and loaded); another, on a cache the programs before
it in the run filled, times the same compile (**cold after others**: the program's own entries
absent, NVRTC's of the units it shares with them there, the library's kernels of a mesh program
as a user's later programs find them); a third, cold again, times where the
compile goes: the fusion search (candidates and the cover) and NVRTC (its compiles summed, some
run side by side: the steps of a spilling kernel, the passes of a staged program), with timers
that add a little to that compile, which is why it is not the cold one. On the CPU backend the first call
builds the host library (the C++ compiler, cached too): timed after the cold compile for the
programs not over a mesh (1,024 elements of uniform values in [-1, 1)). `cuda` compiles for `--arch` through
NVRTC and needs no GPU. `--random K` adds random programs of K statements
(`irfuse.testing.random_programs`, the planner benchmark's dense seeds). Bytecode is written
as an installed package has it (`PYTHONDONTWRITEBYTECODE` is dropped from the children's
environment, and each child runs once before timing so that irfuse's bytecode exists).

The issue's targets (issue 74): every example cold in at most 0.5 s on the GPU machine's host and
1 s on the 2-core CI machine; a 200-statement random program in at most 3 s; hex8 in float64 in
at most 2 s; a cached program loaded in at most 20 ms.
"""

from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile

import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DENSE_SEEDS = (6, 17, 31, 38)  # (benchmarks/planner.py's dense programs)

CHILD = r"""
import json, sys, time
import numpy
t0 = time.perf_counter()
import irfuse
t1 = time.perf_counter()
source, backend, dtype, arch = sys.argv[1:5]
if source.startswith("random:"):
    from irfuse.testing.random_programs import random_program
    _, size, seed = source.split(":")
    source = random_program(int(seed), int(size), loops=False, dense=True)
    t0 += time.perf_counter() - t1  # (the program's generation is not the compiler's)
    t1 = time.perf_counter()
kwargs = {"arch": arch} if backend == "cuda" else {}
spent = {"search": 0.0, "nvrtc": 0.0, "nvrtc_compiles": 0}
if sys.argv[6] == "parts":  # (where a cold compile's time goes: the search, and NVRTC's compiles summed)
    import irfuse.backend.nvrtc as nvrtc
    import irfuse.planner.search as search

    def timed(module, name, key):
        real = getattr(module, name)

        def wrapper(*a, **k):
            start = time.perf_counter()
            try:
                return real(*a, **k)
            finally:
                spent[key] += time.perf_counter() - start
                if key == "nvrtc":
                    spent["nvrtc_compiles"] += 1
        setattr(module, name, wrapper)
    timed(search, "candidate_configs", "search")
    timed(search, "solve_cover", "search")
    timed(nvrtc, "_compile_once", "nvrtc")
program = irfuse.compile(source, backend=backend, dtype=dtype, **kwargs)
t2 = time.perf_counter()
first = None
if backend == "cpu" and sys.argv[5] == "call":  # (the CPU backend builds its host library at the first call)
    rng = numpy.random.default_rng(0)
    shape = lambda name: program.shapes[name] if name in program.uniform else (1024, *program.shapes[name])
    program(**{name: rng.uniform(-1, 1, shape(name)).astype(program.dtype) for name in program.inputs})
    first = time.perf_counter() - t2
print(json.dumps({"import": t1 - t0, "compile": t2 - t1, "first_call": first, "search": spent["search"],
                  "nvrtc": spent["nvrtc"], "nvrtc_compiles": spent["nvrtc_compiles"]}))
"""


def child(source: str, backend: str, dtype: str, arch: str, cache: str, timeout: float, call: bool = False,
          parts: bool = False) -> dict:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["IRFUSE_CACHE_DIR"] = cache
    # (`-P`: the child's working folder, the project root, not put first on its path, so that a
    # tree named by PYTHONPATH is the irfuse it imports, an A/B's other tree; the root after it)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (os.environ.get("PYTHONPATH"), ROOT) if p)
    try:
        done = subprocess.run([sys.executable, "-P", "-c", CHILD, source, backend, dtype, arch,
                               "call" if call else "-", "parts" if parts else "-"], capture_output=True,
                              text=True, env=env, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"error": f"over {timeout:g} s"}
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["?"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--backends", nargs="+", default=["cpu", "cuda"], choices=["cpu", "cuda"])
    ap.add_argument("--examples", nargs="*", default=None, help="file names (e.g. hex8.kas); all by default")
    ap.add_argument("--random", type=int, default=200, help="statements of the random programs (0: none)")
    ap.add_argument("--arch", default="sm_90")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--json", default=None)
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.table import Table

    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas"))) + \
        sorted(glob.glob(os.path.join(ROOT, "examples", "mesh", "*.kas"))) + \
        sorted(glob.glob(os.path.join(ROOT, "examples", "highorder", "*.kas")))
    jobs = []
    for path in paths:
        name = os.path.relpath(path, os.path.join(ROOT, "examples"))
        if args.examples and os.path.basename(path) not in args.examples and name not in args.examples:
            continue
        jobs.append((name, path, "f32"))
        if os.path.basename(path) == "hex8.kas":
            jobs.append((name, path, "f64"))
    if args.examples and not jobs:
        ap.error(f"--examples {' '.join(args.examples)}: no example has that name (file names such as "
                 f"hex8.kas or highorder/bp1.kas)")
    if args.random:
        jobs += [(f"random, {args.random} statements (seed {s})", f"random:{args.random}:{s}", "f32")
                 for s in DENSE_SEEDS]
    # (irfuse's own bytecode written once, so that no timed child compiles it)
    with tempfile.TemporaryDirectory() as cache:
        child(os.path.join(ROOT, "examples", "synctest.kas"), "cpu", "f32", args.arch, cache, args.timeout)
    rows = []
    for backend in args.backends:
        shared = tempfile.TemporaryDirectory()  # (the cache every program of this backend is compiled into in turn)
        for name, source, dtype in jobs:
            with tempfile.TemporaryDirectory() as cache:
                call = os.path.dirname(source) == os.path.join(ROOT, "examples")  # (not over a mesh)
                cold = child(source, backend, dtype, args.arch, cache, args.timeout, call)
                cached = child(source, backend, dtype, args.arch, cache, args.timeout) if "error" not in cold else {}
            after = child(source, backend, dtype, args.arch, shared.name, args.timeout) if "error" not in cold else {}
            with tempfile.TemporaryDirectory() as cache:  # (timed apart: its timers add to the cold compile)
                parts = child(source, backend, dtype, args.arch, cache, args.timeout, parts=True) \
                    if "error" not in cold else {}
            rows.append({"program": name, "dtype": dtype, "backend": backend, "import_s": cold.get("import"),
                         "cold_s": cold.get("compile"), "cold_after_others_s": after.get("compile"),
                         "first_call_s": cold.get("first_call"), "cached_s": cached.get("compile"),
                         "cached_import_s": cached.get("import"), "search_s": parts.get("search"),
                         "nvrtc_s": parts.get("nvrtc"), "nvrtc_compiles": parts.get("nvrtc_compiles"),
                         "error": cold.get("error") or cached.get("error")})
            print(json.dumps(rows[-1]), flush=True)
        shared.cleanup()
    table = Table(title="Compile time, fresh processes (NumPy imported first)")
    for column in ("program", "dtype", "backend", "import irfuse s", "cold compile s", "cold after others s",
                   "of it: search s",
                   "NVRTC s (compiles)", "then a first call s", "cached load ms"):
        table.add_column(column, justify="left" if column in ("program", "dtype", "backend") else "right")
    for r in rows:
        table.add_row(r["program"], r["dtype"], r["backend"],
                      "-" if r["import_s"] is None else f"{r['import_s']:.3f}",
                      r["error"] or f"{r['cold_s']:.2f}",
                      "-" if r.get("cold_after_others_s") is None else f"{r['cold_after_others_s']:.2f}",
                      "-" if r.get("search_s") is None else f"{r['search_s']:.2f}",
                      "-" if not r.get("nvrtc_compiles") else f"{r['nvrtc_s']:.2f} ({r['nvrtc_compiles']})",
                      "-" if r.get("first_call_s") is None else f"{r['first_call_s']:.2f}",
                      "-" if r["cached_s"] is None else f"{1e3 * (r['cached_s'] + r['cached_import_s']):.1f}")
    Console(width=190).print(table)
    print("(cached load: `import irfuse` and `irfuse.compile` of a program in the cache, in a fresh process; cold after "
          "others: compiled cold in the cache the programs above it filled; the search and NVRTC timed in a third cold "
          "compile: NVRTC's compiles summed, some of them side by side)")
    path = args.json or meta.result_path("compile")
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    with open(path, "w") as f:
        meta.dump({"arch": args.arch, "rows": rows}, f, indent=1)
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
