"""The irfuse command line: runs, errors (never a traceback), plans written and run elsewhere."""

import json
import os
import re
import site
import subprocess
import sys

import numpy as np
import pytest

from conftest import EXAMPLES, ROOT, has_gpu
from irfuse.driver.compile import compile_program
from irfuse.runtime.streaming import bytes_per_element

BIG = os.path.join(ROOT, "examples", "bigfusion.kas")
INNER = os.path.join(ROOT, "examples", "stvenant_inner.kas")


def irfuse(*args, env=None):
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", *args], capture_output=True, text=True,
                       env={**os.environ, "COLUMNS": "200", **(env or {})})
    assert "Traceback" not in p.stderr, p.stderr
    return p


def test_run_cpu_verifies():
    p = irfuse("run", BIG, "--backend", "cpu", "--n", "300")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified against the NumPy reference" in p.stdout
    assert "mmul55[" in p.stdout and "madd55[" in p.stdout  # the calls appear in the kernel table


def test_run_an_mlir_file_of_a_kas_program_and_refuse_a_broken_one_at_its_line(tmp_path):
    """`irfuse run FILE.mlir`: the IR irfuse-opt prints runs and verifies as its KAS does; a
    broken op is refused at its line in the file, with the line quoted, exit status 1."""
    ir = subprocess.run([sys.executable, "-m", "irfuse.tools.opt", BIG], capture_output=True, text=True).stdout
    assert "kas.program @bigfusion" in ir
    good, bad = tmp_path / "big.mlir", tmp_path / "broken.mlir"
    good.write_text(ir)
    p = irfuse("run", str(good), "--backend", "cpu", "--n", "300")
    assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr
    lines = ir.splitlines()
    k = next(i for i, line in enumerate(lines) if "kas.call @mmul55" in line)
    lines[k] = lines[k].replace("@mmul55", "@mmul56")
    bad.write_text("\n".join(lines) + "\n")
    p = irfuse("run", str(bad), "--backend", "cpu")
    col = lines[k].index("%") + 1
    assert p.returncode == 1 and f"broken.mlir:{k + 1}:{col}: error: unknown op 'mmul56'" in p.stderr, p.stderr
    assert "kas.call @mmul56" in p.stderr  # (the line quoted)


def test_run_a_program_over_a_mesh(tmp_path, capsys):
    """A random mesh of --n elements, in chunks with --memory-budget, and a mesh from --inputs
    (saved outputs; a node number outside the nodal arrays refused by element and position)."""
    residual = os.path.join(ROOT, "examples", "mesh", "p1_residual.kas")
    p = irfuse("run", residual, "--backend", "cpu", "--n", "2000", "--memory-budget", "400000",
               "--save", str(tmp_path / "r.npz"))
    assert p.returncode == 0, p.stdout + p.stderr
    assert "2,000 elements, 2,003 nodes (a random mesh)" in p.stdout
    assert "verified against the NumPy reference" in p.stdout
    assert np.load(tmp_path / "r.npz")["r"].shape == (2003, 3)
    rng = np.random.default_rng(0)
    arrays = dict(X=rng.random((10, 3), np.float32), conn=np.array([[0, 1, 2, 3], [2, 3, 4, 9]], np.int32),
                  dN=np.zeros((4, 3), np.float32), quarter=np.full(4, 0.25, np.float32), rho=np.float32(1))
    np.savez(tmp_path / "mesh.npz", **arrays)
    mass = os.path.join(ROOT, "examples", "mesh", "lumped_mass.kas")
    p = irfuse("run", mass, "--backend", "cpu", "--inputs", str(tmp_path / "mesh.npz"))
    assert p.returncode == 0 and "2 elements, 10 nodes" in p.stdout, p.stdout + p.stderr
    # (refusals in this process: no second start of Python and the compiler)
    from irfuse.tools.cli import main

    arrays["conn"][1, 3] = 12
    np.savez(tmp_path / "bad.npz", **arrays)
    assert main(["run", mass, "--backend", "cpu", "--inputs", str(tmp_path / "bad.npz")]) == 1
    assert "input 'conn': element 1, position 3 names node 12, outside [0, 10)" in capsys.readouterr().err
    (tmp_path / "garbage.npz").write_text("not an archive")
    assert main(["run", mass, "--backend", "cpu", "--inputs", str(tmp_path / "garbage.npz")]) == 1
    assert "cannot read inputs" in capsys.readouterr().err
    # A member whose header claims terabytes in a few bytes (NumPy allocated what it claimed
    # first: an out-of-memory error, or the machine's memory taken), and one that is no array
    import zipfile

    from irfuse import compile as irfuse_compile
    header = "{'descr': '<f4', 'fortran_order': False, 'shape': (100000000000, 3), }"
    header += " " * (63 - len(header) % 64) + "\n"
    element_code = os.path.join(ROOT, "examples", "strain_energy.kas")
    for program, name in ((mass, "X"), (element_code, irfuse_compile(element_code).inputs[0])):
        with zipfile.ZipFile(tmp_path / "crafted.npz", "w") as z:
            z.writestr(name + ".npy", b"\x93NUMPY\x01\x00" + len(header).to_bytes(2, "little") + header.encode() +
                       bytes(16))
        assert main(["run", program, "--backend", "cpu", "--inputs", str(tmp_path / "crafted.npz")]) == 1
        assert f"input '{name}' is damaged: its header says (100000000000, 3) of float32 (1,200,000,000,000 bytes) " \
               "and the archive holds 16 bytes of it" in capsys.readouterr().err
    with zipfile.ZipFile(tmp_path / "raw.npz", "w") as z:
        z.writestr("X", b"not an array")
    assert main(["run", mass, "--backend", "cpu", "--inputs", str(tmp_path / "raw.npz")]) == 1
    assert "input 'X' is not an array (.npy) member of the archive" in capsys.readouterr().err


