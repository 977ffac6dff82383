"""Probe (issue 74): what the scatter's adding kernel would gain if the element kernel wrote
each partial where the adding kernel reads it, in node order (partial p at the place of p in
the node-ordered list, `rank`), so the adding kernel reads each node's partials as one run,
without the list of partials (`ScatterInverse.partials`) and with no scattered reads; and what
the element kernel's scattered writes would cost for it. Four kernels of their own on the P1
residual's scatter order (12,582,912 Morton-ordered tets at 128, float32 rows of 3), timed by
CUDA events (median of 7 timings of 20 launches):

  adding, as now      each node's partials through the list, the loads of four trips ahead
  adding, in order    each node's partials values[starts[n]:starts[n + 1]]
  writing, as now     partial p's row written at p (a copy from a row a partial)
  writing, by rank    partial p's row written at rank[p]

    python PROBE.py CUBES          (from the repository's root, on a GPU)"""
import sys

import numpy as np
import pycuda.autoprimaryctx  # noqa: F401 -- the primary context
import pycuda.driver as cuda

from irfuse.backend.nvrtc import compile_cubin
from irfuse.mesh import box_tetrahedra, inverse_connectivity, renumber, reorder

SOURCE = r"""
typedef float real_t;
#define IRF_UNROLL _Pragma("unroll")
extern "C" __global__ void __launch_bounds__(128) add_slots(const real_t* __restrict__ values,
    const long long* __restrict__ starts, const int* __restrict__ slots, real_t* __restrict__ out, const long long n)
{
  const long long node = (long long)blockIdx.x * 128 + threadIdx.y;
  const long long begin = node < n ? starts[node] : 0, end = node < n ? starts[node + 1] : 0;
  int trips = (int)(end - begin);
  for (int o = 1; o < 32; o *= 2) trips = max(trips, __shfl_xor_sync(0xffffffffu, trips, o));
  real_t acc[3] = {0, 0, 0};
  for (int t = 0; t < trips; t += 4) {
    real_t mine[4][3];
    IRF_UNROLL for (int u = 0; u < 4; ++u) {
      const long long j = begin + t + u;
      if (j < end) { const real_t* row = values + (long long)slots[j] * 3; IRF_UNROLL for (int w = 0; w < 3; ++w) mine[u][w] = row[w]; }
      else { IRF_UNROLL for (int w = 0; w < 3; ++w) mine[u][w] = 0; }
    }
    IRF_UNROLL for (int u = 0; u < 4; ++u) if (begin + t + u < end) { IRF_UNROLL for (int w = 0; w < 3; ++w) acc[w] += mine[u][w]; }
  }
  if (node < n) { IRF_UNROLL for (int w = 0; w < 3; ++w) out[node * 3 + w] = acc[w]; }
}
extern "C" __global__ void __launch_bounds__(128) add_in_order(const real_t* __restrict__ values,
    const long long* __restrict__ starts, const int* __restrict__ slots, real_t* __restrict__ out, const long long n)
{
  const long long node = (long long)blockIdx.x * 128 + threadIdx.y;
  const long long begin = node < n ? starts[node] : 0, end = node < n ? starts[node + 1] : 0;
  int trips = (int)(end - begin);
  for (int o = 1; o < 32; o *= 2) trips = max(trips, __shfl_xor_sync(0xffffffffu, trips, o));
  real_t acc[3] = {0, 0, 0};
  for (int t = 0; t < trips; t += 4) {
    real_t mine[4][3];
    IRF_UNROLL for (int u = 0; u < 4; ++u) {
      const long long j = begin + t + u;
      if (j < end) { const real_t* row = values + j * 3; IRF_UNROLL for (int w = 0; w < 3; ++w) mine[u][w] = row[w]; }
      else { IRF_UNROLL for (int w = 0; w < 3; ++w) mine[u][w] = 0; }
    }
    IRF_UNROLL for (int u = 0; u < 4; ++u) if (begin + t + u < end) { IRF_UNROLL for (int w = 0; w < 3; ++w) acc[w] += mine[u][w]; }
  }
  if (node < n) { IRF_UNROLL for (int w = 0; w < 3; ++w) out[node * 3 + w] = acc[w]; }
}
extern "C" __global__ void __launch_bounds__(128) write_as_now(const real_t* __restrict__ rows,
    const int* __restrict__ rank, real_t* __restrict__ values, const long long n)
{
  const long long p = (long long)blockIdx.x * 128 + threadIdx.x;
  if (p < n) { IRF_UNROLL for (int w = 0; w < 3; ++w) values[p * 3 + w] = rows[p * 3 + w]; }
}
extern "C" __global__ void __launch_bounds__(128) write_by_rank(const real_t* __restrict__ rows,
    const int* __restrict__ rank, real_t* __restrict__ values, const long long n)
{
  const long long p = (long long)blockIdx.x * 128 + threadIdx.x;
  if (p < n) { const long long at = rank[p]; IRF_UNROLL for (int w = 0; w < 3; ++w) values[at * 3 + w] = rows[p * 3 + w]; }
}
"""


def timed(launch) -> float:
    for _ in range(5):
        launch()
    times = []
    for _ in range(7):
        a, b = cuda.Event(), cuda.Event()
        a.record()
        for _ in range(20):
            launch()
        b.record()
        b.synchronize()
        times.append(b.time_since(a) / 20)
    return float(np.median(times))


cubes = int(sys.argv[1])
X, conn = box_tetrahedra(cubes)
conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
nodes = len(X)
inv = inverse_connectivity(conn, nodes)
P = len(inv.partials)
rank = np.empty(P, np.int32)
rank[inv.partials] = np.arange(P, dtype=np.int32)
print(f"{len(conn):,} tets, {nodes:,} nodes, {P:,} partials ({P / len(conn):.3f} an element)")
mod = cuda.module_from_buffer(compile_cubin(SOURCE, "sm_90").cubin)
rng = np.random.default_rng(0)
rows = cuda.to_device(rng.standard_normal((P, 3)).astype(np.float32))
values = cuda.to_device(rng.standard_normal((P, 3)).astype(np.float32))
starts, slots, rank_d = cuda.to_device(inv.starts), cuda.to_device(inv.partials), cuda.to_device(rank)
out = cuda.mem_alloc(nodes * 12)
nb, pb = (nodes + 127) // 128, (P + 127) // 128
add_slots, add_in_order = mod.get_function("add_slots"), mod.get_function("add_in_order")
write_as_now, write_by_rank = mod.get_function("write_as_now"), mod.get_function("write_by_rank")
figures = {
    "adding, as now": timed(lambda: add_slots(values, starts, slots, out, np.int64(nodes), block=(1, 128, 1), grid=(nb, 1))),
    "adding, in order": timed(lambda: add_in_order(values, starts, slots, out, np.int64(nodes), block=(1, 128, 1), grid=(nb, 1))),
    "writing, as now": timed(lambda: write_as_now(rows, rank_d, values, np.int64(P), block=(128, 1, 1), grid=(pb, 1))),
    "writing, by rank": timed(lambda: write_by_rank(rows, rank_d, values, np.int64(P), block=(128, 1, 1), grid=(pb, 1))),
}
for name, ms in figures.items():
    print(f"{name:18s} {ms * 1e3:8.1f} us")
gain = (figures["adding, as now"] - figures["adding, in order"]) - (figures["writing, by rank"] - figures["writing, as now"])
print(f"net: {gain * 1e3:.1f} us a call")
