"""Compiling generated CUDA C to a cubin with NVRTC (cuda-bindings), with a cache.

NVRTC needs no GPU.  We always ask for machine code for one exact
architecture (`sm_90` unless a GPU says otherwise or `arch` is given),
never PTX: a driver older than the NVRTC refuses newer PTX.  The ptxas
report (`--ptxas-options=-v`) is parsed into per-kernel resources.  NVRTC 12.9
and later keep their own cache of compiled programs and print no ptxas report
on a hit; we ask for `--no-cache` there (we cache cubins ourselves), since the
report is what tells a kernel that spills.
"""

from __future__ import annotations

import functools
import json
import re
from dataclasses import asdict

from irfuse.artifact.artifact import CubinResult, KernelResources
from irfuse.artifact.disk_cache import atomic_write, cache_lock, entry_path, sha256
from irfuse.diagnostics import CompileError, Diagnostic

GENERATED_NAME = "irfuse_kernels.cu"


_ENTRY = re.compile(r"Compiling entry function '([^']+)'")
_PROPS = re.compile(r"Function properties for (\S+)")
_STACK = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"Used (\d+) registers(?:, used (\d+) barriers)?(?:.*?(\d+) bytes smem)?")


def parse_ptxas_report(log: str) -> dict[str, KernelResources]:
    """Per-kernel registers, spills, stack and static shared memory from a ptxas -v log."""
    out: dict[str, KernelResources] = {}
    current: str | None = None
    for line in log.splitlines():
        if m := _ENTRY.search(line):
            current = m.group(1)
            out.setdefault(current, KernelResources())
        elif m := _PROPS.search(line):
            current = m.group(1)
            out.setdefault(current, KernelResources())
        elif (m := _STACK.search(line)) and current is not None:
            r = out[current]
            r.stack_bytes, r.spill_stores, r.spill_loads = (int(g) for g in m.groups())
        elif (m := _USED.search(line)) and current is not None:
            r = out[current]
            r.registers = int(m.group(1))
            r.barriers = int(m.group(2) or 0)
            r.shared_bytes = int(m.group(3) or 0)
    return out


def default_arch() -> str:
    """The architecture of the GPU present, else sm_90."""
    try:
        from cuda.bindings import driver

        (err,) = driver.cuInit(0)
        if err == driver.CUresult.CUDA_SUCCESS:
            err, dev = driver.cuDeviceGet(0)
            a = driver.CUdevice_attribute
            err1, major = driver.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev)
            err2, minor = driver.cuDeviceGetAttribute(a.CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev)
            if err == err1 == err2 == driver.CUresult.CUDA_SUCCESS:
                return f"sm_{major}{minor}"
    except Exception:  # noqa: BLE001 -- a probe: no driver, no GPU, any driver error: the default target
        pass
    return "sm_90"


@functools.cache
def _nvrtc_version() -> str:
    from cuda.bindings import nvrtc

    _, major, minor = nvrtc.nvrtcVersion()
    return f"{major}.{minor}"


def nvrtc_version() -> str:
    """NVRTC's version, "major.minor" (what a plan resting on ptxas's figures depends on)."""
    return _nvrtc_version()


def _nvrtc_at_least(major: int, minor: int) -> bool:
    have = tuple(int(x) for x in _nvrtc_version().split("."))
    return have >= (major, minor)


def _nvrtc_caches() -> bool:
    """Whether this NVRTC keeps its own cache (12.9 and later)."""
    return _nvrtc_at_least(12, 9)


# `--minimal` (NVRTC 12.4 and later) leaves out what generated kernels never use (textures and
# surfaces, the device runtime's functions, launches from the device, the runtime API's types):
# 0.36 s less of every compile (0.89 -> 0.53 s for bigfusion), the same cubin to the byte.
# A source it does not compile (a hand-written implementation using one of those) is compiled
# again without it: its diagnostics, or its cubin, are those of the full language.
MINIMAL = "--minimal"


def _check(result, what: str):
    from cuda.bindings import nvrtc

    err = result[0]
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"NVRTC failed in {what}: {err}")
    return result[1:] if len(result) > 2 else (result[1] if len(result) == 2 else None)


