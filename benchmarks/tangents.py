"""Tangent matrices on the GPU: the P1 elasticity tangent assembled by `irfuse.tangent_matrix`
against the sparse builders users reach for, and the matrix-free tangent apply, every
contender in one run.

    python benchmarks/tangents.py [--cubes 64,128] [--repeat 10] [--skip-peers-above 2000000]
                                  [--skip-jax] [--json ...]

For each box of `--cubes` cubes a side (6 c^3 tetrahedra, Morton-ordered and renumbered;
float32 values, int32 indices), PyTorch CUDA tensors, a `Connectivity` made on the GPU:

1. irfuse: the first call (the pattern made and kept on the `Connectivity`, the programs
   compiled or loaded), then calls with `out=` (values rewritten in place): the median of
   `--repeat`, synchronized. Byte floor: the CSR values written once, plus what the element
   kernel reads (the connectivity, X and u once a node); "of floor" is the floor's time at
   the copy bandwidth measured in the same run over the call's time. Memory: the GPU memory
   in use (`cudaMemGetInfo`, PyTorch's freed blocks let go of first) after the first call
   less before it, against the matrix (values and indices) plus the inputs; with what a call
   with `out=` allocates on top, its peak; and the first call's peak allocation (the
   pattern made). The scatter of per-slot blocks (the path kept for programs the
   owner-computes kernel cannot run) is measured alike in the same run, and so is the
   program compiled with its reference gradients `dN` fixed (`constants=`), into a matrix of
   the same pattern (its values against the first's).
2. Peers from the same element blocks (E, 4, 3, 4, 3) (irfuse's element kernel's, made once
   and not timed): `cupyx.scipy.sparse.coo_matrix(...).tocsr()` and PyTorch's
   `sparse_coo_tensor(...).coalesce().to_sparse_csr()`, each timed and its peak pool memory
   taken (CuPy's pool, torch's allocator); above `--skip-peers-above` tetrahedra they are
   not run (the issue measured cupyx at 114.5 GB on 12.6 M tets, PyTorch out of memory).
   Each peer's matrix is checked against irfuse's to float32 rounding.
3. Hand-written owner-computes kernels (`assembly_kernels.cu`, `p1_elastic_tangent_rows*`; CuPy
   launches them): a thread per node (or node row) adds its elements' blocks into the node's
   rows in shared memory and writes them once, into irfuse's pattern, at blocks of 32, 64 and
   128 nodes: each checked against irfuse's values and for the same bits on a second call.
4. Matrix-free: `irfuse.linear_operator(...).matvec` and the tangent's diagonal
   (`irfuse.diagonal`, a Jacobi preconditioner's) against the residual call itself, and
   `jax.jvp` of the same residual in jax.numpy (`.at[].add`), jitted (for this linear
   residual that is `jax.jvp(jax.grad(energy))`).

First, per element (`--j2-elements`, 0 to skip): the consistent tangent of
`examples/j2_return.kas`, `irfuse.jacobian(..., of="sig", wrt="deps")` (d sig / d deps, 81
values, with sig and ep), called with `out=` on `--j2-elements` elements: its time against
its bytes (sig, deps, ep read; sig, ep and the tangent written: 440 bytes an element in
float32) at the copy bandwidth, and against a device copy of those bytes timed alike. Half
the elements yield (f > 0), in runs.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place
from assembly import LAMBDA, MU, copy_bandwidth, elasticity  # noqa: E402
from peers import ROOT, torch_sampler  # noqa: E402

os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")  # (JAX takes what it needs, no more)
DN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)


def timed(fn, repeat: int, sync) -> float:
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


def back_to_back_ms(fn, calls: int = 20, rounds: int = 7) -> list[float]:
    """Milliseconds a call of `fn` takes `calls` at a time back to back, not synchronized
    between them (`peers.torch_sampler`: CUDA events around each round), for each of `rounds`
    rounds."""
    once = torch_sampler(fn, (), warmup=0, back_to_back=calls)
    return [1e3 * once() for _ in range(rounds)]


def rows_kernel_reports() -> dict:
    """A dict that holds, under "rows", NVRTC's report (registers, spills) of the rows kernel
    compiled last from now on (`nvrtc._compile_once` wrapped): for the probes of the tangent's
    kernel under `results/matrices/`."""
    from irfuse.backend import nvrtc

    seen, real = {}, nvrtc._compile_once

    def noted(source, arch, opts):
        r = real(source, arch, opts)
        if "irf_tangent_rows" in r.resources:
            seen["rows"] = r.resources["irf_tangent_rows"]
        return r

    nvrtc._compile_once = noted
    return seen


def in_use(torch) -> int:
    free, total = torch.cuda.mem_get_info()
    return total - free


def mesh(torch, cubes: int):
    from irfuse.mesh import Connectivity, box_tetrahedra, renumber, reorder

    X, conn = box_tetrahedra(cubes)
    conn, X = renumber(conn, *reorder(conn, X, method="morton"), X)
    u = (1e-3 * np.random.default_rng(0).standard_normal(X.shape)).astype(np.float32)
    t = {"X": torch.from_numpy(X.astype(np.float32)).cuda(), "u": torch.from_numpy(u).cuda(),
         "dN": torch.from_numpy(DN).cuda()}
    return t, Connectivity(torch.from_numpy(conn).cuda(), len(X)), conn


def peers(torch, blocks, conn, nodes: int, want, repeat: int) -> dict:
    """cupyx COO->CSR and torch coalesce->CSR from the element blocks: seconds, peak bytes,
    agreement with irfuse's values."""
    out = {}
    e = len(conn)
    c = torch.from_numpy(conn).cuda().long()
    dof = (c[:, :, None] * 3 + torch.arange(3, device="cuda")).reshape(e, 12)
    rows = dof[:, :, None].expand(e, 12, 12).reshape(-1)
    cols = dof[:, None, :].expand(e, 12, 12).reshape(-1)
    vals = blocks.reshape(e, 12, 12).reshape(-1)
    size = nodes * 3
    scale = float(want.values().abs().max())
    try:
        import cupy
        import cupyx.scipy.sparse as cusparse

        pool = cupy.get_default_memory_pool()
        cr, cc, cv = (cupy.from_dlpack(a) for a in (rows.int(), cols.int(), vals))

        def cupy_build():
            return cusparse.coo_matrix((cv, (cr, cc)), shape=(size, size)).tocsr()

        pool.free_all_blocks()
        base = pool.total_bytes()
        m = cupy_build()
        cupy.cuda.runtime.deviceSynchronize()
        peak = pool.total_bytes() - base
        m.sort_indices()
        ok = bool(np.array_equal(m.indptr.get(), want.crow_indices().cpu().numpy()) and
                  float(abs(m.data.get() - want.values().cpu().numpy()).max()) < 1e-5 * scale)
        del m
        seconds = timed(cupy_build, repeat, cupy.cuda.runtime.deviceSynchronize)
        out["cupyx coo->csr"] = {"ms": seconds * 1e3, "peak GB": peak / 1e9, "agrees": ok}
        cr = cc = cv = cupy_build = None  # (its arrays let go before the next contender)
        pool.free_all_blocks()
    except ImportError:
        out["cupyx coo->csr"] = {"skipped": "cupy not installed"}
    except Exception as err:  # noqa: BLE001 -- (out of memory is a result)
        out["cupyx coo->csr"] = {"failed": f"{type(err).__name__}: {err}"[:200]}
    try:
        idx = torch.stack([rows, cols])

        def torch_build():
            return torch.sparse_coo_tensor(idx, vals, (size, size)).coalesce().to_sparse_csr()

        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        m = torch_build()
        torch.cuda.synchronize()
        peak = torch.cuda.max_memory_allocated() - base
        ok = bool(torch.equal(m.crow_indices().int(), want.crow_indices()) and
                  float((m.values() - want.values()).abs().max()) < 1e-5 * scale)
        del m
        seconds = timed(torch_build, repeat, torch.cuda.synchronize)
        out["torch coalesce->csr"] = {"ms": seconds * 1e3, "peak GB": peak / 1e9, "agrees": ok}
    except Exception as err:  # noqa: BLE001
        out["torch coalesce->csr"] = {"failed": f"{type(err).__name__}: {err}"[:200]}
    torch.cuda.empty_cache()
    return out


