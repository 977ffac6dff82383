"""A program of several stages, as the runtime sees it: each stage a compiled artifact of its
own, run in order, the values one stage makes and a later one reads handed between them by
name.

A program over a mesh that works per node (nodal statements, reductions of nodal values) runs
as passes over the nodes and over the elements in turn (`irfuse.transforms.node_phases`):
each pass is an ordinary program, planned and compiled alone, over the nodes (its batch is
the nodes) or over the mesh's elements. `StagedArtifact` holds them with the whole program's
interface (names, value shapes, which are nodal, uniform, connectivities) and, for the
verification only, the program before it was cut (`reference_text`). `fused`, where the
compiler made one, is the same program with fewer stages: an elements stage whose scatter's
sums the next nodes stage read runs that stage's kernel itself, as a launch over the nodes that
adds each node's partials (`host_plan.NodeLaunch`); a call runs it in one piece in the
scatter's order, and the stages one by one otherwise. A plan directory of a
staged program holds a manifest listing the stages and a directory per stage (`stage0`,
`stage1`, ...) with that stage's plan (`Artifact.save`), and `fused0`, ... for the fused
stages; `load_plan` reads either kind with JSON and bytes only.
"""

from __future__ import annotations

import json
import os

from irfuse.artifact.artifact import Artifact, read_manifest, write_manifest
from irfuse.artifact.records import record
from irfuse.diagnostics import Diagnostic, UsageError

FORMAT = 2  # 2: the manifest carries a digest of itself and the reference program (`plan_digest`)
STAGED_FILES = ("reference.mlir",)  # (each stage's directory carries its own)
OVER = ("nodes", "elements")


@record
class Stage:
    over: str  # "nodes" (its batch is the mesh's nodes) or "elements" (a program over the mesh)
    inputs: tuple[str, ...]  # the program's inputs it reads, and values earlier stages made
    outputs: tuple[str, ...]  # the program's outputs it makes, and values later stages read
    artifact: Artifact


class StagedArtifact:
    """A compiled program of several stages (see the module)."""

    def __init__(self, name: str, inputs: tuple[str, ...], outputs: tuple[str, ...],
                 shapes: dict[str, tuple[int, ...]], uniform: frozenset[str], nodal: frozenset[str],
                 index_inputs: frozenset[str], stages: list[Stage], meta: dict | None = None,
                 reference_text: str | None = None, fused: list[Stage] | None = None):
        self.name = name
        self.inputs, self.outputs, self.shapes = tuple(inputs), tuple(outputs), dict(shapes)
        self.uniform, self.nodal, self.index_inputs = frozenset(uniform), frozenset(nodal), frozenset(index_inputs)
        self.stages = stages
        self.fused = fused  # (see the module)
        self.meta = meta if meta is not None else {}
        self._reference_text = reference_text

    @property
    def dtype(self) -> str:
        return self.stages[0].artifact.dtype

    @property
    def layout(self) -> str:
        return "aos"  # (the stages read arrays of structures; a call rearranges others)

    @property
    def reference_text(self) -> str | None:
        """The whole program before it was cut into stages, as IR text (what the reference
        evaluates)."""
        return self._reference_text

    @property
    def sum_by(self) -> int:
        return min(s.artifact.sum_by for s in self.stages)

    @property
    def kernels(self) -> list:
        return [k for s in self.stages for k in s.artifact.kernels]

    def resources(self, kernel: str):
        """ptxas's report of a kernel of any stage, as `Artifact.resources` (None where no
        stage's cubin holds it)."""
        return next((r for s in self.stages if (r := s.artifact.resources(kernel)) is not None), None)

    def manifest(self) -> dict:
        return {
            "format": FORMAT, "meta": self.meta,
            "program": {"name": self.name, "inputs": list(self.inputs), "outputs": list(self.outputs),
                        "shapes": {k: list(v) for k, v in self.shapes.items()}, "uniform": sorted(self.uniform),
                        "nodal": sorted(self.nodal), "index": sorted(self.index_inputs)},
            "stages": [{"over": s.over, "inputs": list(s.inputs), "outputs": list(s.outputs),
                        "directory": f"stage{k}"} for k, s in enumerate(self.stages)],
            # (a fused stage that is one of the stages is named by its index)
            **({"fused": [{"stage": self._index(s)} if self._index(s) is not None else
                          {"over": s.over, "inputs": list(s.inputs), "outputs": list(s.outputs),
                           "directory": f"fused{k}"} for k, s in enumerate(self.fused)]} if self.fused else {}),
        }

    def _index(self, stage: Stage) -> int | None:
        return next((k for k, s in enumerate(self.stages) if s is stage), None)

    def save(self, directory: str) -> list[str]:
        """Writes the plan directory (a manifest, the reference program, a directory per
        stage); returns the paths written, relative to it."""
        os.makedirs(directory, exist_ok=True)
        written = []
        for kind, stages in (("stage", self.stages), ("fused", self.fused or [])):
            for k, stage in enumerate(stages):
                if kind == "fused" and self._index(stage) is not None:
                    continue
                written += [os.path.join(f"{kind}{k}", f)
                            for f in stage.artifact.save(os.path.join(directory, f"{kind}{k}"))]
        reference = os.path.join(directory, "reference.mlir")
        if self.reference_text is not None:
            with open(reference, "w") as f:
                f.write(self.reference_text)
            written.append("reference.mlir")
        elif os.path.exists(reference):
            os.unlink(reference)
        manifest = self.manifest()
        write_manifest(directory, manifest, STAGED_FILES)
        written.append("manifest.json")
        return written

    @staticmethod
    def load(directory: str, checked: bool = False) -> "StagedArtifact":
        """The staged program a plan directory holds; UsageError naming the directory when it
        is not one whole. `checked`: see `artifact.read_manifest`."""
        try:
            manifest = read_manifest(directory, FORMAT, "stages", "staged ", STAGED_FILES, checked)
            p = manifest["program"]
            stages = _stages(directory, manifest["stages"], [], checked)
            if not stages:
                raise ValueError("it lists no stage")
            fused = _stages(directory, manifest.get("fused", []), stages, checked)
            _check_names(p, stages, fused)
            reference = None
            path = os.path.join(directory, "reference.mlir")
            if os.path.exists(path):
                with open(path) as f:
                    reference = f.read()
            return StagedArtifact(p["name"], tuple(p["inputs"]), tuple(p["outputs"]),
                                  {k: tuple(v) for k, v in p["shapes"].items()}, frozenset(p["uniform"]),
                                  frozenset(p["nodal"]), frozenset(p["index"]), stages, manifest.get("meta", {}),
                                  reference, fused or None)
        except UsageError:
            raise
        except (OSError, ValueError, KeyError, TypeError, AttributeError) as e:
            raise UsageError(Diagnostic(f"not a valid irfuse plan directory: {e}", directory)) from None