def _errors_against_source(log: str, source: str) -> list[Diagnostic]:
    lines = source.splitlines()
    diags = []
    for m in re.finditer(rf"{re.escape(GENERATED_NAME)}\((\d+)\): (error|warning): (.*)", log):
        ln = int(m.group(1))
        if m.group(2) != "error":
            continue
        diags.append(Diagnostic(m.group(3).strip(), GENERATED_NAME, ln, 1, "error",
                                lines[ln - 1] if 0 < ln <= len(lines) else None))
    return diags


def compile_cubin(source: str, arch: str | None = None, defines: dict[str, str] | None = None,
                  use_cache: bool = True) -> CubinResult:
    """Compiles the source for `arch`; raises `CompileError` with NVRTC's errors against the source."""
    arch = arch or default_arch()
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise CompileError(f"--arch must look like sm_90, got '{arch}'")
    opts = [f"--gpu-architecture={arch}", "--ptxas-options=-v", "--std=c++17"]
    if _nvrtc_caches():
        opts.append("--no-cache")
    if _nvrtc_at_least(12, 4):
        opts.append(MINIMAL)
    opts += [f"-D{k}={v}" for k, v in sorted((defines or {}).items())]
    key = sha256(json.dumps([source, opts, _nvrtc_version()]).encode())
    path = entry_path("cubin", key)
    if not use_cache:
        return _compile(source, arch, opts)
    with cache_lock(path):
        hit = _cache_read(path)
        if hit is not None:
            return hit
        result = _compile(source, arch, opts)
        _cache_write(path, result)
        return result


def _compile(source: str, arch: str, opts: list[str]) -> CubinResult:
    try:
        return _compile_once(source, arch, opts)
    except CompileError:
        if MINIMAL not in opts:
            raise
        return _compile_once(source, arch, [o for o in opts if o != MINIMAL])


def _compile_once(source: str, arch: str, opts: list[str]) -> CubinResult:
    from cuda.bindings import nvrtc

    prog = _check(nvrtc.nvrtcCreateProgram(source.encode(), GENERATED_NAME.encode(), 0, [], []),
                  "nvrtcCreateProgram")
    try:
        bopts = [o.encode() for o in opts]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(bopts), bopts)
        size = _check(nvrtc.nvrtcGetProgramLogSize(prog), "nvrtcGetProgramLogSize")
        buf = b" " * size
        nvrtc.nvrtcGetProgramLog(prog, buf)
        log = buf.decode(errors="replace").rstrip("\x00 \n")
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            diags = _errors_against_source(log, source) or [Diagnostic(f"NVRTC failed:\n{log}", GENERATED_NAME)]
            raise CompileError(diags)
        size = _check(nvrtc.nvrtcGetCUBINSize(prog), "nvrtcGetCUBINSize")
        cubin = b" " * size
        nvrtc.nvrtcGetCUBIN(prog, cubin)
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    return CubinResult(arch, bytes(cubin), log, parse_ptxas_report(log))


def _entry_checksum(arch: str, log: str, resources: dict, cubin: bytes) -> str:
    """Covers the cubin and everything read back with it: a damaged report (registers,
    spills) would change what is emitted next, so it must fail the check like the cubin."""
    return sha256(json.dumps([arch, log, resources], sort_keys=True).encode() + cubin)


def _cache_read(path: str) -> CubinResult | None:
    try:
        with open(path + ".json", encoding="utf-8") as f:
            meta = json.load(f)
        with open(path + ".cubin", "rb") as f:
            cubin = f.read()
        if _entry_checksum(meta["arch"], meta["log"], meta["resources"], cubin) != meta["sha256"]:
            return None  # torn or corrupt entry: recompile
        res = {k: KernelResources(**v) for k, v in meta["resources"].items()}
        return CubinResult(meta["arch"], cubin, meta["log"], res, cached=True)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _cache_write(path: str, r: CubinResult) -> None:
    resources = {k: asdict(v) for k, v in r.resources.items()}
    meta = {"arch": r.arch, "log": r.log, "resources": resources,
            "sha256": _entry_checksum(r.arch, r.log, resources, r.cubin)}
    try:
        # The cubin lands first; the metadata (with its checksum) makes the entry valid.
        atomic_write(path + ".cubin", r.cubin)
        atomic_write(path + ".json", json.dumps(meta).encode())
    except OSError:
        pass  # an unwritable cache only costs recompilation
