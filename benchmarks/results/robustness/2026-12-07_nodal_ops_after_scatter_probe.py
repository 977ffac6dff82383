# Every generic op on the scatter's sums (and a nodal input) as a nodal statement after the scatter, alone
# (run in the kernel adding the sums) and with the sums returned: compiled for CUDA and run on the CPU
# (loop and emulate) against the reference.
import os, sys, numpy as np, irfuse, warnings
warnings.simplefilter("ignore")
from irfuse.testing.random_programs import _family_signatures
from irfuse.mesh import box_tetrahedra, Connectivity
types = ("scalar", "vector2", "vector3")
sigs = [s for s in _family_signatures(types) if s[2] != "mask" and all(t in types for t in s[1])]
X, conn = box_tetrahedra(2, numbering="random", seed=1)[:2]
rng = np.random.default_rng(0)
bad = 0; n = 0
for name, ins, res in sigs:
    if "vector3" not in ins: continue
    args = []
    decl = {"r": "vector3", "X": "vector3"}
    extra = []
    for i, t in enumerate(ins):
        if t == "vector3": args.append("r" if i == 0 else "X")
        else:
            v = f"a{i}"; decl[v] = t; extra.append(v); args.append(v)
    body_in = [f"{v} = {'vdot3(X, X)' if decl[v]=='scalar' else 'stack(X[0], X[1])'};" for v in extra]
    lines = ["nodal vector3 X, r;", f"nodal {res} z;"] + [f"nodal {decl[v]} {v};" for v in extra] + \
        ["index4 conn; matrix4x3 Xe;", "input X, conn;"] + body_in + \
        ["Xe = gather(X, conn);", "Xe = tanh(Xe);", "r = scatter(Xe, conn);", f"z = {name}({', '.join(args)});"]
    for ret in ("z", "z, r"):
        src = "\n".join(lines + [f"return {ret};", ""])
        for renderer in ("loop", "emulate"):
            os.environ["IRFUSE_CPU_RENDERER"] = renderer
            n += 1
            try:
                irfuse.compile(src, backend="cuda", dtype="f32")
                p = irfuse.compile(src, backend="cpu", dtype="f64")
                p(X=rng.standard_normal(X.shape), conn=Connectivity(conn, len(X)), verify=True)
            except Exception as e:
                msg = str(e).splitlines()[0][:200]
                if "refus" in msg or "undefined" in msg: pass
                bad += 1
                print("FAIL", name, ins, ret, renderer, type(e).__name__, msg, flush=True)
print("cases", n, "failed", bad)
