"""`irfuse tune`: the N best plans compiled, timed in interleaved rounds, verified, ranked, the fastest saved.

On the CPU (the host execution of the generated code) so that CI runs the whole flow;
`tests/test_gpu.py` runs it on a GPU.
"""

import json
import os

import numpy as np
import pytest

from conftest import ROOT, has_gpu
from test_cli import irfuse

SYNC = os.path.join(ROOT, "examples", "synctest.kas")


def test_rank_correlations_by_hand():
    from irfuse.tools.tune import pearson, ranks, spearman

    assert spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1.0)
    assert spearman([1, 2, 3, 4], [9, 5, 2, 1]) == pytest.approx(-1.0)
    assert list(ranks([5, 1, 5, 2])) == [2.5, 0.0, 2.5, 1.0]
    # ties share their mean rank: ranks (0.5, 0.5, 2) against (0, 1, 2) -> 1.5 / sqrt(1.5 * 2)
    assert spearman([1, 1, 2], [1, 2, 3]) == pytest.approx(1.5 / np.sqrt(3.0))
    # monotone but not linear: Spearman 1, Pearson below 1
    assert spearman([1, 2, 3], [1, 10, 1000]) == pytest.approx(1.0)
    assert pearson([1, 2, 3], [1, 10, 1000]) < 0.9
    assert np.isnan(spearman([1.0], [2.0]))


def test_tune_on_cpu_ranks_verifies_saves_and_reuses(tmp_path):
    out, best_dir, plot = tmp_path / "sync.json", tmp_path / "best", tmp_path / "sync.png"
    p = irfuse("tune", SYNC, "--backend", "cpu", "--top", "4", "--n", "97", "--repeat", "6", "--rounds", "3",
               "--json", str(out), "--save-best", str(best_dir), "--plot", str(plot))
    assert p.returncode == 0, p.stdout + p.stderr
    d = json.loads(out.read_text())
    plans = d["plans"]
    assert [r["plan"] for r in plans] == [0, 1, 2, 3]
    assert all(r["verified"] for r in plans)
    # the search hands plans over in predicted order
    assert [r["predicted_s"] for r in plans] == sorted(r["predicted_s"] for r in plans)
    # 6 runs in 3 rounds: 2 per round, every round of every plan timed
    assert all(len(r["times_s"]) == 6 and min(r["times_s"]) > 0 for r in plans)
    assert all(r["measured_s"] == pytest.approx(float(np.median(r["times_s"]))) for r in plans)
    best = min(plans, key=lambda r: r["measured_s"])
    assert d["best"]["plan"] == best["plan"] and f"plan={best['plan']} " in d["best"]["pipeline"]
    from irfuse.tools.tune import spearman

    assert d["spearman"] == pytest.approx(spearman([r["predicted_s"] for r in plans],
                                                   [r["measured_s"] for r in plans]))
    # the table lists plans fastest first
    rows = [line.split("│")[1].strip() for line in p.stdout.splitlines()
            if line.startswith("│") and line.split("│")[1].strip().isdigit()]
    assert rows == [str(r["plan"]) for r in sorted(plans, key=lambda r: r["measured_s"])]
    assert plot.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the saved fastest plan carries its cubin and runs elsewhere
    manifest = json.loads((best_dir / "manifest.json").read_text())
    assert manifest["meta"]["pipeline"] == d["best"]["pipeline"] and manifest["arch"].startswith("sm_")
    p = irfuse("run", "--plan", str(best_dir), "--backend", "cpu", "--n", "61")
    assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr
    # and `compile --from-tuning` rebuilds the same plan
    again = tmp_path / "again"
    p = irfuse("compile", "--from-tuning", str(out), "-o", str(again))
    assert p.returncode == 0, p.stderr
    assert (again / "kernels.cu").read_text() == (best_dir / "kernels.cu").read_text()
    # a tuning whose pipeline now selects other kernels (the cost model changed) is refused
    assert d["best"]["blocks"] == [[k["bx"], k["by"]] for k in manifest["kernels"]]
    d["best"]["blocks"] = [[b[0], b[1] * 2] for b in d["best"]["blocks"]]
    stale = tmp_path / "stale.json"
    stale.write_text(json.dumps(d))
    p = irfuse("compile", "--from-tuning", str(stale), "-o", str(tmp_path / "stale"))
    assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
    assert str(stale) in p.stderr and "run 'irfuse tune' again" in p.stderr, p.stderr
    assert not (tmp_path / "stale").exists()
    # the Python API takes the same tuning: the fastest plan, its kernels, refusing what contradicts it
    import irfuse as api

    prog = api.compile(SYNC, tuning=out, backend="cpu")
    assert prog.compiled.meta["pipeline"] == d["best"]["pipeline"]
    assert prog.compiled.source.split("#ifndef IRFUSE_HOST", 1)[1] == \
        (best_dir / "kernels.cu").read_text().split("#ifndef IRFUSE_HOST", 1)[1]
    a = np.random.default_rng(0).random((61, 3, 3), dtype=np.float32)
    assert prog.check(a).ok
    with pytest.raises(api.UsageError, match="stale.json: its pipeline now selects other kernels"):
        api.compile(SYNC, tuning=stale, backend="cpu")
    with pytest.raises(api.UsageError, match="pipeline= cannot be given with it"):
        api.compile(SYNC, tuning=out, backend="cpu", pipeline="kas-dce,fuse-each")
    with pytest.raises(api.UsageError, match="the tuning was made for dtype 'f32', not 'f64'"):
        api.compile(SYNC, tuning=out, backend="cpu", dtype="f64")
    with pytest.raises(api.UsageError, match="give its path as the source"):
        api.compile(open(SYNC).read(), tuning=out, backend="cpu")
    # a tuning written again at the same path is compiled again (the first one's plan was kept)
    rewritten = tmp_path / "rewritten.json"
    rewritten.write_text(out.read_text())
    first = api.compile(SYNC, tuning=rewritten, backend="cpu")
    edited = json.loads(out.read_text())
    other = next(r for r in plans if r["blocks"] != edited["best"]["blocks"])
    edited["best"] = {**edited["best"], **{k: other[k] for k in ("plan", "pipeline", "groups", "blocks")}}
    rewritten.write_text(json.dumps(edited))
    second = api.compile(SYNC, tuning=rewritten, backend="cpu")
    assert second is not first and second.compiled.meta["pipeline"] == other["pipeline"]
    # a tuning whose fields were edited into other kinds: refused by name (each failed inside)
    for field, value, message in [("dtype", "f16", "'dtype' is 'f16', not one of f32, f64"),
                                  ("dtype", [], "'dtype' is \\[\\], not one of"),
                                  ("layout", None, "'layout' is None, not one of aos, soa"),
                                  ("groups", None, "'groups' is not a list of kernel groups"),
                                  ("blocks", [[0, 1]], "'blocks' is not a list of block shapes")]:
        edited = json.loads(out.read_text())
        (edited["best"] if field in edited["best"] else edited)[field] = value
        damaged = tmp_path / "edited.json"
        damaged.write_text(json.dumps(edited))
        with pytest.raises(api.UsageError, match=f"edited.json: not a tuning result of 'irfuse tune': {message}"):
            api.compile(SYNC, tuning=damaged, backend="cpu")


