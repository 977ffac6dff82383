"""NVRTC on each example's emitted CUDA (sm_90, irfuse's options, one compile at a time, best of
three) as emitted and with the block-wide copies' loops kept rolled (`2026-12-05_rolled_copies.
patch`, applied here to the prelude's text inside each emitted source): seconds, the module's
machine instructions (nvdisasm) and each planned kernel's registers. No GPU needed.
Usage (from the project root): python benchmarks/results/compile/2026-12-05_rolled_copies_probe.py"""
import glob, os, re, subprocess, sys, tempfile, time, warnings
warnings.simplefilter("ignore")
import irfuse  # noqa: E402
from irfuse.backend import nvrtc  # noqa: E402

DEFINE = '#define IRF_UNROLL _Pragma("unroll")\n'


def rolled(source: str) -> str:
    i = source.index("__device__ __forceinline__ void irf_after_previous_grid()")
    head = re.sub(r"(\n\s*)(for \(int i = (tid|nvec))", r'\1_Pragma("unroll 1") \2', source[:i])
    return head + source[i:]


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
total = [0.0, 0.0]
print(f"{'program':36s} {'dtype':5s} {'NVRTC s: emitted -> rolled':28s} {'instructions':16s} registers")
for path, dtype in rows:
    program = irfuse.compile(path, backend="cuda", dtype=dtype, arch="sm_90")
    for stage in getattr(program, "programs", None) or [program]:
        a, b = compiled(stage.source), compiled(rolled(stage.source))
        total[0] += a[0]
        total[1] += b[0]
        regs = " ".join(f"{a[2][k]}->{b[2].get(k)}" for k in a[2])
        print(f"{path[9:]:36s} {dtype:5s} {a[0]:.3f} -> {b[0]:.3f} ({b[0] / a[0]:.2f})       {a[1]:5d} -> {b[1]:5d}   {regs}",
              flush=True)
print(f"summed: {total[0]:.2f} -> {total[1]:.2f} s")
