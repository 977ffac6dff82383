#!/usr/bin/env bash
# The bake-off's cells before and after kernels whose shared memory bounds their blocks are
# built again with their factors loaded by their readers (issue 75): the head's package
# (HEAD=<folder holding its irfuse/>, by PYTHONPATH) and the working tree, each with a program
# cache of its own, compiled first side by side, then timed alternating twice. Run from the
# project root on the GPU machine; OUT names the results' folder.
set -u
OUT=${OUT:-/tmp}
ORDERS=${ORDERS:-5,6,7}
KINDS=${KINDS:-bp1,bp3,bk3}
TAG=${TAG:-2026-12-04_reader_loads}
cd benchmarks
base=$(mktemp -d); new=$(mktemp -d)
args="--orders $ORDERS --kinds $KINDS --cells 32 --skip-peers --dtype f64"
IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 bakeoff.py $args --compile-only > $OUT/compile_head.log 2>&1 &
IRFUSE_CACHE_DIR=$new python3 bakeoff.py $args --compile-only > $OUT/compile_new.log 2>&1
wait
for r in 1 2; do
  IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 bakeoff.py $args --repeat 10 \
    --json $OUT/${TAG}_head_run${r}_h200.json 2>&1 | grep -v warning | tail -12
  IRFUSE_CACHE_DIR=$new python3 bakeoff.py $args --repeat 10 \
    --json $OUT/${TAG}_new_run${r}_h200.json 2>&1 | grep -v warning | tail -12
done
