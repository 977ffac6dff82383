# Thirty-eighth session, sixth device call (the final code: a value read whole by one reader
# and in part by another stays shared): the batch Neo-Hookean example and the P1 residual on
# the mesh, then the GPU tests.
R=benchmarks/results/thirty_eighth_session
python benchmarks/examples.py --dtype f32 --examples neo_hookean p1_elastic --json $OUT/examples_final.json 2>&1 | tail -7
for t in new old; do
  o=""; [ $t = old ] && o="OLD=.device-carry/old"
  env $o python benchmarks/results/thirty_seventh_session/probe_kernels.py p1_residual.kas 2>&1 | grep median | sed "s/^/p1_residual $t: /"
done
python -m pytest -p no:cacheprovider -p no:warnings tests/test_gpu.py tests/test_dask_gpu.py -n 8 -rfE > $OUT/gpu_tests_final.txt 2>&1; tail -4 $OUT/gpu_tests_final.txt
