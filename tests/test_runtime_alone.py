"""The runtime depends on the artifact only: a saved plan (`irfuse run --plan DIR`, a program
of several stages too) and a program the disk cache holds (`irfuse.compile` of the same source
again) run in a process where importing xDSL raises, with the results of the compiling
process."""

import os
import subprocess
import sys
import textwrap

import numpy as np

from conftest import ROOT

# Run as the first lines of a child process: every import of xdsl (and of what needs it)
# raises from then on.
NO_XDSL = textwrap.dedent("""
    import sys

    class _NoXdsl:
        def find_spec(self, name, path=None, target=None):
            if name == "xdsl" or name.startswith("xdsl."):
                raise ImportError(f"this process runs without xDSL ({name})")

    sys.meta_path.insert(0, _NoXdsl())
""")
CFL = os.path.join(ROOT, "examples", "cfl_step.kas")


def _child(code: str, env: dict, *argv: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", NO_XDSL + textwrap.dedent(code), *argv], capture_output=True,
                          text=True, env=env, cwd=ROOT, timeout=600)


def _saved_plan_runs_alone(tmp_path, source: str, inputs: dict, outputs: set[str]) -> tuple[list[str], dict]:
    """`irfuse compile SOURCE -o DIR`, then `irfuse run --plan DIR` on `inputs` in this
    environment and in a process without xDSL: the alone run's results are the full run's, and
    it says it did not verify. Returns the plan's entries and the run's arguments and environment."""
    env = {**os.environ, "IRFUSE_CACHE_DIR": str(tmp_path / "cache"), "COLUMNS": "200"}
    plan = tmp_path / "plan"
    compiled = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "compile", source, "-o", str(plan)],
                              capture_output=True, text=True, env=env, cwd=ROOT)
    assert compiled.returncode == 0, compiled.stderr
    npz = tmp_path / "in.npz"
    np.savez(npz, **inputs)
    out_full, out_alone = tmp_path / "full.npz", tmp_path / "alone.npz"
    run = ["run", "--plan", str(plan), "--backend", "cpu", "--inputs", str(npz)]
    full = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", *run, "--save", str(out_full)],
                          capture_output=True, text=True, env=env, cwd=ROOT)
    assert full.returncode == 0 and "verified against the NumPy reference" in full.stdout, full.stdout + full.stderr
    alone = _child("""
        import sys
        from irfuse.tools.cli import main
        code = main(sys.argv[1:])
        assert not [m for m in sys.modules if m == "xdsl" or m.startswith("xdsl.")]
        assert "irfuse.driver.compile" not in sys.modules and "irfuse.dialects.kas" not in sys.modules
        sys.exit(code)
    """, env, *run, "--save", str(out_alone))
    assert alone.returncode == 0, alone.stdout + alone.stderr
    assert "not verified: checking the outputs needs irfuse's compiler" in alone.stdout
    assert "time (median of" in alone.stdout
    with np.load(out_full) as a, np.load(out_alone) as b:
        assert set(a.files) == outputs and all(np.array_equal(a[k], b[k]) for k in a.files)
    return sorted(p.name for p in plan.iterdir()), {"run": run, "env": env, "npz": str(npz)}


def test_the_guard_refuses_xdsl():
    p = _child("import xdsl", dict(os.environ))
    assert p.returncode != 0 and "this process runs without xDSL" in p.stderr


