# Thirty-eighth session, second device call: the benchmarks with the registers change, and the
# assembly benchmark's irfuse rows with the tree before it (f805836, OLD).
R=benchmarks/results/thirty_eighth_session
python benchmarks/mesh_derivatives.py --json $OUT/mesh_derivatives.json > $OUT/mesh_derivatives.txt 2>&1; tail -25 $OUT/mesh_derivatives.txt
python benchmarks/assembly.py --json $OUT/assembly.json > $OUT/assembly.txt 2>&1; tail -30 $OUT/assembly.txt
OLD=.device-carry/old python $R/old_run.py benchmarks/assembly.py --skip-jax --skip-compile --json $OUT/assembly_old.json > $OUT/assembly_old.txt 2>&1; tail -30 $OUT/assembly_old.txt
