#!/usr/bin/env bash
# The bake-off's cells before and after kernels whose shared memory bounds their blocks are
# built again with their factors loaded by their readers (issue 75): `benchmarks/bakeoff_ab.sh`
# on BP1, BP3 and BK3 at orders 5-7 (HEAD=<folder holding the head's irfuse/>, OUT the
# results' folder). Run from the project root.
ORDERS=${ORDERS:-5,6,7} KINDS=${KINDS:-bp1,bp3,bk3} TAG=2026-12-04_reader_loads \
  exec bash "$(dirname "$0")/../../bakeoff_ab.sh"
