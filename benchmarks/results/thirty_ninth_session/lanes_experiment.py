"""Experiment (thirty-ninth session): a loop kernel's CPU loop rendering rewritten as text to run
G elements in lockstep (each lane's iteration in turn), timed against the plain rendering and
numba, in turns. Written against the rendering before lanes were built into it (a6be0ad and
earlier: one element at a time), whose text it rewrites; `python lanes_experiment.py WORKLOAD`."""
import os
import re
import sys
import numpy as np
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
from peers import interleaved_medians, numba_fns  # noqa: E402
from irfuse.api.host_calls import aligned_copy  # noqa: E402
from irfuse.driver.compile import PlanningOptions, compile_program  # noqa: E402
from irfuse.verification.reference import random_inputs  # noqa: E402
import cpu as cpub  # noqa: E402
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from flags_ab import built_sampler  # noqa: E402

def lanes(src, G):
    start = src.index("#elif defined(IRFUSE_CPU_LOOP)")
    end = src.index("#else", start)
    k = src[start:end]
    head, rest = k.split("    for (int irf_t = 0; irf_t < irf_count; ++irf_t) {\n", 1)
    body, tail = rest.rsplit("    }\n  }\n  return 0;", 1)
    lines = body.split("\n")
    decl = [line for line in lines if re.match(r"\s+real_t (r_\w+|irf_es)\[\d+\];", line)]
    regs = [re.match(r"\s+real_t (r_\w+|irf_es)\[(\d+)\];", line).groups() for line in decl]
    loop_i = next(i for i, line in enumerate(lines) if "// fuse.loop" in line)
    # the loop's closing brace: the first line after loop_i that is exactly 8 spaces + '}'
    close_i = next(i for i in range(loop_i + 1, len(lines)) if lines[i] == "        }")
    fixed = ("const long long first", "const int tx = 0", "const bool active", "(void)tx;")
    pre = [line for line in lines[:loop_i] if line not in decl and not any(f in line for f in fixed)]
    loop_body = lines[loop_i + 1:close_i]
    post = lines[close_i + 1:]
    ptrs = " ".join(f"real_t* const {n} = irf_L_{n}[irf_g];" for n, _ in regs)
    lane_decl = "\n".join(f"      real_t irf_L_{n}[{G}][{s}];" for n, s in regs)
    def lanewise(stmts, bound):
        return ([f"      for (int irf_g = 0; irf_g < {bound}; ++irf_g) {{",
                 f"        const long long first = irf_first + irf_t + irf_g; {ptrs}",
                 "        const int tx = 0, ty = 0, tid = 0, count = 1; const bool active = true;",
                 "        (void)tx; (void)ty; (void)tid; (void)count; (void)active;"] + stmts + ["      }"])
    loop_head = lines[loop_i].replace("if (active) ", "")
    new_body = ([lane_decl, f"      const int irf_lanes = irf_count - irf_t < {G} ? irf_count - irf_t : {G};"]
                + lanewise(pre, "irf_lanes") + [loop_head] + lanewise(loop_body, "irf_lanes") + ["        }"]
                + lanewise(post, "irf_lanes"))
    new_k = (head + f"    for (int irf_t = 0; irf_t < irf_count; irf_t += {G}) {{\n" + "\n".join(new_body)
             + "\n    }\n  }\n  return 0;" + tail)
    return src[:start] + new_k + src[end:]

n = 1048576
wl = sys.argv[1] if len(sys.argv) > 1 else "Precession"
plan, _ = compile_program(os.path.join(ROOT, "examples", cpub.WORKLOADS[wl]), None, "f32", compile_gpu=False,
                          planning=PlanningOptions(n=n, profile="cpu"))
prog = plan.reference_program
inputs = random_inputs(prog, n, 1, np.float32)
samplers, outs = {}, {}
for name, src in [("loop", plan.source), ("lanes4", lanes(plan.source, 4)), ("lanes8", lanes(plan.source, 8))]:
    samplers[name], outs[name] = built_sampler(plan, src, inputs, n)
ordered = [aligned_copy(inputs[k]) for k in prog.inputs]
samplers["numba"] = cpub.wall_sampler(numba_fns()[wl], ordered)
t = interleaved_medians(samplers, int(os.environ.get("R", 5)), 3, settle=1)
print(wl, {k: f"{v*1e3:.3f}" for k, v in t.items()}, "same bits:", {k: outs[k] == outs["loop"] for k in outs})
