#!/usr/bin/env bash
# A change to the rows kernel timed against the kernel before it: PATCH (a patch of irfuse/ the
# tree holds) reversed on a copy of irfuse/ put first on PYTHONPATH, the tree and that copy
# alternating twice on the Morton box of 128 cubes (12.6 M tets; `2026-12-05_rows_tree_probe.py`:
# the P1 and Neo-Hookean tangents); then Nsight Compute on the tree's rows kernel as on 17:30
# UTC's run, its report in $OUT/NCU. From the repository's root on a GPU:
#   bash THIS PATCH NCU      (2026-12-05: 2026-12-05_rows_prologue.patch ncu_rows_new.txt, then
#                             2026-12-05_rows_read_ahead.patch ncu_rows_read_ahead.txt; 19:21 UTC
#                             the gathers-ahead and places-at-once patches and both together)
# NCU_EXTRA (comma-separated metric names) adds metrics to Nsight Compute's report.
set -u
R=benchmarks/results/matrices
PATCH=$1
NCU=$2
date -u
rm -rf /tmp/before && mkdir -p /tmp/before && cp -r irfuse /tmp/before/
(cd /tmp/before && git apply -R --include="irfuse/*" $OLDPWD/$R/$PATCH) || exit 1  # (its irfuse/ part: a patch may change tests too)
for tree in new before new before; do
  [ "$tree" = before ] && export PYTHONPATH=/tmp/before || unset PYTHONPATH
  timeout 200 python3 $R/2026-12-05_rows_tree_probe.py 128 $tree 2>&1 | grep -E "^(new|before) "
done
unset PYTHONPATH
date -u
M=gpu__time_duration.sum,smsp__inst_executed.sum,sm__inst_issued.avg.pct_of_peak_sustained_active
M=$M,sm__warps_active.avg.pct_of_peak_sustained_active
for s in long_scoreboard short_scoreboard barrier wait; do M=$M,smsp__warp_issue_stalled_${s}_per_warp_active.pct; done
M=$M${NCU_EXTRA:+,$NCU_EXTRA}  # (more metrics, comma-separated, where NCU_EXTRA names them)
IRFUSE_CACHE_DIR=$(mktemp -d) timeout 240 ncu -k regex:irf_tangent_rows --launch-skip 1 --launch-count 1 --metrics $M \
  python3 $R/2026-12-03_tangent_rows_banks_probe.py 128 > $OUT/$NCU 2>&1
grep -E "^ +[a-z_]+__|irf_tangent_rows" $OUT/$NCU
date -u
