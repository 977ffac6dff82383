"""Probe (kept for its record, 2026-12-03_tangent_rows_parts_probe_h200.txt): what two parts of
the P1 tangent's owner-computes kernel (`backend/rows_emit._rounds_kernel`) cost, each taken out
of the emitted CUDA at NVRTC, on the Morton box of `tangents.py` (float32, `out=`). The variants
give wrong values on purpose; they bound what a change could gain, they are not changes:

    orig      as emitted
    seeds     each reverse sweep's cotangent a literal (the slot's local node taken as 0 in the
              seeds only): what NVRTC folds where the node is known when the kernel is compiled
    nosearch  each column's place in the row taken as its local index (no search of the row)
    both      the two
    linear    each column's place counted by one pass over the row's columns for the slot's K
              nodes at once (no chain of dependent steps): the same places, so the same values

    python PROBE.py CUBES VARIANT   (from the repository's root, on a GPU; a process a variant)"""
import os, re, sys, tempfile, time
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np
import torch
import irfuse
from irfuse.backend import nvrtc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
from tangents import LAMBDA, MU, ROOT, mesh  # noqa: E402

cubes, variant = int(sys.argv[1]), sys.argv[2]
seen = {}
real = nvrtc._compile_once
LINEAR = re.compile(r"IRF_UNROLL for \(int b = 0; b < (\d+); \+\+b\) \{\n\s*const int key = \(int\)nodes\[b\] \* (\d+);\n"
                    r"\s*int lo = 0;[^\n]*\n\s*IRF_UNROLL for \(int half = \d+; half > 0; half >>= 1\)\n\s*if \(lo \+ half <= "
                    r"blocks && cols\[lo \+ half - 1\] < key\) lo \+= half;\n\s*irf_at\[tid \* \d+ \+ b\] = lo \* \d+;\n\s*\}")
WIDEST = re.compile(r"const int\* const cols = irf_cols \+ y \* (\d+);")


def linear(source):
    widest = int(WIDEST.search(source).group(1))

    def one(m):
        k, d = m.group(1), m.group(2)
        return (f"{{ int keys[{k}], lo[{k}];\n"
                f"  IRF_UNROLL for (int b = 0; b < {k}; ++b) {{ keys[b] = (int)nodes[b] * {d}; lo[b] = 0; }}\n"
                f"  IRF_UNROLL for (int p = 0; p < {widest}; ++p) {{\n"
                f"    const int c = p < blocks ? cols[p] : 0x7fffffff;\n"
                f"    IRF_UNROLL for (int b = 0; b < {k}; ++b) lo[b] += c < keys[b];\n  }}\n"
                f"  IRF_UNROLL for (int b = 0; b < {k}; ++b) irf_at[tid * {k} + b] = lo[b] * {d}; }}")
    source, k = LINEAR.subn(one, source)
    assert k == 1, k
    return source


SEARCH = re.compile(r"IRF_UNROLL for \(int half = \d+; half > 0; half >>= 1\)\n\s*if \(lo \+ half <= blocks && "
                    r"cols\[lo \+ half - 1\] < key\) lo \+= half;")


def patched(source, arch, opts):
    if "irf_tangent_rows" in source:
        if variant in ("seeds", "both"):
            source, k = re.subn(r"w == a \* (\d+) \+ (\d+) \?", r"w == 0 * \1 + \2 ?", source)
            assert k, "no seeds found"
        if variant == "linear":
            source = linear(source)
        if variant in ("nosearch", "both"):
            source, k = SEARCH.subn("lo = b < blocks ? b : blocks;", source)
            assert k, "no search found"
    r = real(source, arch, opts)
    for name, v in r.resources.items():
        if name == "irf_tangent_rows":
            seen[name] = (v.registers, v.spill_stores, v.shared_bytes)
    return r


nvrtc._compile_once = patched
prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cuda")
t, prepared, conn = mesh(torch, cubes)
args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
M = irfuse.tangent_matrix(prog, *args, wrt="u")
torch.cuda.synchronize()
times = []
for _ in range(3):
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    for _ in range(20):
        irfuse.tangent_matrix(prog, *args, wrt="u", out=M)
    end.record()
    torch.cuda.synchronize()
    times.append(start.elapsed_time(end) / 20)
import hashlib
digest = hashlib.sha256(M.values().cpu().numpy().tobytes()).hexdigest()[:16]
print(f"{variant:9s} {len(conn):,} tets: {min(times):.3f}-{max(times):.3f} ms a call; registers, spills, shared "
      f"{seen.get('irf_tangent_rows')}; values' sha256 {digest}", flush=True)
