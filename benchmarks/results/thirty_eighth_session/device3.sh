# Thirty-eighth session, third device call: whole runs with the uniform copies one word a
# thread, then the GPU tests.
# (the probe ran from a copy in this directory, the same bytes as the thirty-seventh session's)
P=benchmarks/results/thirty_seventh_session/probe_kernels.py
for a in energy ""; do python $P neo_hookean_energy.kas $a 2>&1 | grep median | sed "s/^/${a:-grad}: /"; done
python -m pytest -p no:cacheprovider -p no:warnings tests/test_gpu.py tests/test_dask_gpu.py -n 8 -rfE > $OUT/gpu_tests.txt 2>&1; tail -15 $OUT/gpu_tests.txt