def by_scatter(torch, prog, t, conn, M, repeat: int, matrix_and_inputs: int) -> dict:
    """irfuse's assembly before the owner-computes kernel, run in the same process: the
    element blocks added by a compiled scatter through the pattern's per-slot map (the path
    `tangent_matrix` keeps for programs the kernel cannot run; forced here): seconds, memory
    kept over the matrix and inputs, agreement with the owner-computes values."""
    import irfuse
    import irfuse.api.tangents as tangents
    from irfuse.mesh import Connectivity

    os.environ[tangents.ROWS_SWITCH] = "0"  # (the scatter path, as for a program the kernel cannot run)
    try:
        prepared = Connectivity(torch.from_numpy(conn).cuda(), len(t["X"]))
        args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        before = in_use(torch)
        S = irfuse.tangent_matrix(prog, *args, wrt="u")
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        kept = in_use(torch) - before
        seconds = timed(lambda S=S: irfuse.tangent_matrix(prog, *args, wrt="u", out=S), repeat, torch.cuda.synchronize)
        scale = float(M.values().abs().max())
        out = {"ms": seconds * 1e3, "memory kept GB": kept / 1e9, "memory over matrix+inputs": kept / matrix_and_inputs,
               "max difference": float((S.values() - M.values()).abs().max()) / scale}
        del S, prepared
    finally:
        del os.environ[tangents.ROWS_SWITCH]
    torch.cuda.empty_cache()
    return out


