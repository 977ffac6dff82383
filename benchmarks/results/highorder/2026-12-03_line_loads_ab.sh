#!/usr/bin/env bash
# Probe (kept for its record): the bake-off in float64, the package before (BASE, a copy of the
# head's irfuse/) against the same with 2026-12-03_line_loads_in_registers.patch applied (EXP),
# each compiled into a cache of its own first (15 at a time), then timed order by order.
#   BASE=/path/to/base EXP=/path/to/exp bash 2026-12-03_line_loads_ab.sh    (from the root, on a GPU)
ROOT=$PWD
cd benchmarks
cells() { if [ $1 -ge 7 ]; then echo 32; else echo 48; fi; }
ORDERS=${ORDERS:-"2 3 4 5 6 7 8"}
for tree in BASE EXP; do
  for p in $ORDERS; do
    IRFUSE_CACHE_DIR=/tmp/c_$tree PYTHONPATH=${!tree} python3 bakeoff.py --orders $p --cells $(cells $p) --skip-peers --compile-only > /dev/null 2>&1 &
  done
done
wait
for p in $ORDERS; do
  for tree in BASE EXP; do
    IRFUSE_CACHE_DIR=/tmp/c_$tree PYTHONPATH=${!tree} python3 bakeoff.py --orders $p --cells $(cells $p) --skip-peers --repeat 10 2>&1 | grep -v warning | sed "s/^/$tree /"
  done
done
