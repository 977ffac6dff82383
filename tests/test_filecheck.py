"""Runs the lit/FileCheck suite under pytest, so `pytest` alone runs every test."""

import os
import subprocess
import sys

HERE = os.path.dirname(__file__)


def test_filecheck_suite():
    run_lit = "import sys; from lit.main import main; sys.argv[0] = 'lit'; main()"
    proc = subprocess.run([sys.executable, "-c", run_lit, "-v", os.path.join(HERE, "filecheck")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
    assert "Passed" in proc.stdout
