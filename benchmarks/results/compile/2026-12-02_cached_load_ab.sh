# (run from the repository root with the base package unpacked in .device-carry/base) cached loads, the package of HEAD (base) and the working tree alternating, a cache each
unset PYTHONDONTWRITEBYTECODE
for prog in synctest.kas neo_hookean.kas mesh/p1_residual.kas mesh/explicit_step.kas; do
  E=examples/$prog
  IRFUSE_CACHE_DIR=/tmp/cA PYTHONPATH=$PWD/.device-carry/base python3 benchmarks/results/compile/2026-12-02_cached_load_probe.py $E cuda >/dev/null
  IRFUSE_CACHE_DIR=/tmp/cB PYTHONPATH=$PWD python3 benchmarks/results/compile/2026-12-02_cached_load_probe.py $E cuda > /dev/null
  for r in 1 2 3 4 5 6 7; do
    a=$(IRFUSE_CACHE_DIR=/tmp/cA PYTHONPATH=$PWD/.device-carry/base python3 benchmarks/results/compile/2026-12-02_cached_load_probe.py $E cuda | awk '{print $6}')
    b=$(IRFUSE_CACHE_DIR=/tmp/cB PYTHONPATH=$PWD python3 benchmarks/results/compile/2026-12-02_cached_load_probe.py $E cuda | awk '{print $6}')
    echo "$prog base $a new $b"
  done
done
