"""The padded-lines probe counted by the cost model (no GPU): for each cell, the element kernel
its plan chooses (tables fixed), allocated as `fuse-allocate-shared` does without and with the
probe's line padding, and its shared-memory wavefronts an element, a padded value's words
taken at `w + w // line`. Needs `2026-12-04_padded_lines.patch` applied (`allocate_shared(...,
lines=True)`). From the project root:

    python benchmarks/results/highorder/2026-12-04_padded_lines_model.py bk3:6 bp3:6 bp1:6
"""
import sys, os, tempfile
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
sys.path.insert(0, "tests"); sys.path.insert(0, "examples/highorder")
import numpy as np
import irfuse, operators, highorder_reference as ref
import irfuse.planner.search as search
import irfuse.analysis.bank_conflicts as bc
from irfuse.transforms.allocation import allocate_shared
from irfuse.analysis.access_patterns import words_array
from irfuse.analysis.shared_accesses import call_threads
real_call_access = bc.call_access.__wrapped__
def padded_call_access(ap, impl_bx, kernel_bx, by, remap, size, pitch, itemsize):
    if pitch > size + bc.MAX_EXTRA_WORDS:  # (the probe's mark of a line-padded value: size + size / line)
        line = size // (pitch - size)
        tx, ty, tid = call_threads(impl_bx, kernel_bx, by, remap)
        w = words_array(ap, tx, ty, impl_bx, by)
        inside = bool(np.all((w >= ty[:, None] * size) & (w < (ty[:, None] + 1) * size)))
        return bc.wavefronts(w + w // line, tid, itemsize), inside
    return real_call_access(ap, impl_bx, kernel_bx, by, remap, size, pitch, itemsize)
got = []
real = search.plan_program
def rec(*a, **k):
    r = real(*a, **k); got.append(r); return r
search.plan_program = rec
for spec in sys.argv[1:]:
    kind, p = spec.split(":"); p = int(p)
    B, D, _ = ref.lagrange_tables(p, p + 2)
    got.clear()
    irfuse.compile(getattr(operators, f"{kind}_source")(p, p + 2), backend="cuda", dtype="f64", filename=f"{kind}_p{p}.kas",
                   arch="sm_90", constants={"B": B} if kind.endswith("1") else {"B": B, "D": D})
    for c in got[-1][1][0].configs:
        if len(c.group) < 2: continue
        plain = allocate_shared(c.model, lines=False)
        padded = allocate_shared(c.model, lines=True)
        bc.call_access = real_call_access
        a = bc.kernel_wavefronts(plain)
        bc.call_access = padded_call_access
        b = bc.kernel_wavefronts(padded)
        bc.call_access = real_call_access
        npad = sum(1 for v in padded.values.values() if v.shared and v.pitch > v.size + bc.MAX_EXTRA_WORDS)
        print(spec, "model wavefronts an element: plain", a / c.model.by, "lines padded", b / c.model.by,
              f"({npad} values padded)", "shared words a block", plain.shared_words() if hasattr(plain, "shared_words") else "")
