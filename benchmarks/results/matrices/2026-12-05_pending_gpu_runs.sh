#!/usr/bin/env bash
# What waits for a GPU (benchmarks/NOTES.md, Matrices and solves, 2026-12-05, 16:05 UTC), from the
# repository's root on the GPU machine, results under $OUT: the GPU tests on the head (its rows
# kernel's one-hot words in two halves, 4d6494e, run on no GPU yet), then the P1 tangent at 12.6 M
# tets with the head's rows kernel and with the one before 4d6494e (its patch reversed on a copy of
# irfuse/ put first on PYTHONPATH), alternating twice.
set -u
R=benchmarks/results/matrices
date -u
python3 -m pytest -p no:warnings tests/test_gpu.py -n 14 > $OUT/gpu_suite.txt 2>&1; echo "pytest exit status $?" | tee -a $OUT/gpu_suite.txt
tail -3 $OUT/gpu_suite.txt
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
