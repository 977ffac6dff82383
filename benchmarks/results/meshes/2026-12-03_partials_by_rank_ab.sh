#!/usr/bin/env bash
# The tree (a group's partials listed longest first by the connectivity, dealt to the element
# kernel's threads rank by rank across the block's groups) against the head before it (its
# irfuse/ in $HEAD, by PYTHONPATH), alternating twice, on 12,582,912 Morton-ordered tets (the
# connectivity prepared on the GPU, so each tree's own order); then Nsight Compute's count of
# the P1 residual's element kernel under each. Run from the repository's root on a GPU:
#   HEAD=<a copy of the head's package root> bash THIS
set -u
probe=benchmarks/results/meshes/2026-12-03_member_places_ab.py
for run in 1 2; do
  echo "== head, run $run"; PYTHONPATH=$HEAD python3 $probe 128
  echo "== partials by rank, run $run"; python3 $probe 128
done
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
for tree in head rank; do
  echo "== Nsight Compute, $tree"
  [ "$tree" = head ] && export PYTHONPATH=$HEAD || unset PYTHONPATH
  "$ncu" -k regex:p1_residual_k0 --launch-skip 1 --launch-count 1 --metrics \
    gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_issued.avg.pct_of_peak_sustained_active,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,sm__warps_active.avg.pct_of_peak_sustained_active \
    python3 benchmarks/results/meshes/2026-12-03_residual_banks_probe.py 128 2>&1 | grep -E "^\s+(gpu__|smsp__|sm__|l1tex__)"
done
