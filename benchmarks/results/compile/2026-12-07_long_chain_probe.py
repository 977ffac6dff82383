"""Cold compile time of a chain of K statements (each reading the one before: `B = mmul33(B, A)`
and `B = madd33(B, A)` in turn), on the CPU backend, each K in a fresh process with an empty
cache, for the irfuse on PYTHONPATH (an A/B: a tree of the head before a change by PYTHONPATH,
then the working tree). Run from the root:

    python benchmarks/results/compile/2026-12-07_long_chain_probe.py 250 500 1000 2000
"""
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import sys, time
import irfuse
n = int(sys.argv[1])
lines = ["matrix3x3 A, B;", "input A;", "B = madd33(A, A);"]
lines += ["B = madd33(B, A);" if i % 2 else "B = mmul33(B, A);" for i in range(n)]
source = "\n".join(lines + ["return B;"]) + "\n"
t = time.perf_counter()
program = irfuse.compile(source, backend="cpu", dtype="f64")
print(f"{n} statements: {time.perf_counter() - t:.2f} s cold, {len(program.kernels)} kernel(s)")
"""

for k in sys.argv[1:] or ["250", "500", "1000", "2000"]:
    env = dict(os.environ, IRFUSE_CACHE_DIR=tempfile.mkdtemp())
    done = subprocess.run([sys.executable, "-P", "-W", "ignore", "-c", CHILD, k], capture_output=True, text=True,
                          env=env, timeout=1200)
    print(done.stdout.strip() or done.stderr.strip().splitlines()[-1], flush=True)
