"""irfuse's layers, read from the source: every import statement (function-local ones
included) goes down the layer order, no file imports itself through others, and the
dialects import nothing of irfuse outside themselves but the diagnostics and the plain data
of `irfuse.artifact` (layouts, element types)."""

import ast
import os
from collections import defaultdict

ROOT = os.path.join(os.path.dirname(__file__), "..", "irfuse")

# Bottom to top; a package may import from its own layer's modules only where listed as
# peers below, and from every layer beneath it.
LAYERS = [
    {"irfuse.diagnostics", "irfuse._version"},
    {"irfuse.artifact"},  # what the runtime runs: launch interface, host steps, binaries (no xDSL)
    {"irfuse.mesh"},  # meshes as arrays: generation, renumbering for locality (NumPy; PyTorch on a GPU)
    {"irfuse.runtime"},  # runs artifacts: devices, the host steps, chunks (no compiler below it)
    {"irfuse.dialects"},
    {"irfuse.library"},
    {"irfuse.verification"},  # the NumPy reference of a kas program, and the comparison with it
    {"irfuse.kernel"},  # the kernel model, its bridge to IR, the emitted kernel's policies
    {"irfuse.analysis"},
    {"irfuse.transforms"},
    {"irfuse.planner"},  # the cost model and the fusion search (a derivative's loops are its decision too)
    {"irfuse.backend", "irfuse.frontend"},
    {"irfuse.passes"},
    {"irfuse.driver"},
    {"irfuse.api"},  # irfuse.compile and Program: the library interface
    {"irfuse.dask"},  # programs over Dask arrays, on the library interface
    {"irfuse.universe"},  # what stock xdsl-opt loads: dialects, passes, the cuda target
    {"irfuse.tools"},
    {"irfuse.testing"},
    # the package (names imported on first use), its op listing, the framework operators
    {"irfuse", "irfuse.__main__", "irfuse.ops", "irfuse.torch", "irfuse.jax"},
]
# (importer, imported) between packages of one layer: the package exposes `irfuse.ops`.
PEERS_ALLOWED: set[tuple[str, str]] = {("irfuse", "irfuse.ops")}


def _modules() -> dict[str, str]:
    out = {}
    for dirpath, _, files in os.walk(ROOT):
        for f in files:
            if f.endswith(".py"):
                path = os.path.join(dirpath, f)
                rel = os.path.relpath(path, os.path.dirname(ROOT))[:-3].replace(os.sep, ".")
                out[rel[: -len(".__init__")] if rel.endswith(".__init__") else rel] = path
    return out


def import_graph() -> dict[str, set[str]]:
    """module -> irfuse modules it imports (every import statement, at any depth)."""
    mods = _modules()
    graph: dict[str, set[str]] = defaultdict(set)
    for mod, path in mods.items():
        package = mod if path.endswith("__init__.py") else mod.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(open(path).read(), path)):
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    parts = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join(parts + ([base] if base else []))
                names = [base + "." + a.name for a in node.names] + [base]
            else:
                continue
            for name in names:
                while name and name not in mods:
                    name = name.rsplit(".", 1)[0] if "." in name else ""
                if name and name != mod:
                    graph[mod].add(name)
    return graph


def _package(mod: str) -> str:
    parts = mod.split(".")
    return ".".join(parts[:2]) if len(parts) > 2 or mod in ("irfuse.diagnostics", "irfuse.universe",
                                                              "irfuse._version", "irfuse.__main__") else mod


def _layer(pkg: str) -> int:
    for k, layer in enumerate(LAYERS):
        if pkg in layer:
            return k
    raise AssertionError(f"{pkg} is in no layer: add it to LAYERS (and to docs/architecture.md)")


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    color: dict[str, int] = {}
    stack: list[str] = []

    def visit(u: str) -> list[str] | None:
        color[u] = 1
        stack.append(u)
        for v in sorted(graph.get(u, ())):
            if color.get(v) == 1:
                return stack[stack.index(v):] + [v]
            if v not in color and (found := visit(v)):
                return found
        stack.pop()
        color[u] = 2
        return None

    for u in sorted(graph):
        if u not in color and (found := visit(u)):
            return found
    return None


def test_no_import_cycle_between_files():
    assert _cycle(import_graph()) is None, " -> ".join(_cycle(import_graph()) or [])


