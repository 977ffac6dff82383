"""Ad hoc: a one-kernel program's one-run time through its CUDA graph and through plain launches,
and the device time alone (a run already queued when the timing starts), SyncTest, n = 4,194,304."""
import json, os
import numpy as np
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import effective_bytes

N = 4_194_304
out = {}
for layout in ("aos", "soa"):
    plan, _ = compile_program("examples/synctest.kas", None, "f32", layout=layout)
    rng = np.random.default_rng(1)
    A = rng.random((N, 3, 3), dtype=np.float32) if layout == "aos" else rng.random((3, 3, N), dtype=np.float32)
    nbytes = effective_bytes(plan.reference_program, N, 4)
    for graphs in (True, False):
        dev = CudaDevice(plan, graphs=graphs)
        bw = out.setdefault("copy_Bps", measure_copy_bandwidth(dev.drv))
        rec = Executor(plan, dev).prepare({"A": A}, N)
        for _ in range(5):
            rec.replay()
        r = {}
        for rnd in range(2):
            one = float(np.median([rec.time_once() for _ in range(100)]))
            ten = float(np.median([rec.time_once(10) for _ in range(30)]))
            def queued():
                rec.replay()  # waits on the device when the timed run is issued
                with dev.timer() as t:
                    rec.replay()
                return t.seconds
            q = float(np.median([queued() for _ in range(100)]))
            r[rnd] = {k: round(nbytes / v / bw, 4) for k, v in (("one", one), ("ten", ten), ("queued", q))}
        out[f"{layout} {'graph' if graphs else 'launches'}"] = r
        print(layout, graphs, r, flush=True)
        dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "launch_exp.json"), "w"), indent=1)
