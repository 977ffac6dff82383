#!/usr/bin/env bash
# Probe (kept for its record): the bake-off in float64, the head's package (build/base, a copy of
# irfuse/) against the same with 2026-12-03_uniform_reads_term.patch applied (build/exp), only
# the operators whose plans the term moves (KINDS_p below). Run from the root on a GPU:
#   PHASE=compile bash <this>    (every order, both trees, each into a cache of its own, at once)
#   PHASE=time ORDERS="3 4 5" bash <this>    (order by order, both trees, JSON into $OUT)
set -u
ROOT=$PWD
PATCH=$ROOT/benchmarks/results/highorder/2026-12-03_uniform_reads_term.patch
if [ ! -d build/exp/irfuse ]; then
  mkdir -p build/base build/exp && cp -r irfuse build/base/ && cp -r irfuse build/exp/
  (cd build/exp && patch -s -p1 < "$PATCH") || exit 1
fi
kinds() { case $1 in 3) echo bk3,bp3;; 4) echo bk3,bp1;; 5) echo bk1,bk3,bp1;; 8) echo bk1,bk3,bp3;; *) echo bk1,bk3,bp1,bp3;; esac; }
cells() { if [ $1 -ge 5 ]; then echo 32; else echo 48; fi; }
ORDERS=${ORDERS:-"3 4 5 6 7 8"}
cd benchmarks
run() {  # tree order args...
  local tree=$1 p=$2; shift 2
  IRFUSE_CACHE_DIR=$ROOT/build/c_$tree PYTHONPATH=$ROOT/build/$tree \
    python3 bakeoff.py --orders $p --kinds $(kinds $p) --cells $(cells $p) --skip-peers "$@"
}
PYTHONPATH=$ROOT/build/exp python3 -c "import irfuse; print('exp tree:', irfuse.__file__)"
t0=$(date +%s)
if [ "${PHASE:-time}" = compile ]; then
  for tree in base exp; do for p in $ORDERS; do run $tree $p --compile-only > /dev/null 2>&1 & done; done
  wait
  echo "compiled in $(( $(date +%s) - t0 )) s"
else
  for p in $ORDERS; do
    for tree in base exp; do
      run $tree $p --repeat 10 --json ${OUT:-/tmp}/uniform_reads_${tree}_p$p.json 2>&1 | grep -v warning | sed "s/^/$tree /"
    done
    echo "p=$p at $(( $(date +%s) - t0 )) s"
  done
fi
