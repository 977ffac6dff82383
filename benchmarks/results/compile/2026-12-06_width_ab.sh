#!/usr/bin/env bash
# Compile time on the GPU machine's host with up to four compiles side by side (`WIDTH = 4`,
# the head) and up to two (`WIDTH = 2`): the examples in EXAMPLES (all of them, mesh and
# high-order ones and the 200-statement random programs where unset), alternating RUNS times;
# each tree's irfuse/ by PYTHONPATH.
#   FOUR=<folder> TWO=<folder> OUT=<folder> bash benchmarks/results/compile/2026-12-06_width_ab.sh
set -u
OUT=${OUT:-/tmp}
cd benchmarks
nproc; cat /proc/loadavg
ex=${EXAMPLES:+--random 0 --examples $EXAMPLES}
for r in $(seq ${RUNS:-2}); do
  PYTHONPATH=$FOUR python3 compile_times.py --backends cuda $ex --json $OUT/width4_run$r.json 2>&1 | grep "│" | awk -F'│' '{print "4", $2,$3,$6,$7,$8,$10}'
  PYTHONPATH=$TWO python3 compile_times.py --backends cuda $ex --json $OUT/width2_run$r.json 2>&1 | grep "│" | awk -F'│' '{print "2", $2,$3,$6,$7,$8,$10}'
done
