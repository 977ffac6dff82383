#!/usr/bin/env bash
# What waits for a GPU (benchmarks/NOTES.md, Matrices and solves, 2026-12-05, 10:30 UTC), from the
# repository's root on the GPU machine, results under $OUT: the tangent's scatter path, the head
# against the staging patch (the patch applied to a copy of irfuse/ put first on PYTHONPATH);
# tangents.py on the head (its "dN fixed when compiling" row); BP1 at order 3 (table fixed), head
# and staging patch alternating; first, D threads a node each owning a row (2026-12-05_row_owner.patch,
# `ROW_OWNER`) against the rounds kernel. (The thread-a-node rows kernel against the rounds kernel, run on
# an H100 on 2026-12-05 at 12:57 UTC: `2026-12-05_owner_rows_probe_h100.txt`, NOTES 13:10 UTC.)
set -u
R=benchmarks/results/matrices
rm -rf /tmp/staging && mkdir -p /tmp/staging && cp -r irfuse /tmp/staging/
(cd /tmp/staging && patch -s -p1 < $OLDPWD/$R/2026-12-05_scatter_staging_keeps_blocks.patch)
rm -rf /tmp/rowowner && mkdir -p /tmp/rowowner && cp -r irfuse /tmp/rowowner/
(cd /tmp/rowowner && patch -s -p1 < $OLDPWD/$R/2026-12-05_row_owner.patch)
date -u
PYTHONPATH=/tmp/rowowner timeout 200 python3 $R/2026-12-05_owner_rows_probe.py 128 ROW_OWNER 2>&1 | grep -v Warn | tail -10
for cubes in 16 128; do
  echo "== scatter path, head, $cubes cubes"; timeout 120 python3 $R/2026-12-05_scatter_path_probe.py $cubes 2>&1 | grep -v Warn | tail -8
  echo "== scatter path, staging patch, $cubes cubes"
  PYTHONPATH=/tmp/staging timeout 120 python3 $R/2026-12-05_scatter_path_probe.py $cubes 2>&1 | grep -v Warn | tail -8
done
date -u
(cd benchmarks && timeout 300 python3 tangents.py --cubes 64,128 --j2-elements 0 --skip-jax --skip-peers-above 2000000 \
   --repeat 20 --json $OUT/tangents.json 2>&1 | tail -60)
date -u
cd benchmarks
for tree in head staging head staging; do
  [ "$tree" = staging ] && export PYTHONPATH=/tmp/staging || unset PYTHONPATH
  IRFUSE_CACHE_DIR=$(mktemp -d) timeout 120 python3 bakeoff.py --orders 3 --kinds bp1 --cells 48 --skip-peers --skip-hand \
    --dtype f64 --tables constants --repeat 30 --json $OUT/bakeoff_bp1_p3_${tree}.json 2>&1 | grep -E "^p=3|copy" | sed "s/^/$tree: /"
done
date -u
