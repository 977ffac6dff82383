#!/bin/bash
# A/B of the bake-off plans the register cap moved: base package (.device-carry/base) against the tree.
set -u
mkdir -p $OUT
for st in base new; do
  if [ $st = base ]; then export PYTHONPATH=$PWD/.device-carry/base; else unset PYTHONPATH; fi
  export IRFUSE_CACHE_DIR=/tmp/cache_$st
  python3 benchmarks/bakeoff.py --compile-only --orders 6,7,8 --kinds bp1 --dtype f32 --cells 32 2>&1 | tail -3 &
  python3 benchmarks/bakeoff.py --compile-only --orders 7,8 --kinds bp3 --dtype f64 --cells 32 2>&1 | tail -3 &
  wait
done
for r in 1 2; do for st in base new; do
  if [ $st = base ]; then export PYTHONPATH=$PWD/.device-carry/base; else unset PYTHONPATH; fi
  export IRFUSE_CACHE_DIR=/tmp/cache_$st
  echo "== $st run $r"
  python3 benchmarks/bakeoff.py --orders 6,7,8 --kinds bp1 --dtype f32 --cells 32 --skip-peers --repeat 10 --json $OUT/bp1_f32_${st}_$r.json 2>&1 | grep -v -i warn | tail -8
  python3 benchmarks/bakeoff.py --orders 7,8 --kinds bp3 --dtype f64 --cells 32 --skip-peers --repeat 10 --json $OUT/bp3_f64_${st}_$r.json 2>&1 | grep -v -i warn | tail -6
done; done
