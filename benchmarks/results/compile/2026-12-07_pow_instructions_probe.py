"""Instructions NVRTC emits for a power with a constant exponent, through CUDA's pow and the
prelude's irf_pow (sm_90, nvdisasm), float32 and float64."""
import glob, os, re, shutil, subprocess, sys
from importlib import resources
from irfuse.backend.nvrtc import compile_cubin
prelude = resources.files("irfuse.backend").joinpath("irfuse_prelude.h").read_text()
nv = shutil.which("nvdisasm") or glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "**", "nvdisasm"), recursive=True)[0]
for real in ("float", "double"):
    body = "\n".join(
        f'extern "C" __global__ void {name}(const real_t* x, real_t* y, int n){{ int i = blockIdx.x*blockDim.x+threadIdx.x; '
        f'if (i<n) {{ const real_t c[1] = {{(real_t){e}}}; y[i] = {fn}(x[i], c[0]); }} }}'
        for name, fn, e in (("pow2", "pow", 2), ("irfpow2", "irf_pow", 2), ("pow3", "pow", 3), ("irfpow3", "irf_pow", 3),
                            ("powm1", "pow", -1), ("irfpowm1", "irf_pow", -1), ("pow05", "pow", 0.5), ("irfpow05", "irf_pow", 0.5)))
    src = f"#define IRFUSE_REAL {real}\n" + prelude + body
    r = compile_cubin(src, "sm_90", use_cache=False)
    open("/tmp/k.cubin", "wb").write(r.cubin)
    out = subprocess.run([nv, "-c", "/tmp/k.cubin"], capture_output=True, text=True).stdout
    counts = {}
    for m in re.finditer(r"\.text\.(\w+):(.*?)(?=\n\s*\.section|\Z)", out, re.S):
        counts[m.group(1)] = len(re.findall(r"/\*[0-9a-f]{4}\*/", m.group(2)))
    print(real, {k: counts.get(k) for k in ("pow2", "irfpow2", "pow3", "irfpow3", "powm1", "irfpowm1", "pow05", "irfpow05")},
          "internal:", {k: v for k, v in counts.items() if "internal" in k})
