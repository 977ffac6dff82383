"""The CPU backend's plan of each workload built two ways in one process, in turns with numba:
the host flags and reduction trees before this session (old) and now (new). N, R: size, timings."""
import copy
import os
import re
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

def built_sampler(plan, src: str, inputs: dict, n: int):
    """(a timing of one run, the outputs' bytes) of `plan` with its kernels' source `src`, its
    host library built with the host_compile flags in force now."""
    art = copy.copy(plan)
    art.source = src
    art.host_library = hc.build_host_library(src, plan.kernels, "loop")
    rec = Executor(art, CpuDevice(art)).prepare(inputs, n)
    rec.replay()
    return (lambda: rec.time_once()), [a.tobytes() for a in rec.outputs().values()]


def workload_plan(wl: str, n: int):
    """The CPU plan of workload `wl` (a name of benchmarks/cpu.py) for `n` elements, and random
    float32 inputs for it."""
    plan, _ = compile_program(os.path.join(ROOT, "examples", cpub.WORKLOADS[wl]), None, "f32",
                              compile_gpu=False, planning=PlanningOptions(n=n, profile="cpu"))
    return plan, random_inputs(plan.reference_program, n, 1, np.float32)


def main() -> None:
    n = int(os.environ.get("N", 1048576))
    old_flags = ["-std=c++20", "-O2", "-fno-strict-aliasing", "-ffp-contract=off", "-shared", "-fPIC", "-pthread",
                 "-w"]
    new_flags, new_gcc = list(hc.FLAGS), list(hc.GCC_FLAGS)
    nb = numba_fns()
    for wl in sys.argv[1].split(","):
        plan, inputs = workload_plan(wl, n)
        prog = plan.reference_program
        old_src = re.sub(r"if \(irf_count == \d+\) \{\n(?:.*\n)*?\s*\} else \{\n((?:.*\n)*?)\s*\}\n", r"\1",
                         plan.source)
        samplers, outs = {}, {}
        for name, src, flags, g in (("old", old_src, old_flags, []), ("new", plan.source, new_flags, new_gcc)):
            hc.FLAGS[:], hc.GCC_FLAGS[:] = flags, g
            samplers[name], outs[name] = built_sampler(plan, src, inputs, n)
        hc.FLAGS[:], hc.GCC_FLAGS[:] = new_flags, new_gcc
        ordered = [aligned_copy(inputs[k]) for k in prog.inputs]
        samplers["numba"] = cpub.wall_sampler(nb[wl], ordered)
        t = interleaved_medians(samplers, int(os.environ.get("R", 15)), 3, settle=2)
        print(wl, {k: f"{v*1e3:.3f}" for k, v in t.items()}, f"new/numba {t['numba']/t['new']:.2f}x",
              "same bits:", outs["old"] == outs["new"], "tree branches:", plan.source.count("if (irf_count =="),
              flush=True)


if __name__ == "__main__":
    main()