def fixed_gradients(torch, t, prepared, M, repeat: int, floor_seconds: float, backend: str = "cuda",
                    sync=None) -> dict:
    """The same tangent from the program compiled with the reference gradients `dN` fixed
    (`constants=`: the rows kernel's slot code then folds their 0 and 1), into a matrix of the
    same pattern: ms a call with `out=`, its share of the byte floor, and how far its values are
    from `M`'s (the program given `dN` at the call)."""
    import irfuse

    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend=backend,
                          constants={"dN": DN})
    args = (t["X"], t["u"], prepared, LAMBDA, MU)
    F = irfuse.tangent_matrix(prog, *args, wrt="u")
    seconds = timed(lambda: irfuse.tangent_matrix(prog, *args, wrt="u", out=F), repeat,
                    sync or torch.cuda.synchronize)
    scale = float(M.values().abs().max())
    return {"ms": seconds * 1e3, "of floor": floor_seconds / seconds,
            "max difference": float((F.values() - M.values()).abs().max()) / scale,
            "same bits": bool(torch.equal(F.values(), M.values()))}


def hand_rows(torch, t, conn, M, repeat: int, blocks=(32, 64, 128)) -> dict:
    """The hand-written owner-computes assembly (`assembly_kernels.cu`,
    `p1_elastic_tangent_rows*`: a thread per node, or per node row, sums its rows in shared
    memory) into irfuse's pattern, at blocks of 32, 64 and 128 nodes: seconds, agreement with
    irfuse's values, the same bits on a second call, and the node-to-element lists it reads
    (made here, not timed)."""
    try:
        import cupy
    except ImportError:
        return {"skipped": "cupy not installed"}
    from assembly import KERNELS

    module = cupy.RawModule(code=open(KERNELS).read(), options=("-std=c++17",))
    ct = torch.from_numpy(conn).cuda()
    nodes = len(t["X"])
    keys = ct.reshape(-1).long()
    slots = torch.argsort(keys, stable=True).int()
    first = torch.zeros(nodes + 1, dtype=torch.int32, device="cuda")
    first[1:] = torch.cumsum(torch.bincount(keys, minlength=nodes), 0)
    indptr, indices = M.crow_indices(), M.col_indices()
    widest = int((indptr[1::3] - indptr[0:-1:3]).max()) // 3  # blocks in the longest node row
    want = M.values()
    values = torch.empty_like(want)
    scale = float(want.abs().max())
    out = {"lists bytes": (slots.numel() + first.numel()) * 4, "widest row blocks": widest}
    args = tuple(cupy.from_dlpack(a) for a in (t["X"], ct, first, slots, indptr, indices, values))
    for name, split, staged in (("p1_elastic_tangent_rows", 1, False), ("p1_elastic_tangent_rows_staged", 1, True),
                                ("p1_elastic_tangent_rows_split", 3, True)):
        if staged and widest > 32:
            out[name] = {"skipped": f"rows of {widest} blocks (32 staged)"}
            continue
        kernel = module.get_function(name)
        for block in blocks:
            n0 = torch.arange(0, nodes, block, device="cuda")
            chunk = indptr[3 * torch.clamp(n0 + block, max=nodes)] - indptr[3 * n0]
            shared = int(chunk.max()) * 4 + (block * split * 32 * 4 if staged else 0)
            if shared > 227 * 1024:
                out[f"{name} {block}"] = {"skipped": f"{shared} bytes of shared memory a block"}
                continue
            kernel.max_dynamic_shared_size_bytes = shared
            grid = (nodes + block - 1) // block

            def call(kernel=kernel, grid=grid, threads=block * split, shared=shared):
                with cupy.cuda.Stream.from_external(torch.cuda.current_stream()):
                    kernel((grid,), (threads,), (*args, np.float32(LAMBDA), np.float32(MU), np.int32(nodes)),
                           shared_mem=shared)

            values.fill_(float("nan"))
            call()
            torch.cuda.synchronize()
            got = values.clone()
            call()
            torch.cuda.synchronize()
            out[f"{name} {block}"] = {"ms": timed(call, repeat, torch.cuda.synchronize) * 1e3, "shared bytes": shared,
                                      "max error": float((got - want).abs().max()) / scale,
                                      "same bits": bool(torch.equal(got, values))}
    return out