def test_tune_stops_at_the_plans_that_exist(tmp_path):
    src = tmp_path / "one.kas"
    src.write_text("matrix3x3 A, F;\ninput A;\nF = madd33(A, A);\nreturn F;\n")
    out = tmp_path / "one.json"
    p = irfuse("tune", str(src), "--backend", "cpu", "--top", "40", "--n", "5", "--repeat", "1", "--rounds", "1",
               "--json", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    plans = json.loads(out.read_text())["plans"]
    assert 1 <= len(plans) < 40 and all(r["verified"] for r in plans)


@pytest.mark.parametrize("bad_round, why", [(0, "MISMATCH (largest error"), (1, "differs from the first round's")])
def test_a_plan_that_mismatches_is_reported_and_never_chosen(tmp_path, monkeypatch, bad_round, why):
    """Plan 0 is made to return a wrong element in one round only: against the reference in
    the first round, or differing from its first round later (as a flaky race would): it must
    be marked unverified, named, and the fastest is picked among the rest."""
    import argparse

    from rich.console import Console

    from irfuse.runtime import executor
    from irfuse.tools.tune import tune

    real_run = executor.Executor.run
    calls = {}

    def run(self, inputs, n, **kw):
        res = real_run(self, inputs, n, **kw)
        if "plan=0 " in self.plan.meta["pipeline"]:
            calls[0] = calls.get(0, 0) + 1
            if calls[0] == bad_round + 1:
                name = next(iter(res.outputs))
                res.outputs[name].flat[3] += 1.0
        return res

    monkeypatch.setattr(executor.Executor, "run", run)
    out = tmp_path / "t.json"
    args = argparse.Namespace(file=SYNC, top=3, max_size=8, n=33, repeat=3, rounds=3, back_to_back=1,
                              backend="cpu", profile=None, json=str(out), plot=None, save_best=None,
                              dtype="f32", arch=None, registers=None)
    console = Console(record=True, width=200)
    assert tune(args, console) == 1
    d = json.loads(out.read_text())
    bad = d["plans"][0]
    assert not bad["verified"] and bad["mismatch"].startswith(f"round {bad_round}:") and why in bad["mismatch"]
    assert all(r["verified"] for r in d["plans"][1:]) and d["best"]["plan"] != 0
    assert f"plan 0 does not match the reference: round {bad_round}" in console.export_text()


@pytest.mark.parametrize("flag", ["--rounds", "--repeat", "--back-to-back"])
def test_bad_counts_are_refused(flag):
    p = irfuse("tune", SYNC, "--backend", "cpu", flag, "0")
    assert p.returncode == 1 and "must be at least 1" in p.stderr


@pytest.mark.skipif(has_gpu(), reason="checks the message given without a GPU")
def test_tune_without_gpu_points_to_the_cpu_backend():
    p = irfuse("tune", SYNC)
    assert p.returncode == 1
    assert "synctest.kas" in p.stderr and "--backend cpu" in p.stderr


def test_rounds_alternate_their_order():
    from irfuse.tools.tune import alternating_rounds

    assert list(alternating_rounds(["a", "b", "c"], 3)) == [
        (0, "a"), (0, "b"), (0, "c"), (1, "c"), (1, "b"), (1, "a"), (2, "a"), (2, "b"), (2, "c")]


def test_tune_without_matplotlib_says_which_extra_to_install(tmp_path):
    """--plot needs matplotlib, which the [plot] extra installs (not the GPU extra): without it
    the tuning still runs and says so."""
    import subprocess
    import sys

    blocked = tmp_path / "blocked" / "matplotlib"
    blocked.mkdir(parents=True)
    (blocked / "__init__.py").write_text("raise ImportError('matplotlib is blocked for this test')\n")
    env = {**os.environ, "COLUMNS": "200",
           "PYTHONPATH": os.pathsep.join([str(tmp_path / "blocked"), os.environ.get("PYTHONPATH", "")])}
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "tune", SYNC, "--backend", "cpu", "--top", "1",
                        "--n", "97", "--repeat", "2", "--rounds", "1", "--json", str(tmp_path / "t.json"),
                        "--plot", str(tmp_path / "t.png")], capture_output=True, text=True, env=env)
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stdout + p.stderr
    assert "no plot: matplotlib is not installed (pip install 'irfuse[plot]')" in p.stdout
    assert not (tmp_path / "t.png").exists() and (tmp_path / "t.json").exists()