def test_run_plan_and_compile_a_program_with_nodal_statements(tmp_path, capsys):
    """Passes over the nodes around the one over the elements: `irfuse run` runs them (in
    chunks) and checks every node, `irfuse plan` plans each, `irfuse compile` saves one plan of
    its stages, which `irfuse run --plan` runs and checks. In this process: the compiler is
    imported already (`tests/test_runtime_alone.py` runs such a plan without it)."""
    from irfuse.tools.cli import main

    step = os.path.join(ROOT, "examples", "mesh", "explicit_step.kas")
    assert main(["run", step, "--backend", "cpu", "--n", "300", "--memory-budget", "60000"]) == 0
    assert "verified against the NumPy reference" in capsys.readouterr().out
    assert main(["plan", step, "--top", "1"]) == 0
    out = capsys.readouterr().out
    assert [w for w in ("nodes_before", "elements", "nodes_after") if w in out] == [
        "nodes_before", "elements", "nodes_after"], out
    assert main(["compile", step, "-o", str(tmp_path / "plan")]) == 0
    out = capsys.readouterr().out
    assert "stage0/kernels.cu" in out and "stage2/manifest.json" in out and "reference.mlir" in out
    assert main(["run", "--plan", str(tmp_path / "plan"), "--backend", "cpu", "--n", "200"]) == 0
    assert "verified against the NumPy reference" in capsys.readouterr().out


@pytest.mark.parametrize("damage, said", [
    (lambda m: m["stages"][0].__setitem__("inputs", ["u", "v", "dz"]), "stage 0 reads \\['dz'\\]"),
    (lambda m: m["program"].__setitem__("outputs", "u1"), "its outputs is 'u1', not a list of names"),
    (lambda m: m["program"].__setitem__("shapes", {}), "'X' has no shape"),
    (lambda m: m["program"].__setitem__("nodal", ["w"]), "nodal names \\['w'\\] are not its inputs or outputs"),
    (lambda m: m["stages"].reverse(), "stage 0 reads \\['r'\\]"),
    (lambda m: m["stages"][0].__setitem__("outputs", []), "stage 1 reads \\['u1'\\]"),
    (lambda m: m["stages"].pop(), "no stage makes the outputs \\['v1'\\]"),
])
def test_a_staged_plan_whose_names_do_not_hang_together_is_refused(tmp_path, capsys, damage, said):
    """A staged plan's manifest edited so that a stage reads a value nothing makes, an output
    is made by no stage, or a name has no shape: `irfuse run --plan` refuses it naming the
    directory and the edit (its digest no longer matches); and with the digest made again
    for the edited manifest, naming what is wrong (it raised KeyError from the runtime)."""
    from irfuse.artifact.artifact import plan_digest
    from irfuse.artifact.stages import STAGED_FILES
    from irfuse.tools.cli import main

    step = os.path.join(ROOT, "examples", "mesh", "explicit_step.kas")
    plan = tmp_path / "plan"
    assert main(["compile", step, "-o", str(plan)]) == 0
    capsys.readouterr()
    manifest = json.loads((plan / "manifest.json").read_text())
    damage(manifest)
    (plan / "manifest.json").write_text(json.dumps(manifest))
    assert main(["run", "--plan", str(plan), "--backend", "cpu", "--n", "50"]) == 1
    assert "its files are not those irfuse wrote (edited or damaged since" in capsys.readouterr().err
    manifest["digest"] = plan_digest(str(plan), manifest, STAGED_FILES)
    (plan / "manifest.json").write_text(json.dumps(manifest))
    assert main(["run", "--plan", str(plan), "--backend", "cpu", "--n", "50"]) == 1
    err = capsys.readouterr().err
    assert "not a valid irfuse plan directory" in err and str(plan) in err and re.search(said, err), err


def test_a_plan_whose_meta_is_not_an_object_is_refused(tmp_path, capsys):
    """A plan's manifest with `meta` that is not an object (its digest made for it) was read
    on and failed in the runtime with AttributeError; it is refused as the other damage is."""
    from irfuse.tools.cli import main

    from irfuse.artifact.artifact import plan_digest

    assert main(["compile", os.path.join(ROOT, "examples", "neo_hookean.kas"), "-o", str(tmp_path / "plan")]) == 0
    path = tmp_path / "plan" / "manifest.json"
    manifest = json.loads(path.read_text())
    manifest["meta"] = "x"
    manifest["digest"] = plan_digest(str(tmp_path / "plan"), manifest)  # (as if irfuse had written it)
    path.write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["run", "--plan", str(tmp_path / "plan"), "--backend", "cpu", "--n", "50"]) == 1
    assert "not a valid irfuse plan directory: meta is str, not an object" in capsys.readouterr().err


def test_run_numpy_backend_reports_checksums():
    p = irfuse("run", INNER, "--backend", "numpy", "--n", "1000")
    assert p.returncode == 0
    assert "mattangenthelp" in p.stdout and "(1000, 3, 3)" in p.stdout


