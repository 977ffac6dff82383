"""Probe (not a benchmark): what the per-element gather of node rows costs on a Morton-ordered
tetrahedral mesh, by how the rows and node numbers are loaded. Each kernel reads an element's
four node numbers, gathers the rows of X and u (3 floats a node), and writes one float an
element (sum over rows of x.u) so nothing is dead. Variants:
  scalar    node numbers as 4 loads, rows as 3 scalar loads each (irfuse's gather today)
  conn4     node numbers as one int4 load, rows as 3 scalar loads
  pad4      node numbers as one int4 load, rows from copies padded to 16 B: one float4 load each
  pad4_copy pad4 plus making the padded copy of u (a kernel over the nodes) every call
Run on the GPU machine:  python gather_probe.py [--cubes 128]
"""
import argparse
import os
import sys

import cupy as cp
import numpy as np

SRC = r"""
extern "C" __global__ void scalar(const float* __restrict__ X, const float* __restrict__ u,
                                  const int* __restrict__ conn, float* __restrict__ out, long long n) {
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  float acc = 0.f;
  #pragma unroll
  for (int w = 0; w < 12; ++w) {
    long long k = conn[e * 4 + w / 3];
    acc += X[k * 3 + w % 3] * u[k * 3 + w % 3];
  }
  out[e] = acc;
}
extern "C" __global__ void conn4(const float* __restrict__ X, const float* __restrict__ u,
                                 const int4* __restrict__ conn, float* __restrict__ out, long long n) {
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int4 c = conn[e];
  int ks[4] = {c.x, c.y, c.z, c.w};
  float acc = 0.f;
  #pragma unroll
  for (int a = 0; a < 4; ++a) {
    long long k = ks[a];
    acc += X[k * 3] * u[k * 3] + X[k * 3 + 1] * u[k * 3 + 1] + X[k * 3 + 2] * u[k * 3 + 2];
  }
  out[e] = acc;
}
extern "C" __global__ void pad4(const float4* __restrict__ X, const float4* __restrict__ u,
                                const int4* __restrict__ conn, float* __restrict__ out, long long n) {
  long long e = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (e >= n) return;
  int4 c = conn[e];
  int ks[4] = {c.x, c.y, c.z, c.w};
  float acc = 0.f;
  #pragma unroll
  for (int a = 0; a < 4; ++a) {
    float4 x = X[ks[a]], v = u[ks[a]];
    acc += x.x * v.x + x.y * v.y + x.z * v.z;
  }
  out[e] = acc;
}
extern "C" __global__ void pad(const float* __restrict__ u, float4* __restrict__ u4, long long nodes) {
  long long i = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  if (i >= nodes) return;
  u4[i] = make_float4(u[i * 3], u[i * 3 + 1], u[i * 3 + 2], 0.f);
}
"""


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubes", type=int, default=128)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--irfuse-only", action="store_true", help="only irfuse's energy program (for ncu)")
    args = ap.parse_args()
    import irfuse.mesh as mesh
    X0, conn0 = mesh.box_tetrahedra(args.cubes, numbering="random", seed=0)
    order = mesh.reorder(conn0, X0, method="morton")
    conn, X = mesh.renumber(conn0, *order, X0)
    n, nodes = conn.shape[0], X.shape[0]
    u = np.random.default_rng(1).standard_normal(X.shape)
    bench = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
    here = os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(here, "energy_hand.cu")) as f:  # the energy written by hand
        energy_src = f.read()
    mod = cp.RawModule(code=SRC + energy_src, options=("-std=c++17", "-I" + bench))
    partial = cp.empty((n + 127) // 128, cp.float32)
    Xd, ud = cp.asarray(X, cp.float32), cp.asarray(u, cp.float32)
    cd = cp.asarray(conn.astype(np.int32))
    X4 = cp.zeros((nodes, 4), cp.float32)
    X4[:, :3] = Xd
    u4 = cp.zeros((nodes, 4), cp.float32)
    u4[:, :3] = ud
    out = cp.empty(n, cp.float32)
    grid, block = ((n + 127) // 128,), (128,)
    ref = (X[conn] * u[conn]).sum(axis=(1, 2))
    runs = {
        "scalar": lambda: mod.get_function("scalar")(grid, block, (Xd, ud, cd, out, np.int64(n))),
        "conn4": lambda: mod.get_function("conn4")(grid, block, (Xd, ud, cd, out, np.int64(n))),
        "pad4": lambda: mod.get_function("pad4")(grid, block, (X4, u4, cd, out, np.int64(n))),
        "pad4_copy": lambda: (mod.get_function("pad")(((nodes + 255) // 256,), (256,), (ud, u4, np.int64(nodes))),
                              mod.get_function("pad4")(grid, block, (X4, u4, cd, out, np.int64(n)))),
    }
    runs["energy by hand"] = lambda: mod.get_function("energy")(grid, block, (Xd, ud, cd, partial, np.float32(1.0),
                                                                                 np.float32(1.0), np.int64(n)))
    src = cp.empty(256 << 20, cp.uint8)
    dst = cp.empty_like(src)
    s, e = cp.cuda.Event(), cp.cuda.Event()

    def timed(f):
        f()
        cp.cuda.runtime.deviceSynchronize()
        ts = []
        for _ in range(args.repeat):
            s.record()
            f()
            e.record()
            e.synchronize()
            ts.append(cp.cuda.get_elapsed_time(s, e))
        return float(np.median(ts))
    if args.irfuse_only:
        runs = {}
    copy_ms = timed(lambda: cp.copyto(dst, src))
    print(f"{n:,} tetrahedra, {nodes:,} nodes; copy {2 * src.nbytes / copy_ms / 1e6:.0f} GB/s")
    for name, f in runs.items():
        ms = timed(f)
        err = float(np.abs(cp.asnumpy(out) - ref).max() / np.abs(ref).max())
        print(f"{name:10s} {ms:.4f} ms  rel err {err:.1e}")
    Xd = cp.asarray(X, cp.float32)
    ud = cp.asarray(u * 0.05 / args.cubes, cp.float32)  # displacements that keep det F > 0
    if not args.irfuse_only:
        print(f"energy by hand {timed(runs['energy by hand']):.4f} ms, E = {float(partial.sum()):.6g}")
    for name, f in runs.items():  # again, other order effects
        print(f"{name:10s} {timed(f):.4f} ms (second round)")
    # irfuse's own energy program (examples/mesh/neo_hookean_energy.kas without its derivative
    # line) on the same mesh: every kernel of its run, and the element kernel's share
    import irfuse
    from irfuse.runtime.executor import Executor
    root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..")
    src_kas = open(os.path.join(root, "examples", "mesh", "neo_hookean_energy.kas")).read()
    prog = irfuse.compile(src_kas.replace("derivative grad of E wrt u;", ""), backend="cuda",
                          filename="neo_hookean_energy_only.kas")
    prepared = mesh.Connectivity(conn, nodes)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    inputs = {"X": X.astype(np.float32), "u": (u * 0.05 / args.cubes).astype(np.float32), "conn": prepared.conn,
              "dN": dN, "lam": np.float32(1.0), "mu": np.float32(1.0)}
    run = Executor(prog._with_binary(), prog.opened_device()).prepare(
        inputs, n, nodes=nodes, inverses={"conn": prepared.inverse}, scatter="ordered")
    run.replay()
    ts = sorted(run.time_once() for _ in range(args.repeat))
    print(f"irfuse energy program ({len(prog.kernels)} kernels): {1e3 * ts[len(ts) // 2]:.4f} ms, "
          f"E = {float(run.outputs()['E']):.6g}")
    import torch
    from torch.profiler import ProfilerActivity, profile
    torch.zeros(1, device="cuda")
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(20):
            run.replay()
        torch.cuda.synchronize()
    for ev in prof.key_averages():
        if ev.device_time_total > 0:
            print(f"   {ev.key[:60]:60s} {ev.device_time_total / ev.count:.1f} us x {ev.count}")
    for v in ("scalar", "pad4"):
        if v in runs:
            print(f"{v} again {timed(runs[v]):.4f} ms")


if __name__ == "__main__":
    sys.exit(main())
