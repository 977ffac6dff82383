"""NVRTC compiles a module's units apart (`EmittedModule.units`: each planned kernel with the
device functions it calls, and the library's kernels): the same machine code as the whole
module, a spilling kernel compiled again alone, the library's kernels one source for every
program that has them, and a plan directory that keeps the images."""

import dataclasses
import json
import os
import struct

import pytest

from conftest import ROOT
from irfuse.artifact.artifact import Artifact, CubinResult, KernelResources, plan_digest
from irfuse.backend.nvrtc import compile_cubin
from irfuse.diagnostics import UsageError


def _example(name: str) -> str:
    for folder in ("examples", "examples/mesh", "examples/highorder"):
        path = os.path.join(ROOT, folder, name)
        if os.path.exists(path):
            return path
    raise FileNotFoundError(name)


def _sections(elf: bytes) -> dict[str, bytes]:
    """Each section of a 64-bit little-endian ELF (a cubin), by name."""
    offset, = struct.unpack_from("<Q", elf, 0x28)
    size, count, names = struct.unpack_from("<HHH", elf, 0x3A)
    headers = [struct.unpack_from("<IIQQQQIIQQ", elf, offset + i * size) for i in range(count)]
    table = headers[names][4]

    def name(at: int) -> str:
        return elf[table + at:elf.index(b"\0", table + at)].decode()
    # (a section of no bits, type 8, as its size in zeros: a kernel's static shared memory)
    return {name(h[0]): elf[h[4]:h[4] + h[5]] if h[1] != 8 else bytes(h[5]) for h in headers}


def _kernel_sections(sections: dict[str, bytes], kernel: str) -> dict[str, bytes]:
    """A kernel's own sections, with what names other sections by their place in the file
    (which a module of other kernels numbers otherwise) left out: its relocations' symbols,
    and in its attributes the symbol of its parameters' constant bank (EIATTR_PARAM_CBANK,
    a 4-byte symbol index first in its 8 bytes); and its shared memory section, which ptxas
    gives every kernel of a module 1 KB where one kernel uses the block's reserved shared
    memory (the 1 KB sm_80 and later set aside for every block anyway: BP3's kernel), and
    whose size ptxas reports (`KernelResources.shared_bytes`, compared beside)."""
    out = {}
    for name, data in sections.items():
        if not name.endswith("." + kernel) or name.startswith((".rela", ".nv.shared.")):
            continue
        if name.startswith(".nv.info."):
            records, at = [], 0
            while at < len(data):
                form, attribute, size = data[at], data[at + 1], struct.unpack_from("<H", data, at + 2)[0]
                length = 4 + (size if form == 4 else 0)
                record = data[at:at + length]
                if form == 4 and attribute == 0x0A:
                    record = record[:4] + b"\0\0\0\0" + record[8:]
                records.append(record)
                at += length
            data = b"".join(records)
        out[name] = data
    return out


@pytest.mark.parametrize("name, dtype", [("cfl_step.kas", "f32"), ("bp3.kas", "f32"),
                                         ("neo_hookean_energy.kas", "f32"), ("hex8.kas", "f64")])
def test_each_unit_holds_its_kernels_machine_code_as_the_whole_module_compiled_at_once(name, dtype):
    """Every kernel's sections (its code, its attributes for the driver: registers, barriers,
    parameters; its constant bank) and ptxas's report of it in the program's images are those of the kept source
    compiled as one module, and that module has no state a kernel could share with another
    (global or constant variables), which a unit of its own would not see."""
    from irfuse.driver.compile import compile_program

    program, _ = compile_program(_example(name), dtype=dtype, arch="sm_90")
    at_once = compile_cubin(program.source, "sm_90")
    whole = _sections(at_once.cubin)
    assert program.cubin.resources == at_once.resources
    assert not [s for s in whole if s.startswith((".nv.global", ".nv.constant3", ".nv.constant4"))]
    parts = program.cubin.parts()
    assert len(parts) == (1 if name in ("hex8.kas",) else len([k for k in program.kernels
                                                               if not k.name.startswith("irf_")]) + 1)
    held = {}
    for image, kernels in parts:
        sections = _sections(image)
        for k in kernels or [k.name for k in program.kernels]:
            held[k] = _kernel_sections(sections, k)
    assert sorted(held) == sorted(k.name for k in program.kernels)
    for kernel, sections in held.items():
        assert {".text." + kernel, ".nv.info." + kernel, ".nv.constant0." + kernel} <= set(sections)
        assert sections == _kernel_sections(whole, kernel), kernel


