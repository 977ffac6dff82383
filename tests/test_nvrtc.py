"""NVRTC: the ptxas report and the cache (every example's sm_90 compile is checked with its CPU run
in test_backend_cpu.py, on the same plan)."""

import pytest

from irfuse.backend import nvrtc
from irfuse.diagnostics import CompileError


def test_parse_ptxas_report():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'kern_a' for 'sm_90'
ptxas info    : Function properties for kern_a
ptxas         .     16 bytes stack frame, 8 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 1152 bytes smem
ptxas info    : Compiling entry function 'kern_b' for 'sm_90'
ptxas info    : Function properties for kern_b
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers"""
    r = nvrtc.parse_ptxas_report(log)
    assert vars(r["kern_a"]) == {"registers": 40, "spill_stores": 8, "spill_loads": 4, "shared_bytes": 1152,
                                 "stack_bytes": 16, "barriers": 1}
    assert r["kern_b"].registers == 8 and r["kern_b"].shared_bytes == 0


def test_every_compile_reports_resources_even_for_a_source_nvrtc_has_seen():
    # NVRTC 12.9+ caches programs itself and leaves the ptxas report out on a hit; without
    # the report a kernel that spills would go unnoticed (and never be re-emitted).
    src = 'extern "C" __global__ void k(double* a) { a[threadIdx.x] *= 3.0; }\n'
    for _ in range(3):
        r = nvrtc.compile_cubin(src, "sm_90", use_cache=False)
        assert "k" in r.resources and r.resources["k"].registers > 0, r.log


def test_errors_point_at_the_generated_source_line():
    src = 'extern "C" __global__ void k(float* a) {\n  a[0] = undefined_thing;\n}\n'
    with pytest.raises(CompileError) as e:
        nvrtc.compile_cubin(src, "sm_90", use_cache=False)
    d = e.value.diagnostics[0]
    assert d.file == nvrtc.GENERATED_NAME and d.line == 2
    assert "undefined_thing" in d.message and "undefined_thing" in d.source_line


def test_bad_arch_is_refused():
    with pytest.raises(CompileError, match="sm_90"):
        nvrtc.compile_cubin("", "compute_90")


def test_cache_hit_and_corrupt_entry_recovery(tmp_path, monkeypatch):
    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path))
    src = 'extern "C" __global__ void k(float* a) { a[threadIdx.x] *= 2.0f; }\n'
    first = nvrtc.compile_cubin(src, "sm_90")
    assert not first.cached
    second = nvrtc.compile_cubin(src, "sm_90")
    assert second.cached and second.cubin == first.cubin and second.resources == first.resources
    # Truncate the cached cubin: the checksum no longer matches, so it is rebuilt.
    (cubin,) = list(tmp_path.rglob("*.cubin"))
    cubin.write_bytes(cubin.read_bytes()[:100])
    third = nvrtc.compile_cubin(src, "sm_90")
    assert not third.cached and third.cubin == first.cubin
    # Different options are a different entry.
    other = nvrtc.compile_cubin(src, "sm_80")
    assert not other.cached and other.arch == "sm_80"


def test_calibration_probes_compile_with_every_entry_and_no_spills():
    # `irfuse calibrate` runs these on the GPU; a probe that spilled would time local memory,
    # not the arithmetic it stands for.
    from irfuse.tools.calibrate import ARITHMETIC, PROBES, SLOW

    for src, names in ((PROBES, {"irf_empty", "irf_barriers"}),
                       (ARITHMETIC, {f"irf_{op}_{t}" for op in ("fma", *SLOW) for t in ("float", "double")})):
        r = nvrtc.compile_cubin(src, "sm_90", use_cache=False)
        assert set(r.resources) == names
        for name, res in r.resources.items():
            assert res.spill_stores == 0 and res.spill_loads == 0 and res.stack_bytes == 0, (name, res)


def test_shared_arrays_over_the_static_limit_are_taken_at_launch_with_the_planned_buffer():
    """A planned buffer and a reduction's staging that pass 48 KB together (float64, a 27-word
    sum over 128 elements): all of it is dynamic, ptxas reports no static shared memory, the
    launch asks for the planned words plus the aligned staging, and the kernels run on the
    CPU backend to the reference (the emitter refused this kernel before)."""
    import numpy as np

    import irfuse
    from irfuse.driver.compile import compile_text
    from irfuse.passes.registry import UNFUSED_PIPELINE

    src = ("tensor3x3x3 T, R; matrix3x3 M; uniform tensor3x3x3 S; input T, M;\n"
           "R = ttmul3212(T, M); S = sum(R); return R, S;\n")
    plan, _ = compile_text(src, "arrays.kas", UNFUSED_PIPELINE, "f64", compile_gpu=True, arch="sm_90")
    k = next(k for k in plan.kernels if k.reduced and any(k.reduced))
    assert k.arrays == [128 * 27] and k.shared_words == 128 * 27
    assert k.dynamic_shared and k.static_shared_bytes(8) == 0
    assert k.dynamic_shared_bytes(8) == 2 * 128 * 27 * 8 > 48 * 1024
    assert plan.cubin.resources[k.name].shared_bytes == 0
    prog = irfuse.compile(src, dtype="f64", backend="cpu", pipeline=UNFUSED_PIPELINE)
    rng = np.random.default_rng(1)
    T, M = rng.uniform(-1, 1, (300, 3, 3, 3)), rng.uniform(-1, 1, (300, 3, 3))
    out = prog(T, M, verify=True)
    np.testing.assert_allclose(out.S, np.einsum("nijl,nlk->ijk", T, M), rtol=1e-12)
