"""The cost model's shared-memory wavefronts of the element kernel as emitted (the module's own
`fuse.kernel` after every pass and the driver's marking of loads by readers, read back by
`kernel.bridge.model_from_kernel`), as counted and with a thread's two contiguous float64 words
merged into one 16-byte access as ptxas does, to set beside Nsight Compute's count
(benchmarks/NOTES.md, High-order elements, 2026-12-05). No GPU needed; from the project root:

    python benchmarks/results/highorder/2026-12-05_emitted_kernel_wavefronts_probe.py bk3:6 bp3:6 bp1:6

each argument KIND:ORDER, float64, the 1-D tables fixed (`constants=`), planned for the h100 profile.
"""
import os, sys, tempfile, warnings
warnings.simplefilter("ignore")
os.environ.setdefault("IRFUSE_CACHE_DIR", tempfile.mkdtemp())
sys.path.insert(0, "tests"); sys.path.insert(0, os.path.join("examples", "highorder"))
import highorder_reference as ref, operators
from irfuse.driver.compile import compile_from, _options, PlanningOptions
from irfuse.driver.options import constant_numbers
from irfuse.driver.sources import Source
from irfuse.dialects.fuse import KernelOp
from irfuse.kernel.bridge import model_from_kernel
import irfuse.analysis.bank_conflicts as bc
import importlib.util  # noqa: E402

_spec = importlib.util.spec_from_file_location(
    "model_wavefronts", os.path.join("benchmarks", "results", "highorder", "2026-12-04_model_wavefronts_probe.py"))
_before = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_before)  # (its count with 16-byte pairs merged, `pairs_merged`)
as_counted, pairs_merged = _before.as_counted, _before.pairs_merged


def counts(m):
    out = []
    for count in (as_counted, pairs_merged):
        bc.wavefronts = count
        bc.call_access.cache_clear()
        bc.copy_wavefronts.cache_clear()
        out.append(bc.kernel_wavefronts(m) / m.by)
    bc.wavefronts = as_counted
    bc.call_access.cache_clear()
    bc.copy_wavefronts.cache_clear()
    return out
for arg in sys.argv[1:]:
    kind, p = arg.split(":"); p = int(p)
    B, D, _ = ref.lagrange_tables(p, p + 2)
    t = {"B": B} if kind.endswith("1") else {"B": B, "D": D}
    o = _options(None, "f64", True, "sm_90", PlanningOptions(profile="h100"), "aos", constant_numbers(t))
    program, _ = compile_from(Source(getattr(operators, f"{kind}_source")(p, p + 2), f"{kind}_p{p}.kas"), o)
    for k in program.module.walk():
        if isinstance(k, KernelOp) and len(list(k.body.block.ops)) > 10:
            m, _ = model_from_kernel(k, 8)
            a, b = counts(m)
            shared_in = sum(1 for v in m.values.values() if v.shared and v.is_input)
            print(arg, k.sym_name.data[:30], "loads_by_readers", m.loads_by_readers, "block", m.bx, m.by,
                  "shared inputs", shared_in, f"{a:.0f} wavefronts an element as counted, {b:.0f} with pairs merged")
