"""Runs the lit/FileCheck suite under pytest, so `pytest` alone runs every test."""

import os
import subprocess
import sys

HERE = os.path.dirname(__file__)


def test_filecheck_suite():
    proc = subprocess.run([sys.executable, "-m", "lit", "-v", os.path.join(HERE, "filecheck")],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-20000:] + proc.stderr[-5000:]
    assert "Passed" in proc.stdout
