#!/usr/bin/env bash
# BP3 float64 order 7: 0035e4c's package (before the idle-schedulers rule; its irfuse/ under
# .device-carry/base) against the tree, alternating, a cache each. Run from the root on the GPU machine.
cd benchmarks
args="--orders 7 --kinds bp3 --dtype f64 --cells 32 --skip-peers --repeat 10"
for r in 1 2; do
  echo "== before (0035e4c) run $r"; PYTHONPATH=$PWD/../.device-carry/base IRFUSE_CACHE_DIR=/tmp/cA python3 bakeoff.py $args --json $OUT/bp3_f64_p7_before_$r.json 2>&1 | grep -v Warning | tail -6
  echo "== after (head) run $r"; IRFUSE_CACHE_DIR=/tmp/cB python3 bakeoff.py $args --json $OUT/bp3_f64_p7_after_$r.json 2>&1 | grep -v Warning | tail -6
done
