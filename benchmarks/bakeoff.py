"""The CEED bake-off problems BP1 (mass) and BP3 (Poisson) at order 3: irfuse's examples
against the same sum-factorized operator in PyTorch (eager and `torch.compile`) and JAX
(`jax.jit`), with the copy bandwidth measured in the same run, one table and JSON.

    python benchmarks/bakeoff.py [--cells 40] [--dtype f64|f32] [--device cuda|cpu] [--repeat 20]
                                 [--skip-peers] [--json ...]

The mesh: `irfuse.mesh.box_hexahedra(cells, order=3)` Morton-reordered, its quadrature data
(w detJ for BP1; the six entries of w detJ J^-1 J^-T for BP3, at 5^3 Gauss points an element)
stored as the bake-off's BP3 stores them. Each contender computes y = A u with the gather and
the scatter (the BP form; the BK form without them is not measured yet). Reported per
contender: milliseconds a call (median, synchronized), DoFs a second (nodes / time), and the
byte floor at the measured copy bandwidth over the time: u read and y written once, the
connectivity (int32) and the stored quadrature data read once. irfuse's kernels here run one
element a thread (`examples/highorder/`); the block-per-element kernels of high order are not
written yet, so this measures the starting point. `--device cpu` runs irfuse's CPU backend and
the peers on the CPU (a smoke run: the figures that count are the GPU's).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place
from peers import ROOT  # noqa: E402

import highorder_reference as ref  # noqa: E402 -- the 1-D tables and the quadrature data

P, Q = 3, 5
SYMMETRIC = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))


def problem(cells: int, dtype):
    """(X, conn, B, D, wdet, G) of the Morton-ordered box, float64 host arrays but conn int32."""
    from irfuse.mesh import box_hexahedra, renumber, reorder

    X, conn = box_hexahedra(cells, order=P)
    conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
    B, D, _ = ref.lagrange_tables(P, Q)
    wdet, G = ref.geometric_factors(X, conn, P, Q)
    return X, conn.astype(np.int32), B, D, wdet, G


def floor_bytes(kind: str, nodes: int, elements: int, itemsize: int) -> int:
    stored = (1 if kind == "bp1" else 6) * Q**3
    return itemsize * (2 * nodes + elements * stored) + 4 * elements * (P + 1) ** 3


def sum_factorized(xp, einsum, kind: str, u, conn, B, D, qdata, scatter):
    """y = A u written with einsum in an array library (`xp`: torch or jax.numpy), the peers'
    form of the examples' contractions."""
    e = conn.shape[0]
    ue = u[conn].reshape(e, P + 1, P + 1, P + 1)
    if kind == "bp1":
        t = einsum("kc,ecba->ekba", B, ue)
        t = einsum("jb,ekba->ekja", B, t)
        uq = einsum("ia,ekja->ekji", B, t)
        v = uq * qdata
        t = einsum("ia,ekji->ekja", B, v)
        t = einsum("jb,ekja->ekba", B, t)
        ye = einsum("kc,ekba->ecba", B, t)
    else:
        bz, dz = einsum("kc,ecba->ekba", B, ue), einsum("kc,ecba->ekba", D, ue)
        gx = einsum("ia,ekja->ekji", D, einsum("jb,ekba->ekja", B, bz))
        gy = einsum("ia,ekja->ekji", B, einsum("jb,ekba->ekja", D, bz))
        gz = einsum("ia,ekja->ekji", B, einsum("jb,ekba->ekja", B, dz))
        gxx, gxy, gxz, gyy, gyz, gzz = (qdata[:, k] for k in range(6))
        vx = gxx * gx + gxy * gy + gxz * gz
        vy = gxy * gx + gyy * gy + gyz * gz
        vz = gxz * gx + gyz * gy + gzz * gz
        ax = einsum("jb,ekja->ekba", B, einsum("ia,ekji->ekja", D, vx))
        ay = einsum("jb,ekja->ekba", D, einsum("ia,ekji->ekja", B, vy))
        az = einsum("jb,ekja->ekba", B, einsum("ia,ekji->ekja", B, vz))
        ye = einsum("kc,ekba->ecba", B, ax + ay) + einsum("kc,ekba->ecba", D, az)
    return scatter(ye.reshape(e, -1), conn)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=40, help="hexahedra per side (order 3: (3 cells + 1)^3 nodes)")
    ap.add_argument("--dtype", default="f64", choices=("f64", "f32"))
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--json", default=meta.result_path("highorder"))
    a = ap.parse_args(argv)
    import torch

    import irfuse
    from irfuse.mesh import Connectivity

    real = np.float64 if a.dtype == "f64" else np.float32
    X, conn, B, D, wdet, G = problem(a.cells, real)
    nodes, elements = len(X), len(conn)
    dev = a.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)

    def put(x):
        return torch.from_numpy(np.ascontiguousarray(x)).to(dev)

    u = put(np.random.default_rng(0).standard_normal(nodes).astype(real))
    tc = put(conn)
    tB, tD = put(B.astype(real)), put(D.astype(real))
    qdata = {"bp1": put(wdet.astype(real)),
             "bp3": put(np.stack([G[..., i, j] for i, j in SYMMETRIC], axis=1).astype(real))}
    prepared = Connectivity(tc if dev == "cuda" else conn, nodes)
    bandwidth = None
    if dev == "cuda":
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        bandwidth = 2 * (1 << 30) / meta_timed(lambda: dst.copy_(src), a.repeat, sync)
        del src, dst
    result = {"meta": meta.run_meta(), "order": P, "points": Q, "nodes": nodes, "elements": elements,
              "dtype": a.dtype, "device": dev, "copy GB/s": None if bandwidth is None else bandwidth / 1e9,
              "rows": {}}
    itemsize = np.dtype(real).itemsize
    for kind in ("bp1", "bp3"):
        prog = irfuse.compile(os.path.join(ROOT, "examples", "highorder", f"{kind}.kas"),
                              backend="cuda" if dev == "cuda" else "cpu", dtype=a.dtype)
        q = qdata[kind]
        args = (u, prepared, tB, q) if kind == "bp1" else (u, prepared, tB, tD, *(q[:, k] for k in range(6)))
        if dev == "cpu":
            args = tuple(x.numpy() if isinstance(x, torch.Tensor) else x for x in args)
        out = prog(*args).y
        want = ref.bp1(u.cpu().double().numpy(), conn, P, wdet) if kind == "bp1" else \
            ref.bp3(u.cpu().double().numpy(), conn, P, G)
        error = float(np.abs(np.asarray(out.cpu() if hasattr(out, "cpu") else out) - want).max() / np.abs(want).max())
        contenders = {"irfuse": lambda prog=prog, args=args, out=out: prog(*args, out=out)}
        if not a.skip_peers:
            def scatter(ye, c):
                return torch.zeros(nodes, dtype=ye.dtype, device=ye.device).index_add_(0, c.reshape(-1).long(),
                                                                                      ye.reshape(-1))
            eager = (lambda kind=kind, q=q: sum_factorized(torch, torch.einsum, kind, u, tc.long(), tB, tD, q, scatter))
            contenders["torch eager"] = eager
            contenders["torch.compile"] = torch.compile(eager)
            try:
                import jax
                import jax.numpy as jnp

                if a.dtype == "f64":
                    jax.config.update("jax_enable_x64", True)
                ju, jc, jB, jD, jq = (jnp.asarray(x.cpu().numpy()) for x in (u, tc, tB, tD, q))

                def jscatter(ye, c):
                    return jnp.zeros(nodes, ye.dtype).at[c.reshape(-1)].add(ye.reshape(-1))

                jitted = jax.jit(lambda u_, c_, B_, D_, q_, kind=kind: sum_factorized(
                    jnp, jnp.einsum, kind, u_, c_, B_, D_, q_, jscatter))
                contenders["jax.jit"] = lambda f=jitted: f(ju, jc, jB, jD, jq).block_until_ready()
            except ImportError:
                pass
        row = {"irfuse's relative error": error}
        floor = floor_bytes(kind, nodes, elements, itemsize)
        for name, fn in contenders.items():
            got = fn() if name != "irfuse" else out
            got = np.asarray(got.cpu() if hasattr(got, "cpu") else got, dtype=np.float64)
            seconds = meta_timed(fn, a.repeat, sync)
            row[name] = {"ms": seconds * 1e3, "GDoF/s": nodes / seconds / 1e9,
                         "of the byte floor": None if bandwidth is None else floor / bandwidth / seconds,
                         "relative error": float(np.abs(got - want).max() / np.abs(want).max())}
            print(f"{kind} {name}: {seconds * 1e3:.3f} ms, {nodes / seconds / 1e9:.3f} GDoF/s", flush=True)
        result["rows"][kind] = row
    with open(a.json, "w") as f:
        meta.dump(result, f, indent=1)
    print(json.dumps({k: v for k, v in result.items() if k != "meta"}, indent=1))
    print(f"written {a.json}")
    return 0


def meta_timed(fn, repeat: int, sync) -> float:
    """Median seconds of `fn()` (synchronized), after one call."""
    fn()
    sync()
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        sync()
        times.append(time.perf_counter() - t0)
    return float(np.median(times))


if __name__ == "__main__":
    sys.exit(main())
