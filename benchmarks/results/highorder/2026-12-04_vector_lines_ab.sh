#!/usr/bin/env bash
# The bake-off's BP cells before and after a reshape into an element's vector got a `line`
# mapping (issue 75): `benchmarks/bakeoff_ab.sh` on BP1 and BP3 (HEAD=<folder holding the
# head's irfuse/>, ORDERS as given, OUT the results' folder). Run from the project root.
KINDS=bp1,bp3 TAG=2026-12-04_vector_lines exec bash "$(dirname "$0")/../../bakeoff_ab.sh"
