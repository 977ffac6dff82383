"""The P1 tangent's rows kernel against a slot in closed form (`2026-12-05_ideal_slot.cu`), by kind of
sm_90 instruction (static counts): floating point, shared memory, global memory, the rest (integer
arithmetic, comparisons, selects, control). The rows kernel whole (its rounds, its prologue and
the window write), as the head emits it, with `dN` an input and with `dN` fixed when compiling
(`constants=`), and its round loop (a slot a thread each round) outside and inside its inner loop
(the adds of a round's staged rows into the thread's row, a pass per slot of the round); the closed
form's slot body alone (between its two barriers). No GPU: NVRTC here and nvdisasm (`pip install
nvidia-cuda-nvdisasm`).

    python3 benchmarks/results/matrices/2026-12-05_rows_kernel_parts_probe.py [NVDISASM]
"""
import collections
import os
import re
import subprocess
import sys
import tempfile

os.environ.setdefault("IRFUSE_CACHE_DIR", tempfile.mkdtemp())
import numpy as np  # noqa: E402

from irfuse.artifact.arrays import element_type  # noqa: E402
from irfuse.backend import nvrtc, rows_emit  # noqa: E402
from irfuse.dialects.kas import program_of  # noqa: E402
from irfuse.driver import front  # noqa: E402
from irfuse.driver.options import constant_numbers  # noqa: E402
from irfuse.library.catalogue import default_library  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
NVDISASM = sys.argv[1] if len(sys.argv) > 1 else "nvdisasm"
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
KINDS = {"floating point": ("FADD", "FMUL", "FFMA", "MUFU", "FSEL", "FSETP"), "shared memory": ("LDS", "STS"),
         "global memory": ("LDG", "STG")}


def machine_code(source: str, kernel: str) -> tuple[list, list, int]:
    """The kernel's instructions (offset, words), its loops (first offset, the backward branch's)
    and its registers."""
    compiled = nvrtc._compile_once(source, "sm_90", ["--gpu-architecture=sm_90", "--ptxas-options=-v",
                                                     "--std=c++17", "--no-cache", "--minimal"])
    with tempfile.NamedTemporaryFile(suffix=".cubin", delete=False) as f:
        f.write(compiled.cubin)
    sass = subprocess.run([NVDISASM, f.name], capture_output=True, text=True, check=True).stdout
    text = sass.split(f".text.{kernel}:")[1].split(".section")[0]
    found = [(int(m.group(1), 16), m.group(2).split()) for m in re.finditer(r"/\*([0-9a-f]{4,})\*/\s+([^;]*);", text)]
    labels, lines = {}, text.splitlines()
    for i, line in enumerate(lines):
        m = re.match(r"\.L_x_(\d+):", line.strip())
        if m:
            labels[m.group(1)] = next((int(n.group(1), 16) for n in (re.search(r"/\*([0-9a-f]{4,})\*/", x)
                                                                      for x in lines[i + 1:]) if n), None)
    loops = []  # (a branch back to a label before it)
    for at, words in found:
        m = re.search(r"BRA\s+`?\(?\.L_x_(\d+)", " ".join(words))
        start = labels.get(m.group(1)) if m else None
        if start is not None and start < at:
            loops.append((start, at))
    return found, loops, compiled.resources[kernel].registers


def kinds(found: list, lo: int = 0, hi: int = 1 << 40, skip: tuple = ()) -> dict:
    ops = collections.Counter((words[1] if words[0].startswith("@") else words[0]).split(".")[0]
                              for at, words in found if lo <= at <= hi and not any(a <= at <= b for a, b in skip))
    out = {kind: sum(ops[o] for o in names) for kind, names in KINDS.items()}
    out["the rest"] = sum(ops.values()) - sum(out.values())
    out["all"] = sum(ops.values())
    return out


def said(counted: dict) -> str:
    return ", ".join(f"{kind} {n}" for kind, n in counted.items())


def rows_kernel(constants) -> str:
    path = os.path.join(ROOT, "examples", "mesh", "p1_residual.kas")
    c = constant_numbers(constants)
    module, gathered, _, out = front.element_jacobian(path, "r", "u", "probe", c)
    rows = front.element_rows(path, "r", "u", "probe", c)
    return rows_emit.rows_module(program_of(module), tuple(gathered), out, default_library(), element_type("f32"),
                                 4, 3, False, 15, rows).source


def slot_body(found: list) -> tuple[int, int]:
    """The closed form's slot body: what lies between its kernel's two barriers."""
    bars = [at for at, words in found if words[0].startswith("BAR.SYNC")]
    if len(bars) != 2:
        sys.exit(f"expected the kernel's two barriers, found {len(bars)}")
    return bars[0] + 1, bars[1] - 1


if __name__ == "__main__":
    found, _, _ = machine_code(open(os.path.join(HERE, "2026-12-05_ideal_slot.cu")).read(), "ideal_slot")
    print(f"closed form, a slot's body: {said(kinds(found, *slot_body(found)))}")
    for name, constants in (("dN an input", None), ("dN fixed", {"dN": DN})):
        found, loops, _ = machine_code(rows_kernel(constants), "irf_tangent_rows")
        rounds = max(loops, key=lambda loop: loop[1] - loop[0])  # (the round loop: the longest)
        inner = tuple(loop for loop in loops if rounds[0] < loop[0] and loop[1] < rounds[1])
        print(f"rows kernel, {name}: whole {said(kinds(found))}")
        print(f"  a round, outside its inner loop: {said(kinds(found, *rounds, skip=inner))}")
        for loop in inner:
            print(f"  its inner loop, a pass: {said(kinds(found, *loop))}")
