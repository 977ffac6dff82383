"""The emitted source of every example (`examples/`, mesh, high-order; both types; the h100
profile, CPU backend, which builds the CUDA source) hashed with the prelude's `irf_pow` block
taken out: run with two trees by PYTHONPATH and compare the JSON files (the same where `pow`'s
rendering is all that changed).

    PYTHONPATH=<old tree> python -P 2026-12-07_sources_without_pow_probe.py old.json
    python -P 2026-12-07_sources_without_pow_probe.py new.json
"""
import glob, hashlib, json, os, sys, tempfile, warnings
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
warnings.simplefilter("ignore")
import irfuse
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
paths = sorted(glob.glob(f"{ROOT}/examples/*.kas") + glob.glob(f"{ROOT}/examples/mesh/*.kas") + glob.glob(f"{ROOT}/examples/highorder/*.kas"))
start = "// a to the power b, with the exponents"
out = {}
for p in paths:
    for dtype in ("f32", "f64"):
        try:
            prog = irfuse.compile(p, dtype=dtype, backend="cpu", profile="h100")
        except Exception as e:
            out[f"{os.path.basename(p)}:{dtype}"] = f"error {type(e).__name__}"
            continue
        progs = getattr(prog, "programs", None) or [prog]
        texts = []
        for pr in progs:
            src = pr.compiled.source
            if start in src:
                i = src.index(start); j = src.index("}\n", src.index("irf_pow", i)) + 2
                src = src[:i] + src[j:]
            texts.append(src)
        out[f"{os.path.basename(p)}:{dtype}"] = hashlib.sha256("\0".join(texts).encode()).hexdigest()[:16]
json.dump(out, open(sys.argv[1], "w"), indent=1)
print(len(out))
