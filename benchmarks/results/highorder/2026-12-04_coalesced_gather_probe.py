"""Probe (issue 75): BP1's gather made coalesced. Where a plan gathers u into registers of a
row mapping (a thread reading 16 consecutive node numbers of its element, so a warp's load
touches 32 lines) and then copies them into a shared value by a reshape, the element kernel
here gathers straight into that shared value instead, the block's threads taking consecutive
words (a warp reads 32 consecutive node numbers). Same values, same sums: the reshape is a copy.

    PROBE=1 python3 2026-12-04_coalesced_gather_probe.py <bakeoff.py's arguments>

runs `benchmarks/bakeoff.py` with the NVRTC compile rewriting such kernels (PROBE=0: as emitted).
Each variant wants an IRFUSE_CACHE_DIR of its own (the cache keeps compiled programs)."""

import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", ".."))  # (the project root)

from irfuse.backend import nvrtc  # noqa: E402

GATHER = re.compile(r"(?m)^  // v_uv: gather u through conn into reg\n  \{ const int tx_c = tid % (\d+), ty_c = tid / \1; "
                    r"if \(ty_c < count\) \{ [^\n]*\} \}\n")
RESHAPE = re.compile(r"(?m)^  // reshape_(\w+?)_(\d+)\[row\] into shared\[(\d+), pitch (\d+)\], threads remapped\n"
                     r"  \{ const int tx_c = tid % \d+, ty_c = tid / \d+; if \(ty_c < count\) "
                     r"irf_reshape_\w+_row_rs\(tx_c, ty_c, v_uv, smem \+ \d+ \+ ty_c\*1\); \}\n")
THREADS = re.compile(r"irf_load_async16\([^;]*, tid, (\d+)\);")
BLOCK = re.compile(r"const long long first = \(long long\)blockIdx.x \* (\d+);")
real = nvrtc._compile_once
rewritten = []


def patched(source, arch, opts):
    if os.environ.get("PROBE") == "1":
        gpu, rest = source, ""  # (the GPU kernel's lines are indented by two, the host's by six)
        g, r = GATHER.search(gpu), RESHAPE.search(gpu)
        if g and r:
            n, off, pitch = int(r.group(2)), int(r.group(3)), int(r.group(4))
            nt = int(THREADS.search(gpu).group(1))
            by = int(BLOCK.search(gpu).group(1))
            ceil = -(-by * n // nt)
            new = ("  // v_uv: gathered straight into the reshape's shared value, consecutive words a warp (probe)\n"
                   f"  {{ int irf_idx[{ceil}];\n"
                   f"    IRF_UNROLL for (int j = 0; j < {ceil}; ++j) {{ const int i = tid + j * {nt}; "
                   f"irf_idx[j] = i < count * {n} ? g_conn[first * {n} + i] : 0; }}\n"
                   f"    IRF_UNROLL for (int j = 0; j < {ceil}; ++j) {{ const int i = tid + j * {nt}; "
                   f"if (i < count * {n}) smem[{off} + (i / {n}) * {pitch} + i % {n}] = g_u[(long long)irf_idx[j]]; }} }}\n")
            # (issued after the block's asynchronous copies, before it waits for them)
            gpu = gpu[:g.start()] + gpu[g.end():]
            wait = gpu.index("  irf_async_wait();\n", g.start())
            gpu = gpu[:wait] + new + gpu[wait:]
            gpu = RESHAPE.sub("  // (the reshape: gathered in place above, probe)\n", gpu, count=1)
            rewritten.append((n, off, pitch, nt, by))
            source = gpu + rest
    return real(source, arch, opts)


nvrtc._compile_once = patched
sys.path.insert(0, os.path.join(HERE, "..", ".."))
import bakeoff  # noqa: E402

code = bakeoff.main(sys.argv[1:])
print("rewritten kernels:", rewritten, flush=True)
sys.exit(code)