def test_save_then_inputs_round_trip(tmp_path):
    out = tmp_path / "out.npz"
    assert irfuse("run", INNER, "--backend", "numpy", "--n", "50", "--save", str(out)).returncode == 0
    data = np.load(out)
    assert data["mattangenthelp"].shape == (50, 3, 3)
    # Feed real data in: the CPU backend must agree with the reference on it.
    rng = np.random.default_rng(1)
    inputs = {"ten3help2": rng.random((7, 3, 3, 3)), "vec3dpsi": rng.random((7, 3)), "vec3dphi": rng.random((7, 3)),
              "mat33stress": rng.random((7, 3, 3)), "vecquadweightssums": rng.random(7)}
    np.savez(tmp_path / "in.npz", **inputs)
    p = irfuse("run", INNER, "--backend", "cpu", "--inputs", str(tmp_path / "in.npz"), "--save", str(out))
    assert p.returncode == 0, p.stdout + p.stderr
    got = np.load(out)["mattangenthelp"]
    s = inputs["vecquadweightssums"]
    help2 = np.einsum("nijk,nk->nij", inputs["ten3help2"], inputs["vec3dpsi"]) * s[:, None, None]
    sc = np.abs(np.sum(np.einsum("nij,nj->ni", inputs["mat33stress"], inputs["vec3dphi"]) * inputs["vec3dpsi"], axis=1))
    want = s[:, None, None] * np.eye(3) * sc[:, None, None] + help2
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("arrays, message", [
    ({"ten3help2": np.zeros((4, 3, 3, 3))}, "input 'vec3dpsi' is missing"),
    ({"ten3help2": np.zeros((4, 3, 3)), "vec3dpsi": np.zeros((4, 3)), "vec3dphi": np.zeros((4, 3)),
      "mat33stress": np.zeros((4, 3, 3)), "vecquadweightssums": np.zeros(4)},
     "input 'ten3help2' has shape (4, 3, 3); a tensor3x3x3 batch is shaped (N, 3, 3, 3)"),
    ({"ten3help2": np.zeros((4, 3, 3, 3)), "vec3dpsi": np.zeros((5, 3)), "vec3dphi": np.zeros((4, 3)),
      "mat33stress": np.zeros((4, 3, 3)), "vecquadweightssums": np.zeros(4)},
     "input 'vec3dpsi' has 5 elements but earlier inputs have 4"),
    ({"ten3help2": np.zeros((4, 3, 3, 3), dtype=bool), "vec3dpsi": np.zeros((4, 3)), "vec3dphi": np.zeros((4, 3)),
      "mat33stress": np.zeros((4, 3, 3)), "vecquadweightssums": np.zeros(4)},
     "input 'ten3help2' has dtype bool; expected floating point"),
])
def test_bad_inputs_file(tmp_path, arrays, message):
    np.savez(tmp_path / "in.npz", **arrays)
    p = irfuse("run", INNER, "--backend", "cpu", "--inputs", str(tmp_path / "in.npz"))
    assert p.returncode == 1
    assert message in p.stderr and "in.npz" in p.stderr


def test_inputs_file_that_is_not_npz(tmp_path):
    (tmp_path / "junk.npz").write_text("not a zip")
    p = irfuse("run", INNER, "--backend", "cpu", "--inputs", str(tmp_path / "junk.npz"))
    assert p.returncode == 1 and "cannot read inputs" in p.stderr


@pytest.mark.parametrize("n", ["0", "-5"])
def test_empty_batch_is_refused(n):
    p = irfuse("run", INNER, "--backend", "cpu", "--n", n)
    assert p.returncode == 1 and "--n must be at least 1" in p.stderr


@pytest.mark.skipif(has_gpu(), reason="checks the message shown when there is no GPU")
def test_cuda_backend_without_gpu_explains_itself():
    p = irfuse("run", INNER, "--backend", "cuda", "--n", "10")
    assert p.returncode == 1
    assert "CUDA backend" in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_syntax_error_exit_status(tmp_path):
    f = tmp_path / "bad.kas"
    f.write_text("matrix3x3 A;\ninput A\nreturn A;\n")
    p = irfuse("run", str(f), "--backend", "cpu")
    assert p.returncode == 1 and "bad.kas:3:1: error: expected ';' after the input list" in p.stderr


def test_missing_file():
    p = irfuse("run", "/nonexistent/x.kas", "--backend", "numpy")
    assert p.returncode == 1 and "cannot read file" in p.stderr


def test_compile_writes_a_plan_that_runs_elsewhere(tmp_path):
    d = tmp_path / "plan"
    p = irfuse("compile", BIG, "-o", str(d), "--dtype", "f64")
    assert p.returncode == 0, p.stderr
    for f in ("kernels.cu", "kernels.cubin", "manifest.json", "program.mlir", "reference.mlir"):
        assert (d / f).exists(), f
    import json

    manifest = json.loads((d / "manifest.json").read_text())
    assert manifest["dtype"] == "f64" and manifest["arch"]
    k0, last = manifest["kernels"][0], manifest["kernels"][-1]
    # arguments in launch order: the kernel's global inputs, its outputs, the batch size
    assert k0["block"] == [k0["bx"], k0["by"], 1] and k0["arguments"][:3] == ["A", "B", "c"]
    assert last["arguments"][-2:] == ["F", "n"] and manifest["program"] == {"inputs": ["A", "B", "c", "D", "E"],
                                                                          "outputs": ["F"]}
    assert manifest["resources"][k0["name"]]["registers"] > 0
    p = irfuse("run", "--plan", str(d), "--backend", "cpu", "--n", "130")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "verified" in p.stdout and "f64" in p.stdout


