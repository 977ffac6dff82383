"""The compiled artifact as the runtime sees it: everything needed to run a program, with no
compiler.

An `Artifact` holds the program's element type and layout, the complete CUDA source, the
kernels' launch interface (`KernelInfo`), the host program as plain steps (`HostPlan`), and
the binaries: a cubin with its ptxas report (`CubinResult`) and, for the CPU, the path of a
host library built from the same source. It also keeps the text of the lowered and of the
reference program, which only the compiler side reads (`irfuse.driver.artifact.CompiledProgram`,
the artifact with its IR, is what compiling gives). `save` and `load` write and read a plan
directory; loading reads JSON and bytes only.
"""

from __future__ import annotations

import json
import os
from dataclasses import field

from irfuse.artifact.arrays import ElementType, element_type
from irfuse.artifact.disk_cache import new_sha256
from irfuse.artifact.host_plan import Combine, HostPlan
from irfuse.artifact.kernel_info import KernelInfo
from irfuse.artifact.records import record
from irfuse.diagnostics import Diagnostic, ExecutionError, UsageError

FORMAT = 6  # 2: the manifest holds the host plan and the layout; 3: scatters add in groups; 4: element
# kernels take the nodal sums and the connectivity of their scatters (atomics added in the kernel);
# 5: the manifest carries a digest of itself and the plan's files (`plan_digest`); 6: kernels.cubin
# may hold several cubin images one after another (the manifest's `images`)
PLAN_FILES = ("kernels.cu", "kernels.cubin", "program.mlir", "reference.mlir")  # what the digest covers


def read_manifest(directory: str, expected: int, key: str, kind: str = "", files: tuple[str, ...] = PLAN_FILES,
                  checked: bool = False) -> dict:
    """A plan directory's `manifest.json`, refused (ValueError, which the loaders turn into a
    UsageError naming the directory) unless it is of format `expected`, holds `key`, and its
    digest is that of itself and the directory's `files` as irfuse wrote them: a plan edited
    or damaged since (a number of the manifest changed, a file cut short or removed) could run
    kernels on sizes they were not compiled for, so it is refused whole rather than trusted.
    `checked`: every file of the directory was just found as irfuse wrote it by another sum
    (a compile cache's entry, `api.program_cache`), so the digest is not read again."""
    with open(os.path.join(directory, "manifest.json")) as f:
        manifest = json.load(f)
    if not isinstance(manifest, dict):
        raise ValueError("its manifest is not a JSON object")
    if manifest.get("format") != expected or key not in manifest:
        raise ValueError(f"its manifest is {kind}format {manifest.get('format')}, this irfuse reads {kind}format "
                         f"{expected}: compile the program again")
    if not checked and manifest.get("digest") != plan_digest(directory, manifest, files):
        raise ValueError("its files are not those irfuse wrote (edited or damaged since: the digest its manifest "
                         "carries does not match them): compile the program again")
    return manifest


