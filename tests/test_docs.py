"""The documentation cannot drift from the code: every Python and shell example of the README
and of `docs/` runs here (on the CPU backend), every KAS block compiles and runs against the
reference, every excerpt marked `<!-- from: PATH -->` is that file's text, and every relative
link and anchor leads somewhere.

A block's marker is the line just before its fence: `<!-- from: PATH -->` (an excerpt, checked
verbatim, and run like any other block), `<!-- not run: WHY -->` (skipped here, with the reason
in the page), `<!-- gpu -->` (needs a GPU: `tests/test_gpu.py` runs those). A page's Python
blocks run in order in one namespace, in a fresh process from the repository's root, so a
page reads as one sitting of a user's. ```text blocks are illustrations and are not run."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from dataclasses import dataclass

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PAGES = ["README.md"] + sorted(os.path.join("docs", f) for f in os.listdir(os.path.join(ROOT, "docs"))
                               if f.endswith(".md"))
FENCE = re.compile(r"^(?:<!-- (?P<marker>[^>]*?) -->\n)?```(?P<lang>\w*)\n(?P<code>.*?)^```$", re.M | re.S)


@dataclass
class Block:
    page: str
    line: int  # the line of the block's first line of code, 1-based
    lang: str
    code: str
    marker: str  # "", "gpu", "not run: ...", "from: PATH"


def blocks(page: str) -> list[Block]:
    text = open(os.path.join(ROOT, page)).read()
    out = []
    for m in FENCE.finditer(text):
        line = text.count("\n", 0, m.start("code")) + 1
        out.append(Block(page, line, m.group("lang"), m.group("code"), m.group("marker") or ""))
    return out


def python_script(chosen: list[Block]) -> str:
    """The blocks as one script whose tracebacks name the page and its line numbers."""
    parts = ["ns = {'__name__': '__main__'}"]
    for b in chosen:
        padded = "\n" * (b.line - 1) + b.code
        parts.append(f"exec(compile({padded!r}, {b.page!r}, 'exec'), ns)")
    return "\n".join(parts)


def run_python(chosen: list[Block], cwd: str = ROOT, timeout: int = 900) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", python_script(chosen)], cwd=cwd, capture_output=True, text=True,
                          timeout=timeout, env=env)


def _runs_here(b: Block) -> bool:
    return b.marker == "" or b.marker.startswith("from:")


def test_every_block_has_a_known_marker_and_language():
    for page in PAGES:
        for b in blocks(page):
            assert b.lang in ("python", "sh", "kas", "text"), f"{page}:{b.line}: a ```{b.lang} block"
            assert b.marker in ("", "gpu") or b.marker.startswith(("not run: ", "from: ")), \
                f"{page}:{b.line}: marker {b.marker!r}"


@pytest.mark.heavy
@pytest.mark.parametrize("page", [p for p in PAGES if any(b.lang == "python" and _runs_here(b) for b in blocks(p))])
def test_the_pages_python_examples_run(page):
    chosen = [b for b in blocks(page) if b.lang == "python" and _runs_here(b)]
    p = run_python(chosen)
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-8000:]


def _shell_lines(b: Block) -> list[str]:
    lines = []
    for line in b.code.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        # The README's set-up part installs the checkout, which the suite runs from already.
        line = re.sub(r"^pip install [^&]*&&\s*", "", line)
        lines.append(line)
    return lines


@pytest.mark.parametrize("where", [f"{b.page}:{b.line}" for p in PAGES for b in blocks(p)
                                   if b.lang == "sh" and _runs_here(b)])
def test_the_pages_shell_examples_run(where, tmp_path):
    """Each command in a scratch directory where `examples/` is the checkout's (what a
    command writes stays there), on the CPU backend where no GPU is present."""
    page, line = where.rsplit(":", 1)
    (b,) = [b for b in blocks(page) if b.line == int(line)]
    os.symlink(os.path.join(ROOT, "examples"), tmp_path / "examples")
    bindir = os.path.dirname(sys.executable)
    env = dict(os.environ, PATH=bindir + os.pathsep + os.environ.get("PATH", ""))
    for command in _shell_lines(b):
        p = subprocess.run(command, shell=True, cwd=tmp_path, capture_output=True, text=True, timeout=900, env=env)
        assert p.returncode == 0, f"{where}: {command}\n{p.stdout[-3000:]}{p.stderr[-3000:]}"


@pytest.mark.parametrize("where", [f"{b.page}:{b.line}" for p in PAGES for b in blocks(p) if b.marker.startswith("from:")])
def test_excerpts_are_their_files_text(where):
    page, line = where.rsplit(":", 1)
    (b,) = [b for b in blocks(page) if b.line == int(line)]
    path = b.marker.split(":", 1)[1].strip()
    text = open(os.path.join(ROOT, path)).read()
    assert b.code.strip() in text, f"{where}: the block is not a part of {path} as it is now"


@pytest.mark.parametrize("where", [f"{b.page}:{b.line}" for p in PAGES for b in blocks(p)
                                   if b.lang == "kas" and _runs_here(b)])
def test_kas_blocks_compile_and_agree_with_the_reference(where, tmp_path):
    """`irfuse run` of the block (a program over a mesh on a random mesh), on the CPU backend."""
    page, line = where.rsplit(":", 1)
    (b,) = [b for b in blocks(page) if b.line == int(line)]
    source = tmp_path / "block.kas"
    source.write_text(b.code)
    p = subprocess.run([sys.executable, "-m", "irfuse", "run", str(source), "--backend", "cpu", "--n", "300"],
                       capture_output=True, text=True, timeout=900, cwd=ROOT)
    assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, \
        f"{where}\n{p.stdout[-3000:]}{p.stderr[-3000:]}"


def _slug(heading: str) -> str:
    """GitHub's anchor of a heading: lower case, punctuation but hyphens dropped, spaces as hyphens."""
    text = re.sub(r"[`*_]", "", heading.strip().lower())
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(path: str) -> set[str]:
    text = re.sub(r"^```.*?^```$", "", open(path).read(), flags=re.M | re.S)
    return {_slug(m) for m in re.findall(r"^#+ (.*)$", text, flags=re.M)}


