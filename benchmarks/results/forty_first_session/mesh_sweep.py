"""Random mesh programs beyond the test suite's seeds, checked as
`tests/test_fuzz.py::test_random_mesh_programs_agree_with_the_reference_through_several_plans`
checks them (three plans and the host-loops plan on the CPU, against the reference, ordered and
atomic, both CPU renderings, NVRTC to sm_90), in parallel; failures listed with their detail.

    python mesh_sweep.py FIRST LAST [jobs]
"""
import concurrent.futures as cf
import os
import sys
import tempfile
import warnings


def check(seed: int):
    warnings.filterwarnings("ignore")
    from irfuse.testing.differential import Budget, check_source
    from irfuse.testing.random_programs import random_mesh_program

    src = random_mesh_program(seed, 4 + seed % 7)
    out = check_source(src, Budget(top=3, dtype="f32" if seed % 2 else "f64", n=1 if seed % 4 == 3 else 37,
                                   seed=seed, nvrtc=True, host_loops=True), tempfile.gettempdir())
    return seed, out.ok and out.plans >= 1, out.failure, (out.detail or "")[:600]


if __name__ == "__main__":
    first, last = int(sys.argv[1]), int(sys.argv[2])
    jobs = int(sys.argv[3]) if len(sys.argv) > 3 else os.cpu_count()
    bad = []
    with cf.ProcessPoolExecutor(jobs) as pool:
        for seed, ok, failure, detail in pool.map(check, range(first, last)):
            if not ok:
                bad.append(seed)
                print(f"seed {seed}: {failure}: {detail}", flush=True)
    print(f"{last - first} programs, {len(bad)} failing: {bad}")
