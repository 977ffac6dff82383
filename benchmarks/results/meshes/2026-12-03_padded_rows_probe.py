"""Probe (kept for its record): the P1 residual's element kernel (12.6 M Morton tets, float32)
with its staged rows laid out a node's three words in four (an element's rows at pitch 20
words, 16-byte aligned), so that the group sums read a member's row with one 16-byte shared
load instead of three 4-byte ones: the emitted CUDA rewritten at NVRTC. The same sums in the
same order, so the outputs' bits must not move. Variants `orig` (as emitted) and `padded`.

    python PROBE.py CUBES VARIANT   (from the repository's root, on a GPU)"""
import hashlib
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
EDITS = [
    ("IRFUSE_SHARED_STATIC(real_t, smem, 1664);", "IRFUSE_SHARED_STATIC(real_t, smem, 2560);"),
    ("if (active) irf_scale_4x3_s_elem_rrs(tx, ty, r_fe, r_vol, smem + 0 + ty*1);",
     "if (active) { real_t* const irf_r = smem + ty * 20; for (int irf_k = 0; irf_k < 4; ++irf_k) "
     "*reinterpret_cast<float4*>(irf_r + 4 * irf_k) = make_float4(r_fe[3 * irf_k] * r_vol[0], "
     "r_fe[3 * irf_k + 1] * r_vol[0], r_fe[3 * irf_k + 2] * r_vol[0], 0.0f); }"),
    ("/ 4 * 13 + ", "/ 4 * 20 + "), ("% 4 * 3);", "% 4 * 4);"),
    ("smem[0 + irf_i / 12 * 13 + irf_i % 12]", "smem[irf_i / 12 * 20 + irf_i % 12 / 3 * 4 + irf_i % 3]"),
    ("for (int irf_c = 0; irf_c < 3; ++irf_c) irf_acc[irf_c] = (smem + 0)[irf_m[irf_m0] + irf_c];",
     "{ const float4 irf_w = *reinterpret_cast<const float4*>(smem + irf_m[irf_m0]); "
     "irf_acc[0] = irf_w.x; irf_acc[1] = irf_w.y; irf_acc[2] = irf_w.z; }"),
    ("for (int irf_c = 0; irf_c < 3; ++irf_c) irf_acc[irf_c] += (smem + 0)[irf_m[irf_q] + irf_c];",
     "{ const float4 irf_w = *reinterpret_cast<const float4*>(smem + irf_m[irf_q]); "
     "irf_acc[0] += irf_w.x; irf_acc[1] += irf_w.y; irf_acc[2] += irf_w.z; }"),
]


def padded(gpu: str) -> str:
    for old, new in EDITS:
        assert old in gpu, old
        gpu = gpu.replace(old, new)
    return gpu


def patched(source, arch, opts):
    if variant == "padded" and "p1_residual_k0" in source:
        gpu, mark, rest = source.partition("#elif defined(IRFUSE_CPU_LOOP)")
        source = padded(gpu) + mark + rest
    return real(source, arch, opts)


if __name__ == "__main__":
    nvrtc._compile_once = patched
    Xt, ut, prepared, dN = morton_box(cubes)
    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cuda")
    call = lambda: prog(Xt, ut, prepared, dN, np.float32(1.0), np.float32(0.5))  # noqa: E731
    digest = hashlib.sha256(call().r.detach().cpu().numpy().tobytes()).hexdigest()[:16]
    median, least = median_ms(call)
    print(f"{variant:7s} p1_residual {median:.4f} ms (min {least:.4f})  outputs {digest}")
