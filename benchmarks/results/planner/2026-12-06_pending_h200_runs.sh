#!/usr/bin/env bash
# What the cost model's window refit (bae5ee1) still asks of an H200, from the project root on
# the GPU machine: the table under the h200 profile with this tree and with b490ed3's (HEAD names
# a folder holding its irfuse/, by PYTHONPATH), each with a program cache of its own; then the
# tangents' table (issue 73's figures, none on an H200 since the diagonal's program).
#   HEAD=<folder> OUT=<folder> bash benchmarks/results/planner/2026-12-06_pending_h200_runs.sh
set -u
OUT=${OUT:-/tmp}
cd benchmarks
IRFUSE_CACHE_DIR=$(mktemp -d) python3 cost_model.py --backend cuda --profile h200 \
  --json "$OUT/cost_model_window_refit_h200.json" 2>&1 | grep -v warning | grep "predicted"
IRFUSE_CACHE_DIR=$(mktemp -d) PYTHONPATH=$HEAD python3 cost_model.py --backend cuda --profile h200 \
  --json "$OUT/cost_model_b490ed3_h200.json" 2>&1 | grep -v warning | grep "predicted" | sed 's/^/b490ed3 /'
python3 tangents.py --cubes 64,128 --j2-elements 0 --skip-jax --skip-peers-above 2000000 --repeat 20 \
  --json "$OUT/tangents_h200.json" 2>&1 | tail -30
