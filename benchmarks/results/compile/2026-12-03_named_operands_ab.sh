#!/usr/bin/env bash
# The tree (each generated helper's operand words read once, named; values read at once by their
# readers in registers) against the head before it (its irfuse/ in $HEAD, by PYTHONPATH),
# alternating: the mesh element kernels (12.6 M Morton tets, float32, outputs' SHA-256), the
# examples with the most helper code (float32 and float64), the bake-off's BK3 and BP3 at orders 3,
# 6 and 8 (float64). Run from the repository's root on a GPU; results under $OUT.
set -u
HEAD=${HEAD:-$PWD/build/head}
OUT=${OUT:-/tmp}
mesh=benchmarks/results/meshes/2026-12-03_member_places_ab.py
for run in 1 2; do
  echo "== mesh, head, run $run"; PYTHONPATH=$HEAD python3 $mesh 128
  echo "== mesh, tree, run $run"; python3 $mesh 128
done
for who in head tree; do
  pp=$([ $who = head ] && echo $HEAD || echo "")
  echo "== examples, $who"
  PYTHONPATH=$pp python3 benchmarks/examples.py --examples hex8 j2_return neo_hookean stvenant bigfusion \
    --dtype f32 f64 --repeat 30 --json $OUT/examples_$who.json 2>&1 | grep -E "│|copy"
  echo "== bake-off, $who"
  (cd benchmarks && PYTHONPATH=$pp python3 bakeoff.py --orders 3,6,8 --kinds bk3,bp3 --cells 32 --skip-peers \
    --repeat 10 --json $OUT/bakeoff_$who.json 2>&1 | grep -E "│|copy")
done