def test_ops_lists_the_library():
    p = irfuse("ops")
    assert p.returncode == 0 and "ttmul3212" in p.stdout and "venorm6" in p.stdout
    p = irfuse("ops", "mmul33")
    assert "irf_mmul33_elem" in p.stdout
    p = irfuse("ops", "mmul3")
    assert p.returncode == 1 and "mmul33" in p.stderr


def test_ops_lists_and_shows_the_generic_ops():
    p = irfuse("ops")
    assert "generic ops" in p.stdout and "contract" in p.stdout and "mmul(A: matrixMxK, B: matrixKxN)" in p.stdout
    p = irfuse("ops", "inv")  # (a family, not an op of the library: it was refused as unknown)
    assert p.returncode == 0, p.stderr
    assert "inv(A: matrix2x2 or matrix3x3) -> the same" in p.stdout and "irfuse ops inv_3x3" in p.stdout
    p = irfuse("ops", "inv_3x3")
    assert p.returncode == 0 and "irf_inv_3x3_elem" in p.stdout


@pytest.mark.parametrize("path", EXAMPLES[:1])
def test_opt_list_passes(path):
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.opt", "--list-passes"], capture_output=True, text=True)
    assert "kas-dce: Removes calls" in p.stdout and "fuse-each:" in p.stdout
    assert "by: int | None" in p.stdout


def test_extension_example_runs_end_to_end():
    lib = os.path.join(ROOT, "examples", "extending", "mdet.py")
    prog = os.path.join(ROOT, "examples", "extending", "jacobian.kas")
    p = irfuse("run", prog, "--library", lib, "--backend", "cpu", "--n", "200",
               "--pipeline", "kas-dce,fuse-each{impl=cofactor}")
    assert p.returncode == 0, p.stdout + p.stderr
    assert "mdet33[cofactor]" in p.stdout and "verified" in p.stdout
    p = irfuse("ops", "--library", lib, "mdet33")
    assert "cofactor (hand-written): bx = 1" in p.stdout
    assert '#fuse.ap<"ty*9", 1, 1, 9>' in p.stdout


def test_ops_shows_access_patterns_and_definitions():
    p = irfuse("ops", "mmul33")
    assert "C[i,j] = sum(k) A[i,k]*B[k,j]" in p.stdout
    assert '#fuse.ap<"ty*9 + tx*3", 1, 1, 3>' in p.stdout  # the row mapping's A, as in the seeds
    assert "irf_mmul33_entry_sss" in p.stdout


SMALL = "matrix3x3 A, B;\ninput A;\nB = madd33(A, A);\nreturn B;\n"


@pytest.mark.parametrize("extra, message", [
    (["--seed", "-1"], "argument --seed: must be 0 or more, got -1"),
    (["--n", "99999999999999"], "a batch of 99,999,999,999,999 elements needs about"),
    (["--save", "{tmp}/missing/out.npz"], "the directory {tmp}/missing does not exist"),
    (["--save", "{tmp}"], "--save {tmp} names a directory; give a file name such as {tmp}/out.npz"),
])
def test_bad_run_options_are_refused_before_anything_runs(tmp_path, extra, message):
    src = tmp_path / "p.kas"
    src.write_text(SMALL)
    extra = [e.format(tmp=tmp_path) for e in extra]
    p = irfuse("run", str(src), "--backend", "cpu", "--n", "4", *extra)
    assert p.returncode in (1, 2) and message.format(tmp=tmp_path) in p.stderr, p.stderr
    assert "verified" not in p.stdout  # refused before running, not after (the outputs would be lost)


def test_save_without_the_suffix_says_where_it_wrote(tmp_path):
    src = tmp_path / "p.kas"
    src.write_text(SMALL)
    p = irfuse("run", str(src), "--backend", "cpu", "--n", "4", "--save", str(tmp_path / "out"))
    assert p.returncode == 0 and f"outputs written to {tmp_path / 'out.npz'}" in p.stdout
    assert np.load(tmp_path / "out.npz")["B"].shape == (4, 3, 3)


def test_a_save_that_fails_when_writing_is_named(tmp_path, capsys, monkeypatch):
    """Writing the outputs can fail after the checks before the run (a full disk, a directory
    that takes no new files: /proc as root): it ended in numpy's OSError, a traceback."""
    import errno

    from irfuse.tools.cli import main

    src = tmp_path / "p.kas"
    src.write_text(SMALL)

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")
    monkeypatch.setattr(np, "savez", full)
    assert main(["run", str(src), "--backend", "cpu", "--n", "4", "--save", str(tmp_path / "o.npz")]) == 1
    assert f"--save {tmp_path / 'o.npz'}: cannot write the outputs: No space left on device" in capsys.readouterr().err


def test_a_file_a_command_cannot_write_is_named(tmp_path, capsys, monkeypatch):
    """`irfuse compile -o DIR` (and `tune --json`) where the system refuses the write after the
    checks (a read-only file system; /proc as root) ended in the OSError's traceback."""
    import errno

    from irfuse.tools.cli import main

    src = tmp_path / "p.kas"
    src.write_text(SMALL)

    def refused(path, *args, **kwargs):
        raise OSError(errno.EROFS, "Read-only file system", str(path))
    monkeypatch.setattr(os, "makedirs", refused)
    assert main(["compile", str(src), "-o", str(tmp_path / "plan")]) == 1
    assert f"irfuse: error: {tmp_path / 'plan'}: Read-only file system" in capsys.readouterr().err


