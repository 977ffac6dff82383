"""The element examples (a P1 tetrahedron's strain and stress, a Neo-Hookean stress, J2 radial
return, an 8-node hexahedron over 8 quadrature points) in irfuse, hand-written CUDA, PyTorch and
JAX, in one run, float32 and float64.

    python benchmarks/element_codes.py [--n 4194304] [--repeat 30] [--rounds 5] [--dtypes f32 f64]
                                       [--examples p1_elastic ...] [--skip-jax] [--json element_codes.json]

For every example and element type, on the same data (arrays of structures, `(N, *shape)`;
physical values: elements near the reference element, deformation gradients near the
identity, positive material constants):
- irfuse: the example's default plan through `irfuse.compile` (the front door), called on
  PyTorch tensors with `out=`;
- hand-written: `element_kernels.cu`, one thread per element with every value in registers,
  compiled by NVRTC through CuPy and launched on the same stream; for hex8 also the same
  math with the block's elements staged through shared memory both ways (coalesced, as
  irfuse's kernels are), and the faster of the two is the one irfuse is compared with;
- torch eager, torch.compile and jax.jit of the same math written with batched array ops
  (determinant and inverse in closed form, as the kernels compute them, which Inductor and
  XLA can fuse; `torch.linalg.inv` would call a batched LU per 3x3 matrix instead).
Every contender's outputs are checked against the float64 NumPy reference of the example
(the first 100,000 elements). Times are medians of single calls timed with CUDA events (JAX:
host clock around dispatch and `block_until_ready`), contenders visited in turns. The
effective bandwidth counts each per-element input read once and each output written once
(uniform values: nothing), against a device-to-device copy of 1 GiB timed on the device alone.

An example is memory-bound where its bytes at the copy rate take longer than its arithmetic at
the GPU's peak rate (the planner's profile: flops of every op, a division, square root,
logarithm or exponential counted as the profile's slow-op flops), else compute-bound.
Targets (issue 39): memory-bound ones at 90% of the copy bandwidth or more; compute-bound ones
within 1.15x of the hand-written kernel; at least 2x the best peer. The bandwidth is judged as
the seed workloads' is: one call against a copy of the same bytes timed the same way (from
the host, one launch), whose fixed costs a 1 GiB copy amortizes; the fraction of the 1 GiB copy
and both for 10 calls back to back are in the table too. Where the best peer already moves the
bytes at more than half the copy bandwidth, 2x is out of any implementation's reach: the
report says what fraction of the copy bandwidth it would take.
"""

from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peers import ROOT, interleaved_medians, jax_sampler, torch_sampler  # noqa: E402
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

EXAMPLES = ("p1_elastic", "neo_hookean", "j2_return", "hex8")
SAME_BYTES = "(copy of the same bytes)"
HAND_STAGED = "hand-written CUDA, staged"
HANDS = ("hand-written CUDA", HAND_STAGED)
YARDSTICKS = ("irfuse x10", SAME_BYTES, SAME_BYTES + " x10")
KERNELS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "element_kernels.cu")


# --- data ---------------------------------------------------------------------------------


def _hex8_tables() -> tuple[np.ndarray, np.ndarray]:
    """dN[q] (8 nodes x 3) at the 2x2x2 Gauss points of the reference cube [-1, 1]^3, and w[q]."""
    corners = np.array([[-1, -1, -1], [1, -1, -1], [1, 1, -1], [-1, 1, -1],
                        [-1, -1, 1], [1, -1, 1], [1, 1, 1], [-1, 1, 1]], float)
    g = 1 / np.sqrt(3)
    points = np.array([[a, b, c] for c in (-g, g) for b in (-g, g) for a in (-g, g)])
    dN = np.zeros((8, 8, 3))
    for q, (x, y, z) in enumerate(points):
        for a, (xa, ya, za) in enumerate(corners):
            dN[q, a] = [xa * (1 + ya * y) * (1 + za * z), ya * (1 + xa * x) * (1 + za * z),
                        za * (1 + xa * x) * (1 + ya * y)]
    return dN / 8, np.ones(8)


