"""The planner's predicted time of each derivative program (arguments: KAS files declaring
`derivative ... loops unroll|tape;`), its kernels' estimated registers against their cap (h200
profile, n = 1,048,576)."""
import sys
from irfuse.driver.compile import run_pipeline
from irfuse.frontend.irgen import compile_file
from irfuse.verification.reference import find_program
from irfuse.passes.fuse_partition import FusePartition
from irfuse.planner.cost import estimate_registers
for path in sys.argv[1:]:
    res = compile_file(path)
    module = run_pipeline(res.module, "kas-dce")
    part = FusePartition(max_size=8, top=1, n=1048576, profile="h200")
    dags, plans, profile = part.search(find_program(module), 4)
    p = plans[0]
    tot = 0
    for c in p.configs:
        m = c.model
        mult = dags[c.dag].multiplier
        tot += mult * c.cost.time
        k = c.cost
        print(f"  {path.split('/')[-1]} by={m.by} est={estimate_registers(m)} cap={k.registers} "
              f"time={k.time*1e3:.4f}ms x{mult} occ={k.occupancy:.2f} tc={k.t_compute*1e3:.4f} "
              f"tm={k.t_mem*1e3:.4f} ts={k.t_shared*1e3:.4f}")
    print(path, f"total {tot*1e3:.4f} ms")
