"""Runs a benchmark script with the irfuse package found in $OLD (an older tree) instead of
the installed one: python old_run.py SCRIPT ARGS..."""
import os
import runpy
import sys

sys.meta_path[:] = [f for f in sys.meta_path if "editable" not in repr(f).lower()]
sys.path.insert(0, os.environ["OLD"])
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, os.path.dirname(os.path.abspath(script)))
import irfuse  # noqa: E402
print("irfuse from", irfuse.__file__)
runpy.run_path(script, run_name="__main__")
