"""Runs the lit/FileCheck suite under pytest, so `pytest` alone runs every test."""

import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(__file__)


@pytest.mark.heavy
def test_filecheck_suite():
    run_lit = "import sys; from lit.main import main; sys.argv[0] = 'lit'; main()"
    proc = subprocess.run([sys.executable, "-c", run_lit, "-v", os.path.join(HERE, "filecheck")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
    assert "Passed" in proc.stdout


def test_every_registered_pass_has_filecheck_tests_and_a_failure_case():
    """Each pass of the registry is run by a RUN line of some FileCheck test, and some test
    of it checks an error (`CHECK...: error` or `--verify-diagnostics`): a pass added without
    its tests fails here. The `test-print-*` passes only print an analysis of IR the verifiers
    accepted and refuse nothing of their own, so they need their RUN lines alone."""
    import re

    from irfuse.passes.registry import PASSES

    runs: dict[str, set[str]] = {}
    for dirpath, _, files in os.walk(os.path.join(HERE, "filecheck")):
        for f in files:
            if f.endswith((".kas", ".mlir")):
                text = open(os.path.join(dirpath, f)).read()
                for line in text.splitlines():
                    if "RUN:" in line:
                        for name in re.findall(r"[a-z][a-z0-9-]+", line):
                            runs.setdefault(name, set()).add(text)
    missing = [p.name for p in PASSES if p.name not in runs]
    assert not missing, f"passes no FileCheck test runs: {missing}"
    no_failure = [p.name for p in PASSES if not p.name.startswith("test-print-") and not any(re.search(r"error|verify-diagnostics|not %irfuse|refus", t) for t in runs[p.name])]
    assert not no_failure, f"passes without a FileCheck failure case: {no_failure}"


def test_each_pass_module_defines_one_module_pass():
    """xDSL's rule: one `ModulePass` per file of `irfuse/passes/` (the analyses' test passes
    share `test_print_analyses.py`, which only prints)."""
    import ast

    folder = os.path.join(HERE, "..", "irfuse", "passes")
    for f in sorted(os.listdir(folder)):
        if not f.endswith(".py") or f == "test_print_analyses.py":
            continue
        tree = ast.parse(open(os.path.join(folder, f)).read())
        passes = [n.name for n in ast.walk(tree) if isinstance(n, ast.ClassDef)
                  and any(getattr(b, "id", getattr(b, "attr", "")) == "ModulePass" for b in n.bases)]
        assert len(passes) <= 1, f"{f} defines {passes}"
