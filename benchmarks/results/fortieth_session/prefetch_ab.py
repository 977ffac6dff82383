"""The CPU backend's plan of each workload built two ways in one process and timed in turns
with numba: as emitted (the element loop prefetches the rows of wide inputs, `render_cpu_loop`)
and with the prefetches compiled away (IRF_PREFETCH defined empty). usage: prefetch_ab.py
W1,W2,... (names of benchmarks/cpu.py); N, R: size, timings."""
import copy
import os
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from peers import interleaved_medians, numba_fns  # noqa: E402
import irfuse.backend.host_compile as hc  # noqa: E402
from irfuse.api.host_calls import aligned_copy  # noqa: E402
from irfuse.driver.compile import PlanningOptions, compile_program  # noqa: E402
from irfuse.runtime.executor import CpuDevice, Executor  # noqa: E402
from irfuse.verification.reference import random_inputs  # noqa: E402
import cpu as cpub  # noqa: E402

NO_PREFETCH = "#undef IRF_PREFETCH\n#define IRF_PREFETCH(p) ((void)0)\n"


def built_sampler(plan, src: str, inputs: dict, n: int):
    """(a timing of one run, the outputs' bytes) of `plan` with its kernels' source `src`."""
    art = copy.copy(plan)
    art.source = src
    art.host_library = hc.build_host_library(src, plan.kernels, "loop")
    rec = Executor(art, CpuDevice(art)).prepare(inputs, n)
    rec.replay()
    return (lambda: rec.time_once()), [a.tobytes() for a in rec.outputs().values()]


def main() -> None:
    n = int(os.environ.get("N", 1048576))
    nb = numba_fns()
    for wl in sys.argv[1].split(","):
        plan, _ = compile_program(os.path.join(ROOT, "examples", cpub.WORKLOADS[wl]), None, "f32",
                                  compile_gpu=False, planning=PlanningOptions(n=n, profile="cpu"))
        prog = plan.reference_program
        inputs = random_inputs(prog, n, 1, np.float32)
        samplers, outs = {}, {}
        for name, src in (("prefetch", plan.source), ("none", NO_PREFETCH + plan.source)):
            samplers[name], outs[name] = built_sampler(plan, src, inputs, n)
        samplers["numba"] = cpub.wall_sampler(nb[wl], [aligned_copy(inputs[k]) for k in prog.inputs])
        t = interleaved_medians(samplers, int(os.environ.get("R", 15)), 3, settle=2)
        print(wl, {k: f"{v * 1e3:.3f}" for k, v in t.items()},
              f"prefetch/numba {t['numba'] / t['prefetch']:.2f}x, none/numba {t['numba'] / t['none']:.2f}x",
              "same bits:", outs["prefetch"] == outs["none"], "prefetches:", plan.source.count("IRF_PREFETCH(("),
              flush=True)


if __name__ == "__main__":
    main()