def test_tune_in_structure_of_arrays_and_its_tuning_reused(tmp_path):
    """`tune --layout soa` times and verifies the SoA plans; the tuning records the layout, and
    `compile --from-tuning` and `irfuse.compile(tuning=)` rebuild the plan for it."""
    out = tmp_path / "soa.json"
    p = irfuse("tune", SYNC, "--backend", "cpu", "--layout", "soa", "--top", "2", "--n", "97", "--repeat", "2",
               "--rounds", "1", "--json", str(out), "--save-best", str(tmp_path / "best"))
    assert p.returncode == 0, p.stdout + p.stderr
    d = json.loads(out.read_text())
    assert d["layout"] == "soa" and all(r["verified"] for r in d["plans"])
    assert 'kas.layout = "soa"' in (tmp_path / "best" / "program.mlir").read_text()
    p = irfuse("compile", "--from-tuning", str(out), "-o", str(tmp_path / "plan"))
    assert p.returncode == 0, p.stderr
    assert 'kas.layout = "soa"' in (tmp_path / "plan" / "program.mlir").read_text()
    import irfuse as api

    prog = api.compile(SYNC, tuning=out, backend="cpu")
    assert prog.layout == "soa"
    a = np.random.default_rng(1).random((3, 3, 61), dtype=np.float32)
    assert prog.check(a).ok
    with pytest.raises(api.UsageError, match="compiled from a tuning result or read from a saved plan, for contiguous arrays in layout 'soa'"):
        prog(np.zeros((61, 3, 3), np.float32))
    with pytest.raises(api.UsageError, match="the tuning was made for layout 'soa', not 'aos'"):
        api.compile(SYNC, tuning=out, backend="cpu", layout="aos")