def _check_names(program: dict, stages: list[Stage], fused: list[Stage]) -> None:
    """ValueError where the manifest's names do not hang together: the program's inputs and
    outputs lists of names, each with a shape; its uniform, nodal and connectivity names among
    them; each stage reading only the program's inputs and earlier stages' outputs, and the
    stages making every output (the fused sequence alike)."""
    def names(what: str, v) -> tuple[str, ...]:
        if not isinstance(v, (list, tuple)) or not all(isinstance(n, str) for n in v):
            raise ValueError(f"{what} is {v!r}, not a list of names")
        return tuple(v)

    inputs, outputs = names("the program's inputs", program["inputs"]), names("its outputs", program["outputs"])
    shapes = program["shapes"]
    for n in (*inputs, *outputs):
        shape = shapes.get(n) if isinstance(shapes, dict) else None
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d > 0
                                                  for d in shape):
            raise ValueError(f"'{n}' has no shape (a list of whole numbers) among the program's shapes")
    for key in ("uniform", "nodal", "index"):
        stray = set(names(f"the program's {key} names", program[key])) - set(inputs) - set(outputs)
        if stray:
            raise ValueError(f"the program's {key} names {sorted(stray)} are not its inputs or outputs")
    for label, sequence in (("stage", stages), ("fused stage", fused)):
        made = set(inputs)
        for k, stage in enumerate(sequence):
            unknown = [n for n in names(f"{label} {k}'s inputs", stage.inputs) if n not in made]
            if unknown:
                raise ValueError(f"{label} {k} reads {unknown}, which neither the program's inputs nor an earlier "
                                 "stage's outputs hold")
            made |= set(names(f"{label} {k}'s outputs", stage.outputs))
        missing = [n for n in outputs if n not in made] if sequence else []
        if missing:
            raise ValueError(f"no {label} makes the outputs {missing}")


def _stages(directory: str, listed: list, earlier: list[Stage], checked: bool = False) -> list[Stage]:
    """The stages a manifest lists, each loaded from its directory or one of `earlier` (by
    index)."""
    stages = []
    for s in listed:
        if "stage" in s:
            k = int(s["stage"])
            if not 0 <= k < len(earlier):
                raise ValueError(f"a fused stage names stage {k} of {len(earlier)}")
            stages.append(earlier[k])
            continue
        if s["over"] not in OVER or os.sep in s["directory"] or s["directory"].startswith("."):
            raise ValueError(f"a stage over {s['over']!r} in {s['directory']!r}")
        stages.append(Stage(s["over"], tuple(s["inputs"]), tuple(s["outputs"]),
                            Artifact.load(os.path.join(directory, s["directory"]), checked)))
    return stages


def is_staged(directory: str) -> bool:
    """Whether a plan directory holds a staged program (its manifest lists stages)."""
    try:
        with open(os.path.join(directory, "manifest.json")) as f:
            return "stages" in json.load(f)
    except (OSError, ValueError):
        return False


def load_plan(directory: str, checked: bool = False) -> Artifact | StagedArtifact:
    """The program a plan directory holds: one artifact, or a staged program (`checked`: see
    `artifact.read_manifest`)."""
    return StagedArtifact.load(directory, checked) if is_staged(directory) else Artifact.load(directory, checked)
