"""Device profiles: the figures of a GPU the cost model plans with (SMs, bandwidth, flops,
shared memory and register limits, launch and barrier costs), built in for the H100 and the
H200 or measured by `irfuse calibrate` and saved as JSON; the CPU profile (`kind` "cpu": cores,
caches, vector width, the host copy rate and the CPU backend's arithmetic, launch and twin
figures), built in for the CI machine's kind or measured by `irfuse calibrate --backend cpu`;
and the batch size plans are made for by default. Plain data (no IR): the program cache keys
entries by a profile's figures.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import asdict, fields, replace

from irfuse.artifact.records import record
from irfuse.artifact.user_files import read_text
from irfuse.diagnostics import CompileError, UsageError

DEFAULT_BATCH = 4_194_304  # elements the cost model plans for unless told otherwise (the GPU run's default)


@record(frozen=True)
class DeviceProfile:
    name: str
    sms: int
    bandwidth: float  # bytes/s, read + write, device-to-device copy
    fp32_flops: float
    fp64_flops: float
    shared_per_sm: int
    shared_per_block: int
    regs_per_sm: int = 65536
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    max_threads_per_block: int = 1024
    max_regs_per_thread: int = 255  # (every sm_70 and later GPU's: `kernel.policies.REGISTER_WORDS`)
    launch_overhead: float = 3e-6
    barrier_cost: float = 2e-7
    turnaround: float = 1.5e-6  # s from a block's loads to the next block's on its SM (see above)
    # Seconds an SM takes per block it runs, however little the block does: a kernel of many
    # small blocks is bound by starting them (`cost.py`, t_blocks). 0 turns the term off.
    block_cost: float = 0.0
    remap_ops: int = 4
    slow_op_flops: float = 16.0  # flop-equivalents of one IEEE division, reciprocal or square root (float32)
    slow_op_flops_f64: float = 16.0  # the same in float64, in float64 flops
    shared_wavefront_rate: float = 1.75e9  # shared-memory wavefronts per second per SM (one per clock)
    # Bytes per second of gathered rows (32 per sector of a row an element reads through its
    # connectivity) the GPU delivers to the threads: the rows come mostly from the caches, each
    # after its node number (a dependent load), which bounds such kernels below the copy rate.
    # (4.0e12 fitted with every one-thread kernel's rows at that rate; since 2026-12-06 the rate with
    # `cost.BLOCK_TAIL` apart, 4.0e12 / (1 - 0.5 / 10): the fitted kernel ran 10 blocks an SM.)
    gather_rate: float = 4.21e12
    # Bytes per second of a scatter's adding of every node's partials in order (each partial's
    # slot and row read through the node-ordered list, each node's start and sum: dependent
    # loads, which run below the copy rate whatever it is); 0: the copy rate (`bandwidth`).
    node_sum_rate: float = 0.0
    # Elements a second an SM finishes, at most, of a kernel that gathers: each waits on a chain
    # of dependent loads (its node numbers, then its rows) and on its group sums, whatever its
    # blocks (`cost.gather_time`); 0: no such bound. Both rates below were fitted on the H100
    # (benchmarks/NOTES.md, The planner, 2026-12-06, 16:30 UTC; the adding kernel's also ran
    # 2.2-2.6e12 on the H200) and taken over for the H200.
    gathered_element_rate: float = 0.0
    # A CPU profile (`kind` "cpu", planned for by `cost.cpu_kernel_cost`): `sms` counts the
    # worker threads (cores), `bandwidth` the host's copy rate on all of them, the flop rates the
    # multiply-adds of the CPU backend's code on all of them, `launch_overhead` one launch of the
    # kept workers. The GPU's limits above stay those of the GPU profile it was made from: a plan
    # for the CPU is still a valid GPU kernel (the same source is the GPU kernel, its twin and
    # the loop).
    kind: str = "gpu"
    l1_bytes: int = 0  # data cache per core
    l2_bytes: int = 0  # per core
    l3_bytes: int = 0  # shared by the cores
    vector_bytes: int = 0  # the widest vector registers the host build may use (informational)
    twin_factor: float = 1.0  # a kernel's time as its CPU twin over its time as a loop (`render_cpu_loop`)

    def to_json(self) -> dict:
        return asdict(self)


# Copy bandwidth, launch and barrier figures from `irfuse calibrate` on each GPU of the GPU
# machine (H100 2026-11-22, H200 2026-11-23, launches in one CUDA graph on both;
# benchmarks/results/planner/2026-11-22_profile-nvidia_h200.json and
# 2026-11-22_profile-nvidia_h100_80gb_hbm3.json, those of 2026-11-23 in benchmarks/results/seeds/);
# `turnaround` fitted on the H100 (benchmarks/NOTES.md) and taken over for the H200, not
# measured there; `gather_rate` fitted on the H200 (the P1 residual's element kernel: 0.50 ms on
# 12.6 M Morton-ordered tetrahedra, NOTES, Meshes, 2026-11-26, where the bytes it takes from memory
# alone predict 0.29 ms) and taken over for the H100, not measured there. The multiply-add rates and the cost of a division, reciprocal or square
# root were measured by `irfuse calibrate` on both on 2026-11-23 and agree within 1%.
_HOPPER = dict(sms=132, fp32_flops=63.8e12, fp64_flops=33.4e12, slow_op_flops=30.6, slow_op_flops_f64=26.5,
               shared_per_sm=228 * 1024, shared_per_block=227 * 1024, node_sum_rate=2.3e12, gathered_element_rate=3.4e8)
# `block_cost` measured on the H200 (NOTES, The planner, 2026-11-26: a kernel of 64-element blocks ran
# at 790 blocks a microsecond whatever their bytes, 166 ns a block on each SM) and taken over for
# the H100 (the same chip).
H100 = DeviceProfile("NVIDIA H100 80GB HBM3", bandwidth=3.01e12, launch_overhead=7.8e-7, barrier_cost=6.4e-8,
                     turnaround=1.5e-6, block_cost=1.66e-7, **_HOPPER)
H200 = DeviceProfile("NVIDIA H200", bandwidth=4.26e12, launch_overhead=5.0e-7, barrier_cost=7.4e-8,
                     turnaround=1.5e-6, block_cost=1.66e-7, **_HOPPER)
# The CI machine's kind (2 cores of an AMD EPYC, 32 MiB of L3): two runs of
# `irfuse calibrate --backend cpu` on 2026-11-26, averaged (benchmarks/NOTES.md, The CPU backend,
# 2026-11-26). A machine of other cores plans better with its own (`irfuse calibrate --backend
# cpu` replaces this profile).
CPU = DeviceProfile("CPU", kind="cpu", sms=2, bandwidth=2.3e10, fp32_flops=8.7e9, fp64_flops=8.8e9,
                    slow_op_flops=10.0, slow_op_flops_f64=13.4, launch_overhead=4.3e-6, barrier_cost=0.0,
                    l1_bytes=32 * 1024, l2_bytes=512 * 1024, l3_bytes=32 * 1024 * 1024, vector_bytes=32,
                    twin_factor=2.2, shared_per_sm=_HOPPER["shared_per_sm"],
                    shared_per_block=_HOPPER["shared_per_block"])
BUILTIN = {"h100": H100, "h200": H200, "cpu": CPU}


def backend_profile(backend: str) -> str:
    """The profile a backend's plans are made for unless one is named: "cpu" for the CPU
    backend, "h100" for the GPU."""
    return "cpu" if backend == "cpu" else "h100"


def profile_path(name: str) -> str:
    base = os.environ.get("IRFUSE_PROFILE_DIR") or os.path.join(
        os.environ.get("XDG_CONFIG_HOME") or os.path.expanduser("~/.config"), "irfuse")
    return os.path.join(base, f"profile-{name.lower().replace(' ', '_')}.json")


def profile_files(name: str) -> list[str]:
    """The files a profile named `name` is read from, the first that exists (a built-in's
    name: its calibrated file by that name, then by the GPU's)."""
    candidates = [name] if name.endswith(".json") else [profile_path(name)]
    if not name.endswith(".json") and name.lower() in BUILTIN:
        candidates.append(profile_path(BUILTIN[name.lower()].name))
    return candidates


def load_profile(name: str = "h100") -> DeviceProfile:
    """A built-in profile by name ('h100', 'h200', 'cpu'), or one saved by `irfuse calibrate`
    (by GPU name or file path; `--backend cpu` saves the profile named 'cpu'); a calibrated
    profile overrides the built-in of the same name."""
    for path in profile_files(name):
        if os.path.exists(path):
            try:
                data = json.loads(read_text(path))
            except (OSError, UnicodeDecodeError, ValueError) as e:
                raise CompileError(f"{path}: not a device profile ({e}); run 'irfuse calibrate' again") from None
            return _from_json(data, path)
    if name.lower() in BUILTIN:
        return BUILTIN[name.lower()]
    raise UsageError(f"unknown device profile '{name}' (built in: {', '.join(BUILTIN)}; "
                       "or a file written by 'irfuse calibrate')")


# Figures the cost model divides by, or a kernel's limits: above 0 in any profile (a rate of 0
# would make every time infinite; the others may be 0: nothing of that kind, or unknown).
POSITIVE = ("sms", "bandwidth", "fp32_flops", "fp64_flops", "shared_per_sm", "shared_per_block", "regs_per_sm",
            "max_threads_per_sm", "max_blocks_per_sm", "max_threads_per_block", "max_regs_per_thread",
            "shared_wavefront_rate", "gather_rate")


def _from_json(data: dict, path: str) -> DeviceProfile:
    """A saved profile; figures an older irfuse saved and this one no longer reads are
    dropped, figures it lacks come from the built-in profile of the same GPU."""
    if not isinstance(data, dict) or "name" not in data:
        raise CompileError(f"{path}: not a device profile (run 'irfuse calibrate' again)")
    known = {f.name for f in fields(DeviceProfile)}
    base = next((b for b in BUILTIN.values() if b.name == data["name"]), H100)
    for k, v in data.items():  # (each figure of the type the built-in's is: a count, a rate or a name)
        if k not in known:
            continue
        want = type(getattr(base, k))
        least = "above 0" if k in POSITIVE else "at least 0"
        number = isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) and \
            (v > 0 if k in POSITIVE else v >= 0)
        if (want is str and not isinstance(v, str)) or (want is not str and not number) or \
                (want is int and not float(v).is_integer()):
            kind = "name" if want is str else f"whole number {least}" if want is int else f"number {least}"
            raise CompileError(f"{path}: '{k}' is {v!r}, not a {kind} (run 'irfuse calibrate' again)")
    try:
        return replace(base, **{k: int(v) if type(getattr(base, k)) is int else v for k, v in data.items()
                                if k in known})
    except TypeError as e:
        raise CompileError(f"{path}: {e} (run 'irfuse calibrate' again)") from None


def save_profile(p: DeviceProfile, path: str | None = None) -> str:
    path = path or profile_path(p.name)
    try:
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            json.dump(p.to_json(), f, indent=2)
    except OSError as e:
        raise UsageError(f"the profile cannot be saved to {path}: {e.strerror or e} "
                         "(IRFUSE_PROFILE_DIR names where profiles go)") from None
    return path
