#!/usr/bin/env bash
# A GPU A/B of one of the block-copy patches (2026-12-05_rolled_copies.patch or
# 2026-12-05_copies_fixed_trips.patch) against the tree as it is: the element codes and the seeds
# (their share of the copy measured in each run) and the bake-off cells at risk, each tree by
# PYTHONPATH with a program cache of its own, the two alternating ROUNDS times. Run from the
# project root on the GPU machine:
#   PATCH=benchmarks/results/compile/2026-12-05_copies_fixed_trips.patch OUT=$OUT \
#     bash benchmarks/results/compile/2026-12-05_copies_ab.sh
# Results: $OUT/copies_{head,patched}_{examples,element_codes,bakeoff}_run{1..ROUNDS}.json.
set -u
OUT=${OUT:-/tmp}
ROUNDS=${ROUNDS:-2}
root=$(pwd)
patched=$(mktemp -d)
cp -r "$root/irfuse" "$root/tests" "$patched/"  # (the patch also names tests)
(cd "$patched" && patch -p1 -s < "$root/$PATCH") || { echo "the patch does not apply"; exit 1; }
head_cache=$(mktemp -d); patched_cache=$(mktemp -d)
cd "$root/benchmarks"
run() {  # tree-name pythonpath cache round
  local name=$1 path=$2 cache=$3 r=$4
  IRFUSE_CACHE_DIR=$cache PYTHONPATH=$path python3 examples.py --dtype f32 f64 \
    --json "$OUT/copies_${name}_examples_run${r}.json" 2>&1 | grep -v warning | tail -30
  IRFUSE_CACHE_DIR=$cache PYTHONPATH=$path python3 element_codes.py --skip-jax --skip-compile \
    --json "$OUT/copies_${name}_element_codes_run${r}.json" 2>&1 | grep -v warning | tail -14
  IRFUSE_CACHE_DIR=$cache PYTHONPATH=$path python3 bakeoff.py --orders ${ORDERS:-3,5,6} \
    --kinds ${KINDS:-bp3,bk3} --cells 32 --skip-peers --skip-hand --dtype f64 --tables constants \
    --repeat 10 --json "$OUT/copies_${name}_bakeoff_run${r}.json" 2>&1 | grep -v warning | tail -12
}
for r in $(seq "$ROUNDS"); do
  run head "$root" "$head_cache" "$r"
  run patched "$patched" "$patched_cache" "$r"
done