def write_manifest(directory: str, manifest: dict, files: tuple[str, ...] = PLAN_FILES) -> None:
    """Writes `manifest.json` with the digest `read_manifest` checks (`plan_digest`), after
    the directory's `files` are written."""
    manifest["digest"] = plan_digest(directory, manifest, files)
    with open(os.path.join(directory, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=2)


def plan_digest(directory: str, manifest: dict, files: tuple[str, ...] = PLAN_FILES) -> str:
    """The digest a plan directory's manifest carries: of the manifest without it (keys
    sorted) and of each of `files`, by name, as present or absent."""
    h = new_sha256(json.dumps({k: v for k, v in manifest.items() if k != "digest"}, sort_keys=True).encode())
    for name in files:
        path = os.path.join(directory, name)
        data = None
        if os.path.exists(path):
            with open(path, "rb") as f:
                data = f.read()
        h.update(f"\0{name}\0{-1 if data is None else len(data)}\0".encode())
        h.update(data or b"")
    return h.hexdigest()


@record
class KernelResources:
    """What ptxas reports of one kernel."""

    registers: int = 0
    spill_stores: int = 0
    spill_loads: int = 0
    shared_bytes: int = 0
    stack_bytes: int = 0
    barriers: int = 0


@record
class CubinResult:
    """The GPU code of a program for one architecture, its compiler log and per-kernel
    resources. `cubin` is one cubin image, or several one after another where NVRTC compiled
    the program's kernels apart (`images`: each image's bytes and the kernels it holds, in
    order; empty for one image holding every kernel): the runtime loads each image as a module
    of its own (`parts`)."""

    arch: str
    cubin: bytes
    log: str
    resources: dict[str, KernelResources] = field(default_factory=dict)
    cached: bool = False
    images: tuple[tuple[int, tuple[str, ...]], ...] = ()

    def parts(self) -> list[tuple[bytes, tuple[str, ...] | None]]:
        """Each image's bytes and the kernels it holds (None: every kernel, one image)."""
        if not self.images:
            return [(self.cubin, None)]
        out, at = [], 0
        for size, kernels in self.images:
            out.append((self.cubin[at:at + size], kernels))
            at += size
        return out

    @staticmethod
    def joined(parts: list[tuple["CubinResult", tuple[str, ...]]]) -> "CubinResult":
        """One result of cubins compiled apart for one architecture, each with the kernels of
        it that run (a kernel's other images are left out); one part is itself."""
        if len(parts) == 1 and set(parts[0][1]) >= set(parts[0][0].resources):
            return parts[0][0]
        arch = {c.arch for c, _ in parts}
        if len(arch) != 1:
            raise ValueError(f"cubins for several architectures: {sorted(arch)}")
        return CubinResult(arch.pop(), b"".join(c.cubin for c, _ in parts), "\n".join(c.log for c, _ in parts),
                           {k: c.resources[k] for c, kernels in parts for k in kernels if k in c.resources},
                           all(c.cached for c, _ in parts), tuple((len(c.cubin), tuple(k)) for c, k in parts))


class Artifact:
    """A compiled program the runtime runs (see the module's docstring)."""

    def __init__(self, dtype: str, layout: str, source: str, kernels: list[KernelInfo], host: HostPlan,
                 cubin: CubinResult | None = None, meta: dict | None = None, program_text: str | None = None,
                 reference_text: str | None = None, host_library: str | None = None):
        self.dtype = dtype
        self.layout = layout
        self.source = source
        self.kernels = kernels
        self.host = host
        self.cubin = cubin
        self.meta = meta if meta is not None else {}
        self._program_text = program_text
        self._reference_text = reference_text
        self._host_library = host_library

    @property
    def element(self) -> ElementType:
        return element_type(self.dtype)

    @property
    def itemsize(self) -> int:
        return self.element.itemsize

    @property
    def sum_by(self) -> int:
        """The fewest elements per block among the kernels that sum over the batch (1: none),
        for the verification's allowance (`reference.sum_depth`)."""
        return min((k.by for k in self.kernels if "sum" in k.reduced), default=1)

    @property
    def program_text(self) -> str | None:
        """The lowered program's IR text, where the artifact keeps it."""
        return self._program_text

    @property
    def reference_text(self) -> str | None:
        """The program before lowering (what the reference evaluates), as IR text."""
        return self._reference_text

    def resources(self, kernel: str) -> KernelResources | None:
        return self.cubin.resources.get(kernel) if self.cubin else None

    def kernel(self, name: str) -> KernelInfo:
        return next(k for k in self.kernels if k.name == name)

    def cubin_for(self, arch: str) -> CubinResult:
        """The cubin for a GPU of `arch`; ExecutionError when the artifact holds none."""
        if self.cubin is None or self.cubin.arch != arch:
            have = f"a cubin for {self.cubin.arch}" if self.cubin else "no cubin"
            raise ExecutionError(f"this plan holds {have}, not one for {arch}: compile it for this GPU "
                                 f"(irfuse.driver.binaries.with_binaries, or irfuse compile --arch {arch})")
        return self.cubin

    @property
    def host_library(self) -> str:
        """The path of the host library whose kernels run on the CPU; ExecutionError when the
        artifact holds none."""
        if self._host_library is None:
            raise ExecutionError("this plan holds no host library for the CPU: build one from its source "
                                 "(irfuse.driver.binaries.with_binaries)")
        return self._host_library

    @host_library.setter
    def host_library(self, path: str) -> None:
        self._host_library = path

    def has_host_library(self) -> bool:
        return self._host_library is not None

    # --- a plan directory ----------------------------------------------------------------

    def manifest(self) -> dict:
        return {
            "format": FORMAT, "dtype": self.dtype, "layout": self.layout, "meta": self.meta,
            "program": {"inputs": list(self.host.input_names), "outputs": list(self.host.output_names)},
            "kernels": [k.to_json() | {"block": list(k.block_dims), "grid": _grid_text(k),
                                       "arguments": [*k.inputs, *k.outputs, "n"]}
                        for k in self.kernels],
            "host": self.host.to_json(),
        }

    def save(self, directory: str) -> list[str]:
        """Writes the plan directory; returns the names of the files written."""
        os.makedirs(directory, exist_ok=True)
        written = ["kernels.cu"]
        with open(os.path.join(directory, "kernels.cu"), "w") as f:
            f.write(self.source)
        manifest = self.manifest()
        if self.cubin is not None:
            with open(os.path.join(directory, "kernels.cubin"), "wb") as f:
                f.write(self.cubin.cubin)
            written.append("kernels.cubin")
            manifest["arch"] = self.cubin.arch
            manifest["resources"] = {k: vars(v) for k, v in self.cubin.resources.items()}
            if self.cubin.images:
                manifest["images"] = [[size, list(kernels)] for size, kernels in self.cubin.images]
        for name, text in (("program.mlir", self.program_text), ("reference.mlir", self.reference_text)):
            path = os.path.join(directory, name)
            if text is not None:
                with open(path, "w") as f:
                    f.write(text)
                written.append(name)
            elif os.path.exists(path):  # (a file of an earlier plan in the same directory)
                os.unlink(path)
        if self.cubin is None and os.path.exists(os.path.join(directory, "kernels.cubin")):
            os.unlink(os.path.join(directory, "kernels.cubin"))
        write_manifest(directory, manifest)
        written.append("manifest.json")
        return written

    @staticmethod
    def load(directory: str, checked: bool = False) -> "Artifact":
        """The artifact a plan directory holds (JSON and bytes only: no compiler needed);
        UsageError naming the directory when it is not one whole. `checked`: see `read_manifest`."""
        try:
            manifest = read_manifest(directory, FORMAT, "host", checked=checked)
            with open(os.path.join(directory, "kernels.cu")) as f:
                source = f.read()
            kernels = [KernelInfo.from_json({k: v for k, v in d.items() if k in KernelInfo.__dataclass_fields__})
                       for d in manifest["kernels"]]
            host = HostPlan.from_json(manifest["host"])
            texts = []
            for name in ("program.mlir", "reference.mlir"):
                path = os.path.join(directory, name)
                text = None
                if os.path.exists(path):
                    with open(path) as f:
                        text = f.read()
                texts.append(text)
            cubin = None
            cubin_path = os.path.join(directory, "kernels.cubin")
            if os.path.exists(cubin_path):
                with open(cubin_path, "rb") as f:
                    data = f.read()
                cubin = CubinResult(manifest["arch"], data, "",
                                    {k: KernelResources(**v) for k, v in manifest.get("resources", {}).items()},
                                    images=_images(manifest.get("images", []), len(data), manifest["kernels"]))
            element_type(manifest["dtype"])
            if manifest["layout"] not in ("aos", "soa"):
                raise ValueError(f"layout {manifest['layout']!r}")
            if not isinstance(manifest.get("meta", {}), dict):
                raise ValueError(f"meta is {type(manifest['meta']).__name__}, not an object")
            launched = {s.kernel for s in host.launches()} | {s.kernel for s in host.steps if isinstance(s, Combine)}
            missing = launched - {k.name for k in kernels}
            if missing:
                raise ValueError(f"the host plan launches kernels the manifest does not list: {sorted(missing)}")
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise UsageError(Diagnostic(f"not a valid irfuse plan directory: {e}", directory)) from None
        return Artifact(manifest["dtype"], manifest["layout"], source, kernels, host, cubin, manifest.get("meta", {}),
                        texts[0], texts[1])


def _images(images: list, size: int, kernels: list) -> tuple[tuple[int, tuple[str, ...]], ...]:
    """A manifest's `images` (each cubin image's bytes and kernels), checked against the cubin's
    size and the kernels the manifest lists: ValueError where they do not add up."""
    named = {k.get("name") for k in kernels if isinstance(k, dict)}
    if not isinstance(images, list):
        raise ValueError(f"images: {images!r} is not a list")
    out = []
    for image in images:
        if not (isinstance(image, list) and len(image) == 2 and isinstance(image[0], int)
                and not isinstance(image[0], bool) and image[0] > 0
                and isinstance(image[1], list) and all(isinstance(k, str) and k in named for k in image[1])):
            raise ValueError(f"images: {image!r} is not [bytes, [kernels of the manifest]]")
        out.append((image[0], tuple(image[1])))
    if not out:
        return ()
    listed, missing = sum(s for s, _ in out), named - {k for _, names in out for k in names}
    if listed != size:
        raise ValueError(f"images: {listed} bytes listed, kernels.cubin holds {size}")
    if missing:
        raise ValueError(f"images: no image holds kernels {sorted(missing)}")
    return tuple(out)


def _grid_text(k: KernelInfo) -> str:
    """A launch's grid, for readers of the manifest (n: the batch size; for a combine
    kernel, the number of partials)."""
    if k.fixed_grid:
        return str(k.fixed_grid)
    return "1" if k.once else f"ceil(n / {k.by})"
