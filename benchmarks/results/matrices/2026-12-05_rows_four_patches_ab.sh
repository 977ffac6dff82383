#!/usr/bin/env bash
# The four rows-kernel patches of NOTES (Matrices and solves, 2026-12-05, 20:25 and 20:48 UTC), each
# applied alone to the tree and timed against the kernel before it by `2026-12-05_rows_patch_ab.sh`
# (the P1 and Neo-Hookean tangents on 12.6 M Morton-ordered tets, the tree and its patch reversed
# alternating twice; then Nsight Compute on the rows kernel, with the L1's work split between its
# shared memory and the gathers), then reversed. The padded gathers' patch also runs the GPU tests
# of the tangents, operators and diagonals with it applied (its copies' launch through the API had
# run on no GPU). From the repository's root on a GPU, results under $OUT:
#   bash THIS [PATCH-NAME ...]     (default: the three below, run 2026-12-06 01:58 UTC; the padded
#                                   gathers ran 00:02 UTC: `bash THIS padded_gathers`. All four were
#                                   timed on an H100 and dropped: NOTES, Matrices and solves, 2026-12-06)
R=benchmarks/results/matrices
PATCHES=${*:-uniform_words_once uniform_words_once_blocks_by_shared padded_gathers_uniform_words}
for p in $PATCHES; do
  echo "=== $p"
  git apply $R/2026-12-05_$p.patch || { echo "apply failed: $p"; continue; }
  NCU_EXTRA=l1tex__data_pipe_lsu_wavefronts.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared.sum,l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum,l1tex__throughput.avg.pct_of_peak_sustained_active \
    bash $R/2026-12-05_rows_patch_ab.sh 2026-12-05_$p.patch ncu_$p.txt
  if [ "$p" = padded_gathers ]; then
    timeout 200 python3 -m pytest -p no:warnings tests/test_gpu.py -n 8 -k "tangent or matri or operator or diagonal" 2>&1 | tail -4
  fi
  git apply -R $R/2026-12-05_$p.patch
done
