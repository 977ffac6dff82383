#!/usr/bin/env bash
# The coalesced-gather probe against the kernels as emitted (issue 75): BP1 at order 3,
# alternating twice, each variant with a program cache of its own; then Nsight Compute's
# kernel durations of one call of BP1 and BP3 at order 3 as emitted.
# Run from the project root on the GPU machine; OUT names the results' folder.
set -u
cd benchmarks/results/highorder
OUT=${OUT:-/tmp}
base=$(mktemp -d); probe=$(mktemp -d)
for r in 1 2; do
  for v in 0 1; do
    cache=$base; [ $v = 1 ] && cache=$probe
    IRFUSE_CACHE_DIR=$cache PROBE=$v python3 2026-12-04_coalesced_gather_probe.py --orders 3 --kinds bp1 --cells 48 \
      --skip-peers --repeat 30 --json $OUT/2026-12-04_coalesced_gather_probe${v}_run${r}_h200.json 2>&1 | grep -E "p=3|rewritten|copy"
  done
done
cd ../..
if command -v ncu >/dev/null; then
  IRFUSE_CACHE_DIR=$base timeout 240 ncu --profile-from-start off --csv --page raw \
    --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_elapsed,l1tex__throughput.avg.pct_of_peak_sustained_active,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum \
    --log-file $OUT/2026-12-04_ncu_bp_order3_kernels_h200.csv python3 bakeoff.py --orders 3 --kinds bp1,bp3,bk1,bk3 --cells 48 \
    --skip-peers --profile-once --repeat 1 > /dev/null 2>&1
  python3 - "$OUT/2026-12-04_ncu_bp_order3_kernels_h200.csv" <<'P'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
head = next(i for i, r in enumerate(rows) if "Kernel Name" in r)
h = rows[head]
for r in rows[head + 2:]:
    d = dict(zip(h, r))
    print(d["Kernel Name"][:60], *(f"{k.split('.')[0][:28]}={d[k]}" for k in h if k.startswith(("gpu__", "dram", "sm__", "smsp", "l1tex"))))
P
fi
