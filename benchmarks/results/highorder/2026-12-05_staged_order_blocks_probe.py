"""Probe (kept for its record, 2026-12-05_staged_order_blocks.txt): for the bake-off's BP1 and
BP3 (float64, q = p + 2) at orders 1-8 under both GPU profiles, the 1-D tables passed and fixed
(`constants=`), each element kernel whose scatter order the emitter stages in shared memory
(`cuda_emit.emit_scatter_rows`): its shared bytes a block with and without the staged order,
the resident blocks an SM each leaves by `cost.resident_blocks` (H100 profile, sm_90's shared
memory), and the blocks its launch bounds ask (`min_blocks` of the kernel kept, after any steps
down for spills). A row marked "loses" is a kernel whose
order is staged at the cost of a resident block. Only the kernels the program keeps are listed (a
build also emits alternatives it compares). NVRTC compiles each (no GPU).

    python PROBE.py           (from the repository's root)"""
import dataclasses, os, sys, tempfile, warnings
warnings.simplefilter("ignore")
os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp()
import numpy as np
import irfuse
import irfuse.backend.cuda_emit as ce
from irfuse.planner.cost import resident_blocks
from irfuse.planner.profiles import H100

sys.path.insert(0, os.path.join(os.getcwd(), "examples", "highorder"))
import operators  # noqa: E402

seen = []


class _Recording:
    """`dataclasses` as `cuda_emit` uses it, noting each KernelInfo made with the order's words."""
    def __getattr__(self, name):
        return getattr(dataclasses, name)

    @staticmethod
    def replace(obj, **kw):
        out = dataclasses.replace(obj, **kw)
        if "arrays" in kw and kw["arrays"]:
            seen.append((obj, out))
        return out


ce.dataclasses = _Recording()
blocks = lambda info: resident_blocks(H100, info.threads, info.total_shared_bytes(8), 1)
print(f"{'cell':18s} {'kernel':34s} {'plan':>4s} {'bytes without':>13s} {'with':>7s} {'blocks without':>14s} {'with':>5s}")
for kind in ("bp1", "bp3"):
    for p in range(1, 9):
        src = getattr(operators, f"{kind}_source")(p, p + 2)
        plain = irfuse.compile(src, backend="cpu", dtype="f64", filename=f"{kind}_p{p}.kas")  # (its shapes)
        names = ["B"] if kind == "bp1" else ["B", "D"]
        tables = {n: np.random.default_rng(0).standard_normal(plain.shapes[n]) for n in names}
        for profile in ("h100", "h200"):
            for how, constants in (("passed", None), ("fixed", tables)):
                seen.clear()
                prog = irfuse.compile(src, backend="cuda", arch="sm_90", dtype="f64", profile=profile,
                                      filename=f"{kind}_p{p}.kas", constants=constants)
                # (the kernels the program kept: a build also emits the alternatives it compares)
                kept = {(k.name, tuple(k.arrays)): k for k in prog.artifact.kernels}
                staged = {}
                for _, with_order in seen:
                    key = (with_order.name, tuple(with_order.arrays))
                    if key in kept:
                        staged[key] = (kept[key], with_order)  # (the kept kernel: its launch bounds' blocks)
                for info, with_order in staged.values():
                    # (`with_order` adds the order's words to the block's arrays so far)
                    without = dataclasses.replace(with_order, arrays=with_order.arrays[:-1])
                    b0, b1 = blocks(without), blocks(with_order)
                    mark = "loses" if b1 < min(b0, info.min_blocks) else ""
                    print(f"{kind} p{p} {profile} {how:6s} {info.name[:34]:34s} {info.min_blocks:4d} "
                          f"{without.total_shared_bytes(8):13,d} {with_order.total_shared_bytes(8):7,d} "
                          f"{b0:14d} {b1:5d} {mark}", flush=True)
