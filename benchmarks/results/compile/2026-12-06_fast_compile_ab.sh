#!/usr/bin/env bash
# NVRTC's `--Ofast-compile=min` against its default optimisation, on the GPU machine, from the
# project root, in a tree with 2026-12-06_fast_compile_probe.patch applied (the level taken
# from IRFUSE_AB_OFAST): every example and mesh example (cost_model.py, h100 profile, float32
# and float64) and the bake-off's BP1, BP3 and BK3 in float64 at orders 1, 3, 5, 6, 8; each
# configuration with a program cache of its own, timed alternating.
#   OUT=<folder> bash benchmarks/results/compile/2026-12-06_fast_compile_ab.sh
set -u
OUT=${OUT:-/tmp}
python3 -c "from cuda.bindings import nvrtc; print('nvrtc', nvrtc.nvrtcVersion()[1:])"
c0=$(mktemp -d); c1=$(mktemp -d)
cd benchmarks
bk="--orders ${ORDERS:-1,3,5,6,8} --kinds bp1,bp3,bk3 --cells 32 --skip-peers --skip-hand --dtype f64"
IRFUSE_CACHE_DIR=$c0 python3 bakeoff.py $bk --compile-only > $OUT/compile_default.log 2>&1 &
IRFUSE_CACHE_DIR=$c1 IRFUSE_AB_OFAST=min python3 bakeoff.py $bk --compile-only > $OUT/compile_min.log 2>&1
wait
for r in 1 2; do
  IRFUSE_CACHE_DIR=$c0 python3 bakeoff.py $bk --repeat 10 --json $OUT/bakeoff_default_run$r.json 2>&1 | grep -v warning | tail -18
  IRFUSE_CACHE_DIR=$c1 IRFUSE_AB_OFAST=min python3 bakeoff.py $bk --repeat 10 --json $OUT/bakeoff_min_run$r.json 2>&1 | grep -v warning | tail -18
done
IRFUSE_CACHE_DIR=$c0 python3 cost_model.py --backend cuda --profile h100 --json $OUT/examples_default.json 2>&1 | grep -v warning | tail -48
IRFUSE_CACHE_DIR=$c1 IRFUSE_AB_OFAST=min python3 cost_model.py --backend cuda --profile h100 --json $OUT/examples_min.json 2>&1 | grep -v warning | tail -48
