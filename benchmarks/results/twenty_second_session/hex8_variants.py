"""Experiment: hex8's one kernel with other launch bounds and block shapes, timed as element_codes does."""
import os, sys, json, tempfile
import numpy as np
sys.path.insert(0, "benchmarks")
import torch
import irfuse
import irfuse.backend.cuda_emit as ce
from irfuse.passes.registry import partition_pipeline
from element_codes import inputs_of
from peers import interleaved_medians, torch_sampler
from irfuse.runtime.cuda_device import measure_copy_bandwidth
orig = ce.launch_min_blocks
n = 4194304
rows = []
bw = None
for dtype in sys.argv[1].split(","):
    np_t, torch_t = (np.float32, torch.float32) if dtype == "f32" else (np.float64, torch.float64)
    host = {k: np.array(v, np_t) for k, v in inputs_of("hex8", n).items()}
    samplers = {}
    for plan in (0, 1):
        for mb in (None, 1, 2, 4, 8, 16):
            os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
            ce.launch_min_blocks = orig if mb is None else (lambda m, mb=mb: mb)
            from irfuse.passes.registry import DEFAULT_PIPELINE
            pipe = DEFAULT_PIPELINE.replace("fuse-partition", f"fuse-partition{{top=2 plan={plan} n={n} budget=100}}", 1)
            prog = irfuse.compile("examples/hex8.kas", backend="cuda", dtype=dtype, n=n, pipeline=pipe)
            k = prog.artifact.kernels[0]
            r = prog.artifact.resources(k.name)
            if mb is not None and k.min_blocks != mb:
                print("skip", plan, mb, "(became", k.min_blocks, ")", flush=True); continue
            if bw is None:
                bw = measure_copy_bandwidth(prog.opened_device().drv)
            tensors = [torch.from_numpy(host[x]).cuda() for x in prog.inputs]
            outs = [torch.empty((n, *prog.shapes[x]), dtype=torch_t, device="cuda") for x in prog.outputs]
            name = f"{dtype} plan{plan} by{k.by} mb{k.min_blocks}{'(default)' if mb is None else ''} regs{r.registers} spill{r.spill_stores + r.spill_loads}"
            print(name, flush=True)
            samplers[name] = torch_sampler(lambda *a, prog=prog, outs=outs: prog(*a, out=outs), tensors)
    words = 48 + 72 + 1 + 9
    nbytes = n * words * np.dtype(np_t).itemsize
    med = interleaved_medians(samplers, 20, 3)
    for k, t in med.items():
        print(f"{k}: {t*1e3:.3f} ms  {nbytes / t / bw * 100:.1f}% of copy", flush=True)
        rows.append({"variant": k, "ms": t * 1e3, "of_copy": nbytes / t / bw})
json.dump({"bw": bw, "rows": rows}, open(os.path.join(os.environ.get("OUT", "."), f"hex8_variants_{sys.argv[1].replace(',', '_')}.json"), "w"), indent=1)
