"""The compile caches: concurrent processes, corrupt entries."""

import multiprocessing
import os

import numpy as np
import pytest
from conftest import EXAMPLES

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
static int twice(const real_t* a, real_t* b, const long long n, const long long block_begin,
                 const long long block_end, const bool reverse) {
  for (long long i = block_begin * 4; i < block_end * 4 && i < n; ++i) b[i] = 2 * a[i];
  return 0; }
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


def test_host_builds_include_one_precompiled_header_and_make_the_same_library(tmp_path, monkeypatch):
    """The standard headers are parsed once per compiler and flags (a `.gch` beside a copy of
    the header in the cache); a library built through it is byte for byte the one built by
    parsing the header, and a damaged precompiled header is made again."""
    from irfuse.artifact.kernel_info import KernelInfo
    from irfuse.backend import host_compile

    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path))
    monkeypatch.setattr(host_compile, "_PRECOMPILED", {})
    kernels = [KernelInfo("twice", 1, 4, 0, ["a"], ["b"], [1], [1])]
    host_compile.build_host_library(HOST_SRC, kernels)
    assert not list(tmp_path.glob("host-header/*/*/*.gch"))  # a fresh cache's first library parses the header
    host_compile.build_host_library(HOST_SRC.replace("2 * a[i]", "3 * a[i]"), kernels)
    (pch,) = tmp_path.glob(f"host-header/*/*/{host_compile.HEADER}.gch")
    assert (pch.parent / host_compile.HEADER).read_text() == host_compile._header_text()
    header, cxx = host_compile._header_text(), host_compile.compiler()
    flags = host_compile.compiler_flags(cxx) + [host_compile.abi_flag(header)] + host_compile.cpu_renderer_flags()
    launcher = host_compile.launcher_source(kernels)
    through = host_compile._build(HOST_SRC, launcher, header, cxx, flags, str(pch.parent))
    assert through == host_compile._build(HOST_SRC, launcher, header, cxx, flags)
    whole = pch.read_bytes()
    pch.write_bytes(whole[: len(whole) // 3])  # as an interrupted write could leave it
    monkeypatch.setattr(host_compile, "_PRECOMPILED", {})
    assert host_compile._precompiled(header, cxx, flags) == str(pch.parent)
    # made again whole (not the same bytes: it records the path it was made at)
    assert host_compile.read_checked(str(pch)) is not None and len(pch.read_bytes()) > len(whole) // 2



@pytest.mark.parametrize("damage", ["removed", "header changed", "another cache"])
def test_a_precompiled_header_changed_after_this_process_checked_it_still_builds(damage, tmp_path, monkeypatch):
    """A process checks the cache's precompiled header once. Removed afterwards (a cache
    cleaned while the process runs), its header copy changed on disk, or the cache moved
    (`IRFUSE_CACHE_DIR` set to another directory), later host builds used to include what was
    no longer there: "fatal error: .../irfuse_host.h: No such file or directory" (found by the
    fuzzer's cache cases). Now each build checks that the files are there, or falls back to
    parsing the header itself, and the library works."""
    import shutil

    from irfuse.artifact.kernel_info import KernelInfo
    from irfuse.backend import host_compile
    from irfuse.runtime.host_library import HostLibrary

    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path / "a"))
    monkeypatch.setattr(host_compile, "_PRECOMPILED", {})
    kernels = [KernelInfo("twice", 1, 4, 0, ["a"], ["b"], [1], [1])]
    for k in (3, 4):  # (a cache's second library makes the precompiled header)
        host_compile.build_host_library(HOST_SRC.replace("2 * a[i]", f"{k} * a[i]"), kernels)
    (pch,) = (tmp_path / "a").glob(f"host-header/*/*/{host_compile.HEADER}.gch")
    if damage == "removed":
        shutil.rmtree(pch.parent)
    elif damage == "header changed":
        (pch.parent / host_compile.HEADER).write_text("#error damaged\n")
    else:
        shutil.copytree(tmp_path / "a", tmp_path / "b")
        shutil.rmtree(tmp_path / "a")
        monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path / "b"))
    mod = HostLibrary(host_compile.build_host_library(HOST_SRC, kernels), kernels)
    a = np.arange(10, dtype=np.float32)
    b = np.zeros(10, dtype=np.float32)
    mod.launch("twice", [a, b], 10)
    np.testing.assert_array_equal(b, 2 * a)