def _recording(monkeypatch, most: int | None) -> list:
    """NVRTC as `build` calls it, recording each compile's kernels and blocks; with `most`, as
    if ptxas spilled every planned kernel above `most` resident blocks."""
    from irfuse.driver import compile as driver

    real, asked = driver.compiler_for, []

    class Recorded:
        def compile(self, source, kernels, element, arch):
            cubin = real("cuda").compile(source, kernels, element, arch)
            asked.append([(k.name, k.min_blocks) for k in kernels])
            for k in kernels:
                if most is not None and k.min_blocks > most:
                    cubin.resources[k.name] = dataclasses.replace(cubin.resources[k.name],
                                                                  spill_stores=driver.SPILL_BYTES_KEPT + 4)
            return cubin

    monkeypatch.setattr(driver, "compiler_for", lambda name: Recorded())
    return asked


@pytest.mark.parametrize("width", [1, 2, 4])
def test_a_spilling_kernel_is_compiled_again_alone(monkeypatch, width):
    """The P1 residual's element kernel, as if it spilled above 2 resident blocks, is compiled
    at its steps down to 2 in units of its own: the library's nine kernels are compiled once,
    in their own unit, however many compiles run at once; the kept kernel is at 2 blocks."""
    from irfuse.driver import compile as driver

    asked = _recording(monkeypatch, 2)
    monkeypatch.setattr(driver, "_width", lambda: width)
    program, _ = driver.compile_program(_example("p1_residual.kas"), arch="sm_90")
    library = [a for a in asked if len(a) > 1]
    assert len(library) == 1 and all(name.startswith("irf_") for name, _ in library[0])
    planned = [a for a in asked if len(a) == 1]
    (kernel,) = {name for (name, _), in planned}
    blocks = [b for (_, b), in planned]
    assert blocks[0] > 2 and 2 in blocks and min(blocks) >= 1 and len(blocks) == len(set(blocks))
    assert width > 1 or blocks == sorted(blocks, reverse=True) and blocks[-1] == 2
    assert program.kernel(kernel).min_blocks == 2
    assert [k for _, k in program.cubin.images] == [(kernel,), tuple(n for n, _ in library[0])]


def test_the_library_kernels_of_two_programs_are_one_source_compiled_once(monkeypatch, tmp_path):
    """The P1 residual's and the Neo-Hookean residual's library units (the scatter of 3-word
    rows through 4 nodes an element, the index checks) are the same text, so the second
    program's is NVRTC's cache entry of the first's; their element kernels are not."""
    from irfuse.driver import compile as driver

    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path))
    cached = {}
    real = driver.compiler_for

    class Noted:
        def compile(self, source, kernels, element, arch):
            cubin = real("cuda").compile(source, kernels, element, arch)
            cached.setdefault(tuple(k.name for k in kernels), []).append(cubin.cached)
            return cubin

    monkeypatch.setattr(driver, "compiler_for", lambda name: Noted())
    monkeypatch.setattr(driver, "_width", lambda: 1)
    for name in ("p1_residual.kas", "neo_hookean_residual.kas"):
        driver.compile_program(_example(name), arch="sm_90")
    (library,) = [c for names, c in cached.items() if len(names) > 1]
    assert library == [False, True]
    assert all(c == [False] for names, c in cached.items() if len(names) == 1)


