"""Probe (kept for its record): the mesh element kernels' gathers of 3-word rows read with one
8-byte and one 4-byte load a row instead of three 4-byte loads (float32; the 8-byte load at the
row's first word where the node's number is even, at its second where it is odd), the emitted
CUDA rewritten at NVRTC. The same words are loaded, so the outputs' bits must not move.
Variants: `orig` as emitted, `pairs` the rewrite. (When it was run, IRFUSE_EXP_PARTIAL=1 in
the environment switched on, in that package, the values read in part held in registers that
landed as `promotion._read_at_once`; the switch is not in the package.)

    python PROBE.py CUBES VARIANT   (from the repository's root, on a GPU)"""
import os
import re
import sys
import tempfile

os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()

from irfuse.backend import nvrtc  # noqa: E402
from mesh_probe import mesh_examples, morton_box  # noqa: E402 -- this folder's shared mesh and timing

cubes, variant = int(sys.argv[1]), sys.argv[2]
real = nvrtc._compile_once
WORD = re.compile(r"(v_\w+)\[(\d+)\] = (g_\w+)\[\(long long\)(g_\w+)\[\(first \+ ty\) \* (\d+) \+ "
                  r"\(\(0\*(\d+)\) \+ (\d+)\) / 3\] \* 3 \+ \(\(0\*\d+\) \+ \d+\) % 3\];")
rewritten = []


def pairs(gpu: str) -> str:
    def block(m):
        words = WORD.findall(m.group(0))
        if not words or len(words) % 3:
            return m.group(0)
        out = []
        for i in range(0, len(words), 3):
            dst, src, conn, k = words[i][0], words[i][2], words[i][3], int(words[i][4])
            r0 = int(words[i][1])
            a = int(words[i][6]) // 3
            out.append(f"{{ const long long irf_n = g_{conn[2:]}[(first + ty) * {k} + {a}]; const bool irf_o = irf_n & 1; "
                       f"const float2 irf_p = *reinterpret_cast<const float2*>({src} + irf_n * 3 + (irf_o ? 1 : 0)); "
                       f"const float irf_s = {src}[irf_n * 3 + (irf_o ? 0 : 2)]; "
                       f"{dst}[{r0}] = irf_o ? irf_s : irf_p.x; {dst}[{r0 + 1}] = irf_o ? irf_p.x : irf_p.y; "
                       f"{dst}[{r0 + 2}] = irf_o ? irf_p.y : irf_s; }}")
        rewritten.append(len(words))
        return "{ if (active) { " + " ".join(out) + " } }"
    return re.sub(r"\{ if \(active\) \{ v_\w+\[0\] = g_\w+\[\(long long\)g_\w+\[.*?\} \}", block, gpu)


def patched(source, arch, opts):
    if variant == "pairs" and "irf_members0" in source:
        gpu, mark, rest = source.partition("#elif defined(IRFUSE_CPU_LOOP)")
        source = pairs(gpu) + mark + rest
    return real(source, arch, opts)


nvrtc._compile_once = patched
box = morton_box(cubes)
print(f"{variant} partial={os.environ.get('IRFUSE_EXP_PARTIAL', '')}: {box[2].shape[0]:,} tets")
for name, median, least, digest in mesh_examples(box):
    print(f"{name:24s} {median:.4f} ms (min {least:.4f})  outputs {digest}  rows rewritten {rewritten}")
    rewritten.clear()
