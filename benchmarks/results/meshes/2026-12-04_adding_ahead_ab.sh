#!/usr/bin/env bash
# The adding kernel with its loads of up to four trips issued before their adds
# (`scatter_emit.scatter_kernel`) against the head before it (its irfuse/ in $HEAD, by
# PYTHONPATH): the mesh examples on 12,582,912 Morton-ordered tets, alternating twice (times
# and the outputs' SHA-256); the bake-off's BP1 and BP3 at order 3 (float64, 48 cells) each way;
# Nsight Compute's durations of the adding kernels of one BP1 call each way. Run from the
# repository's root on a GPU:   HEAD=<a copy of the head's package root> OUT=<folder> bash THIS
set -u
probe=benchmarks/results/meshes/2026-12-03_member_places_ab.py
for run in 1 2; do
  echo "== head, run $run"; PYTHONPATH=$HEAD python3 $probe 128
  echo "== trips ahead, run $run"; python3 $probe 128
done
cd benchmarks
for tree in head ahead; do
  [ "$tree" = head ] && export PYTHONPATH=$HEAD || unset PYTHONPATH
  IRFUSE_CACHE_DIR=$(mktemp -d) python3 bakeoff.py --orders 3 --kinds bp1,bp3 --cells 48 --skip-peers --repeat 30 \
    --json $OUT/2026-12-04_adding_ahead_bakeoff_${tree}_h200.json 2>&1 | grep -E "^p=3|copy" | sed "s/^/$tree: /"
done
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for tree in head ahead; do
  [ "$tree" = head ] && export PYTHONPATH=$HEAD || unset PYTHONPATH
  echo "== Nsight Compute, the adding kernel, $tree"
  IRFUSE_CACHE_DIR=$(mktemp -d) "$ncu" --profile-from-start off -k regex:irf_scatter --metrics \
    gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,smsp__inst_executed.sum \
    python3 bakeoff.py --orders 3 --kinds bp1 --cells 48 --skip-peers --profile-once --repeat 1 2>&1 | grep -E "^\s+(gpu__|smsp__|dram__)|irf_scatter"
done