def test_plan_directory_refuses_options_it_would_ignore(tmp_path):
    src = tmp_path / "p.kas"
    src.write_text(SMALL)
    assert irfuse("compile", str(src), "-o", str(tmp_path / "c")).returncode == 0
    p = irfuse("run", str(src), "--plan", str(tmp_path / "c"), "--dtype", "f64", "--pipeline", "kas-dce,fuse-each")
    assert p.returncode == 1
    assert "a .kas file, --dtype, --pipeline cannot be given with it" in p.stderr
    assert irfuse("run", "--plan", str(tmp_path / "c"), "--backend", "cpu", "--n", "5").returncode == 0


def test_compile_onto_an_existing_file_is_refused(tmp_path):
    src = tmp_path / "p.kas"
    src.write_text(SMALL)
    target = tmp_path / "file"
    target.write_text("keep me")
    p = irfuse("compile", str(src), "-o", str(target))
    assert p.returncode == 1 and f"-o {target} is a file" in p.stderr and target.read_text() == "keep me"


def test_a_program_without_statements_runs(tmp_path):
    """It returns an input: no kernel to emit, nothing to launch, and that is fine."""
    src = tmp_path / "p.kas"
    src.write_text("matrix3x3 A; vector12 v; matrix2x3 m;\ninput A;\nreturn A;\n")
    p = irfuse("run", str(src), "--backend", "cpu", "--n", "6")
    assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr


def test_a_cache_directory_that_is_a_file_only_costs_time(tmp_path):
    src = tmp_path / "p.kas"
    src.write_text(SMALL)
    blocker = tmp_path / "cache"
    blocker.write_text("")
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", str(src), "--backend", "cpu", "--n", "4"],
                       capture_output=True, text=True, env={**os.environ, "IRFUSE_CACHE_DIR": str(blocker)})
    assert p.returncode == 0 and "Traceback" not in p.stderr, p.stderr


def test_tune_on_the_cpu_uses_the_cpu_batch_size(tmp_path):
    src = tmp_path / "p.kas"
    src.write_text(SMALL)
    out = tmp_path / "t.json"
    p = irfuse("tune", str(src), "--backend", "cpu", "--top", "1", "--repeat", "1", "--rounds", "1", "--json", str(out))
    assert p.returncode == 0, p.stderr
    import json

    assert json.loads(out.read_text())["n"] == 4096


def test_plan_refuses_a_batch_below_one_and_names_the_tool():
    p = irfuse("plan", BIG, "--n", "-1")
    assert p.returncode == 1 and p.stderr.startswith("irfuse: error: --n must be at least 1, got -1")
    assert "<input>" not in p.stderr and "predicted" not in p.stdout


def test_tools_say_what_they_are():
    from irfuse import __version__

    p = irfuse("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"irfuse {__version__}"
    assert subprocess.run([sys.executable, "-m", "irfuse", "--version"], capture_output=True,
                          text=True).stdout.strip() == f"irfuse {__version__}"
    opt = subprocess.run(["irfuse-opt", "--version"], capture_output=True, text=True)
    assert opt.stdout.startswith(f"irfuse-opt {__version__} (irfuse's passes and dialects on xDSL ")
    help_text = subprocess.run(["irfuse-opt", "--help"], capture_output=True, text=True).stdout
    assert "irfuse-opt: irfuse's KAS frontend" in help_text and "xDSL modular optimizer driver" not in help_text


def test_large_batches_are_verified_on_a_seeded_sample_unless_asked(tmp_path, monkeypatch):
    """The reference of a whole large batch costs more than the run: beyond 100,000 elements a
    seeded sample is checked, and the report says so; --verify all and none do what they say."""
    from irfuse.verification.verify import sample_elements

    idx = sample_elements(4_194_304, "auto", 3)
    assert len(idx) == 100_000 and np.all(np.diff(idx) > 0) and idx[-1] < 4_194_304
    assert np.array_equal(idx, sample_elements(4_194_304, "auto", 3))  # seeded: the same sample
    assert np.array_equal(sample_elements(500, "auto"), np.arange(500))
    assert sample_elements(500, "none") is None and len(sample_elements(500, "sample", size=7)) == 7
    src = tmp_path / "p.kas"
    src.write_text(SMALL)
    p = irfuse("run", str(src), "--backend", "cpu", "--n", "200", "--verify", "none")
    assert p.returncode == 0 and "not verified (--verify none)" in p.stdout and "status" not in p.stdout
    p = irfuse("run", str(src), "--backend", "cpu", "--n", "150000")
    assert p.returncode == 0
    assert "on a seeded sample of 100,000 of the 150,000 elements (--verify all checks every one)" in p.stdout


def test_cxx_is_split_into_words_and_a_missing_compiler_is_named():
    """CXX holds a command (a wrapper and its compiler, as `ccache g++`): its words are run; a
    compiler that is not there is a one-line error naming it, not a traceback."""
    small = os.path.join(ROOT, "examples", "synctest.kas")
    env = {**os.environ, "COLUMNS": "200"}
    ok = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", small, "--backend", "cpu", "--n", "9"],
                        capture_output=True, text=True, env={**env, "CXX": "env g++"})
    assert ok.returncode == 0 and "verified against the NumPy reference" in ok.stdout, ok.stderr
    bad = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", small, "--backend", "cpu", "--n", "9"],
                         capture_output=True, text=True, env={**env, "CXX": "/no/such/g++ -O1"})
    assert bad.returncode == 1 and "Traceback" not in bad.stderr
    assert "CXX='/no/such/g++ -O1': '/no/such/g++' is not an executable" in bad.stderr


