"""The CPU backend's worker threads (`irfuse_host.h`): launches from several Python threads at
once, in a forked child, and from host libraries built from different versions of the header
in one process all run every block once, with the bits of a one-thread run."""

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from conftest import EXAMPLES

from irfuse.driver.compile import compile_program
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import random_inputs

BIGFUSION = next(p for p in EXAMPLES if p.endswith("bigfusion.kas"))


@pytest.fixture(scope="module")
def plan():
    return compile_program(BIGFUSION, None, "f32", compile_gpu=False)[0]


def one_thread_result(plan, inputs, n, monkeypatch):
    monkeypatch.setenv("IRFUSE_CPU_THREADS", "1")
    return Executor(plan, CpuDevice(plan)).run(inputs, n).outputs["F"]


def test_launches_from_several_python_threads_at_once(plan, monkeypatch):
    """One launch has the kept workers, the others start threads of their own: all right."""
    n = 64 * plan.kernels[0].by + 3
    inputs = random_inputs(plan.reference_program, n, 5, np.float32)
    want = one_thread_result(plan, inputs, n, monkeypatch)
    monkeypatch.setenv("IRFUSE_CPU_THREADS", "3")
    recorded = [Executor(plan, CpuDevice(plan)).prepare(inputs, n) for _ in range(4)]
    wrong = []

    def replay(rec):
        for _ in range(20):
            rec.replay()
            if not np.array_equal(rec.outputs()["F"], want):
                wrong.append(rec)

    threads = [threading.Thread(target=replay, args=(rec,)) for rec in recorded]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong


@pytest.mark.skipif(not hasattr(os, "fork"), reason="needs fork")
def test_a_forked_child_starts_workers_of_its_own(plan, monkeypatch):
    n = 32 * plan.kernels[0].by
    inputs = random_inputs(plan.reference_program, n, 6, np.float32)
    want = one_thread_result(plan, inputs, n, monkeypatch)
    monkeypatch.setenv("IRFUSE_CPU_THREADS", "3")
    Executor(plan, CpuDevice(plan)).run(inputs, n)  # the parent's workers exist before the fork
    pid = os.fork()
    if pid == 0:  # the child: its copy of the pool has no threads
        try:
            got = Executor(plan, CpuDevice(plan)).run(inputs, n).outputs["F"]
            os._exit(0 if np.array_equal(got, want) else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0


# Two host libraries in one process, the second built from a header whose pool has another
# layout: the pool's C++ symbols are unique across a process's libraries, so without the
# header's version in their namespace the second library would run on the first one's pool
# (a crash, or blocks run twice or never).
OTHER_HEADER = r"""
import sys
import numpy as np
from irfuse.backend import host_compile
from irfuse.driver.binaries import with_cpu_rendering
from irfuse.driver.compile import compile_program
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import random_inputs

plan = compile_program(sys.argv[1], None, "f32", compile_gpu=False)[0]
n = 50 * plan.kernels[0].by + 7
inputs = random_inputs(plan.reference_program, n, 2, np.float32)
first = Executor(plan, CpuDevice(plan)).run(inputs, n).outputs["F"]
header = host_compile._header_text()
changed = header.replace("  long long pid;", "  long long padding[5];\n  long long pid;", 1)
assert changed != header, "the pool's layout was not changed: the test needs updating"
host_compile._header_text = lambda: changed
other = with_cpu_rendering(plan, "loop")
for _ in range(5):
    a = Executor(plan, CpuDevice(plan)).run(inputs, n).outputs["F"]
    b = Executor(other, CpuDevice(other)).run(inputs, n).outputs["F"]
    assert np.array_equal(a, first) and np.array_equal(b, first)
"""


def test_libraries_of_two_header_versions_keep_pools_of_their_own(tmp_path):
    env = dict(os.environ, IRFUSE_CPU_THREADS="3", IRFUSE_CACHE_DIR=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", OTHER_HEADER, BIGFUSION], capture_output=True, text=True, env=env,
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
