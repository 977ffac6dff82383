import sys, time
import numpy
t0 = time.perf_counter()
import irfuse
t1 = time.perf_counter()
p = irfuse.compile(sys.argv[1], backend=sys.argv[2], **({"arch": "sm_90"} if sys.argv[2]=="cuda" else {}))
t2 = time.perf_counter()
print(f"import {1e3*(t1-t0):.1f} compile {1e3*(t2-t1):.1f} total {1e3*(t2-t0):.1f}")
