"""The CEED bake-off problems BP1 (mass) and BP3 (Poisson), and their element operators alone
(BK1, BK3), at orders 1-8: irfuse's operators
against the same sum-factorized operator in PyTorch (eager and `torch.compile`) and JAX
(`jax.jit`) and a hand-written CUDA kernel of each (`bakeoff_kernels.cu`, float64), with the copy
bandwidth measured in the same run, one table and JSON.

    python benchmarks/bakeoff.py [--cells 40] [--orders 1,2,3] [--dtype f64|f32] [--device cuda|cpu]
                                 [--repeat 20] [--skip-peers] [--skip-hand] [--kinds bp1,bp3,bk1,bk3] [--plans 1]
                                 [--registers ptxas] [--tables inputs|constants] [--compile-only]
                                 [--profile-once] [--json ...]

The mesh: `irfuse.mesh.box_hexahedra(cells, order=p)` Morton-reordered, its quadrature data
(w detJ for BP1; the six entries of w detJ J^-1 J^-T for BP3, at (p+2)^3 Gauss points an element)
stored as the bake-off's BP3 stores them. Each contender computes y = A u with the gather and
the scatter (BP) and ye = A_e ue on each element's own values without them (BK). Reported per
contender (BP's irfuse programs also called with `scatter="atomic"`, their scatters added with
atomics: faster, and the bits vary from run to run): milliseconds a call (median, synchronized), DoFs a second (BP: nodes / time; BK:
the elements' own values / time), and the byte floor at the measured copy bandwidth over the
time: u read and y written once (BP: with the int32 connectivity), the stored quadrature data
read once; where the issue names a published rate (`PUBLISHED`: nekRS's BK3-like axhelm at
p = 7, libCEED's BP1 at p = 6), the ratio to it scaled by the bandwidths. The hand-written kernels
("hand-written CUDA"; on the GPU, in float64, through CuPy, left out by `--skip-hand`) are the layout
the field's published kernels use (a block of q x q threads an element with a column of its values
in registers) and irfuse's own mapping written by hand (a thread a line, the tables in constant
memory, the shared values at pitches that spare bank conflicts): what this GPU gives the same bytes
and arithmetic written by hand (BP's add into y with atomicAdd, so their bits vary from run to run). `--plans K` times the
search's K best plans of each operator (plan 0 as a call builds it), each checked as the
first: what a better choice among them would give; `--registers ptxas` adds the plan the search
settles on with ptxas's registers and spills of its kernels (`irfuse.compile(...,
registers="ptxas")`); `--tables constants` compiles irfuse's programs with their 1-D tables B
and D fixed (`irfuse.compile(..., constants=...)`: constant arrays of the kernels, which the
contractions then read along their summed axes; the peers still take them as arrays, as a
user's `jax.jit` would); `--compile-only` builds irfuse's programs into the cache and times
nothing (a GPU machine then loads them); `--profile-once` calls each irfuse program once more
between `cudaProfilerStart` and `cudaProfilerStop` and times nothing, for Nsight Compute's
`--profile-from-start off` (the counters `bakeoff_bounds.py --ncu` reads). Each irfuse row keeps its element kernels'
blocks and, on the GPU, ptxas's registers and spilled bytes a thread. irfuse's programs are `examples/highorder/operators.py`'s for each order (the files
`bp1.kas`, `bp3.kas` at order 3),
planned as any program: each element's calls spread over a few threads by the ops' mappings
(`row`, `line`: one thread a line along a tensor's first index); kernels giving a block to one
element are not written yet. `--device cpu` runs irfuse's CPU backend and
the peers on the CPU (a smoke run: the figures that count are the GPU's).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests"))
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place
from peers import ROOT  # noqa: E402
from tangents import timed  # noqa: E402 -- median seconds of a synchronized call

import highorder_reference as ref  # noqa: E402 -- the 1-D tables and the quadrature data

sys.path.insert(0, os.path.join(ROOT, "examples", "highorder"))

SYMMETRIC = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))

# The published rates the issue names, float64: (operator, order) -> (who and where, GDoF/s, the
# GPU's nominal memory bandwidth in GB/s). Scaled to this run by the copy bandwidth measured here
# over that nominal figure (the published machines' measured copy rate is not known here, and
# a nominal figure is above a measured one: the scaled rate is, if anything, low). nekRS's
# axhelm applies the Poisson operator to each element's own values, as BK3 does, with q = p + 1
# collocated points where these programs take q = p + 2 (more work a DoF here); libCEED's BP1
# gathers and scatters as BP1 does.
PUBLISHED = {("bk3", 7): ("nekRS axhelm, A100", 12.9, 1555.0),
             ("bp1", 6): ("libCEED cuda-gen, V100", 3.7, 900.0)}


def problem(cells: int, p: int, q: int):
    """(X, conn, B, D, wdet, G) of the Morton-ordered box of order p, float64 host arrays but
    conn int32."""
    from irfuse.mesh import box_hexahedra, renumber, reorder

    X, conn = box_hexahedra(cells, order=p)
    conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
    B, D, _ = ref.lagrange_tables(p, q)
    wdet, G = ref.geometric_factors(X, conn, p, q)
    return X, conn.astype(np.int32), B, D, wdet, G


def floor_bytes(kind: str, p: int, q: int, nodes: int, elements: int, itemsize: int) -> int:
    """u read and y written once (BP: nodal, with the int32 connectivity; BK: each element's own
    values), and the stored quadrature data read once."""
    stored = (1 if kind.endswith("1") else 6) * q**3
    if kind.startswith("bk"):
        return itemsize * elements * (2 * (p + 1) ** 3 + stored)
    return itemsize * (2 * nodes + elements * stored) + 4 * elements * (p + 1) ** 3


def element_operator(einsum, kind: str, ue, B, D, qdata):
    """ye = A_e ue for every element's [c, b, a] values with einsum in an array library (torch
    or jax.numpy): the peers' form of the examples' contractions (`kind` "1": BP1's mass,
    "3": BP3's Poisson operator with stored factors)."""
    if kind.endswith("1"):
        t = einsum("kc,ecba->ekba", B, ue)
        t = einsum("jb,ekba->ekja", B, t)
        uq = einsum("ia,ekja->ekji", B, t)
        v = uq * qdata
        t = einsum("ia,ekji->ekja", B, v)
        t = einsum("jb,ekja->ekba", B, t)
        return einsum("kc,ekba->ecba", B, t)
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
    return einsum("kc,ekba->ecba", B, ax + ay) + einsum("kc,ekba->ecba", D, az)


def sum_factorized(einsum, kind: str, u, conn, B, D, qdata, scatter):
    """y = A u: the element operator between the gather and the scatter (BP)."""
    e, n = conn.shape[0], B.shape[1]
    ye = element_operator(einsum, kind, u[conn].reshape(e, n, n, n), B, D, qdata)
    return scatter(ye.reshape(e, -1), conn)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cells", type=int, default=40, help="hexahedra per side ((p cells + 1)^3 nodes)")
    ap.add_argument("--orders", default="1,2,3", help="orders p (q = p + 2 points an axis), at most 9")
    ap.add_argument("--dtype", default="f64", choices=("f64", "f32"))
    ap.add_argument("--device", default="cuda", choices=("cuda", "cpu"))
    ap.add_argument("--repeat", type=int, default=20)
    ap.add_argument("--skip-peers", action="store_true")
    ap.add_argument("--skip-hand", action="store_true", help="leave out the hand-written CUDA kernels")
    ap.add_argument("--kinds", default="bp1,bp3,bk1,bk3", help="which operators, of bp1, bp3, bk1, bk3")
    ap.add_argument("--plans", type=int, default=1,
                    help="also time the search's next best plans, up to this many in all ('irfuse plan K')")
    ap.add_argument("--registers", default=None, choices=("ptxas",),
                    help="also time the plan the search settles on with ptxas's registers and spills of its "
                         "kernels ('irfuse, ptxas figures')")
    ap.add_argument("--compile-only", action="store_true",
                    help="build irfuse's programs (filling the cache a later run loads them from) and time nothing")
    ap.add_argument("--profile-once", action="store_true",
                    help="call each irfuse program once between cudaProfilerStart and Stop (for ncu's "
                         "--profile-from-start off) and time nothing")
    ap.add_argument("--tables", default="inputs", choices=("inputs", "constants"),
                    help="irfuse's 1-D tables B and D: inputs of each call, or fixed when compiling (constants=)")
    ap.add_argument("--json", default=None)
    a = ap.parse_args(argv)
    unknown = set(a.kinds.split(",")) - {"bp1", "bp3", "bk1", "bk3"}
    if unknown:
        ap.error(f"--kinds: {', '.join(sorted(unknown))} not among bp1, bp3, bk1, bk3")
    if a.profile_once and a.device != "cuda":
        ap.error("--profile-once: the profiler's range is the GPU's (--device cuda)")
    if a.plans < 1:
        ap.error(f"--plans: at least 1 (the plan a call builds), not {a.plans}")
    if a.compile_only:
        for p in (int(x) for x in a.orders.split(",")):
            for kind in a.kinds.split(","):
                t0 = time.perf_counter()
                programs = irfuse_programs(kind, p, p + 2, a)
                print(f"p={p} {kind}: {len(programs)} programs in {time.perf_counter() - t0:.1f} s", flush=True)
        return 0
    import torch

    dev = a.device
    sync = torch.cuda.synchronize if dev == "cuda" else (lambda: None)
    bandwidth = None
    if dev == "cuda":
        src = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
        dst = torch.empty_like(src)
        bandwidth = 2 * (1 << 30) / timed(lambda: dst.copy_(src), a.repeat, sync)
        del src, dst
    result = {"meta": meta.run_meta(), "dtype": a.dtype, "device": dev, "cells": a.cells, "tables": a.tables,
              "copy GB/s": None if bandwidth is None else bandwidth / 1e9, "orders": {}}
    for p in (int(x) for x in a.orders.split(",")):
        result["orders"][str(p)] = one_order(torch, p, p + 2, a, sync, bandwidth)
    path = a.json or meta.result_path("highorder")
    with open(path, "w") as f:
        meta.dump(result, f, indent=1)
    print(f"written {path}")
    return 0


def irfuse_programs(kind: str, p: int, q: int, a, tables: dict | None = None) -> dict:
    """irfuse's contenders for one operator: the plan a call builds, with `--plans K` the
    search's next best after it ('irfuse plan K'), and with `--registers ptxas` the plan the
    search settles on with ptxas's figures of its kernels (`registers="ptxas"`); `tables`: the
    1-D tables fixed when compiling (`constants=`, `--tables constants`)."""
    import irfuse
    from irfuse.passes.fuse_partition import NoSuchPlan
    from irfuse.passes.registry import partition_pipeline
    from irfuse.planner.profiles import DEFAULT_BATCH

    import operators  # (examples/highorder/operators.py)

    make, dev = getattr(operators, f"{kind}_source"), a.device

    def build(plan: int, registers=None):
        """Plan 0 as a call builds it; with `--plans`, the search's next best after it."""
        pipeline = None if plan == 0 else partition_pipeline(a.plans, plan, 8, DEFAULT_BATCH,
                                                             "h100" if dev == "cuda" else "cpu")
        # constants= only when fixing tables: a head without it (bakeoff_ab.sh's A/B) runs the rest
        fixed = {"constants": tables} if tables else {}
        return irfuse.compile(make(p, q), backend="cuda" if dev == "cuda" else "cpu", dtype=a.dtype,
                              filename=f"{kind}_p{p}.kas", pipeline=pipeline, registers=registers, **fixed)

    programs = {"irfuse": build(0)}
    for k in range(1, a.plans):  # each checked and timed as the first
        try:
            programs[f"irfuse plan {k}"] = build(k)
        except NoSuchPlan:
            break
    if a.registers == "ptxas":
        programs["irfuse, ptxas figures"] = build(0, "ptxas")
    return programs


def one_order(torch, p: int, q: int, a, sync, bandwidth) -> dict:
    """BP1, BP3, BK1 and BK3 at order p: every contender timed and checked against the reference."""
    from irfuse.mesh import Connectivity

    real = np.float64 if a.dtype == "f64" else np.float32
    X, conn, B, D, wdet, G = problem(a.cells, p, q)
    nodes, elements, n = len(X), len(conn), p + 1
    dev = a.device

    def put(x):
        return torch.from_numpy(np.ascontiguousarray(x)).to(dev)

    u = put(np.random.default_rng(0).standard_normal(nodes).astype(real))
    tc = put(conn)
    ue = u[tc.long()].reshape(elements, n, n, n).contiguous()  # (BK: each element's own values)
    own = np.arange(elements * n**3).reshape(elements, n**3)  # (their numbering as nodes of their own)
    tB, tD = put(B.astype(real)), put(D.astype(real))
    qdata = {"1": put(wdet.astype(real)),
             "3": put(np.stack([G[..., i, j] for i, j in SYMMETRIC], axis=1).astype(real))}
    # irfuse reads each geometric factor as its own contiguous array (a column of the stack is a
    # strided view, which a program over a mesh on the GPU refuses).
    columns = tuple(qdata["3"][:, k].contiguous() for k in range(6))
    prepared = Connectivity(tc if dev == "cuda" else conn, nodes)
    out_rows = {"nodes": nodes, "elements": elements, "points": q}
    itemsize = np.dtype(real).itemsize
    for kind in a.kinds.split(","):
        fixed = a.tables == "constants"
        programs = irfuse_programs(kind, p, q, a, ({"B": B} if kind.endswith("1") else {"B": B, "D": D}) if fixed else None)
        qd, mesh = qdata[kind[-1]], kind.startswith("bp")
        given = (u, prepared) if mesh else (ue,)
        tables = () if fixed else (tB,) if kind.endswith("1") else (tB, tD)
        args = (*given, *tables, qd) if kind.endswith("1") else (*given, *tables, *columns)
        if dev == "cpu":
            args = tuple(x.numpy() if isinstance(x, torch.Tensor) else x for x in args)
        outs = {name: prog(*args)[prog.outputs[0]] for name, prog in programs.items()}
        if a.profile_once:  # (one call of each, its kernels alone in the profiler's range)
            for name, prog in programs.items():
                sync()
                torch.cuda.profiler.start()
                prog(*args, out=outs[name])
                sync()
                torch.cuda.profiler.stop()
            out_rows[kind] = {name: {"kernels": kernel_facts(prog)} for name, prog in programs.items()}
            continue
        host = (u if mesh else ue).cpu().double().numpy().reshape(-1)
        conn_of = conn if mesh else own
        want = ref.bp1(host, conn_of, p, wdet) if kind.endswith("1") else ref.bp3(host, conn_of, p, G)
        contenders = {name: (lambda prog=prog, out=outs[name]: prog(*args, out=out)) for name, prog in programs.items()}
        if mesh:  # (the same programs called with scatter="atomic": added with atomics, bits not reproducible)
            for name, prog in programs.items():
                out = prog(*args, scatter="atomic")[prog.outputs[0]]
                contenders[f'{name}, scatter="atomic"'] = (
                    lambda prog=prog, out=out: prog(*args, out=out, scatter="atomic")[prog.outputs[0]])
        if dev == "cuda" and a.dtype == "f64" and not a.skip_hand:
            contenders.update(hand_written(torch, kind, p, q, u if mesh else ue, tc, tB, tD,
                                           qd if kind.endswith("1") else columns, nodes))
        if not a.skip_peers:
            contenders.update(peers(torch, kind, u if mesh else ue, tc, tB, tD, qd, nodes, a.dtype))
        row = {}
        dofs = nodes if mesh else elements * n**3
        floor = floor_bytes(kind, p, q, nodes, elements, itemsize)
        for name, fn in contenders.items():
            got = outs[name] if name in outs else fn()
            got = np.asarray(got.cpu() if hasattr(got, "cpu") else got, dtype=np.float64).reshape(-1)
            seconds = timed(fn, a.repeat, sync)
            row[name] = {"ms": seconds * 1e3, "GDoF/s": dofs / seconds / 1e9,
                         "of the byte floor": None if bandwidth is None else floor / bandwidth / seconds,
                         "relative error": float(np.abs(got - want).max() / np.abs(want).max())}
            if name in programs:
                row[name]["kernels"] = kernel_facts(programs[name])
            published = PUBLISHED.get((kind, p))
            if published and bandwidth is not None:
                who, rate, nominal = published
                row[name]["of the published rate scaled"] = (dofs / seconds / 1e9) / (rate * bandwidth / 1e9 / nominal)
                row[name]["published"] = who
            print(f"p={p} {kind} {name}: {seconds * 1e3:.3f} ms, {dofs / seconds / 1e9:.3f} GDoF/s, error "
                  f"{row[name]['relative error']:.1e}", flush=True)
        out_rows[kind] = row
    return out_rows


def kernel_facts(prog) -> list[dict]:
    """Each element kernel of an irfuse program: its block (bx threads an element, by elements),
    the resident blocks its launch bounds ask, and where NVRTC compiled it, ptxas's registers
    and spilled bytes a thread and its static shared memory: what bounds these kernels (NOTES,
    High-order elements), kept beside each time."""
    out = []
    for k in prog.artifact.kernels:
        if not k.calls:
            continue  # (the scatter's and the checks' kernels)
        facts = {"name": k.name, "bx": k.bx, "by": k.by, "min_blocks": k.min_blocks}
        r = prog.artifact.resources(k.name)
        if r is not None:
            facts.update(registers=r.registers, spilled_bytes=r.spill_stores + r.spill_loads,
                         shared_bytes=r.shared_bytes)
        out.append(facts)
    return out


HAND = os.path.join(os.path.dirname(os.path.abspath(__file__)), "bakeoff_kernels.cu")


def hand_written(torch, kind: str, p: int, q: int, u, tc, tB, tD, qd, nodes: int) -> dict:
    """The hand-written kernels of `kind` at order p (`bakeoff_kernels.cu`), as callables on the
    caller's stream: "a block an element" (q x q threads an element, a column of its values in
    registers: the published kernels' layout), "lines" (a thread a line along the axis each
    step contracts, the tables in constant memory, the shared values at pitches that spare bank
    conflicts: irfuse's own mapping with its tables fixed, written by hand) and for BP3/BK3 "lines,
    the factors read coalesced" (the contraction along the first axis a thread a point, each
    thread's rows of the tables in registers, so that the six factors are read along their
    fastest axis; back along it by lines). `qd` the quadrature data (BP3/BK3: the six factors'
    arrays). Empty without CuPy."""
    try:
        import cupy
    except ImportError:
        return {}
    mesh = kind.startswith("bp")
    flag = "true" if mesh else "false"
    names = {"a block an element": f"bake{kind[-1]}<{p + 1}, {q}, {flag}>",
             "lines": f"lines{kind[-1]}<{p + 1}, {q}, {flag}>"}
    if kind.endswith("3"):  # (its values fit a block's 48 KB up to order 7)
        names["lines, the factors read coalesced"] = f"lines3<{p + 1}, {q}, {flag}, true>"
    with open(HAND) as f:
        code = f.read()
    elements = tc.shape[0]
    y = torch.empty(nodes, dtype=u.dtype, device=u.device) if mesh else torch.empty_like(u)
    tables = (tB,) if kind.endswith("1") else (tB, tD)
    data = qd if isinstance(qd, tuple) else (qd,)
    out = {}
    for form, name in names.items():
        try:
            module = cupy.RawModule(code=code, options=("-std=c++17",), name_expressions=[name])
            kernel = module.get_function(name)
        except cupy.cuda.compiler.CompileException as e:
            print(f"p={p} {kind} hand-written CUDA, {form}: not built ({str(e).splitlines()[-1]})", flush=True)
            continue
        for symbol, table in (("cB", tB), ("cD", tD)):  # (the lines' tables, in constant memory)
            words = cupy.asarray(table).ravel()
            module.get_global(symbol).copy_from_device(words.data, words.nbytes)
        if form.startswith("lines"):
            per_block = kernel.max_threads_per_block // (q * q)  # (its launch bounds: the elements a block)
            grid, block = ((elements + per_block - 1) // per_block,), (per_block * q * q,)
            args = (*[cupy.asarray(x) for x in (u, tc, *data, y)], np.int64(elements))
        else:
            grid, block = (elements,), (q, q)
            args = tuple(cupy.asarray(x) for x in (u, tc, *tables, *data, y))

        def call(kernel=kernel, grid=grid, block=block, args=args):
            if mesh:
                y.zero_()
            with cupy.cuda.Stream.from_external(torch.cuda.current_stream()):
                kernel(grid, block, args)
            return y

        out[f"hand-written CUDA, {form}" + (" (atomicAdd)" if mesh else "")] = call
    return out


def peers(torch, kind: str, u, tc, tB, tD, qd, nodes: int, dtype: str) -> dict:
    """The same operator in torch (eager, `torch.compile`) and `jax.jit`, as callables (BK: `u`
    holds each element's values and nothing is gathered or scattered)."""
    mesh = kind.startswith("bp")

    def scatter(ye, c):
        return torch.zeros(nodes, dtype=ye.dtype, device=ye.device).index_add_(0, c.reshape(-1).long(),
                                                                              ye.reshape(-1))

    long_conn = tc.long()

    def eager():
        if mesh:
            return sum_factorized(torch.einsum, kind, u, long_conn, tB, tD, qd, scatter)
        return element_operator(torch.einsum, kind, u, tB, tD, qd)

    out = {"torch eager": eager, "torch.compile": torch.compile(eager)}
    try:
        import jax
        import jax.numpy as jnp
    except ImportError:
        return out
    if dtype == "f64":
        jax.config.update("jax_enable_x64", True)
    ju, jc, jB, jD, jq = (jnp.asarray(x.cpu().numpy()) for x in (u, tc, tB, tD, qd))

    def jscatter(ye, c):
        return jnp.zeros(nodes, ye.dtype).at[c.reshape(-1)].add(ye.reshape(-1))

    if mesh:
        jitted = jax.jit(lambda u_, c_, B_, D_, q_: sum_factorized(jnp.einsum, kind, u_, c_, B_, D_, q_, jscatter))
    else:
        jitted = jax.jit(lambda u_, c_, B_, D_, q_: element_operator(jnp.einsum, kind, u_, B_, D_, q_))
    out["jax.jit"] = lambda: jitted(ju, jc, jB, jD, jq).block_until_ready()
    return out


if __name__ == "__main__":
    sys.exit(main())
