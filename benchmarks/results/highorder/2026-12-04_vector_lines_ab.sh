#!/usr/bin/env bash
# The bake-off's BP cells before and after a reshape into an element's vector got a `line`
# mapping (issue 75): the head's package (HEAD=<folder holding its irfuse/>, by PYTHONPATH)
# and the working tree, each with a program cache of its own, compiled first side by side,
# then timed alternating twice. Run from the project root on the GPU machine; OUT names the
# results' folder.
set -u
OUT=${OUT:-/tmp}
ORDERS=${ORDERS:-3,4,5,6,7,8}
cd benchmarks
base=$(mktemp -d); new=$(mktemp -d)
args="--orders $ORDERS --kinds bp1,bp3 --cells 32 --skip-peers --dtype f64"
IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 bakeoff.py $args --compile-only > $OUT/compile_head.log 2>&1 &
IRFUSE_CACHE_DIR=$new python3 bakeoff.py $args --compile-only > $OUT/compile_new.log 2>&1
wait
for r in 1 2; do
  IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 bakeoff.py $args --repeat 10 \
    --json $OUT/2026-12-04_vector_lines_head_run${r}_h200.json 2>&1 | grep -v warning | tail -22
  IRFUSE_CACHE_DIR=$new python3 bakeoff.py $args --repeat 10 \
    --json $OUT/2026-12-04_vector_lines_new_run${r}_h200.json 2>&1 | grep -v warning | tail -22
done
