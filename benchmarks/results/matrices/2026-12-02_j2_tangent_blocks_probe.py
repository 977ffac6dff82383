"""Probe (kept for its record, 2026-12-02_j2_tangent_blocks_probe_h200.txt): J2's consistent
tangent (irfuse.jacobian(examples/j2_return.kas, of="sig", wrt="deps"), float32, out=) under the
search's first plans (`fuse-partition{top=K plan=j}`: blocks of 128 and of 64 elements) and
forced resident blocks (the kernel's launch bounds rewritten at NVRTC), against a kernel that
only moves the same bytes (reads 19 words an element, writes 91, each array streamed in 16-byte
vectors): the most a kernel with this mix of reads and writes reaches of the copy.

    python PROBE.py [VARIANT ...]   (from the repository's root, on a GPU)
    VARIANT: PLAN or PLAN/FORM[:BLOCKS] (e.g. 0, 0/orig:5, 0/foldstage:5, 1/foldstage:10; the forms
    in 2026-12-02_j2_tangent_transforms.py), or "mix"."""
import hashlib, json, os, sys, tempfile, time
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import ctypes
import torch
import irfuse
from irfuse.backend import nvrtc

N = 4 * 1024 * 1024
MOVED = N * 4 * (9 + 9 + 1 + 9 + 1 + 81)  # sig, deps, ep in; sig, ep, the tangent out
seen: dict = {}
forced = {"variant": None}
real = nvrtc._compile_once
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import importlib
transforms = importlib.import_module("2026-12-02_j2_tangent_transforms")


def patched(source, arch, opts):
    if forced["variant"] and "j2_return_jacobian_k0" in source:
        source = transforms.transform(source, forced["variant"])
    r = real(source, arch, opts)
    for k, v in r.resources.items():
        seen[k[:40]] = (v.registers, v.spill_stores, v.shared_bytes)
    return r


nvrtc._compile_once = patched
MIX = r"""
extern "C" __global__ void __launch_bounds__(256) mix(const float4* __restrict__ sig, const float4* __restrict__ deps,
    const float4* __restrict__ ep, float4* __restrict__ sig1, float4* __restrict__ ep1, float4* __restrict__ tan,
    long long n4)
{
  const long long stride = (long long)gridDim.x * blockDim.x;
  const long long i0 = (long long)blockIdx.x * blockDim.x + threadIdx.x;
  for (long long w = i0; w < 9 * n4; w += stride) {
    float4 a = sig[w], b = deps[w];
    sig1[w] = make_float4(a.x + b.x, a.y + b.y, a.z + b.z, a.w + b.w);
  }
  for (long long w = i0; w < n4; w += stride) ep1[w] = ep[w];
  for (long long w = i0; w < 81 * n4; w += stride) {
    float f = (float)(w & 1023);
    tan[w] = make_float4(f, f + 1.0f, f + 2.0f, f + 3.0f);
  }
}
"""


def timed(f, reps=50):
    runs = []
    for _ in range(5):
        torch.cuda.synchronize(); t = time.perf_counter()
        for _ in range(reps):
            f()
        torch.cuda.synchronize(); runs.append((time.perf_counter() - t) / reps)
    return sorted(runs)[2]


def inputs():
    g = torch.Generator(device="cuda").manual_seed(0)
    sig = torch.randn(N, 3, 3, device="cuda", generator=g) * 0.5
    sig = (sig + sig.transpose(1, 2)) / 2
    sig[N // 2:] *= 0.01
    deps = torch.randn(N, 3, 3, device="cuda", generator=g) * 1e-3
    deps = (deps + deps.transpose(1, 2)) / 2
    return sig.contiguous(), deps.contiguous(), torch.zeros(N, device="cuda")


def main():
    src = torch.empty(MOVED // 2, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    sig, deps, ep = inputs()
    u = (1.0, 2.0, 0.2, 0.5)
    jac = irfuse.jacobian("examples/j2_return.kas", of="sig", wrt="deps")
    for variant in sys.argv[1:]:
        if variant == "mix":
            from cuda.bindings import driver as cu
            cubin = nvrtc.compile_cubin(MIX, arch="sm_90").cubin
            _, mod = cu.cuModuleLoadData(cubin)
            _, fn = cu.cuModuleGetFunction(mod, b"mix")
            outs = [torch.empty(N * 9, device="cuda"), torch.empty(N, device="cuda"), torch.empty(N * 81, device="cuda")]
            ptrs = [sig.data_ptr(), deps.data_ptr(), ep.data_ptr()] + [o.data_ptr() for o in outs]
            stream = torch.cuda.current_stream().cuda_stream
            params = (tuple(ptrs) + (N // 4,), (ctypes.c_void_p,) * 6 + (ctypes.c_longlong,))
            launch = lambda: cu.cuLaunchKernel(fn, 132 * 8, 1, 1, 256, 1, 1, 0, stream, params, 0)
            launch()
            rows = [(timed(launch), timed(lambda: dst.copy_(src))) for _ in range(3)]
            print(json.dumps({"variant": "mix", "ms": [round(t * 1e3, 4) for t, _ in rows],
                              "of copy of its bytes": [round(c / t, 4) for t, c in rows]}), flush=True)
            continue
        plan, _, form = variant.partition("/")
        forced["variant"] = form or None
        seen.clear()
        os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
        from irfuse.passes.registry import DEFAULT_PIPELINE
        pipe = DEFAULT_PIPELINE.replace("fuse-partition", f"fuse-partition{{top=4 plan={plan} n={N}}}", 1)
        prog = irfuse.compile(jac, backend="cuda", pipeline=pipe, n=N)
        out = {"sig": torch.empty_like(sig), "ep": torch.empty_like(ep),
               "dsig_ddeps": torch.empty(N, 3, 3, 3, 3, device="cuda")}
        prog(sig, deps, ep, *u, out=out)
        torch.cuda.synchronize()
        digest = hashlib.sha256(b"".join(out[k].cpu().numpy().tobytes() for k in ("sig", "ep", "dsig_ddeps"))).hexdigest()[:16]
        rows = [(timed(lambda: prog(sig, deps, ep, *u, out=out)), timed(lambda: dst.copy_(src))) for _ in range(3)]
        print(json.dumps({"variant": variant, "resources": dict(seen), "digest": digest,
                          "ms": [round(t * 1e3, 4) for t, _ in rows],
                          "of copy of its bytes": [round(c / t, 4) for t, c in rows]}), flush=True)


main()
