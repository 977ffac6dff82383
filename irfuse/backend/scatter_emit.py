"""The scatter kernel of a `kas.scatter`: per-element rows added into nodes through a
connectivity's inverse, in one fixed order wherever it runs. Emitted once per row size of
the program's scatters, GPU kernel and CPU twin together.

The element kernel stores each element's K rows (`values`, row a of element e at slot
e * K + a); node n's slots are `slots[starts[n]:starts[n + 1]]` in ascending order (the
inverse the runtime makes once per connectivity, `irfuse.mesh.inverse_connectivity`). One
thread per node adds them one after another into a running sum that starts at 0, so every
run, the GPU's and the CPU's, gives the bits of `irfuse.mesh.scatter_add`: no atomics, no
order that depends on scheduling. A node no element names gets 0.
"""

from __future__ import annotations

from irfuse.artifact.kernel_info import KernelInfo
from irfuse.dialects import fuse

SCATTER_THREADS = 128  # nodes per block


def scatter_kernel(size: int) -> tuple[str, KernelInfo]:
    """The CUDA C (GPU kernel, and its CPU twin under IRFUSE_HOST) and launch interface of the
    kernel adding rows of `size` words into nodes; launched over the nodes (its `n`)."""
    name, t = fuse.scatter_kernel_name(size), SCATTER_THREADS
    params = ("const real_t* __restrict__ values, const long long* __restrict__ starts, "
              "const int* __restrict__ slots, real_t* __restrict__ out, const long long n")
    body = [f"    real_t acc[{size}];",
            f"    for (int w = 0; w < {size}; ++w) acc[w] = 0;",
            "    const long long end = starts[node + 1];",
            "    for (long long j = starts[node]; j < end; ++j) {",
            f"      const real_t* const row = values + (long long)slots[j] * {size};",
            f"      for (int w = 0; w < {size}; ++w) acc[w] += row[w];",
            "    }",
            f"    for (int w = 0; w < {size}; ++w) out[node * {size} + w] = acc[w];"]
    gpu = [f"// kas.scatter of {size}-word rows: one thread per node adds its slots in ascending order",
           f'extern "C" __global__ void __launch_bounds__({t}) {name}({params})',
           "{",
           # (a launch's block is (bx, by) = (1, SCATTER_THREADS): one node per thread row)
           f"  const long long node = (long long)blockIdx.x * {t} + threadIdx.y;",
           "  if (node < n) {",
           *body,
           "  }",
           "}"]
    host = ["// kas.scatter on the CPU: the GPU's additions in the GPU's order",
            f"static int {name}({params}, const long long block_begin, const long long block_end, "
            "const bool reverse)",
            "{",
            "  (void)reverse;",
            f"  const long long last = block_end * {t} < n ? block_end * {t} : n;",
            f"  for (long long node = block_begin * {t}; node < last; ++node) {{",
            *body,
            "  }",
            "  return 0;",
            "}"]
    info = KernelInfo(name, 1, t, 0, ["values", "starts", "slots"], ["out"], [size, 1, 1], [size],
                      input_types=["", "long long", "int"])
    return "\n".join(["#ifndef IRFUSE_HOST", *gpu, "#else", *host, "#endif"]), info
