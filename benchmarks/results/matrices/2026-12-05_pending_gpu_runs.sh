#!/usr/bin/env bash
# What waits for a GPU (benchmarks/NOTES.md, Matrices and solves, 2026-12-05, 16:05 UTC), from the
# repository's root on the GPU machine, results under $OUT: the GPU tests on the head (its rows
# kernel's one-hot words in two halves, 4d6494e, run on no GPU yet), then the P1 tangent at 12.6 M
# tets with the head's rows kernel and with the one before 4d6494e (its patch reversed on a copy of
# irfuse/ put first on PYTHONPATH), alternating twice; then Nsight Compute on the head's rows kernel
# (12.6 M tets): its instructions executed, its issue rate and what its warps wait on, against the
# count of 16:30 UTC (571 instructions a slot, about a third of the peak issue rate).
# Two calls' worth (the GPU tests take 370-400 s): `bash THIS tests`, then `bash THIS times`.
set -u
R=benchmarks/results/matrices
PART=${1:-all}
date -u
if [ "$PART" != times ]; then
  python3 -m pytest -p no:warnings tests/test_gpu.py -n 14 > $OUT/gpu_suite.txt 2>&1; echo "pytest exit status $?" | tee -a $OUT/gpu_suite.txt
  tail -3 $OUT/gpu_suite.txt
  [ "$PART" = tests ] && exit 0
fi
rm -rf /tmp/before && mkdir -p /tmp/before && cp -r irfuse /tmp/before/
(cd /tmp/before && patch -s -R -p1 < $OLDPWD/$R/2026-12-05_one_hot_halves.patch)
cd benchmarks
for tree in head before head before; do
  [ "$tree" = before ] && export PYTHONPATH=/tmp/before || unset PYTHONPATH
  IRFUSE_CACHE_DIR=$(mktemp -d) timeout 200 python3 tangents.py --cubes 128 --j2-elements 0 --skip-jax \
    --skip-peers-above 2000000 --repeat 20 --json $OUT/tangents_${tree}.json > /dev/null 2>&1
  python3 -c "import json,sys; s=json.load(open(sys.argv[1]))['sizes']['12582912']; print(sys.argv[2], s['ms'], s['same bits'])" \
    $OUT/tangents_${tree}.json $tree
done
date -u
cd ..
unset PYTHONPATH
if command -v ncu > /dev/null; then
  M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_issued.avg.pct_of_peak_sustained_active
  M=$M,sm__warps_active.avg.pct_of_peak_sustained_active,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum
  for s in long_scoreboard short_scoreboard mio_throttle barrier wait math_pipe_throttle lg_throttle; do
    M=$M,smsp__warp_issue_stalled_${s}_per_warp_active.pct
  done
  IRFUSE_CACHE_DIR=$(mktemp -d) timeout 240 ncu -k regex:irf_tangent_rows --launch-skip 1 --launch-count 1 --metrics $M \
    python3 $R/2026-12-03_tangent_rows_banks_probe.py 128 > $OUT/ncu_rows_head.txt 2>&1
  grep -E "^ +[a-z_]+__|irf_tangent_rows" $OUT/ncu_rows_head.txt
else
  echo "no ncu on this machine"
fi
date -u
