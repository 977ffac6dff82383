"""What every benchmark result records about its run, and where it is kept by default.

`dump(obj, f)` is `json.dump` with a `meta` block first: the date (UTC), the git commit, the
exact command, the GPU (name, driver) where `nvidia-smi` answers, the host's CPU count and the
Python, NumPy and irfuse versions. `result_path(topic)` is the default place of a script's
JSON: `benchmarks/results/<topic>/<date>_<gpu>.json` (`cpu` where no GPU answers), beside the
earlier runs of that topic (`benchmarks/NOTES.md` says what each measured)."""

from __future__ import annotations

import datetime
import json
import os
import platform
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))


def _gpu() -> tuple[str | None, str | None]:
    try:
        out = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=20).stdout.strip().splitlines()
    except (OSError, subprocess.SubprocessError):
        return None, None
    if not out:
        return None, None
    name, _, driver = out[0].partition(",")
    return name.strip(), driver.strip()


def run_meta() -> dict:
    import numpy as np

    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                                cwd=HERE, timeout=20).stdout.strip() or None
    except (OSError, subprocess.SubprocessError):
        commit = None
    try:
        import irfuse
        version = irfuse.__version__
    except ImportError:
        version = None
    gpu, driver = _gpu()
    return {"date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"), "commit": commit,
            "command": " ".join([os.path.relpath(sys.argv[0]) if sys.argv else "", *sys.argv[1:]]),
            "gpu": gpu, "driver": driver, "cpus": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "irfuse": version}


def dump(obj, f, **kwargs) -> None:
    """`json.dump` of a result with the run's `meta` block first (where it is a dict)."""
    json.dump({"meta": run_meta(), **obj} if isinstance(obj, dict) else obj, f, **kwargs)


def result_path(topic: str) -> str:
    """`benchmarks/results/<topic>/<date>_<gpu>.json`, its folder made."""
    gpu, _ = _gpu()
    label = (gpu or "cpu").lower().replace("nvidia ", "").replace(" ", "_")
    date = datetime.date.today().isoformat()
    folder = os.path.join(HERE, "results", topic)
    os.makedirs(folder, exist_ok=True)
    return os.path.join(folder, f"{date}_{label}.json")