@pytest.mark.parametrize("page", PAGES)
def test_relative_links_and_anchors_lead_somewhere(page):
    text = re.sub(r"^```.*?^```$", "", open(os.path.join(ROOT, page)).read(), flags=re.M | re.S)
    here = os.path.dirname(os.path.join(ROOT, page))
    for target in re.findall(r"\]\(([^)\s]+)\)", text):
        if re.match(r"[a-z]+:", target):
            continue
        path, _, anchor = target.partition("#")
        full = os.path.normpath(os.path.join(here, path)) if path else os.path.join(ROOT, page)
        assert os.path.exists(full), f"{page}: link to {target}: no such file"
        if anchor and full.endswith(".md"):
            assert anchor in _anchors(full), f"{page}: link to {target}: no such heading"


def test_the_readme_is_short_and_holds_the_two_commands():
    text = open(os.path.join(ROOT, "README.md")).read()
    assert len(text.splitlines()) <= 200
    commands = [b.code.strip() for b in blocks("README.md") if b.lang == "sh"]
    assert commands[:2] == ["pip install -e . && irfuse run examples/bigfusion.kas",
                            'pip install -e ".[test]" && pytest']
    ci = open(os.path.join(ROOT, ".ci", "run")).read()
    assert commands[1] in ci


def test_the_checker_finds_a_wrong_example(tmp_path):
    """The runner reports a failing block at its page and line."""
    bad = Block("docs/x.md", 7, "python", "import irfuse\nraise ValueError('wrong')\n", "")
    p = run_python([bad])
    assert p.returncode != 0 and 'File "docs/x.md", line 8' in p.stderr


def test_the_architecture_names_every_module():
    """Any pass, op, analysis or runtime piece is one hop from `docs/architecture.md`: each
    module of the package is named under its package there."""
    text = open(os.path.join(ROOT, "docs", "architecture.md")).read()
    index = text.split("## Module index", 1)[1].split("\n## ", 1)[0] + "\n\n"
    sections = {m.group(1): m.group(2) for m in re.finditer(r"\*\*(\w+)\*\*:(.*?)(?=\n\n)", index, flags=re.S)}
    missing = []
    for package in sorted(os.listdir(os.path.join(ROOT, "irfuse"))):
        folder = os.path.join(ROOT, "irfuse", package)
        if not os.path.isdir(folder) or package.startswith("__") or package == "examples":
            continue
        for f in sorted(os.listdir(folder)):
            if f.endswith((".py", ".h")) and f != "__init__.py" and f"`{f}`" not in sections.get(package, ""):
                missing.append(f"irfuse/{package}/{f}")
    assert not missing, f"modules docs/architecture.md does not name under their package: {missing}"
