#!/usr/bin/env bash
# The rounds kernel's sweeps written out against the head (its irfuse/ by PYTHONPATH, unpacked from
# .device-carry/head_irfuse.tgz: `git archive HEAD irfuse | gzip`), alternating twice;
# tangents.py on the tree; the GPU tests of tangents and solvers.
set -u
mkdir -p .device-carry/head && tar -xzf .device-carry/head_irfuse.tgz -C .device-carry/head
H=$PWD/.device-carry/head
P=benchmarks/results/matrices/2026-12-05_tangent_folded_sweeps_probe.py
date -u
for run in 1 2; do
  echo "== head, run $run"; PYTHONPATH=$H timeout 150 python3 $P 128 2>&1 | grep -v Warning
  echo "== folded, run $run"; timeout 150 python3 $P 128 2>&1 | grep -v Warning
done
date -u
(cd benchmarks && timeout 200 python3 tangents.py --cubes 64,128 --j2-elements 0 --skip-jax --skip-peers-above 2000000 \
   --repeat 20 --json $OUT/2026-12-05_tangents_folded_sweeps_h200.json 2>&1 | tail -40)
date -u
timeout 150 python3 -m pytest -p no:warnings -q tests/test_gpu.py -n 8 -k "tangent or operator or diagonal or newton or hessian or jacobian or solve" 2>&1 | tail -5
date -u
