#!/usr/bin/env bash
# The block's partials taken longest first (cuda_emit.sorted_partials) against the head before it
# (its irfuse/ in build/head): the GPU tests of meshes and scatters first, then the A/B of
# 2026-12-03_member_places_ab.sh (which it runs). From the repository's root on a GPU.
python3 -m pytest -p no:warnings tests/test_gpu.py -k "mesh or scatter or random or atomic or connectivit" -n 14 2>&1 | tail -2
exec bash "$(dirname "$0")/2026-12-03_member_places_ab.sh"
