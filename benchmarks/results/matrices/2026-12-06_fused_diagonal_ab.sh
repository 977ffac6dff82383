#!/usr/bin/env bash
# The tangent's diagonal as one program over the mesh against the head's diagonal from the
# element blocks, on the GPU machine, from the project root: HEAD names a folder holding the
# head's irfuse/ (by PYTHONPATH); each tree has a program cache of its own. Alternating twice at
# CUBES (default 64), then once each at 16 with the float64 host reference.
#   HEAD=<folder> CUBES=64 bash benchmarks/results/matrices/2026-12-06_fused_diagonal_ab.sh
set -u
base=$(mktemp -d); new=$(mktemp -d)
probe=benchmarks/results/matrices/2026-12-06_fused_diagonal_probe.py
for r in 1 2; do
  IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 $probe ${CUBES:-64} head
  IRFUSE_CACHE_DIR=$new python3 $probe ${CUBES:-64} fused
done
IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 $probe 16 head
IRFUSE_CACHE_DIR=$new python3 $probe 16 fused
