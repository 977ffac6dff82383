# Thirty-eighth session, fifth device call: the examples with uniform inputs (float32) with this
# session's code and with the tree before it (f805836, OLD), each against the copy measured in
# its own run. (A first try over every example ran past the call's ten minutes.)
R=benchmarks/results/thirty_eighth_session
E="cfl_step j2_return neo_hookean p1_elastic hex8"
python benchmarks/examples.py --dtype f32 --examples $E --json $OUT/examples.json > $OUT/examples.txt 2>&1; tail -12 $OUT/examples.txt
OLD=.device-carry/old python $R/old_run.py benchmarks/examples.py --dtype f32 --examples $E --json $OUT/examples_old.json > $OUT/examples_old.txt 2>&1; tail -12 $OUT/examples_old.txt
