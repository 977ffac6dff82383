"""Probe (issue 75): the bake-off's 1-D tables B and D read from the constant bank instead of
the block's copy in shared memory. The element kernel's uniform inputs B and D are copied into
shared memory by each block and read from there by every contraction (a broadcast load each,
through the L1 and shared-memory pipe that bounds these kernels); here the NVRTC compile
rewrites the element kernel so that they are `__constant__` arrays holding the tables' values
(the same float64 words `bakeoff.py` passes, written as hexadecimal literals), which the
contractions' multiply-adds take as operands without a load.

    PROBE=1 python3 2026-12-04_constant_tables_probe.py <bakeoff.py's arguments>

runs `benchmarks/bakeoff.py` with the rewrite (PROBE=0: as emitted). The values are the order's
tables, so the results' errors against the reference check the rewrite. Each variant wants an
IRFUSE_CACHE_DIR of its own (the cache keeps compiled programs)."""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..", "..", "..")
sys.path.insert(0, ROOT if "PYTHONPATH" not in os.environ else os.environ["PYTHONPATH"].split(os.pathsep)[0])
sys.path.insert(0, os.path.join(ROOT, "tests"))

import highorder_reference as ref  # noqa: E402
from irfuse.backend import nvrtc  # noqa: E402

KERNEL = re.compile(r'extern "C" __global__ void __launch_bounds__\([^)]*\) (b[pk][13])_p(\d+)_k\d+\w*\(')
COPY = re.compile(r"(?m)^  if \(tid < (\d+)\) (irf_u\d+)\[tid\] = g_(\w+)\[tid\];\n")
real = nvrtc._compile_once
rewritten = []


def _declaration(name: str) -> re.Pattern:
    return re.compile(rf"(?m)^  (?:__shared__ __align__\(16\) real_t {name}\[\d+\];|real_t\* const {name} = smem \+ \d+;)[^\n]*\n")


def patched(source, arch, opts):
    if os.environ.get("PROBE") == "1":
        m = KERNEL.search(source)
        if m:
            p = int(m.group(2))
            start = m.start()
            end = source.index("\n}\n", start) + 3
            kernel = source[start:end]
            B, D, _ = ref.lagrange_tables(p, p + 2)
            tables = {"B": B.ravel(), "D": D.ravel()}
            head = []
            for n, name, table in COPY.findall(kernel):
                words = tables[table]
                assert len(words) == int(n), (table, n, len(words))
                const = f"irf_c{table}"
                head.append(f"__constant__ real_t {const}[{n}] = {{{', '.join(float(w).hex() for w in words)}}};\n")
                kernel = _declaration(name).sub(f"  const real_t* const {name} = {const};  // (probe)\n", kernel, count=1)
                kernel = COPY.sub(lambda c: "" if c.group(2) == name else c.group(0), kernel)
                rewritten.append((m.group(1), p, name, table))
            source = source[:start] + "".join(head) + kernel + source[end:]
    return real(source, arch, opts)


nvrtc._compile_once = patched
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import bakeoff  # noqa: E402

code = bakeoff.main(sys.argv[1:])
print("rewritten:", rewritten, flush=True)
sys.exit(code)
