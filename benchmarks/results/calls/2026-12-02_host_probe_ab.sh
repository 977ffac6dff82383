#!/bin/bash
# A/B of host times: the head's package (.device-carry/base) against the working tree, alternating.
for r in 1 2 3; do
  echo "== base run $r"; ROWS_ONLY=1 PYTHONPATH=$PWD/.device-carry/base python3 .device-carry/probe/host_probe.py 2 2>&1 | grep -v Warn
  echo "== new run $r"; ROWS_ONLY=1 python3 .device-carry/probe/host_probe.py 2 2>&1 | grep -v Warn
done