def test_joined_images_give_each_kernel_its_own_and_one_image_is_itself():
    one = CubinResult("sm_90", b"\x7fELF-a", "a", {"k": KernelResources(registers=10), "k_x": KernelResources()})
    two = CubinResult("sm_90", b"\x7fELF-bb", "b", {"irf_z": KernelResources(registers=8)}, cached=True)
    assert CubinResult.joined([(one, ("k", "k_x"))]) is one
    joined = CubinResult.joined([(one, ("k",)), (two, ("irf_z",))])
    assert joined.parts() == [(b"\x7fELF-a", ("k",)), (b"\x7fELF-bb", ("irf_z",))]
    assert joined.resources == {"k": one.resources["k"], "irf_z": two.resources["irf_z"]} and not joined.cached
    assert one.parts() == [(one.cubin, None)]
    with pytest.raises(ValueError, match="several architectures"):
        CubinResult.joined([(one, ("k",)), (dataclasses.replace(two, arch="sm_80"), ("irf_z",))])


def test_a_plan_directory_keeps_the_images_and_refuses_images_that_do_not_add_up(tmp_path):
    """Saved and loaded, a program of several images runs the same parts; a manifest whose
    images do not cover kernels.cubin's bytes, or name a kernel it does not list, or leave one
    out, is refused naming the directory (its digest made for the edit, as if irfuse wrote it)."""
    from irfuse.driver.compile import compile_program

    program, _ = compile_program(_example("p1_residual.kas"), arch="sm_90")
    assert len(program.cubin.parts()) == 2
    program.save(str(tmp_path / "plan"))
    loaded = Artifact.load(str(tmp_path / "plan"))
    assert loaded.cubin.parts() == program.cubin.parts() and loaded.cubin.resources == program.cubin.resources
    path = tmp_path / "plan" / "manifest.json"
    good = json.loads(path.read_text())
    size, kernels = good["images"][0]
    for images, said in (([[size + 1, kernels], good["images"][1]], "bytes listed"),
                         ([[size, kernels + ["nowhere"]], good["images"][1]], "is not"),
                         ([[True, kernels], good["images"][1]], "is not"), (None, "is not a list"),
                         ([good["images"][1]], "bytes listed|no image holds")):
        manifest = dict(good, images=images)
        manifest["digest"] = plan_digest(str(tmp_path / "plan"), manifest)
        path.write_text(json.dumps(manifest))
        with pytest.raises(UsageError, match="not a valid irfuse plan directory: images: .*(" + said + ")") as e:
            Artifact.load(str(tmp_path / "plan"))
        assert str(tmp_path / "plan") in str(e.value)


def test_a_program_without_kernels_compiles_its_prelude_as_one_unit():
    """A program that returns an input has no kernel: its one unit is the prelude, compiled
    once, and the cubin is that unit's own (no images listed)."""
    from irfuse.driver.compile import compile_text

    program, _ = compile_text("matrix3x3 A; vector12 v;\ninput A;\nreturn A;\n", "returns_a.kas", arch="sm_90")
    assert program.kernels == [] and program.cubin.images == () and program.cubin.cubin[:4] == b"\x7fELF"
    assert program.cubin.parts() == [(program.cubin.cubin, None)]



def test_a_modules_units_take_the_cores_the_modules_beside_it_leave(monkeypatch):
    """Built beside other modules (`_build_modules`), a module's units run in threads of their
    own, each compile once it holds one of the cores the modules share (a semaphore): asked one
    step at a time (`width` 1), its four units still run two at once on two cores, one at once
    while another module holds the second core; the cubins come back in the units' order."""
    import threading
    import time

    from irfuse.backend.cuda_emit import EmittedModule
    from irfuse.driver import compile as driver

    lock, running, most = threading.Lock(), [0], [0]

    class Counted:
        def compile(self, source, kernels, element, arch):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
            time.sleep(0.05)  # (so that compiles started together overlap)
            with lock:
                running[0] -= 1
            return source

    monkeypatch.setattr(driver, "compiler_for", lambda name: Counted())
    units = [(EmittedModule(f"unit {i}", []), {}) for i in range(4)]
    cores = threading.BoundedSemaphore(2)
    assert driver._compile_units(units, None, "sm_90", 1, cores) == [f"unit {i}" for i in range(4)]
    assert most == [2]
    most[0] = 0
    with cores:  # (another module compiling on the second core)
        assert driver._compile_units(units, None, "sm_90", 1, cores) == [f"unit {i}" for i in range(4)]
    assert most == [1]
    most[0] = 0
    assert driver._compile_units(units, None, "sm_90", 1) == [f"unit {i}" for i in range(4)] and most == [1]