def inputs_of(name: str, n: int, seed: int = 1) -> dict[str, np.ndarray]:
    """Physical float64 inputs of an example, by input name (uniform ones without a batch axis)."""
    rng = np.random.default_rng(seed)
    if name == "p1_elastic":
        ref = np.array([[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
        dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
        return {"X": ref + 0.1 * rng.uniform(-1, 1, (n, 4, 3)), "u": 0.01 * rng.uniform(-1, 1, (n, 4, 3)),
                "dN": dN, "lam": np.array(1.5), "mu": np.array(0.8)}
    if name == "neo_hookean":
        return {"F": np.eye(3) + 0.2 * rng.uniform(-1, 1, (n, 3, 3)), "mu": np.array(0.8), "lam": np.array(1.5)}
    if name == "j2_return":
        return {"sig": rng.uniform(-1, 1, (n, 3, 3)), "deps": 0.1 * rng.uniform(-1, 1, (n, 3, 3)),
                "ep": rng.uniform(0, 0.1, n), "G": np.array(1.0), "K": np.array(1.6), "sy0": np.array(1.2),
                "H": np.array(0.1)}
    if name == "hex8":
        dN, w = _hex8_tables()
        corners = np.array([[0, 0, 0], [1, 0, 0], [1, 1, 0], [0, 1, 0], [0, 0, 1], [1, 0, 1], [1, 1, 1], [0, 1, 1]],
                           float)
        return {"X": corners + 0.1 * rng.uniform(-1, 1, (n, 8, 3)), "u": 0.01 * rng.uniform(-1, 1, (n, 8, 3)),
                "dN": dN, "w": w}
    raise ValueError(name)


# --- the peers' math (batched array ops; closed-form det and inverse) -----------------------


def array_fns(xp, stack, eye):
    """The four examples over an array module (torch or jax.numpy): `stack(list, axis)`,
    `eye(n, like)`. Operands in the examples' input order; results in their output order."""
    def det3(a):
        return (a[..., 0, 0] * (a[..., 1, 1] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 1])
                - a[..., 0, 1] * (a[..., 1, 0] * a[..., 2, 2] - a[..., 1, 2] * a[..., 2, 0])
                + a[..., 0, 2] * (a[..., 1, 0] * a[..., 2, 1] - a[..., 1, 1] * a[..., 2, 0]))

    def inv3(a, d):
        def m(i, j, k, l):  # noqa: E741 -- the minor's entries
            return a[..., i, j] * a[..., k, l] - a[..., i, l] * a[..., k, j]
        rows = [[m(1, 1, 2, 2), -m(0, 1, 2, 2), m(0, 1, 1, 2)],
                [-m(1, 0, 2, 2), m(0, 0, 2, 2), -m(0, 0, 1, 2)],
                [m(1, 0, 2, 1), -m(0, 0, 2, 1), m(0, 0, 1, 1)]]
        return stack([stack(r, -1) for r in rows], -2) / d[..., None, None]

    def T(a):
        return a.swapaxes(-1, -2) if hasattr(a, "swapaxes") else a.transpose(-1, -2)

    def trace(a):
        return a[..., 0, 0] + a[..., 1, 1] + a[..., 2, 2]

    def p1_elastic(X, u, dN, lam, mu):
        J = xp.einsum("nai,aj->nij", X, dN)
        det = det3(J)
        G = xp.einsum("ak,nkj->naj", dN, inv3(J, det))
        H = xp.einsum("nai,naj->nij", u, G)
        eps = 0.5 * (H + T(H))
        sig = 2 * mu * eps + (lam * trace(eps))[:, None, None] * eye(3, X)
        return eps, sig, det * 0.16666666666666666

    def neo_hookean(F, mu, lam):
        J = det3(F)
        logJ = xp.log(J)
        FiT = T(inv3(F, J))
        a = (lam * logJ)[:, None, None]
        P = mu * (F - FiT) + a * FiT
        C = xp.einsum("nki,nkj->nij", F, F)
        Ci = inv3(C, det3(C))
        S = mu * (eye(3, F) - Ci) + a * Ci
        W = 0.5 * ((trace(C) - 3) * mu + lam * logJ * logJ) - mu * logJ
        return P, S, W

    def j2_return(sig, deps, ep, G, K, sy0, H):
        I3 = eye(3, sig)
        s = sig - (trace(sig) / 3)[:, None, None] * I3 + 2 * G * (deps - (trace(deps) / 3)[:, None, None] * I3)
        p = trace(sig) * 0.3333333333333333 + K * trace(deps)
        q = xp.sqrt((s * s).sum((-2, -1))) * 1.224744871391589
        f = q - (sy0 + H * ep)
        dg = xp.where(f > 0, f / (3 * G + H), 0 * f)
        s = s - (3 * G * dg / q)[:, None, None] * s
        return s + p[:, None, None] * I3, ep + dg

    def hex8(X, u, dN, w):
        J = xp.einsum("nai,qaj->nqij", X, dN)
        det = det3(J)
        G = xp.einsum("qak,nqkj->nqaj", dN, inv3(J, det))
        H = xp.einsum("nai,nqaj->nqij", u, G)
        eps = 0.5 * (H + T(H))
        dv = det * w
        vol = dv.sum(1)
        return eps, vol, xp.einsum("nq,nqij->nij", dv, eps) / vol[:, None, None]

    return {"p1_elastic": p1_elastic, "neo_hookean": neo_hookean, "j2_return": j2_return, "hex8": hex8}


def torch_fns():
    import torch

    return array_fns(torch, lambda xs, axis: torch.stack(xs, axis),
                     lambda k, like: torch.eye(k, dtype=like.dtype, device=like.device))


def jax_fns():
    import jax.numpy as jnp

    return array_fns(jnp, lambda xs, axis: jnp.stack(xs, axis), lambda k, like: jnp.eye(k, dtype=like.dtype))


# --- the measurement ------------------------------------------------------------------------


def program_flops(prog, profile, itemsize: int) -> float:
    """Flops of one element of the program (slow operations weighted as the profile says)."""
    from irfuse.dialects import kas
    from irfuse.library.catalogue import default_library
    from irfuse.planner.cost import op_flops

    lib = default_library()
    total = 0.0
    for op in prog.compiled.reference_program.walk():
        if isinstance(op, kas.CallOp):
            trips = 1
            parent = op.parent_op()
            while parent is not None and not isinstance(parent, kas.ProgramOp):
                if isinstance(parent, kas.LoopOp):
                    trips *= parent.trip_count.data
                parent = parent.parent_op()
            if not kas.is_uniform(op.res):
                total += trips * op_flops(lib.get(op.op_name), profile, itemsize)
    return total


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=4_194_304)
    ap.add_argument("--repeat", type=int, default=30)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--dtypes", nargs="+", default=["f32", "f64"])
    ap.add_argument("--examples", nargs="+", default=list(EXAMPLES))
    ap.add_argument("--skip-jax", action="store_true")
    ap.add_argument("--skip-compile", action="store_true", help="leave out torch.compile")
    ap.add_argument("--json", default=meta.result_path("element-codes"))
    args = ap.parse_args(argv)

    os.environ.setdefault("XLA_PYTHON_CLIENT_PREALLOCATE", "false")
    import cupy
    import torch
    from rich.console import Console
    from rich.table import Table

    import irfuse
    from irfuse.planner.profiles import load_profile
    from irfuse.runtime.cuda_device import measure_copy_bandwidth
    from irfuse.verification.reference import run_references
    from irfuse.verification.verify import check_outputs

    if not args.skip_jax:
        import jax

        jax.config.update("jax_enable_x64", True)
        # (XLA's default on GPUs multiplies float32 matrices in TF32, which misses float32's
        # accuracy: the reference check fails; torch keeps float32 unless asked.)
        jax.config.update("jax_default_matmul_precision", "highest")
        jfns = jax_fns()
    console = Console(width=200)
    torch.cuda.init()
    tfns = torch_fns()
    source = open(KERNELS).read()
    rows, copy_bw = [], None
    for dtype in args.dtypes:
        np_t, torch_t, real = ((np.float32, torch.float32, "float") if dtype == "f32"
                               else (np.float64, torch.float64, "double"))
        module = cupy.RawModule(code=source, options=(f"-Dreal={real}", "-std=c++17"))
        for name in args.examples:
            path = os.path.join(ROOT, "examples", f"{name}.kas")
            prog = irfuse.compile(path, backend="cuda", dtype=dtype, n=args.n)
            profile = load_profile("h200" if "H200" in torch.cuda.get_device_name() else "h100")
            dev = prog.opened_device()
            if copy_bw is None:
                copy_bw = measure_copy_bandwidth(dev.drv)
            host = {k: np.array(v, np_t) for k, v in inputs_of(name, args.n).items()}  # (0-d stays 0-d)
            tensors = {k: torch.from_numpy(host[k]).cuda() for k in prog.inputs}
            ordered = [tensors[k] for k in prog.inputs]
            outs = [torch.empty((args.n, *prog.shapes[k]), dtype=torch_t, device="cuda") for k in prog.outputs]
            sample = {k: v if k in prog.uniform else v[:100_000] for k, v in host.items()}
            reference = run_references(prog.compiled.reference_program, sample, dtype)

            def verdict(results) -> str:
                got = {k: np.asarray(r[:100_000].detach().cpu() if hasattr(r, "detach") else r[:100_000])
                       for k, r in zip(prog.outputs, results)}
                checks = check_outputs(got, reference, dtype)
                return "ok" if all(c.ok for c in checks) else "; ".join(c.describe() for c in checks if not c.ok)

            prog(*ordered, out=outs)
            torch.cuda.synchronize()
            checks = {"irfuse": verdict(outs)}

            def irfuse_call(*a, prog=prog, outs=outs):
                prog(*a, out=outs)
            samplers = {"irfuse": torch_sampler(irfuse_call, ordered)}
            # hand-written: one thread per element, on torch's stream
            kernel = module.get_function(name)
            hand_outs = [torch.empty_like(o) for o in outs]
            pointers = [cupy.asarray(t) for t in ordered] + [cupy.asarray(o) for o in hand_outs]
            block = 128
            grid = (args.n + block - 1) // block

            def hand(*_, kernel=kernel, pointers=pointers, grid=grid):
                with cupy.cuda.Stream.from_external(torch.cuda.current_stream()):
                    kernel((grid,), (block,), (*pointers, np.int64(args.n)))
            hand()
            torch.cuda.synchronize()
            checks["hand-written CUDA"] = verdict(hand_outs)
            samplers["hand-written CUDA"] = torch_sampler(hand, ordered)
            if name == "hex8":
                # The same math with the block's elements staged through shared memory as
                # irfuse's kernels do (coalesced), HEX8_BY = 64 elements a block.
                staged = module.get_function("hex8_staged")
                staged_grid = (args.n + 63) // 64

                def hand_staged(*_, kernel=staged, pointers=pointers, grid=staged_grid):
                    with cupy.cuda.Stream.from_external(torch.cuda.current_stream()):
                        kernel((grid,), (64,), (*pointers, np.int64(args.n)))
                for o in hand_outs:
                    o.zero_()
                hand_staged()
                torch.cuda.synchronize()
                checks[HAND_STAGED] = verdict(hand_outs)
                samplers[HAND_STAGED] = torch_sampler(hand_staged, ordered)
            peers = {"torch eager": tfns[name]}
            if not args.skip_compile:
                peers["torch.compile"] = torch.compile(tfns[name])
            for k, fn in peers.items():
                checks[k] = verdict(fn(*ordered))
                samplers[k] = torch_sampler(fn, ordered)
            if not args.skip_jax:
                jargs = [jax.device_put(host[k]) for k in prog.inputs]
                jfn = jax.jit(jfns[name])
                checks["jax.jit"] = verdict(jfn(*jargs))
                samplers["jax.jit"] = jax_sampler(jfn, jargs)
            itemsize = np.dtype(np_t).itemsize
            words = (sum(int(np.prod(prog.shapes[k])) for k in prog.inputs if k not in prog.uniform)
                     + sum(int(np.prod(prog.shapes[k])) for k in prog.outputs))
            nbytes = itemsize * args.n * words
            # Yardsticks timed as the contenders are: a copy of the same bytes (half read, half
            # written) from the host, and irfuse and that copy 10 times back to back (a time
            # loop's steady state, where each launch overlaps the run before it).
            src = torch.empty(nbytes // 2, dtype=torch.uint8, device="cuda")
            dst = torch.empty_like(src)
            samplers[SAME_BYTES] = torch_sampler(lambda dst=dst, src=src: dst.copy_(src), [])
            samplers[SAME_BYTES + " x10"] = torch_sampler(lambda dst=dst, src=src: dst.copy_(src), [],
                                                          back_to_back=10)
            samplers["irfuse x10"] = torch_sampler(irfuse_call, ordered, back_to_back=10)
            times = interleaved_medians(samplers, args.repeat, args.rounds)
            del src, dst
            flops = program_flops(prog, profile, itemsize) * args.n
            peak = profile.fp64_flops if dtype == "f64" else profile.fp32_flops
            bound = "memory" if nbytes / copy_bw >= flops / peak else "compute"
            peer_best = min(v for k, v in times.items() if k not in ("irfuse", *HANDS, *YARDSTICKS))
            hand_best = min(v for k, v in times.items() if k in HANDS)
            row = {"example": name, "dtype": dtype, "n": args.n, "bytes": nbytes, "flops": flops, "bound": bound,
                   "kernels": len(prog.kernels), "times_s": times, "checks": checks,
                   "fraction_of_copy": {k: nbytes / t / copy_bw for k, t in times.items()},
                   "fraction_of_same_bytes_copy": times[SAME_BYTES] / times["irfuse"],
                   "fraction_of_same_bytes_copy_x10": times[SAME_BYTES + " x10"] / times["irfuse x10"],
                   "vs_hand_written": times["irfuse"] / hand_best,
                   "speedup_over_best_peer": peer_best / times["irfuse"]}
            fraction = row["fraction_of_copy"]["irfuse"]
            # (A run 2x faster than the best peer moves the bytes at this fraction of the copy.)
            row["two_x_best_peer_needs_fraction_of_copy"] = 2 * nbytes / peer_best / copy_bw
            row["target_met"] = bool((row["fraction_of_same_bytes_copy"] >= 0.9 if bound == "memory"
                                      else row["vs_hand_written"] <= 1.15)
                                     and row["speedup_over_best_peer"] >= 2 and checks["irfuse"] == "ok")
            rows.append(row)
            console.print(f"{name} {dtype}: {bound}-bound, irfuse {fraction:.1%} of copy, "
                          f"{row['vs_hand_written']:.2f}x hand-written, {row['speedup_over_best_peer']:.2f}x over the "
                          f"best peer; checks {checks}")
            del samplers, tensors, ordered, outs, hand_outs, pointers
            prog.close()
            torch.cuda.empty_cache()
    gpu = torch.cuda.get_device_name()
    table = Table(title=f"{gpu}: element codes, n = {args.n}; copy bandwidth {copy_bw / 1e9:.0f} GB/s (read + write)")
    for col in ("example", "dtype", "bound", "contender", "ms", "GB/s", "of copy", "irfuse speedup", "check"):
        table.add_column(col)
    for r in rows:
        for k, t in sorted(r["times_s"].items(), key=lambda kv: kv[1]):
            table.add_row(r["example"], r["dtype"], r["bound"], k, f"{t * 1e3:.3f}", f"{r['bytes'] / t / 1e9:.0f}",
                          f"{r['fraction_of_copy'][k]:.1%}",
                          "" if k == "irfuse" or k in YARDSTICKS else f"{t / r['times_s']['irfuse']:.2f}x",
                          r["checks"].get(k, "")[:40])
    console.print(table)
    for r in rows:
        console.print(f"{r['example']} {r['dtype']}: target {'met' if r['target_met'] else 'NOT met'}; irfuse at "
                      f"{r['fraction_of_same_bytes_copy']:.1%} of a copy of the same bytes timed the same way, "
                      f"{r['fraction_of_same_bytes_copy_x10']:.1%} 10 calls back to back; 2x the best peer needs "
                      f"{r['two_x_best_peer_needs_fraction_of_copy']:.0%} of the copy bandwidth")
    with open(args.json, "w") as f:
        meta.dump({"gpu": gpu, "n": args.n, "copy_bandwidth_Bps": copy_bw, "repeat": args.repeat,
                   "rounds": args.rounds, "rows": rows}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
