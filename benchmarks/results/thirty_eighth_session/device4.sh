# Thirty-eighth session, fourth device call: the batch derivatives (n = 4,194,304) with this
# session's code, and irfuse's rows with the tree before it (f805836, OLD), in one session.
R=benchmarks/results/thirty_eighth_session
python benchmarks/derivatives.py --repeat 30 --rounds 5 --json $OUT/derivatives.json > $OUT/derivatives.txt 2>&1; tail -22 $OUT/derivatives.txt
OLD=.device-carry/old python $R/old_run.py benchmarks/derivatives.py --repeat 30 --rounds 5 --skip-jax --skip-compile --json $OUT/derivatives_old.json > $OUT/derivatives_old.txt 2>&1; tail -16 $OUT/derivatives_old.txt
