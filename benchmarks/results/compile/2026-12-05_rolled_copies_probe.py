"""NVRTC on each example's emitted CUDA (sm_90, irfuse's options, one compile at a time, best of
three) as emitted, with the block-wide copies' loops kept rolled (`2026-12-05_rolled_copies.
patch`, applied here to the prelude's text inside each emitted source), and with each copy's
trips fixed when emitting (at most the block's chunk over its threads: `fixed`, its calls
rewritten here in the text, each trip guarded and the trips unrolled): seconds, the module's
machine instructions (nvdisasm) and each planned kernel's registers. No GPU needed.
Usage (from the project root): python benchmarks/results/compile/2026-12-05_rolled_copies_probe.py"""
import glob, os, re, subprocess, tempfile, time, warnings
warnings.simplefilter("ignore")
import irfuse  # noqa: E402
from irfuse.backend import nvrtc  # noqa: E402

DEFINE = '#define IRF_UNROLL _Pragma("unroll")\n'


def rolled(source: str) -> str:
    i = source.index("__device__ __forceinline__ void irf_after_previous_grid()")
    head = re.sub(r"(\n\s*)(for \(int i = (tid|nvec))", r'\1_Pragma("unroll 1") \2', source[:i])
    return head + source[i:]


FIXED = r"""
template <int TRIPS>
__device__ __forceinline__ void irf_copy_n(real_t* __restrict__ dst, const real_t* __restrict__ src, int count, int tid, int nthreads)
{
  IRF_UNROLL for (int k = 0; k < TRIPS; ++k) { const int i = tid + k * nthreads; if (i < count) dst[i] = src[i]; }
}
template <int TRIPS>
__device__ __forceinline__ void irf_copy16_n(real_t* __restrict__ dst, const real_t* __restrict__ src, int count, int tid, int nthreads)
{
  const int per = 16 / (int)sizeof(real_t);
  const int nvec = count / per;
  IRF_UNROLL for (int k = 0; k < TRIPS; ++k) {
    const int i = tid + k * nthreads;
    if (i < nvec) reinterpret_cast<float4*>(dst)[i] = reinterpret_cast<const float4*>(src)[i];
  }
  const int i = nvec * per + tid;  // (fewer than `per` words left: one trip)
  if (i < count) dst[i] = src[i];
}
template <int TRIPS>
__device__ __forceinline__ void irf_load_async16_n(real_t* __restrict__ dst, const real_t* __restrict__ src, int count, int tid, int nthreads)
{
  const int per = 16 / (int)sizeof(real_t);
  const int nvec = count / per;
  IRF_UNROLL for (int k = 0; k < TRIPS; ++k) {
    const int i = tid + k * nthreads;
    if (i < nvec) {
      const unsigned s = (unsigned)__cvta_generic_to_shared(dst + i * per);
      asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(src + i * per) : "memory");
    }
  }
  const int i = nvec * per + tid;
  if (i < count) dst[i] = src[i];
}
"""
CALL = re.compile(r"irf_(copy16|copy|load_async16)\(([^;]*?), count \* (\d+), tid, (\d+)\);")


def fixed(source: str, itemsize: int) -> str:
    i = source.index("__device__ __forceinline__ void irf_after_previous_grid()")
    out, by = [], None
    for line in (source[:i] + FIXED + source[i:]).split("\n"):
        m = re.search(r"first = \(long long\)blockIdx\.x \* (\d+);", line)
        if m:
            by = int(m.group(1))
        if "#else" in line or "#elif" in line:
            by = None  # (the CPU twins keep their calls)

        def trips(c):
            fn, size, threads = c.group(1), int(c.group(3)), int(c.group(4))
            per = 1 if fn == "copy" else 16 // itemsize
            return f"irf_{fn}_n<{-(-by * size // per // threads) or 1}>({c.group(2)}, count * {size}, tid, {threads});"
        out.append(CALL.sub(trips, line) if by else line)
    return "\n".join(out)


def nvdisasm() -> str:
    import nvidia.cu13
    return os.path.join(list(nvidia.cu13.__path__)[0], "bin", "nvdisasm")


def compiled(source: str):
    times, result = [], None
    for _ in range(3):
        t = time.perf_counter()
        result = nvrtc.compile_cubin(source, "sm_90", use_cache=False)
        times.append(time.perf_counter() - t)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(result.cubin)
        f.flush()
        sass = subprocess.run([nvdisasm(), "-c", f.name], capture_output=True, text=True).stdout
    instructions = len(re.findall(r"/\*[0-9a-f]{4}\*/\s+[A-Z@]", sass))
    regs = {k: r.registers for k, r in result.resources.items() if not k.startswith("irf_")}
    return min(times), instructions, regs


files = sorted(glob.glob("examples/*.kas")) + sorted(glob.glob("examples/mesh/*.kas")) + \
    sorted(glob.glob("examples/highorder/*.kas"))
rows = [(f, "f32") for f in files] + [("examples/hex8.kas", "f64")]
total = [0.0, 0.0, 0.0]
print(f"{'program':30s} {'dtype':5s} {'NVRTC s: emitted / rolled / fixed':34s} {'instructions':22s} registers")
for path, dtype in rows:
    program = irfuse.compile(path, backend="cuda", dtype=dtype, arch="sm_90")
    for stage in getattr(program, "programs", None) or [program]:
        a, b = compiled(stage.source), compiled(rolled(stage.source))
        c = compiled(fixed(stage.source, 8 if dtype == "f64" else 4))
        for k, x in enumerate((a, b, c)):
            total[k] += x[0]
        regs = " ".join(f"{a[2][k]}/{b[2].get(k)}/{c[2].get(k)}" for k in a[2])
        print(f"{path[9:]:30s} {dtype:5s} {a[0]:.3f} / {b[0]:.3f} / {c[0]:.3f}   {a[1]:5d} / {b[1]:5d} / {c[1]:5d}   {regs}",
              flush=True)
print(f"summed: {total[0]:.2f} / {total[1]:.2f} / {total[2]:.2f} s")