def test_a_saved_plan_runs_with_irfuse_run_in_a_process_without_xdsl(tmp_path):
    rng = np.random.default_rng(4)
    _, saved = _saved_plan_runs_alone(tmp_path, CFL, {"x": rng.random((300, 3), np.float32),
                                                      "v": rng.random((300, 3), np.float32),
                                                      "cfl": np.array(0.5, np.float32)}, {"xn", "dt"})
    run, env = saved["run"], saved["env"]
    # Asked to verify, it says why it cannot, without a traceback.
    refused = _child("""
        import sys
        from irfuse.tools.cli import main
        sys.exit(main(sys.argv[1:]))
    """, env, *run, "--verify", "all")
    assert refused.returncode == 1 and "needs irfuse's compiler" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_a_cached_program_runs_through_the_api_in_a_process_without_xdsl(tmp_path):
    env = {**os.environ, "IRFUSE_CACHE_DIR": str(tmp_path / "cache")}
    code = """
        import sys
        import numpy as np
        import irfuse
        prog = irfuse.compile(sys.argv[1], backend="cpu", layout=sys.argv[2])
        # loading a program of no mesh for the CPU brings neither the mesh's side nor PyCUDA's
        print("loaded with:", sorted(m for m in sys.modules if m.startswith(
            ("irfuse.mesh.", "irfuse.api.mesh", "irfuse.api.time_loops", "irfuse.api.staged_programs",
             "irfuse.runtime.cuda_device", "pycuda"))))
        rng = np.random.default_rng(8)
        x, v = rng.random((3, 500), np.float32), rng.random((3, 500), np.float32)
        if sys.argv[2] == "aos":
            x, v = np.ascontiguousarray(x.T), np.ascontiguousarray(v.T)
        out = prog(x, v, np.array(0.25, np.float32))
        chunked = prog(x, v, np.array(0.25, np.float32), memory_budget=30_000)
        assert prog.last_chunks > 1
        print(repr(out.dt.tolist()), repr(out.xn.sum(dtype=np.float64)), np.array_equal(out.xn, chunked.xn),
              out.dt == chunked.dt)
        print("xdsl imported:", any(m == "xdsl" or m.startswith("xdsl.") for m in sys.modules))
    """
    for layout in ("aos", "soa"):
        first = subprocess.run([sys.executable, "-c", textwrap.dedent(code), CFL, layout], capture_output=True,
                               text=True, env=env, cwd=ROOT)
        assert first.returncode == 0, first.stderr
        assert first.stdout.splitlines()[2] == "xdsl imported: True"  # it compiled
        # Loaded from the cache where xDSL is at hand, it is not imported either (the errors'
        # classes are irfuse's own, `irfuse.diagnostics`)
        again = subprocess.run([sys.executable, "-c", textwrap.dedent(code), CFL, layout], capture_output=True,
                               text=True, env=env, cwd=ROOT)
        assert again.returncode == 0, again.stderr
        assert again.stdout.splitlines()[1:] == [first.stdout.splitlines()[1], "xdsl imported: False"]
        alone = _child(code, env, CFL, layout)
        assert alone.returncode == 0, alone.stderr
        lines = alone.stdout.splitlines()
        assert lines[0] == "loaded with: []"
        assert lines[1] == first.stdout.splitlines()[1] and lines[1].endswith("True True")
        assert lines[2] == "xdsl imported: False"


STEP = os.path.join(ROOT, "examples", "mesh", "explicit_step.kas")


def test_a_saved_plan_of_several_stages_runs_in_a_process_without_xdsl(tmp_path):
    """`irfuse compile -o DIR` of the explicit step (passes over nodes, elements, nodes)
    writes its stages into one plan, and its fused stages (the first stage named by its index,
    the elements stage running the nodes stage after it in `fused1`); `irfuse run --plan DIR`
    runs them where xDSL cannot be
    imported, with the compiling process's results, and the program cache's entry of it runs
    there through the API too."""
    from irfuse.mesh import box_tetrahedra

    X, conn = box_tetrahedra(3)[:2]
    rng = np.random.default_rng(5)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    inputs = dict(X=X.astype(np.float32), u=(0.01 * rng.standard_normal(X.shape)).astype(np.float32),
                  v=rng.standard_normal(X.shape).astype(np.float32), m=rng.uniform(0.5, 1.5, len(X)).astype(np.float32),
                  conn=conn, dN=dN, lam=np.float32(1.5), mu=np.float32(0.7), dt=np.float32(1e-3))
    entries, saved = _saved_plan_runs_alone(tmp_path, STEP, inputs, {"u1", "v1"})
    assert entries == ["fused1", "manifest.json", "reference.mlir", "stage0", "stage1", "stage2"]
    env, inputs = saved["env"], saved["npz"]
    code = """
        import sys
        import numpy as np
        import irfuse
        prog = irfuse.compile(sys.argv[1], backend="cpu")
        assert "irfuse.api.time_loops" not in sys.modules  # (loaded and called with no time loop)
        with np.load(sys.argv[2]) as f:
            out = prog(**{k: f[k] for k in f.files})
        prog.close()
        print(type(prog).__name__, [s.over for s in prog.stages], float(out.v1.sum(dtype=np.float64)))
        print("xdsl imported:", any(m == "xdsl" or m.startswith("xdsl.") for m in sys.modules))
    """
    first = subprocess.run([sys.executable, "-c", textwrap.dedent(code), STEP, str(inputs)], capture_output=True,
                           text=True, env=env, cwd=ROOT)
    assert first.returncode == 0, first.stderr
    alone = _child(code, env, STEP, str(inputs))
    assert alone.returncode == 0, alone.stderr
    assert alone.stdout.splitlines()[0] == first.stdout.splitlines()[0]
    assert alone.stdout.splitlines()[0].startswith("StagedProgram ['nodes', 'elements', 'nodes']")
    assert alone.stdout.splitlines()[1] == "xdsl imported: False"