def test_a_host_compiler_without_precompiled_headers_still_builds(tmp_path, monkeypatch):
    """A compiler wrapper that refuses to make a precompiled header (as one that does not know
    `-x c++-header` would) only costs parsing the header in every build."""
    from irfuse.artifact.kernel_info import KernelInfo
    from irfuse.backend import host_compile
    from irfuse.runtime.host_library import HostLibrary

    wrapper = tmp_path / "cxx"
    wrapper.write_text('#!/bin/sh\ncase "$*" in *c++-header*) exit 1;; esac\nexec g++ "$@"\n')
    wrapper.chmod(0o755)
    monkeypatch.setenv("CXX", str(wrapper))
    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(host_compile, "_PRECOMPILED", {})
    kernels = [KernelInfo("twice", 1, 4, 0, ["a"], ["b"], [1], [1])]
    host_compile.build_host_library(HOST_SRC.replace("2 * a[i]", "3 * a[i]"), kernels)
    mod = HostLibrary(host_compile.build_host_library(HOST_SRC, kernels), kernels)
    assert not list((tmp_path / "cache").glob("host-header/*/*/*.gch"))
    a = np.arange(10, dtype=np.float32)
    b = np.zeros(10, dtype=np.float32)
    mod.launch("twice", [a, b], 10)
    np.testing.assert_array_equal(b, 2 * a)


def test_a_program_stored_after_a_compile_loaded_the_library_is_found_by_a_fresh_process(tmp_path):
    """The key of a compile once held the op library's additions as "" where the library was
    not loaded yet (a process whose compiles so far were cache hits) and as the digest of
    nothing where a compile had loaded it: the same program got two keys, and a fresh process
    missed what a process with a compile behind it had stored (seconds of compiling again).
    Stored after a miss, a program is now found by a process that loads nothing first."""
    import subprocess
    import sys

    env = dict(os.environ, IRFUSE_CACHE_DIR=str(tmp_path))
    synctest, stvenant = (next(p for p in EXAMPLES if p.endswith(name)) for name in ("synctest.kas", "stvenant.kas"))
    code = ("import sys, irfuse\n"
            "for path in sys.argv[1:]:\n"
            "    print(irfuse.compile(path, backend='cpu').artifact.meta.get('loaded_from') is not None)\n")
    first = subprocess.run([sys.executable, "-c", code, synctest, stvenant], env=env, capture_output=True, text=True,
                           check=True).stdout.split()
    assert first == ["False", "False"]  # (both compiled: the second after the first loaded the library)
    again = subprocess.run([sys.executable, "-c", code, stvenant], env=env, capture_output=True, text=True,
                           check=True).stdout.split()
    assert again == ["True"]


def test_a_cached_program_is_loaded_without_reading_its_plan_digest_again(tmp_path):
    """A program entry's files are summed against its checksum list before it is loaded
    (`program_cache._intact`), so the plans' own digests are not read again (a staged
    program's stage directories: about 2 ms of a 25 ms load in a fresh process); the first
    compile writes them, and a plan directory loaded outside the cache still checks its digest
    (tests/test_cli.py)."""
    import subprocess
    import sys

    path = os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "explicit_step.kas")
    code = f"""
import irfuse
from irfuse.artifact import artifact
calls = []
real = artifact.plan_digest
artifact.plan_digest = lambda *a, **k: calls.append(a[0]) or real(*a, **k)
prog = irfuse.compile({path!r}, backend="cuda", arch="sm_90")
print(prog.compiled.meta.get("loaded_from") is not None, len(calls))
"""
    env = {**os.environ, "IRFUSE_CACHE_DIR": str(tmp_path / "cache")}

    def run():
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
        assert p.returncode == 0, p.stderr
        loaded, digests = p.stdout.split()
        return loaded == "True", int(digests)

    loaded, digests = run()
    assert not loaded and digests > 1  # compiled: every stage's manifest written with its digest
    assert run() == (True, 0)
