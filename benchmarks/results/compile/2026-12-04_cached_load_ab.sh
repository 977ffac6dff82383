#!/usr/bin/env bash
# Cached loads of two trees alternating: `A=<dir> B=<dir> bash 2026-12-04_cached_load_ab.sh`, each
# dir a checkout (its `irfuse/` taken by PYTHONPATH), from anywhere. Each of ROUNDS rounds runs,
# for each tree and program, a fresh process timing `import irfuse.api` and `irfuse.compile` of the
# program found in the cache (NumPy imported first, bytecode written). Prints "tree program import
# compile total" in ms.
set -euo pipefail
root=$(cd "$(dirname "$0")/../../.." && pwd)
export IRFUSE_CACHE_DIR=${IRFUSE_CACHE_DIR:-$(mktemp -d)}
unset PYTHONDONTWRITEBYTECODE
ROUNDS=${ROUNDS:-8}
PROGRAMS=${PROGRAMS:-"j2_return.kas mesh/explicit_step.kas mesh/lumped_mass.kas synctest.kas"}
probe='
import sys, time
import numpy
t0 = time.perf_counter()
import irfuse.api
t1 = time.perf_counter()
irfuse.compile(sys.argv[1], backend="cuda", arch="sm_90")
t2 = time.perf_counter()
print(f"{1e3 * (t1 - t0):.1f} {1e3 * (t2 - t1):.1f} {1e3 * (t2 - t0):.1f}")'
for t in A B; do for p in $PROGRAMS; do  # (into the cache first, and each tree's bytecode)
  PYTHONPATH=${!t} python3 -c "$probe" "$root/examples/$p" > /dev/null
done; done
for r in $(seq "$ROUNDS"); do for t in A B; do for p in $PROGRAMS; do
  echo "$t $p $(cd /tmp && PYTHONPATH=${!t} python3 -c "$probe" "$root/examples/$p")"
done; done; done
