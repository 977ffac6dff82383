"""Probe (kept for its record): what the group sums' loop over a partial's members costs the
P1 residual's element kernel (12.6 M Morton-ordered tets, float32), taken out of the emitted
CUDA at NVRTC in a fresh process a variant. The variants but `orig` give wrong values on
purpose; they bound what a change of that loop could gain:

    orig     as emitted
    first    each partial its first member's row alone (the loop over the rest taken out)
    none     no partial summed or written (the element code, the order's staging and the barrier)

    python PROBE.py CUBES VARIANT   (from the repository's root, on a GPU)"""
import os
import sys
import tempfile

os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np  # noqa: E402

import irfuse  # noqa: E402
from irfuse.backend import nvrtc  # noqa: E402
from mesh_probe import median_ms, morton_box  # noqa: E402 -- this folder's shared mesh and timing

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
cubes, variant = int(sys.argv[1]), sys.argv[2]
real = nvrtc._compile_once
LOOP = "for (int irf_q = irf_m0 + 1; irf_q < irf_m1; ++irf_q) {"
PARTIALS = "for (int irf_i = tid; irf_i < irf_parts; irf_i += 128) {\n      const long long irf_p = irf_p0 + irf_i;"


def patched(source, arch, opts):
    if "p1_residual_k0" in source and variant != "orig":
        gpu, mark, rest = source.partition("#elif defined(IRFUSE_CPU_LOOP)")
        if variant == "first":
            assert gpu.count(LOOP) == 1, gpu.count(LOOP)
            gpu = gpu.replace(LOOP, "for (int irf_q = irf_m0 + 1; irf_q < irf_m0 + 1; ++irf_q) {")
        elif variant == "none":
            assert gpu.count(PARTIALS) == 1, gpu.count(PARTIALS)
            gpu = gpu.replace(PARTIALS, PARTIALS.replace("irf_i < irf_parts", "irf_i < 0"))
        source = gpu + mark + rest
    return real(source, arch, opts)


nvrtc._compile_once = patched
Xt, ut, prepared, dN = morton_box(cubes)
prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cuda")
median, least = median_ms(lambda: prog(Xt, ut, prepared, dN, np.float32(1.0), np.float32(0.5)))
print(f"{variant:6s} {median:.4f} ms a call (min {least:.4f})")