def test_no_import_cycle_between_packages():
    packages: dict[str, set[str]] = defaultdict(set)
    for mod, targets in import_graph().items():
        for t in targets:
            if _package(t) != _package(mod):
                packages[_package(mod)].add(_package(t))
    assert _cycle(packages) is None, " -> ".join(_cycle(packages) or [])


def test_every_import_goes_down_the_layers():
    wrong = []
    for mod, targets in import_graph().items():
        for t in targets:
            a, b = _package(mod), _package(t)
            if a == b:
                continue
            if _layer(b) > _layer(a) or (_layer(b) == _layer(a) and (a, b) not in PEERS_ALLOWED):
                wrong.append(f"{mod} imports {t}")
    assert not wrong, "\n".join(sorted(wrong))


def test_dialects_import_nothing_above_them():
    outside = [f"{mod} imports {t}" for mod, targets in import_graph().items() if mod.startswith("irfuse.dialects")
               for t in targets
               if not t.startswith(("irfuse.dialects", "irfuse.artifact")) and t != "irfuse.diagnostics"]
    assert not outside, "\n".join(outside)


def test_the_runtime_imports_only_the_artifact_and_itself():
    """The runtime runs artifacts: it never imports the compiler's layers (the dialects, the
    library, the backend's compilers, the planner, the driver), so a saved plan runs without
    them (`tests/test_runtime_alone.py` runs one where importing xDSL raises). It may use
    `irfuse.mesh` (NumPy only: a scatter's inverse connectivity is made where it runs)."""
    allowed = ("irfuse.runtime", "irfuse.artifact", "irfuse.diagnostics", "irfuse.mesh")
    outside = [f"{mod} imports {t}" for mod, targets in import_graph().items()
               if mod.startswith(("irfuse.runtime", "irfuse.artifact")) for t in targets if not t.startswith(allowed)]
    assert not outside, "\n".join(outside)
    xdsl = [mod for mod, path in _modules().items() if mod.startswith(allowed)
            and any(isinstance(node, (ast.Import, ast.ImportFrom)) and any(
                (a.name if isinstance(node, ast.Import) else node.module or "").startswith("xdsl")
                for a in node.names) for node in ast.walk(ast.parse(open(path).read())))]
    assert xdsl == ["irfuse.diagnostics"], xdsl  # (which falls back to plain exceptions without xDSL)


def test_the_library_interface_calls_the_compiler_only_through_the_driver():
    """`irfuse.api`, `irfuse.dask`, `irfuse.torch` and `irfuse.jax` reach the compiler through
    the driver alone (sources, derivatives, stages, options, binaries, phases): they import
    only themselves, the driver, the artifact, the runtime, meshes, the verification and the
    diagnostics."""
    interface = ("irfuse.api", "irfuse.dask", "irfuse.torch", "irfuse.jax")
    allowed = (*interface, "irfuse.driver", "irfuse.artifact", "irfuse.runtime", "irfuse.mesh",
               "irfuse.verification", "irfuse.diagnostics")
    outside = [f"{mod} imports {t}" for mod, targets in import_graph().items()
               if mod.startswith(interface) for t in targets if not t.startswith(allowed)]
    assert not outside, "\n".join(sorted(outside))


def test_the_frontend_imports_neither_the_planner_nor_the_transforms():
    """The frontend reads sources into IR; `derivative` lines are applied by the driver (the
    passes `kas-jvp`, `kas-vjp`), which may plan."""
    outside = [f"{mod} imports {t}" for mod, targets in import_graph().items() if mod.startswith("irfuse.frontend")
               for t in targets if t.startswith(("irfuse.planner", "irfuse.transforms"))]
    assert not outside, "\n".join(sorted(outside))


def test_the_checker_sees_imports_at_any_depth(tmp_path, monkeypatch):
    """The graph counts function-local and relative imports: a check that cannot miss them."""
    pkg = tmp_path / "irfuse"
    (pkg / "dialects").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "dialects" / "__init__.py").write_text("")
    (pkg / "dialects" / "a.py").write_text("def f():\n    from ..library import b\n")
    (pkg / "library").mkdir()
    (pkg / "library" / "__init__.py").write_text("")
    (pkg / "library" / "b.py").write_text("import irfuse.dialects.a\n")
    monkeypatch.setattr(__import__(__name__), "ROOT", str(pkg))
    graph = import_graph()
    assert graph["irfuse.dialects.a"] == {"irfuse.library", "irfuse.library.b"}
    assert _cycle(graph) is not None
