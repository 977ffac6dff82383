# Thirty-eighth session, first device call: the element kernels before (f805836, OLD) and
# after gathered values and partly-read results in registers; whole runs, then ncu per kernel.
# (the probe ran from a copy in this directory, the same bytes as the thirty-seventh session's)
P=benchmarks/results/thirty_seventh_session/probe_kernels.py
export OLD_TREE=.device-carry/old
for tree in new old; do
  for what in energy grad; do
    arg=""; [ $what = energy ] && arg=energy
    if [ $tree = old ]; then OLD=$OLD_TREE python $P neo_hookean_energy.kas $arg 2>&1 | tail -3 | sed "s/^/$tree $what: /"
    else python $P neo_hookean_energy.kas $arg 2>&1 | tail -3 | sed "s/^/$tree $what: /"; fi
  done
done
M=smsp__inst_executed.sum,gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__registers_per_thread,smsp__issue_active.avg.pct_of_peak_sustained_active
for tree in new old; do
  for what in energy grad; do
    arg=""; [ $what = energy ] && arg=energy
    o=""; [ $tree = old ] && o="OLD=$OLD_TREE"
    env $o ncu --metrics $M --kernel-name regex:_k0_ --launch-skip 3 --launch-count 1 --csv python $P neo_hookean_energy.kas $arg 2>/dev/null \
      | grep '"' | awk -F'","' '{print $5 " | " $(NF-2) " | " $(NF)}' | sed "s/^/$tree $what: /" | grep -v "Kernel Name"
  done
done
