#!/bin/bash
# A/B of the plans the idle-scheduler rule moves: base package (.device-carry/base, the head) against the tree.
set -u
mkdir -p $OUT
for st in base new; do
  if [ $st = base ]; then export PYTHONPATH=$PWD/.device-carry/base; else unset PYTHONPATH; fi
  export IRFUSE_CACHE_DIR=/tmp/cache_idle_$st
  python3 benchmarks/bakeoff.py --compile-only --orders 6 --kinds bp1 --dtype f32 --cells 32 2>&1 | tail -1 &
  python3 benchmarks/bakeoff.py --compile-only --orders 4 --kinds bp1 --dtype f64 --cells 48 2>&1 | tail -1 &
done
wait
for st in base new; do
  if [ $st = base ]; then export PYTHONPATH=$PWD/.device-carry/base; else unset PYTHONPATH; fi
  export IRFUSE_CACHE_DIR=/tmp/cache_idle_$st
  echo "== $st"
  python3 benchmarks/bakeoff.py --orders 6 --kinds bp1 --dtype f32 --cells 32 --skip-peers --repeat 10 --json $OUT/bp1_f32_p6_${st}.json 2>&1 | grep -v -i warn | tail -2
  python3 benchmarks/bakeoff.py --orders 4 --kinds bp1 --dtype f64 --cells 48 --skip-peers --repeat 10 --json $OUT/bp1_f64_p4_${st}.json 2>&1 | grep -v -i warn | tail -2
done
