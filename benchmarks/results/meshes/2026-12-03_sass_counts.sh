#!/usr/bin/env bash
# Where the P1 residual's element kernel and the P1 tangent's rounds kernel spend their warp
# instructions, instruction by instruction: Nsight Compute's SourceCounters on the second call of
# each (12,582,912 Morton-ordered tets, float32), printed as SASS with each instruction's
# executed count; then every kernel of the residual's third call timed. Run from the repository's
# root on a GPU; writes under $OUT (or build/).
set -u
out=${OUT:-build}
ncu=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
"$ncu" --version | tail -1
for spec in "p1_residual_k0 benchmarks/results/meshes/2026-12-03_residual_banks_probe.py" \
            "irf_tangent_rows benchmarks/results/matrices/2026-12-03_tangent_rows_banks_probe.py"; do
  set -- $spec
  "$ncu" -f -k regex:$1 --launch-skip 1 --launch-count 1 --section SourceCounters --section SpeedOfLight \
    --import-source no -o "$out/sass_$1" python3 "$2" 128 > "$out/sass_$1.log" 2>&1
  tail -3 "$out/sass_$1.log"
  "$ncu" -i "$out/sass_$1.ncu-rep" --page source --csv --print-source sass > "$out/sass_$1.csv" 2> "$out/sass_$1.err"
  wc -l "$out/sass_$1.csv"; head -c 600 "$out/sass_$1.err"
done
"$ncu" --metrics gpu__time_duration.sum,smsp__inst_executed.sum --launch-skip 0 --csv \
  python3 benchmarks/results/meshes/2026-12-03_residual_banks_probe.py 128 > "$out/residual_kernels.csv" 2> "$out/residual_kernels.err"
grep -E "gpu__time|inst_exec" "$out/residual_kernels.csv" | tail -24
