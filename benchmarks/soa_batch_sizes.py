"""SyncTest's structure-of-arrays kernel at several batch sizes against the device copy.

    python benchmarks/soa_batch_sizes.py [--sizes 4194304 4198400 16777216 16781312 33554432]

The copy bandwidth (`measure_copy_bandwidth`: a 1 GiB device-to-device copy) is what the API
benchmark's fractions divide by; SyncTest in SoA moves 72 bytes an element, so at the API
benchmark's 4,194,304 elements it moves 302 MB, under a third of the copy it is compared with.
Each row: the default SoA plan replayed (10 runs back to back per timing, median of 20) as a
fraction of that copy. An experiment behind a note in NOTES.md, not a peer comparison.
"""

import argparse

import numpy as np

import irfuse
from irfuse.runtime.cuda_device import measure_copy_bandwidth
from irfuse.runtime.executor import Executor
from irfuse.verification.reference import effective_bytes
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+",
                    default=[1 << 22, (1 << 22) + 4096, 1 << 24, (1 << 24) + 4096, 1 << 25])
    ap.add_argument("--json", default=meta.result_path("layouts"))
    args = ap.parse_args(argv)
    prog = irfuse.compile("examples/synctest.kas", backend="cuda", layout="soa")
    dev = prog.opened_device()
    dev.make_current()
    bw = measure_copy_bandwidth(dev.drv)
    print(f"{dev.gpu_name}: copy {bw / 1e9:.0f} GB/s", flush=True)
    rows = []
    for n in args.sizes:
        rec = Executor(prog.compiled, dev).prepare({"A": np.random.rand(3, 3, n).astype(np.float32)}, n)
        rec.replay()
        times = sorted(rec.time_once(10) for _ in range(20))
        t = times[len(times) // 2]
        frac = effective_bytes(prog.compiled.reference_program, n, 4) / t / bw
        rows.append({"n": n, "seconds": t, "of_copy": frac})
        print(f"SoA SyncTest n={n}: {t * 1e3:.4f} ms, {frac:.1%} of copy", flush=True)
    with open(args.json, "w") as f:
        meta.dump({"gpu": dev.gpu_name, "copy_bandwidth_Bps": bw, "rows": rows}, f, indent=1)
    prog.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
