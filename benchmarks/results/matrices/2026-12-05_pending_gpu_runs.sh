#!/usr/bin/env bash
# What waits for a GPU (benchmarks/NOTES.md, Matrices and solves, 2026-12-05, 10:30 UTC), from the
# repository's root on the GPU machine, results under $OUT: the tangent's scatter path, the head
# against the staging patch (each patch applied to a copy of irfuse/ put first on PYTHONPATH); the
# thread-a-node rows kernel against the rounds kernel (`OWNER_ROWS` switched in one process, on the
# patched copy); the GPU tests of tangents on both; tangents.py on the head (its "dN fixed when
# compiling" row); BP1 at order 3 (table fixed), head and staging patch alternating.
set -u
R=benchmarks/results/matrices
for copy in staging owner; do
  rm -rf /tmp/$copy && mkdir -p /tmp/$copy && cp -r irfuse /tmp/$copy/
done
(cd /tmp/staging && patch -s -p1 < $OLDPWD/$R/2026-12-05_scatter_staging_keeps_blocks.patch)
(cd /tmp/owner && patch -s -p1 < $OLDPWD/$R/2026-12-05_owner_rows.patch)
date -u
for cubes in 16 128; do
  echo "== scatter path, head, $cubes cubes"; timeout 120 python3 $R/2026-12-05_scatter_path_probe.py $cubes 2>&1 | grep -v Warn | tail -8
  echo "== scatter path, staging patch, $cubes cubes"
  PYTHONPATH=/tmp/staging timeout 120 python3 $R/2026-12-05_scatter_path_probe.py $cubes 2>&1 | grep -v Warn | tail -8
done
date -u
PYTHONPATH=/tmp/owner timeout 200 python3 $R/2026-12-05_owner_rows_probe.py 128 2>&1 | grep -v Warn | tail -10
date -u
printf 'import irfuse.backend.rows_emit as r\nr.OWNER_ROWS = True\n' > /tmp/owner/owner_on.py
timeout 200 python3 -m pytest -p no:warnings -q tests/test_gpu.py -n 4 -k tangent 2>&1 | tail -3
# (run from the copy: `python -m` puts the working directory first on the path)
(cd /tmp/owner && PYTHONPATH=/tmp/owner timeout 200 python3 -m pytest -p owner_on -p no:warnings -q --rootdir $OLDPWD \
   $OLDPWD/tests/test_gpu.py -n 4 -k tangent 2>&1 | tail -3)
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
