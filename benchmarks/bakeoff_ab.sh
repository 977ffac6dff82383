#!/usr/bin/env bash
# The bake-off's cells with the head's package and with the working tree, for a change to the
# compiler (issue 75's A/B runs): HEAD names a folder holding the head's irfuse/ (by
# PYTHONPATH); each tree has a program cache of its own; both compile first side by side,
# then are timed alternating twice. Run from the project root on the GPU machine.
#   HEAD=<folder> ORDERS=5,6,7 KINDS=bp1,bp3 TAG=<date>_<what> OUT=<folder> bash benchmarks/bakeoff_ab.sh
# NEW_ARGS: arguments the working tree's runs take besides (`--tables constants`: its 1-D tables
# fixed when compiling, which a head without `constants=` cannot take); ARGS: arguments both take
# (`--tables constants` where the head has `constants=` too).
# Results: $OUT/${TAG}_{head,new}_run{1,2}_<gpu>.json (h100, h200, or gpu for another), compile
# logs beside them.
set -u
OUT=${OUT:-/tmp}
ORDERS=${ORDERS:-3,4,5,6,7,8}
KINDS=${KINDS:-bp1,bp3}
TAG=${TAG:-bakeoff_ab}
cd "$(dirname "$0")"
case "$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -1)" in
  *H100*) gpu=h100 ;; *H200*) gpu=h200 ;; *) gpu=gpu ;;
esac
base=$(mktemp -d); new=$(mktemp -d)
args="--orders $ORDERS --kinds $KINDS --cells 32 --skip-peers --dtype f64 ${ARGS:-}"
IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 bakeoff.py $args --compile-only > $OUT/compile_head.log 2>&1 &
IRFUSE_CACHE_DIR=$new python3 bakeoff.py $args ${NEW_ARGS:-} --compile-only > $OUT/compile_new.log 2>&1
wait
for r in 1 2; do
  IRFUSE_CACHE_DIR=$base PYTHONPATH=$HEAD python3 bakeoff.py $args --repeat 10 \
    --json $OUT/${TAG}_head_run${r}_${gpu}.json 2>&1 | grep -v warning | tail -22
  IRFUSE_CACHE_DIR=$new python3 bakeoff.py $args ${NEW_ARGS:-} --repeat 10 \
    --json $OUT/${TAG}_new_run${r}_${gpu}.json 2>&1 | grep -v warning | tail -22
done
