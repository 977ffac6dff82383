"""The compile caches: concurrent processes, corrupt entries."""

import multiprocessing
import os

import numpy as np

SRC = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] += 1.0f; }\n'


def _compile(cache):
    os.environ["IRFUSE_CACHE_DIR"] = cache
    from irfuse.backend.nvrtc import compile_cubin

    return compile_cubin(SRC, "sm_90").cubin


def test_concurrent_processes_share_one_cache_entry(tmp_path):
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(4) as pool:
        cubins = pool.map(_compile, [str(tmp_path)] * 8)
    assert len(set(cubins)) == 1 and cubins[0][:4] == b"\x7fELF"
    assert len(list(tmp_path.rglob("*.cubin"))) == 1
    assert not list(tmp_path.rglob(".tmp-*"))  # no torn temporaries left behind


HOST_SRC = """typedef float real_t;
static void twice(const real_t* a, real_t* b, const long long n, const long long block_begin,
                  const long long block_end, const bool reverse) {
  for (long long i = block_begin * 4; i < block_end * 4 && i < n; ++i) b[i] = 2 * a[i]; }
"""


def _host_module(cache):
    os.environ["IRFUSE_CACHE_DIR"] = cache
    from irfuse.artifact.kernel_info import KernelInfo
    from irfuse.backend.host_compile import build_host_library
    from irfuse.runtime.host_library import HostLibrary

    kernels = [KernelInfo("twice", 1, 4, 0, ["a"], ["b"], [1], [1])]
    return HostLibrary(build_host_library(HOST_SRC, kernels), kernels)


def test_corrupt_host_library_is_rebuilt(tmp_path, monkeypatch):
    # Built by another process (a library loaded here could not be overwritten safely).
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        pool.map(_build_only, [str(tmp_path)])
    (lib,) = list(tmp_path.rglob("*.so"))
    lib.write_bytes(b"not a shared library")  # as an interrupted copy could leave it
    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path))
    mod = _host_module(str(tmp_path))
    a = np.arange(10, dtype=np.float32)
    b = np.zeros(10, dtype=np.float32)
    mod.launch("twice", [a, b], 10)
    np.testing.assert_array_equal(b, 2 * a)


def _build_only(cache):
    _host_module(cache)


def test_truncated_host_library_is_rebuilt_not_loaded(tmp_path, monkeypatch):
    """A library cut short part-way still looks like ELF and used to be loaded (a bus error on
    every run, never rebuilt): the checksum written with it refuses it now."""
    ctx = multiprocessing.get_context("spawn")
    with ctx.Pool(1) as pool:
        pool.map(_build_only, [str(tmp_path)])
    (lib,) = list(tmp_path.rglob("*.so"))
    whole = lib.read_bytes()
    lib.write_bytes(whole[: len(whole) // 2])
    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path))
    mod = _host_module(str(tmp_path))
    assert lib.read_bytes() == whole  # rebuilt in place
    a = np.arange(10, dtype=np.float32)
    b = np.zeros(10, dtype=np.float32)
    mod.launch("twice", [a, b], 10)
    np.testing.assert_array_equal(b, 2 * a)


def test_cubin_entry_with_a_damaged_report_is_recompiled(tmp_path, monkeypatch):
    """The checksum covers the ptxas report read back with the cubin (registers, spills decide
    what is emitted next), not only the cubin."""
    import json

    from irfuse.backend.nvrtc import compile_cubin

    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path))
    first = compile_cubin(SRC, "sm_90")
    (meta,) = list(tmp_path.rglob("*.json"))
    data = json.loads(meta.read_text())
    data["resources"]["k"]["spill_stores"] = 64
    meta.write_text(json.dumps(data))
    again = compile_cubin(SRC, "sm_90")
    assert not again.cached and again.resources["k"].spill_stores == first.resources["k"].spill_stores == 0