def matrix_free(torch, prog, t, prepared, conn, repeat: int, skip_jax: bool) -> dict:
    import irfuse

    args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
    op = irfuse.linear_operator(prog, *args, wrt="u")
    v = torch.randn(t["u"].numel(), device="cuda")
    out = {"residual ms": timed(lambda: prog(*args), repeat, torch.cuda.synchronize) * 1e3,
           "tangent apply ms": timed(lambda: op.matvec(v), repeat, torch.cuda.synchronize) * 1e3,
           "tangent diagonal ms": timed(lambda: irfuse.diagonal(prog, *args, wrt="u"), repeat,
                                        torch.cuda.synchronize) * 1e3}
    if not skip_jax:
        try:
            import jax
            import jax.numpy as jnp

            X, c = jnp.asarray(t["X"].cpu().numpy()), jnp.asarray(conn)
            u, w = jnp.asarray(t["u"].cpu().numpy()), jnp.asarray(v.reshape(-1, 3).cpu().numpy())

            def at_add(f, cc):
                return jnp.zeros((len(X), 3), f.dtype).at[cc.reshape(-1)].add(f.reshape(-1, 3))

            def apply(XX, cc, uu, ww):
                return jax.jvp(lambda q: elasticity(jnp, XX, q, cc, LAMBDA, MU, at_add), (uu,), (ww,))[1]

            jitted = jax.jit(apply)
            out["jax.jvp ms"] = timed(lambda: jitted(X, c, u, w).block_until_ready(), repeat, lambda: None) * 1e3
        except ImportError:
            out["jax.jvp ms"] = None
    return out


