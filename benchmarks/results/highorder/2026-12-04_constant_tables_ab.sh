#!/usr/bin/env bash
# The constant-table probe (issue 75): BK3 and BP3 at orders 6 and 7 in float64 under four
# trees at once: the head's package and the head with the contractions' line axes
# (2026-12-04_line_axes.patch applied), each as emitted (PROBE=0) and with the 1-D tables read
# from the constant bank (PROBE=1). HEAD and V1 name folders holding those irfuse/ packages;
# each variant has a program cache of its own; all compile first side by side, then each is
# timed once. Run from the project root on the GPU machine; OUT names the results' folder.
set -u
R=$PWD
OUT=${OUT:-/tmp}
cd benchmarks/results/highorder
A="--orders 6,7 --kinds bk3,bp3 --cells 32 --skip-peers --dtype f64"
for cfg in head:0 head:1 v1:0 v1:1; do
  t=${cfg%:*}; pr=${cfg#*:}; tree=$HEAD; [ $t = v1 ] && tree=$V1
  IRFUSE_CACHE_DIR=/tmp/c_${t}_$pr PYTHONPATH=$tree PROBE=$pr python3 2026-12-04_constant_tables_probe.py $A \
    --compile-only > $OUT/compile_${t}_$pr.txt 2>&1 &
done
wait
for cfg in head:0 head:1 v1:0 v1:1; do
  t=${cfg%:*}; pr=${cfg#*:}; tree=$HEAD; [ $t = v1 ] && tree=$V1
  echo "== $t probe=$pr"
  IRFUSE_CACHE_DIR=/tmp/c_${t}_$pr PYTHONPATH=$tree PROBE=$pr python3 2026-12-04_constant_tables_probe.py $A --repeat 10 \
    --json $OUT/2026-12-04_constant_tables_${t}_probe${pr}_h200.json 2>&1 | grep -E "irfuse|copy"
done