def test_examples_run_by_name_from_any_directory(tmp_path):
    """The examples ship in the package (a wheel has no examples/ folder): a program argument
    that is no file but an example's name runs that example; an unknown name lists them."""
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", "transform44", "--backend", "cpu",
                        "--n", "7"], capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 0 and "transform44.kas: backend cpu, n = 7" in p.stdout, p.stdout + p.stderr
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", "transform45", "--backend", "cpu"],
                       capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 1 and "Traceback" not in p.stderr
    shipped = sorted(f[:-4] for f in os.listdir(os.path.join(ROOT, "examples")) if f.endswith(".kas"))
    assert "transform45: error: no such file, nor an example of that name (the examples shipped with irfuse: " \
           + ", ".join(shipped) + ")" in p.stderr


def test_a_python_file_is_refused_saying_how_to_compile_its_function(tmp_path):
    """A path to a Python file (read as KAS it was refused at its first decorator's '@') is
    refused by the command that took it, `irfuse run`, `compile`, `plan`, and by
    `irfuse.compile`, saying how to compile its function."""
    import irfuse

    path = tmp_path / "energy.py"
    path.write_text("import irfuse\n\n@irfuse.program\ndef f(A: irfuse.Matrix[3, 3]):\n    return A @ A\n")
    said = "energy.py is a Python file: compile its function itself, irfuse.compile(function)"
    for command in (["run", str(path), "--backend", "cpu"], ["compile", str(path), "-o", str(tmp_path / "out")],
                    ["plan", str(path)]):
        p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", *command], capture_output=True, text=True,
                           env={**os.environ, "COLUMNS": "300"})
        assert p.returncode == 1 and "Traceback" not in p.stderr, p.stderr
        assert f"irfuse {command[0]}: {path}" in p.stderr and said in " ".join(p.stderr.split()), p.stderr
    with pytest.raises(irfuse.UsageError, match="irfuse.compile: .*energy.py is a Python file"):
        irfuse.compile(str(path), backend="cpu")


@pytest.mark.heavy
def test_sdist_and_wheel_carry_what_their_users_need(tmp_path):
    """The sdist holds the examples and the whole test suite (so its tests run); the wheel,
    installed outside the source tree, runs the README's first command by example name."""
    import tarfile
    import zipfile

    out = tmp_path / "dist"

    def build(what: str, where) -> str:
        p = subprocess.run([sys.executable, "-c", "import sys; from setuptools import build_meta as b; "
                            f"print('BUILT=' + b.build_{what}(sys.argv[1]))", str(out)],
                           capture_output=True, text=True, cwd=where)
        assert p.returncode == 0, p.stderr[-2000:]
        return next(line[6:] for line in p.stdout.splitlines() if line.startswith("BUILT="))

    sdist_name = build("sdist", ROOT)
    with tarfile.open(out / sdist_name) as t:
        names = {n.split("/", 1)[1] for n in t.getnames() if "/" in n}
        if hasattr(tarfile, "data_filter"):
            t.extractall(tmp_path / "src", filter="data")
        else:  # Python before 3.11.4
            t.extractall(tmp_path / "src")
    assert {"LICENSE", "examples/bigfusion.kas", "tests/conftest.py", "tests/filecheck/lit.cfg",
            "irfuse/backend/irfuse_host.h", "irfuse/examples"} <= names
    wheel_name = build("wheel", tmp_path / "src" / sdist_name.removesuffix(".tar.gz"))  # from the sdist alone
    with zipfile.ZipFile(out / wheel_name) as z:
        names = set(z.namelist())
    assert {"irfuse/examples/bigfusion.kas", "irfuse/backend/irfuse_host.h"} <= names
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    py = str(venv / "bin" / "python")
    # The wheel's dependencies come from the environment running these tests: its
    # site-packages directories as plain path entries (a .pth file), after the new
    # environment's own. (--system-site-packages would see the base interpreter's packages,
    # not those of a virtual environment running the tests; and the plain entries run none
    # of that environment's .pth hooks, so its editable install of irfuse stays out.)
    purelib = subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    parents = [*site.getsitepackages(), *([site.getusersitepackages()] if site.ENABLE_USER_SITE else [])]
    with open(os.path.join(purelib, "tested-environment.pth"), "w") as f:
        f.write("\n".join(p for p in parents if os.path.isdir(p)) + "\n")
    # NVRTC's library is looked up in site-packages directories only (cuda.pathfinder), which
    # the plain entries are not: the loader is told where this environment's copy lies.
    from cuda.pathfinder import load_nvidia_dynamic_lib

    nvrtc_dir = os.path.dirname(load_nvidia_dynamic_lib("nvrtc").abs_path)
    libraries = os.pathsep.join(filter(None, [nvrtc_dir, os.environ.get("LD_LIBRARY_PATH")]))
    pip = subprocess.run([py, "-m", "pip", "install", "-q", "--no-deps", "--no-index", str(out / wheel_name)],
                         capture_output=True, text=True)
    assert pip.returncode == 0, pip.stderr[-2000:]
    elsewhere = tmp_path / "work"
    elsewhere.mkdir()
    where = subprocess.run([py, "-c", "import irfuse; print(irfuse.__file__)"], capture_output=True, text=True,
                           cwd=elsewhere)
    assert where.stdout.startswith(str(venv)), where.stdout + where.stderr  # the wheel's, not the checkout's
    run = subprocess.run([str(venv / "bin" / "irfuse"), "run", "bigfusion", "--backend", "cpu", "--n", "50"],
                         capture_output=True, text=True, cwd=elsewhere,
                         env={**os.environ, "COLUMNS": "200", "LD_LIBRARY_PATH": libraries})
    assert run.returncode == 0 and "verified against the NumPy reference" in run.stdout, run.stdout + run.stderr


