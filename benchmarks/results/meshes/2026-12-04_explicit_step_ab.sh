#!/usr/bin/env bash
# The node kernel adding the scatter's partials four at a time (`cuda_emit.emit_sums`) against
# the head before it ($HEAD, by PYTHONPATH), alternating twice on 12,582,912 Morton tets. Run
# from the repository's root on a GPU:
#   HEAD=<a copy of the head's package root> bash THIS
set -u
probe=benchmarks/results/meshes/2026-12-04_explicit_step_probe.py
for run in 1 2; do
  echo "== head, run $run"; PYTHONPATH=$HEAD python3 $probe 128
  echo "== four at a time, run $run"; python3 $probe 128
done
