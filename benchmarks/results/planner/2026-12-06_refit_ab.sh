#!/usr/bin/env bash
# The cost model's refit of 2026-12-06 (float64's compute warps, one-thread kernels' spill count,
# the gather rate, the node sums' rate) against the head before it, on the GPU machine, from the
# project root: HEAD names a folder holding the head's irfuse/ (by PYTHONPATH); each tree has a
# program cache of its own. PART=mesh: cost_model.py on the mesh examples and hex8 (h100
# profile: the plans GPU compiles make by default), each tree twice, alternating, then at 12.6 M
# tets; PART=derivatives: the diagonal and the product (2026-12-06_refit_derivatives_probe.py).
#   HEAD=<folder> PART=mesh OUT=<folder> bash benchmarks/results/planner/2026-12-06_refit_ab.sh
set -u
OUT=${OUT:-/tmp}
base=$(mktemp -d); new=$(mktemp -d)
here=benchmarks/results/planner
if [ "${PART:-mesh}" = mesh ]; then
  ex="hex8 p1_residual neo_hookean_residual neo_hookean_energy explicit_step lumped_mass"
  for r in 1 2; do
    (cd benchmarks && IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 cost_model.py --backend cuda --profile h100 \
      --examples $ex --json $OUT/refit_head_run$r.json 2>&1 | grep -v warning | grep "predicted")
    (cd benchmarks && IRFUSE_CACHE_DIR=$new python3 cost_model.py --backend cuda --profile h100 \
      --examples $ex --json $OUT/refit_new_run$r.json 2>&1 | grep -v warning | grep "predicted")
  done
  for tree in head new; do
    if [ $tree = head ]; then pp=$HEAD; c=$base; else pp=; c=$new; fi
    (cd benchmarks && IRFUSE_CACHE_DIR=$c PYTHONPATH=$pp python3 cost_model.py --backend cuda --profile h100 --cubes 128 \
      --dtype f32 --examples p1_residual neo_hookean_residual neo_hookean_energy --json $OUT/refit_${tree}_cubes128.json \
      2>&1 | grep -v warning | grep "predicted")
  done
else
  for r in 1 2; do
    IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 $here/2026-12-06_refit_derivatives_probe.py ${CUBES:-64} head
    IRFUSE_CACHE_DIR=$new python3 $here/2026-12-06_refit_derivatives_probe.py ${CUBES:-64} new
  done
fi