def test_rates_keep_their_digits_and_tables_do_not_cut_names():
    from irfuse.tools.report import million_elements_per_second as rate

    assert [rate(4_000_000_000, 1.0), rate(5_000_000, 1.0), rate(1000, 1.0), rate(7, 0.0)] == \
        ["4000", "5.0", "0.001", "-"]
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", BIG, "--backend", "cpu", "--n", "64",
                        "--repeat", "2"], capture_output=True, text=True, env={**os.environ, "COLUMNS": "90"})
    assert p.returncode == 0, p.stderr
    assert "…" not in p.stdout  # long kernel names fold onto more lines instead
    assert " M elements/s" in p.stdout and " 0 M elements/s" not in p.stdout


def _on_a_terminal(argv: list[str]) -> str:
    """What a command prints on a pseudo-terminal."""
    import pty

    pid, fd = pty.fork()
    if pid == 0:  # the child: the command, its output on the terminal
        os.execv(sys.executable, [sys.executable, "-m", "irfuse.tools.cli", *argv])
    out = b""
    while True:
        try:
            chunk = os.read(fd, 4096)
        except OSError:
            break
        if not chunk:
            break
        out += chunk
    os.waitpid(pid, 0)
    return out.decode(errors="replace")


def test_run_with_a_memory_budget_streams_the_batch_in_chunks():
    p = irfuse("run", BIG, "--backend", "cpu", "--n", "5000", "--memory-budget", "200K")
    assert p.returncode == 0, p.stderr
    flat = " ".join(p.stdout.split())
    chunks = int(re.search(r"(\d+) chunks from host memory", flat).group(1))
    per = 2 * bytes_per_element(compile_program(BIG, compile_gpu=False)[0])  # two lanes
    assert chunks == -(-5000 // (200 * 1024 // per)) and "verified against the NumPy reference" in flat
    for size, message in (("2X", "expected a size in bytes"), ("0", "must be at least 1 byte")):
        bad = irfuse("run", BIG, "--backend", "cpu", "--memory-budget", size)
        assert bad.returncode == 2 and message in bad.stderr
    # A program that reduces over the batch: passes over chunks of whole reducing blocks.
    energy = os.path.join(ROOT, "examples", "strain_energy.kas")
    run = irfuse("run", energy, "--backend", "cpu", "--n", "5000", "--memory-budget", "100K")
    assert run.returncode == 0, run.stderr
    flat = " ".join(run.stdout.split())
    assert int(re.search(r"(\d+) chunks from host memory", flat).group(1)) > 1
    assert "verified against the NumPy reference" in flat
    small = irfuse("run", energy, "--backend", "cpu", "--n", "5000", "--memory-budget", "10K")
    assert small.returncode == 1 and "cannot hold 128 elements in each of 2 lanes" in small.stderr
    assert "Traceback" not in small.stderr


def test_a_progress_bar_is_drawn_only_for_calls_past_its_delay():
    import io

    from irfuse.api.progress import progress_bar
    for after, drawn in ((0.0, True), (60.0, False)):
        out = io.StringIO()
        with progress_bar("running", after_s=after, stream=out) as report:
            for k in range(1, 5):
                report(k, 4)
        assert ("4/4" in out.getvalue() and "running" in out.getvalue()) == drawn


def test_run_says_what_it_is_doing_on_a_terminal_only():
    """Compiling, running and verifying take seconds at large batches: a terminal sees which
    is under way; a pipe gets the report alone."""
    argv = ["run", BIG, "--backend", "cpu", "--n", "3000"]
    shown = _on_a_terminal(argv)
    assert "compiling bigfusion.kas" in shown and "verifying 3,000 elements" in shown
    assert "verified against the NumPy reference" in shown
    piped = irfuse(*argv)
    assert piped.returncode == 0 and "compiling" not in piped.stdout + piped.stderr
    assert "verified against the NumPy reference" in piped.stdout


def test_irfuse_opt_help_names_irfuse_passes_and_upstream_ones_on_request():
    help_text = subprocess.run(["irfuse-opt", "--help"], capture_output=True, text=True).stdout
    flat = " ".join(help_text.split())
    assert "irfuse's are kas-dce, fuse-each, fuse-partition" in flat.replace("- ", "-")
    assert "convert-arith-to-riscv" not in flat.replace("- ", "-")  # xDSL's hundred-odd passes: on request
    upstream = subprocess.run(["irfuse-opt", "--list-passes", "--upstream"], capture_output=True, text=True)
    assert upstream.returncode == 0 and "  canonicalize\n" in upstream.stdout and "fuse-each" not in upstream.stdout


def test_a_hand_written_implementation_that_does_not_compile_is_reported_at_its_line(tmp_path):
    """The compiler's first error in the user's C++ is reported at that line of the user's
    library file (quoted, with a caret), not at a line of a temporary generated file."""
    lib = tmp_path / "badlib.py"
    text = open(os.path.join(ROOT, "examples", "extending", "mdet.py")).read()
    lib.write_text(text.replace("d[APOUT] = a[0] * c0", "d[APOUT] = a[0] * cq"))
    wanted = next(k for k, line in enumerate(lib.read_text().splitlines(), 1) if "* cq" in line)
    program = tmp_path / "det.kas"
    program.write_text("matrix3x3 A; scalar d;\ninput A;\nd = mdet33(A);\nreturn d;\n")
    p = irfuse("run", str(program), "--library", str(lib), "--backend", "cpu", "--n", "5")
    assert p.returncode == 1
    first = p.stderr.splitlines()[0]
    assert first.startswith(f"{lib}:{wanted}:3: error: op library refused: implementation 'cofactor' of 'mdet33' "
                            "does not compile:"), p.stderr
    assert "cq" in first and "kernels.cu" not in p.stderr
    assert "d[APOUT] = a[0] * cq" in p.stderr.splitlines()[1]


def test_the_tuning_plot_shows_what_a_reader_needs():
    """Each plan's median with its spread, plans at one spot under one label, the line of
    agreement and the copy ceiling on a GPU, the fastest and the predicted best named, a
    title that wraps instead of running off the figure."""
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from irfuse.tools.tune import throughput_figure

    n = 1_000_000
    results = [{"plan": k, "predicted_s": p, "measured_s": m, "times_s": [m * 0.98, m, m * 1.03]}
               for k, (p, m) in enumerate([(1e-3, 1.2e-3), (2e-3, 1.1e-3), (2.001e-3, 1.1003e-3), (3e-3, 3e-3)])]
    title = "a long title " * 12
    fig = throughput_figure(results, n, title, ceiling=950.0, on_gpu=True)
    ax = fig.axes[0]
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert "measured = predicted" in legend and "copy bandwidth: 950 M elements/s" in legend
    assert "fastest: plan 1" in legend and "predicted best: plan 0" in legend
    labels = sorted(t.get_text() for t in ax.texts)
    assert labels == ["0", "1,2", "3"]  # plans 1 and 2 nearly coincide: one label
    assert "\n" in ax.get_title() and max(len(line) for line in ax.get_title().splitlines()) <= 80
    assert ax.get_ylim()[1] > 950.0  # the ceiling is inside the frame
    cpu = throughput_figure(results, n, "t", on_gpu=False).axes[0]
    assert "measured = predicted" not in [t.get_text() for t in cpu.get_legend().get_texts()]
    assert "on the CPU" in cpu.get_ylabel()


def test_a_cache_directory_that_cannot_be_written_only_costs_rebuilding(tmp_path):
    """IRFUSE_CACHE_DIR under a regular file (no directory can be made there, even by root):
    the CPU path builds its host library privately and runs; the NVRTC path the same."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", BIG, "--backend", "cpu", "--n", "20",
                        "--dtype", "f64"], capture_output=True, text=True,
                       env={**os.environ, "IRFUSE_CACHE_DIR": str(blocker / "cache"), "COLUMNS": "200"})
    assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr
    assert "Traceback" not in p.stderr
    c = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "compile", BIG, "-o", str(tmp_path / "plan")],
                       capture_output=True, text=True, env={**os.environ, "IRFUSE_CACHE_DIR": str(blocker / "cache")})
    assert c.returncode == 0 and (tmp_path / "plan" / "kernels.cubin").exists(), c.stderr


def test_calibrate_the_cpu_saves_a_cpu_profile_the_search_plans_with(tmp_path):
    """`irfuse calibrate --backend cpu` measures this machine and saves the profile 'cpu' (in
    IRFUSE_PROFILE_DIR), which `--profile cpu` and the CPU backend's runs then plan with."""
    env = {"IRFUSE_PROFILE_DIR": str(tmp_path), "IRFUSE_CPU_THREADS": "2"}
    p = irfuse("calibrate", "--backend", "cpu", "--n", "65536", env=env)
    assert p.returncode == 0, p.stderr
    saved = json.loads((tmp_path / "profile-cpu.json").read_text())
    assert saved["kind"] == "cpu" and saved["sms"] == 2
    for figure in ("bandwidth", "fp32_flops", "fp64_flops", "launch_overhead"):
        assert saved[figure] > 0, figure
    assert saved["slow_op_flops"] >= 1 and saved["twin_factor"] >= 1
    plan = irfuse("plan", BIG, "--profile", "cpu", "--top", "1", env=env)
    assert plan.returncode == 0 and "best plans on CPU" in " ".join(plan.stdout.split()), plan.stderr
    for args, message in ((("--backend", "cpu", "--n", "0"), "--n must be a positive number of elements"),
                          (("--n", "5"), "--n is for --backend cpu")):
        bad = irfuse("calibrate", *args, env=env)
        assert bad.returncode == 1 and message in bad.stderr, bad.stderr
    (tmp_path / "profile-cpu.json").unlink()
    (tmp_path / "profile-cpu.json").mkdir()  # where the profile cannot be written: said, not a traceback
    p = irfuse("calibrate", "--backend", "cpu", "--n", "65536", env=env)
    assert p.returncode == 1 and "the profile cannot be saved to" in p.stderr
