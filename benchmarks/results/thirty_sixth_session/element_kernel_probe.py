"""Probe (not a benchmark): irfuse's element kernel of the Neo-Hookean energy on the Morton mesh
of 128^3 cubes, in variants of its plan and of its generated source, each timed as a whole run.
  default          the default pipeline
  one a thread     fuse-partition{per_thread=one}
  inv reciprocal   default, inv_3x3's nine divisions by det as one reciprocal and nine products
  + edits given on the command line as NAME=python-expression-of-source (eval'd)
"""
import copy
import os
import re
import sys

import numpy as np

import irfuse
import irfuse.mesh as mesh
from irfuse.driver.binaries import build_cubin
from irfuse.passes.registry import DEFAULT_PIPELINE
from irfuse.runtime.cuda_device import CudaDevice, current_arch
from irfuse.runtime.executor import Executor

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")


def inv_reciprocal(src: str) -> str:
    def fix(m):
        lines = m.group(0).split("\n")
        den = None
        for k, line in enumerate(lines):
            if line.strip().startswith("const real_t r") and " / " in line:
                head, tail = line.split(" / ", 1)
                den = tail[:-2]  # `D);`: the statement is `(NUM / D);`
                lines[k] = head + " * irf_rd);"
        if den is None:
            return m.group(0)
        out = "\n".join(lines)
        return out.replace("(void)tx; (void)ty;", f"(void)tx; (void)ty;\n  const real_t irf_rd = 1 / {den};", 1)
    return re.sub(r"void irf_inv_3x3_elem_rr\(.*?\n}\n", fix, src, flags=re.S)


def merge_guards(src: str) -> str:
    """Runs of `if (active) statement;` lines (comments between them kept) as one guarded block."""
    out, run = [], []
    guarded = re.compile(r"^  if \(active\) (irf_\w+\(.*\);)$")

    def flush():
        calls = [x for x in run if guarded.match(x)]
        if len(calls) > 1:
            out.append("  if (active) {")
            out.extend("  " + (guarded.match(x).group(1) if guarded.match(x) else x.strip()) for x in run)
            out.append("  }")
        else:
            out.extend(run)
        run.clear()
    for line in src.split("\n"):
        if guarded.match(line) or (run and line.startswith("  // ")):
            run.append(line)
        else:
            tail = []
            while run and not guarded.match(run[-1]):
                tail.append(run.pop())
            flush()
            out.extend(reversed(tail))
            out.append(line)
    flush()
    return "\n".join(out)


def main():
    cubes = 128
    X0, conn0 = mesh.box_tetrahedra(cubes, numbering="random", seed=0)
    order = mesh.reorder(conn0, X0, method="morton")
    conn, X = mesh.renumber(conn0, *order, X0)
    n, nodes = conn.shape[0], X.shape[0]
    u = np.random.default_rng(1).standard_normal(X.shape) * (0.05 / cubes)
    prepared = mesh.Connectivity(conn, nodes)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    inputs = {"X": X.astype(np.float32), "u": u.astype(np.float32), "conn": prepared.conn, "dN": dN,
              "lam": np.float32(1.0), "mu": np.float32(1.0)}
    text = open(os.path.join(ROOT, "examples", "mesh", "neo_hookean_energy.kas")).read()
    grad = "--grad" in sys.argv
    if not grad:
        text = text.replace("derivative grad of E wrt u;", "")
    base = irfuse.compile(text, backend="cuda", filename="nh_energy.kas")
    one = irfuse.compile(text, backend="cuda", filename="nh_energy.kas",
                         pipeline=DEFAULT_PIPELINE.replace("fuse-partition", "fuse-partition{per_thread=one}"))
    variants = {"default": (base, None), "one a thread": (one, None), "inv reciprocal": (base, inv_reciprocal),
                "one a thread, inv reciprocal": (one, inv_reciprocal)}
    if grad:
        variants = {"E and grad_u": (base, None)}
    if "--guards" in sys.argv:
        variants = {k: v for k, v in variants.items() if k in ("default", "E and grad_u")}
        variants["merged guards"] = (base, merge_guards)
        variants["no guards"] = (base, lambda src: src.replace("if (active) ", ""))
    for arg in [a for a in sys.argv[1:] if a not in ("--grad", "--guards")]:
        name, expr = arg.split("=", 1)
        variants[name] = (base, eval("lambda src: " + expr))
    arch = current_arch()
    for name, (prog, edit) in variants.items():
        art = prog._with_binary()
        if edit is not None:
            art = copy.copy(art)
            art.source = edit(art.source)
            if art.source == prog.artifact.source:
                print(f"{name}: the edit changed nothing")
            art.cubin = build_cubin(art.source, arch)
        dev = CudaDevice(art)
        run = Executor(art, dev).prepare(inputs, n, nodes=nodes, inverses={"conn": prepared.inverse},
                                          scatter="ordered")
        run.replay()
        ts = sorted(run.time_once() for _ in range(40))
        out = run.outputs()
        extra = " ".join(f"max|{k}| = {float(np.abs(v).max()):.7g}" for k, v in out.items() if k != "E")
        print(f"{name:32s} {1e3 * ts[len(ts) // 2]:.4f} ms  E = {float(out['E']):.7g} {extra} "
              f"kernels {len(art.kernels)}")


if __name__ == "__main__":
    main()
