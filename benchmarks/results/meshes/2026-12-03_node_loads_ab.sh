#!/usr/bin/env bash
# An element's node numbers read once by 16-byte loads for its gathers (the patch
# 2026-12-03_node_loads.patch applied to the tree) against the head before it (its irfuse/ in
# build/head, by PYTHONPATH): the same A/B and Nsight Compute count as
# 2026-12-03_member_places_ab.sh, which it runs. From the repository's root on a GPU.
exec bash "$(dirname "$0")/2026-12-03_member_places_ab.sh"
