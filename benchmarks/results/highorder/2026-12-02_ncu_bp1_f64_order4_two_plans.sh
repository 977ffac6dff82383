#!/usr/bin/env bash
# BP1 float64 order 4: the search's two best plans timed, then one call of each under Nsight Compute.
cd benchmarks
export IRFUSE_CACHE_DIR=/tmp/cn
python3 bakeoff.py --orders 4 --kinds bp1 --dtype f64 --cells 48 --skip-peers --plans 2 --repeat 10 --json $OUT/bp1_f64_p4_two_plans.json 2>&1 | grep -v Warning | tail -4
timeout 200 ncu --profile-from-start off --section SpeedOfLight --section Occupancy --section LaunchStats --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis python3 bakeoff.py --orders 4 --kinds bp1 --dtype f64 --cells 48 --skip-peers --plans 2 --profile-once > $OUT/bp1_f64_p4_two_plans_ncu.txt 2>&1
echo "ncu rc $?"; grep -c "Section: GPU Speed Of Light" $OUT/bp1_f64_p4_two_plans_ncu.txt