def j2_tangent(torch, n: int, repeat: int, bandwidth: float) -> dict:
    """The consistent tangent of the J2 return mapping on `n` elements (see the module)."""
    import irfuse

    prog = irfuse.compile(irfuse.jacobian(os.path.join(ROOT, "examples", "j2_return.kas"), of="sig", wrt="deps"),
                          backend="cuda")
    g = torch.Generator(device="cuda").manual_seed(0)
    sig = torch.randn(n, 3, 3, device="cuda", generator=g) * 0.5
    sig = (sig + sig.transpose(1, 2)) / 2
    sig[n // 2:] *= 0.01  # (the second half stays elastic)
    deps = torch.randn(n, 3, 3, device="cuda", generator=g) * 1e-3
    deps = (deps + deps.transpose(1, 2)) / 2
    ep = torch.zeros(n, device="cuda")
    uniforms = (1.0, 2.0, 0.2, 0.5)  # G, K, sy0, H
    out = {"sig": torch.empty_like(sig), "ep": torch.empty_like(ep),
           "dsig_ddeps": torch.empty(n, 3, 3, 3, 3, device="cuda")}
    probe = torch.cat([sig[:2048], sig[-2048:]]), torch.cat([deps[:2048], deps[-2048:]]), ep[:4096]
    yielding = float((prog(*probe, *uniforms).ep > 0).float().mean())

    def call():
        prog(sig, deps, ep, *uniforms, out=out)

    seconds = timed(call, repeat, torch.cuda.synchronize)
    moved = n * 4 * (9 + 9 + 1 + 9 + 1 + 81)
    src = torch.empty(moved // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    copy = timed(lambda: dst.copy_(src), repeat, torch.cuda.synchronize)
    return {"elements": n, "ms": seconds * 1e3, "bytes a call": moved, "of copy bandwidth": moved / bandwidth / seconds,
            "of a copy of its bytes": copy / seconds, "yielding (2048 of each half)": yielding}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cubes", default="64,128")
    ap.add_argument("--repeat", type=int, default=10)
    ap.add_argument("--skip-peers-above", type=int, default=2_000_000)
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--j2-elements", type=int, default=4 * 1024 * 1024)
    ap.add_argument("--profile", action="store_true", help="print each size's kernels of one call")
    ap.add_argument("--json", default=meta.result_path("matrices"))
    a = ap.parse_args(argv)
    import torch

    import irfuse
    from irfuse.api.tangents import _element_blocks

    result = {"meta": meta.run_meta(), "copy GB/s": copy_bandwidth(torch) / 1e9, "sizes": {}}
    bandwidth = result["copy GB/s"] * 1e9
    if a.j2_elements:
        result["j2 tangent"] = j2_tangent(torch, a.j2_elements, a.repeat, bandwidth)
        print(json.dumps({"j2 tangent": result["j2 tangent"]}, indent=1), flush=True)
    prog = irfuse.compile(os.path.join(ROOT, "examples", "mesh", "p1_residual.kas"), backend="cuda")
    for cubes in (int(c) for c in a.cubes.split(",")):
        t, prepared, conn = mesh(torch, cubes)
        nodes = len(t["X"])
        args = (t["X"], t["u"], prepared, t["dN"], LAMBDA, MU)
        torch.cuda.synchronize()
        torch.cuda.empty_cache()  # (before and after alike: what the allocator holds freed is no one's)
        before = in_use(torch)
        torch.cuda.reset_peak_memory_stats()
        allocated = torch.cuda.memory_allocated()
        t0 = time.perf_counter()
        M = irfuse.tangent_matrix(prog, *args, wrt="u")
        torch.cuda.synchronize()
        first = time.perf_counter() - t0
        first_peak = torch.cuda.max_memory_allocated() - allocated
        tensors = torch.cuda.memory_allocated() - allocated  # (what stays: matrix, pattern, lists)
        torch.cuda.empty_cache()  # (what torch's allocator holds freed is no one's)
        kept = in_use(torch) - before
        seconds = timed(lambda M=M, args=args: irfuse.tangent_matrix(prog, *args, wrt="u", out=M), a.repeat,
                        torch.cuda.synchronize)
        if a.profile:
            from torch.profiler import ProfilerActivity, profile

            with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
                irfuse.tangent_matrix(prog, *args, wrt="u", out=M)
                torch.cuda.synchronize()
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25), flush=True)
        nnz = M.values().numel()
        matrix = nnz * 8 + (3 * nodes + 1) * 4
        inputs = conn.size * 4 + nodes * 24
        floor = nnz * 4 + inputs
        row = {"tets": len(conn), "nodes": nodes, "nnz": nnz, "matrix GB": matrix / 1e9,
               "first call s": first, "ms": seconds * 1e3, "floor ms": floor / bandwidth * 1e3,
               "of floor": floor / bandwidth / seconds, "memory kept GB": kept / 1e9,
               "memory over matrix+inputs": kept / (matrix + inputs)}
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        irfuse.tangent_matrix(prog, *args, wrt="u", out=M)
        torch.cuda.synchronize()
        extra = torch.cuda.max_memory_allocated() - base  # (what a call with out= allocates, at most)
        row["peak a call over matrix+inputs"] = (kept + extra) / (matrix + inputs)
        row["first call peak GB (pattern made)"] = first_peak / 1e9
        row["tensors kept GB"] = tensors / 1e9
        same = irfuse.tangent_matrix(prog, *args, wrt="u")
        row["same bits"] = bool(torch.equal(same.values(), M.values()))
        del same
        row["dN fixed when compiling"] = fixed_gradients(torch, t, prepared, M, a.repeat, floor / bandwidth)
        try:
            row["scatter of per-slot blocks"] = by_scatter(torch, prog, t, conn, M, a.repeat, matrix + inputs)
        except Exception as err:  # (recorded, as for the peers: the other contenders still run)
            row["scatter of per-slot blocks"] = {"failed": f"{type(err).__name__}: {err}"[:400]}
            print(f"scatter of per-slot blocks failed: {type(err).__name__}: {err}", flush=True)
        if len(conn) <= a.skip_peers_above:
            blocks = _element_blocks(prog, args, {}, "u", None, None, "benchmark")[0]
            row["peers"] = peers(torch, blocks, conn, nodes, M, max(3, a.repeat // 3))
            del blocks
        else:
            row["peers"] = {"skipped": f"above {a.skip_peers_above} tets"}
        row["hand-written rows"] = hand_rows(torch, t, conn, M, a.repeat)
        best = min((v["ms"] for v in row["hand-written rows"].values() if isinstance(v, dict) and "ms" in v),
                   default=None)
        if best:
            row["hand-written rows"]["of floor"] = floor / bandwidth / (best / 1e3)
        torch.cuda.empty_cache()
        row["matrix-free"] = matrix_free(torch, prog, t, prepared, conn, a.repeat, a.skip_jax)
        result["sizes"][str(len(conn))] = row
        print(json.dumps({len(conn): row}, indent=1), flush=True)
        del M, t, prepared
        torch.cuda.empty_cache()
    with open(a.json, "w") as f:
        meta.dump(result, f, indent=1)
    print(f"copy {result['copy GB/s']:.0f} GB/s; written {a.json}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
