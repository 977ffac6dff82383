#!/usr/bin/env bash
# The element kernels timed alone (`2026-12-03_named_operands_probe.py`: each example's default
# plan, 4,194,304 elements, median of 30 runs, no reference) with the tree, the fixed-trips copy
# patch and the rolled copy patch (each a patched copy of irfuse/ by PYTHONPATH), alternating
# ROUNDS times. Run from the project root on a GPU; prints "tree example dtype ms registers".
set -u
ROUNDS=${ROUNDS:-2}
root=$(pwd)
for form in fixed_trips rolled; do
  patch_file=$root/benchmarks/results/compile/2026-12-05_$([ $form = rolled ] && echo rolled_copies || echo copies_fixed_trips).patch
  mkdir -p /tmp/copies_$form && cp -r "$root/irfuse" "$root/tests" /tmp/copies_$form/
  (cd /tmp/copies_$form && patch -p1 -s < "$patch_file") || exit 1
done
probe=$root/benchmarks/results/compile/2026-12-03_named_operands_probe.py
examples=${EXAMPLES:-"synctest:f32 j2_return:f32 neo_hookean:f32 stvenant:f32 bigfusion:f32 precession:f32 rotation_loop:f32 p1_elastic:f32 transform44:f32 power_iteration:f32 hex8:f32 hex8:f64 j2_return:f64 stvenant:f64"}
for r in $(seq "$ROUNDS"); do
  for tree in head fixed_trips rolled; do
    pp=$([ $tree = head ] && echo "$root" || echo /tmp/copies_$tree)
    PYTHONPATH=$pp python3 "$probe" 4194304 30 $examples 2>&1 | grep -v warning | sed "s|^|$tree run$r |"
  done
done
