"""Regression tests of the second robustness review: wrong results and crashes in chunked
runs, empty batches, a damaged program cache, host compilers that are not C++ compilers,
Dask results moving between workers, damaged IR, and refusals that name what is wrong.
Wrong results are compared with one call and with the reference; what once crashed runs in
a child process."""

import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from conftest import ROOT
import irfuse
from irfuse.api.programs import Outputs
from irfuse.diagnostics import CompileError, UsageError

CFL = os.path.join(ROOT, "examples", "cfl_step.kas")
MMUL = "matrix3x3 A, B; input A; B = mmul33(A, A); return B;"
# The first kernel (statements 1 and 4) gives the output `v` before the second kernel
# (statements 2 and 3) reads the input `v`.
REASSIGNED = """
matrix3x3 M, D; vector3 v, z, w, t;
input M, D, v;
t = mvmul33(D, v); z = vadd3(v, v); w = mvmul33(M, z); v = vadd3(t, t);
return v, w;
"""


def _rng():
    return np.random.default_rng(37)


def _soa(a: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(np.moveaxis(a, 0, -1))


def _child(code: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          cwd=ROOT, timeout=600)


@pytest.mark.parametrize("layout", ["aos", "soa"])
@pytest.mark.parametrize("budget", [10**7, 4000])  # one chunk; several
def test_chunks_read_an_input_that_a_kernel_before_them_gave_a_new_value(layout, budget):
    prog = irfuse.compile(REASSIGNED, backend="cpu", layout=layout)
    order = [(k.inputs, k.outputs) for k in prog.compiled.kernels]
    assert "v" in order[0][1] and "v" in order[1][0], order  # the case: the writer runs first
    rng = _rng()
    n = 301
    args = [rng.random((n, 3, 3), np.float32), rng.random((n, 3, 3), np.float32), rng.random((n, 3), np.float32)]
    if layout == "soa":
        args = [_soa(a) for a in args]
    one = prog(*args)
    chunked = prog(*args, memory_budget=budget)
    assert (prog.last_chunks > 1) == (budget == 4000)
    for name in prog.outputs:
        np.testing.assert_array_equal(chunked[name], one[name])
    assert prog.check(*args)


def test_chunks_of_a_strided_view_read_its_elements_once():
    rng = _rng()
    prog = irfuse.compile(MMUL, backend="cpu")
    big = rng.random((400, 3, 3), np.float32)
    want = prog(np.ascontiguousarray(big[::2])).B
    for budget in (10**7, 3000):
        np.testing.assert_array_equal(prog(big[::2], memory_budget=budget).B, want)
    np.testing.assert_array_equal(prog(big[::-3], memory_budget=3000).B, prog(np.ascontiguousarray(big[::-3])).B)


def test_a_reduction_over_a_strided_view_in_chunks_is_one_calls():
    rng = _rng()
    prog = irfuse.compile(CFL, backend="cpu")
    x, v = rng.random((1200, 3), np.float32), rng.random((1200, 3), np.float32)
    cfl = np.array(0.5, np.float32)
    want = prog(np.ascontiguousarray(x[::2]), np.ascontiguousarray(v[::2]), cfl)
    got = prog(x[::2], v[::2], cfl, memory_budget=25_000)
    assert prog.last_chunks > 1
    np.testing.assert_array_equal(got.dt, want.dt)
    np.testing.assert_array_equal(got.xn, want.xn)


def test_an_out_view_of_a_chunked_call_is_written_in_place_and_nowhere_else():
    """Once a write past the chunk buffer that killed the process: run in a child."""
    p = _child(f"""
        import numpy as np, irfuse
        prog = irfuse.compile({MMUL!r}, backend="cpu")
        rng = np.random.default_rng(1)
        big = rng.random((400, 3, 3), np.float32)
        out = np.full((800, 3, 3), -7.0, np.float32)
        prog(big[::2], out=out[::4], memory_budget=3000)
        chunks = prog.last_chunks
        want = prog(np.ascontiguousarray(big[::2])).B
        assert np.array_equal(out[::4], want)
        untouched = np.delete(out, np.arange(0, 800, 4), axis=0)
        assert (untouched == -7.0).all()
        print("ok", chunks)
    """)
    assert p.returncode == 0 and p.stdout.startswith("ok"), p.stdout + p.stderr
    assert int(p.stdout.split()[1]) > 1


def test_an_empty_batch_gives_empty_outputs_and_is_checked():
    prog = irfuse.compile(MMUL, backend="cpu")
    empty = np.zeros((0, 3, 3), np.float32)
    assert prog(empty).B.shape == (0, 3, 3)
    report = prog.check(empty)
    assert report.ok and report.n == 0 and "empty batch" in str(report)
    assert prog(empty, verify=True).B.shape == (0, 3, 3)


def test_an_empty_batch_is_refused_where_an_output_holds_a_value_for_the_batch():
    prog = irfuse.compile(CFL, backend="cpu")
    for call in (lambda: prog(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32), np.array(0.5, np.float32)),
                 lambda: prog.check(np.zeros((0, 3), np.float32), np.zeros((0, 3), np.float32),
                                    np.array(0.5, np.float32))):
        with pytest.raises(UsageError, match="0 elements and output 'dt' holds one value for the whole batch"):
            call()


def test_a_damaged_program_cache_entry_is_compiled_again(tmp_path):
    """A program entry changed on disk (its kernels' source, its IR or its manifest edited, its
    source cut short, a file removed) is neither loaded (wrong results) nor left to fail every
    later call: the next process compiles the program again and replaces the entry. Each
    damage is done to a copy of one whole entry."""
    code = textwrap.dedent(f"""
        import numpy as np, irfuse
        prog = irfuse.compile({MMUL!r}, backend="cpu")
        a = np.arange(36, dtype=np.float32).reshape(4, 3, 3) / 10
        print(prog.compiled.meta.get("loaded_from", "compiled"))
        print(repr(prog(a).B.tolist()))
    """)

    def run(cache):
        env = {**os.environ, "IRFUSE_CACHE_DIR": str(cache)}
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        return p.stdout.splitlines()

    whole = tmp_path / "whole"
    first = run(whole)
    assert first[0] == "compiled"
    assert run(whole)[0] != "compiled"  # the entry is read back
    for damage in ("kernels.cu", "program.mlir", "manifest.json", "truncate", "remove"):
        cache = tmp_path / damage
        shutil.copytree(whole, cache)
        entry = next(p for p in (cache / "program").glob("*/*") if p.is_dir())
        if damage == "truncate":
            text = (entry / "kernels.cu").read_bytes()
            (entry / "kernels.cu").write_bytes(text[: len(text) // 2])
        elif damage == "remove":
            (entry / "reference.mlir").unlink()
        else:
            text = (entry / damage).read_text()
            changed = (text.replace("mmul33", "madd33") if damage != "manifest.json"
                       else text.replace('"by": ', '"by": 1'))
            assert changed != text
            (entry / damage).write_text(changed)
        again = run(cache)
        assert again == ["compiled", first[1]], damage  # compiled again, the same results
        assert run(cache)[0] != "compiled", damage  # and the rebuilt entry is whole


@pytest.mark.parametrize("cxx,said", [("junk", "does not load"), ("true", "wrote no library"),
                                      ("echo", "wrote no library")])
def test_a_host_compiler_that_is_not_a_cpp_compiler_is_named_and_nothing_is_cached(tmp_path, cxx, said):
    if cxx == "junk":  # a "compiler" that writes a file that is not a library where it is asked to
        junk = tmp_path / "junk-cxx"
        junk.write_text('#!/bin/sh\nwhile [ $# -gt 0 ]; do [ "$1" = -o ] && echo junk > "$2"; shift; done\n')
        junk.chmod(0o755)
        cxx = str(junk)
    env = {**os.environ, "IRFUSE_CACHE_DIR": str(tmp_path / "cache"), "CXX": cxx}
    code = f"import numpy as np, irfuse; irfuse.compile({MMUL!r}, backend='cpu')(np.ones((2, 3, 3), np.float32))"
    for _ in range(2):  # the second run is not served a library the first one kept
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        assert p.returncode != 0 and said in p.stderr and f"'{cxx}'" in p.stderr, p.stderr
        assert "irfuse.diagnostics.CompileError" in p.stderr and "FileNotFoundError" not in p.stderr, p.stderr
    assert not list((tmp_path / "cache").glob("host/*/*.so"))


@pytest.mark.skipif(shutil.which("gcc") is None, reason="needs gcc")
def test_gcc_builds_host_libraries_as_g_plus_plus_does(tmp_path):
    """The generated C++ needs nothing of the C++ runtime library (POSIX threads run the
    blocks), so the C driver, which compiles it as C++ but does not link libstdc++, makes a
    library that loads and gives the same results."""
    code = (f"import numpy as np, irfuse; a = np.arange(18, dtype=np.float32).reshape(2, 3, 3); "
            f"print(irfuse.compile({MMUL!r}, backend='cpu')(a).B.tobytes().hex())")
    runs = []
    for cxx in ("gcc", "g++"):
        env = {**os.environ, "IRFUSE_CACHE_DIR": str(tmp_path / cxx), "CXX": cxx}
        p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT)
        assert p.returncode == 0, p.stderr
        runs.append(p.stdout)
    assert runs[0] == runs[1]


def test_a_host_compiler_that_never_returns_is_stopped(tmp_path, monkeypatch):
    slow = tmp_path / "slow-cxx"
    slow.write_text("#!/bin/sh\nsleep 60\n")
    slow.chmod(0o755)
    monkeypatch.setenv("CXX", str(slow))
    monkeypatch.setenv("IRFUSE_CXX_TIMEOUT", "1.5")
    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path / "cache"))
    from irfuse.backend.host_compile import build_host_library

    prog = irfuse.compile(MMUL, backend="cpu", pipeline="kas-dce,fuse-each")
    with pytest.raises(CompileError, match="did not finish within 1.5 s"):
        build_host_library(prog.compiled.source, prog.compiled.kernels)
    monkeypatch.setenv("IRFUSE_CXX_TIMEOUT", "soon")
    with pytest.raises(UsageError, match="IRFUSE_CXX_TIMEOUT must be a positive number of seconds"):
        build_host_library(prog.compiled.source, prog.compiled.kernels)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the memory cap is set with the shell's ulimit -v")
def test_a_host_compile_past_its_memory_is_stopped_with_an_error_that_says_so(tmp_path, monkeypatch):
    """The host compiler's address space is capped (`IRFUSE_CXX_MEMORY`, bytes; by default half
    the machine's memory): a compile that needs more ends with an error naming the limit and
    the variable, not with the machine's memory taken. A value that is not a number of bytes
    is refused by name."""
    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path / "cache"))
    from irfuse.backend.host_compile import build_host_library

    prog = irfuse.compile(MMUL, backend="cpu", pipeline="kas-dce,fuse-each")
    monkeypatch.setenv("IRFUSE_CXX_MEMORY", str(48 << 20))
    with pytest.raises(CompileError, match=r"ran out of the 0\.0 GiB it may take \(IRFUSE_CXX_MEMORY sets the limit"):
        build_host_library(prog.compiled.source, prog.compiled.kernels)
    for bad in ("lots", "1000"):
        monkeypatch.setenv("IRFUSE_CXX_MEMORY", bad)
        with pytest.raises(UsageError, match="IRFUSE_CXX_MEMORY must be a whole number of bytes"):
            build_host_library(prog.compiled.source, prog.compiled.kernels)
    monkeypatch.delenv("IRFUSE_CXX_MEMORY")
    assert build_host_library(prog.compiled.source, prog.compiled.kernels)  # (the default: it builds)


def test_gcc_alone_gets_its_own_flags(tmp_path, monkeypatch):
    """The host build adds GCC's own flags (`GCC_FLAGS`) for a compiler whose --version names the
    Free Software Foundation, not for clang or a compiler that does not say."""
    from irfuse.backend import host_compile

    monkeypatch.setattr(host_compile, "_IS_GCC", {})
    flags = {}
    for name, says in (("gcc-like", "g++ (GCC) 13.3.0\nCopyright (C) 2023 Free Software Foundation, Inc."),
                       ("clang-like", "clang version 18.1.3\nTarget: x86_64-pc-linux-gnu"), ("silent", "")):
        cxx = tmp_path / name
        cxx.write_text(f"#!/bin/sh\nprintf '{says}\\n'\n")
        cxx.chmod(0o755)
        flags[name] = host_compile.compiler_flags([str(cxx)])
    assert flags["gcc-like"] == host_compile.FLAGS + host_compile.GCC_FLAGS
    assert flags["clang-like"] == flags["silent"] == host_compile.FLAGS
    assert "-fno-math-errno" in host_compile.FLAGS and "-ffp-contract=off" in host_compile.FLAGS


def test_outputs_pickle_with_their_names():
    out = Outputs(("a", "b"), [np.arange(3.0), np.ones(2)])
    back = pickle.loads(pickle.dumps(out))
    assert back.keys() == ("a", "b") and np.array_equal(back.a, out.a) and np.array_equal(back["b"], out.b)


FIVE_OUTPUTS = """
matrix3x3 A, B; vector3 c, v, y; scalar s, e;
uniform scalar m, t, u; uniform vector3 g;
input A, B, c;
B = mmul33(A, A); v = mvmul33(B, c); s = venorm3(v);
m = max(s); g = sum(v);
e = smul(s, m); y = svmul3(v, m);
t = sum(e); u = sadd(t, m);
return B, y, g, t, u;
"""


def test_dask_results_that_move_between_worker_processes_come_back():
    """Five outputs and two levels of reductions, n = 7 in uneven chunks (3, 4) on two worker
    processes: a task's `Outputs` moved between workers (once unpicklable: the workers
    logged it forever and `compute()` never returned)."""
    p = _child(f"""
        import numpy as np, dask, dask.array as da, distributed, irfuse, irfuse.dask
        prog = irfuse.compile({FIVE_OUTPUTS!r}, backend="cpu")
        rng = np.random.default_rng(5)
        A, B, c = rng.random((7, 3, 3), np.float32), rng.random((7, 3, 3), np.float32), rng.random((7, 3), np.float32)
        one = prog(A, B, c)
        if __name__ == "__main__":
            cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                               dashboard_address=None)
            with distributed.Client(cluster) as client:
                outs = irfuse.dask.apply(prog, da.from_array(A, chunks=(3, 3, 3)), da.from_array(B, chunks=(4, 3, 3)),
                                         da.from_array(c, chunks=((3, 4), 3)))
                got = dask.compute(*outs, scheduler=client.get)
            cluster.close()
            for name, g in zip(prog.outputs, got):
                tol = 0 if name in ("B", "y") else 1e-5
                assert np.allclose(g, one[name], rtol=tol, atol=0), (name, g, one[name])
            print("ok")
    """)
    assert p.returncode == 0 and "ok" in p.stdout, p.stdout + p.stderr[-3000:]


def test_an_already_lowered_module_is_refused_by_compile():
    from irfuse.dialects.context import module_text, parse_module

    prog = irfuse.compile(CFL, backend="cpu")
    with pytest.raises(UsageError, match="already lowered"):
        irfuse.compile(parse_module(module_text(prog.compiled.module)), backend="cpu")


def test_a_python_loop_of_no_iterations_runs_nothing(tmp_path):
    """`for _ in range(0)` (or `range(3, 3)`, `range(N)` of a module's N = 0) runs its body
    never, as Python does: the body is not read (a name it alone assigns is not assigned)."""
    src = textwrap.dedent("""
        import numpy as np
        import irfuse
        from irfuse import Matrix

        N = 0

        @irfuse.program
        def f(R: Matrix[3, 3], Q: Matrix[3, 3]):
            for _ in range(N):
                R = R @ R
                T = Q
            for _ in range(3, 3):
                Q = Q + Q
            S = R @ Q
            for _ in range(0):
                S = T
            return S

        R, Q = np.random.default_rng(0).random((2, 5, 3, 3))
        print(np.allclose(irfuse.compile(f, backend="cpu", dtype="f64")(R, Q).S, R @ Q, rtol=1e-14, atol=0))
    """)
    (tmp_path / "loop0.py").write_text(src)
    p = subprocess.run([sys.executable, str(tmp_path / "loop0.py")], capture_output=True, text=True, cwd=ROOT)
    assert p.returncode == 0 and p.stdout.strip() == "True", p.stdout + p.stderr


def test_a_batch_length_mismatch_names_the_input_that_disagrees():
    prog = irfuse.compile(os.path.join(ROOT, "examples", "bigfusion.kas"), backend="cpu")
    rng = _rng()
    A = rng.random((48, 3, 3), np.float32)
    B, c = rng.random((97, 3, 3), np.float32), rng.random((97, 3), np.float32)
    D = rng.random((97, 5, 5), np.float32)
    with pytest.raises(UsageError, match=r"input 'A' holds 48 elements, the other arguments \(B, c, D, E\) 97"):
        prog(A, B, c, D, D)
    with pytest.raises(UsageError, match=r"inputs 'B' \(97\), 'E' \(97\) disagree with the other arguments \(A, c, "
                                         r"D\), which hold 48 elements"):
        prog(A, B, c[:48], D[:48], D)
    with pytest.raises(UsageError, match=r"the inputs' batch lengths disagree \('A' 48, 'B' 97, 'c' 50, 'D' 50, "
                                         r"'E' 97 elements\)"):
        prog(A, B, c[:50], D[:50], D)  # no length is the most common one: every one is listed


def test_a_uniform_assigned_inside_a_loop_is_named_as_such():
    src = "matrix3x3 A, B; uniform scalar c;\ninput A, c;\nloop 2 { c = sadd(c, c); B = mmul33(A, A); }\nreturn B;"
    with pytest.raises(CompileError, match="'c' is uniform and cannot be assigned inside a loop"):
        irfuse.compile(src, backend="cpu")


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_python_sequences_are_taken_in_either_precision_and_masked_arrays_refused(dtype):
    prog = irfuse.compile(MMUL, backend="cpu", dtype=dtype)
    values = [[[1, 2, 0], [0, 1, 0], [0, 0, 1]], [[2, 0, 0], [0, 2, 0], [0, 0, 2]]]
    got = prog(values).B
    assert got.dtype == prog.dtype and np.array_equal(got, np.array(values) @ np.array(values))
    with pytest.raises(UsageError, match="masked array"):
        prog(np.ma.masked_array(np.ones((2, 3, 3), prog.dtype), mask=False))
    with pytest.raises(UsageError, match="not a rectangular nest of numbers"):
        prog([[[1, 2], [3]]])
    if dtype == "f32":
        with pytest.raises(UsageError, match="beyond the float32 range"):
            prog([[[1e39, 0, 0], [0, 1, 0], [0, 0, 1]]])
        with pytest.raises(UsageError, match="does not cast"):
            prog(np.ones((2, 3, 3)))  # a NumPy array of another type is still refused


def test_cli_reports_what_it_converted_from_an_npz_file(tmp_path):
    rng = _rng()
    path = tmp_path / "in.npz"
    np.savez(path, A=rng.random((5, 3, 3)))  # float64 values for a float32 run
    (tmp_path / "p.kas").write_text(MMUL)
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", str(tmp_path / "p.kas"), "--backend", "cpu",
                        "--inputs", str(path)], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "COLUMNS": "300"})
    assert p.returncode == 0, p.stderr
    assert "converted to the run's type (input 'A': float64 -> float32)" in p.stdout
    np.savez(path, A=rng.random((5, 3, 3)).astype(">f4"))  # the run's type in the other byte order: named so
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", str(tmp_path / "p.kas"), "--backend", "cpu",
                        "--inputs", str(path)], capture_output=True, text=True, cwd=ROOT,
                       env={**os.environ, "COLUMNS": "300"})
    assert p.returncode == 0 and "verified" in p.stdout, p.stderr
    said = " ".join(p.stdout.split())  # (the console wraps a line longer than its width: the file's path is long)
    assert "(input 'A': float32 (>f4, the other byte order) -> float32)" in said, p.stdout


def test_cli_run_on_the_cpu_reports_a_time_and_compile_lists_every_file(tmp_path):
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "run", "bigfusion", "--backend", "cpu", "--n", "64"],
                       capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "COLUMNS": "200"})
    assert p.returncode == 0 and "time (median of 5)" in p.stdout, p.stdout + p.stderr
    out = tmp_path / "plan"
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "compile", "bigfusion", "-o", str(out)],
                       capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "COLUMNS": "300"})
    assert p.returncode == 0, p.stderr
    said = p.stdout.split("wrote", 1)[1]
    for name in os.listdir(out):
        assert name in said, (name, said)


def test_tune_checks_its_plot_path_first_and_writes_nothing_unasked(tmp_path):
    src = tmp_path / "p.kas"
    src.write_text(MMUL)
    # (planned for the H100: its two plans, elem and row, are predicted alike at n = 64, so their
    # correlation with the measured times is undefined)
    base = [sys.executable, "-m", "irfuse.tools.cli", "tune", str(src), "--backend", "cpu", "--top", "2",
            "--repeat", "1", "--rounds", "1", "--n", "64", "--profile", "h100"]
    p = subprocess.run([*base, "--plot", "/nonexistent/x.png"], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 1 and "--plot /nonexistent/x.png: the directory /nonexistent does not exist" in p.stderr
    assert "Traceback" not in p.stderr and "compiling" not in p.stdout
    p = subprocess.run(base, capture_output=True, text=True, cwd=tmp_path, env={**os.environ, "COLUMNS": "300"})
    assert p.returncode == 0, p.stderr
    assert sorted(os.listdir(tmp_path)) == ["p.kas"]  # no p.tuning.json here
    assert "results not written" in p.stdout
    # Predictions all alike: no correlation, said as such, not 'nan'.
    assert "nan" not in p.stdout and "undefined" in p.stdout
    p = subprocess.run([*base, "--json", str(tmp_path / "t.json")], capture_output=True, text=True, cwd=tmp_path)
    assert p.returncode == 0 and json.loads((tmp_path / "t.json").read_text())["spearman"] is None


def test_irfuse_opt_names_the_default_pipeline():
    run = [sys.executable, "-m", "irfuse.tools.opt", os.path.join(ROOT, "examples", "synctest.kas")]
    named = subprocess.run([*run, "-p", "irfuse-default", "-t", "cuda"], capture_output=True, text=True)
    from irfuse.passes.registry import DEFAULT_PIPELINE

    spelled = subprocess.run([*run, "-p", DEFAULT_PIPELINE, "-t", "cuda"], capture_output=True, text=True)
    assert named.returncode == 0 and named.stdout == spelled.stdout and "__global__" in named.stdout, named.stderr
    listed = subprocess.run([sys.executable, "-m", "irfuse.tools.opt", "--list-passes"], capture_output=True, text=True)
    assert f"irfuse-default: the pipeline {DEFAULT_PIPELINE}" in listed.stdout


def test_a_gather_of_a_nodal_value_of_four_axes_is_refused_at_its_line():
    """K rows of a tensor2x2x2x2 would be a value of five axes: an unlocated VerifyException
    once; now the line and the limit are named. (A Python program's nodal values are scalars
    and vectors: `irfuse.Nodal` says so.)"""
    src = "nodal tensor2x2x2x2 T; index4 conn; matrix2x2 x;\ninput T, conn;\nx = gather(T, conn);\nreturn x;"
    with pytest.raises(CompileError, match=r"<source>:3:12: error: 'gather' of tensor2x2x2x2 'T' through index4 "
                                           r"would give a value of 5 axes .*at most 4"):
        irfuse.compile(src, backend="cpu")


def test_a_contraction_of_too_many_products_is_refused_and_one_at_the_limit_compiles():
    """Ten matrices contracted into a scalar (1,024 products of 10 factors an entry) once
    ended in a RecursionError; it is refused at its line naming the limit, and seven (64
    products of 7 factors) run against the reference."""
    ten = ", ".join(["a"] * 10)
    src = (f'matrix2x2 a; scalar s;\ninput a;\ns = contract("ij,jk,kl,lm,mn,no,op,pq,qr,ri->", {ten});\n'
           "return s;")
    with pytest.raises(CompileError, match=r"<source>:3:5: error: contract: .* sums 1024 products of 10 factors "
                                           r"for each entry .* at most 512 factors in all"):
        irfuse.compile(src, backend="cpu")
    seven = irfuse.compile('matrix2x2 a, s;\ninput a;\ns = contract("ij,jk,kl,lm,mn,no,op->ip", '
                           + ", ".join(["a"] * 7) + ");\nreturn s;", backend="cpu")
    assert seven.check(_rng().uniform(-1, 1, (9, 2, 2)).astype(np.float32)).ok


RUNAWAY = {
    # (every size within the documented 64: 16.7 M words a value)
    "kas": "tensor64x64x64x64 T, U; input T; U = scale(T, 2); return U;",
    "python": "import irfuse\ndef f(T: irfuse.Tensor[64, 64, 64, 64]):\n    return T * 2\nirfuse.compile(f)",
    "ir": ("builtin.module {\n  kas.program @p(%T: !kas.tensor<64x64x64x64>) -> (U : !kas.tensor<64x64x64x64>) {\n"
           "    %c = kas.constant 2.0 : !kas.scalar\n    %U = kas.call @scale_64x64x64x64_s(%T, %c) : "
           "(!kas.tensor<64x64x64x64>, !kas.scalar) -> !kas.tensor<64x64x64x64>\n"
           "    kas.return %U : !kas.tensor<64x64x64x64>\n  }\n}\n"),
}


@pytest.mark.parametrize("form", sorted(RUNAWAY))
def test_a_program_too_large_to_compile_is_refused_up_front_within_a_memory_limit(form, tmp_path):
    """A value of 64x64x64x64 words once compiled for minutes and took the machine's memory.
    In a child process limited to 1.5 GB of address space and 60 s, each form of it (KAS, a
    Python function, IR through irfuse-opt) is refused at once naming the limit."""
    limit = "import resource; resource.setrlimit(resource.RLIMIT_AS, (1_500_000_000, 1_500_000_000))\n"
    if form == "ir":
        path = tmp_path / "big.mlir"
        path.write_text(RUNAWAY["ir"])
        code = limit + (f"import sys; sys.argv = ['irfuse-opt', {str(path)!r}, '-p', 'irfuse-default']\n"
                        "from irfuse.tools.opt import main; raise SystemExit(main())")
    elif form == "kas":
        code = limit + f"import irfuse; irfuse.compile({RUNAWAY['kas']!r}, backend='cpu')"
    else:
        path = tmp_path / "big.py"
        path.write_text(RUNAWAY["python"])
        code = limit + f"exec(compile(open({str(path)!r}).read(), {str(path)!r}, 'exec'))"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    said = p.stdout + p.stderr
    assert p.returncode != 0 and "MemoryError" not in said, said[-3000:]
    want = {"kas": "holds 16,777,216 words a value; at most 4,096", "python": "a value holds at most 4,096 words",
            "ir": "unknown op 'scale_64x64x64x64_s'"}[form]
    assert want in said, said[-3000:]


@pytest.mark.skipif(not os.path.exists("/dev/zero"), reason="a character device to read")
def test_files_a_user_names_are_read_only_where_they_end_and_within_a_bound(tmp_path):
    """A program's source, a register table, a tuning result or a device profile named as
    `/dev/zero` was read to its end: the machine's memory taken (under a limit, "out of memory
    (try a smaller --n)"). Devices and sockets are refused by name; a pipe (a shell's `<(...)`)
    is read; a file past the bound is refused."""
    from irfuse.artifact.user_files import read_text

    device = "not a regular file (a device or a socket: its text has no end)"
    with pytest.raises(CompileError, match=r"/dev/zero: error: cannot read file: not a regular file"):
        irfuse.compile("/dev/zero", backend="cpu")
    source = os.path.join(ROOT, "examples", "synctest.kas")
    with pytest.raises(UsageError, match=r"registers='/dev/zero': cannot read the register table: not a regular"):
        irfuse.compile(source, backend="cpu", registers="/dev/zero")
    os.symlink("/dev/zero", tmp_path / "zero.json")
    with pytest.raises(CompileError, match="zero.json: not a device profile .*not a regular file"):
        irfuse.compile(source, backend="cpu", profile=str(tmp_path / "zero.json"))
    from irfuse.driver.tuned import compile_tuned
    with pytest.raises(UsageError, match="not a tuning result of 'irfuse tune': .*not a regular file"):
        compile_tuned("/dev/zero")
    with pytest.raises(OSError, match=device.replace("(", r"\(").replace(")", r"\)")):
        read_text("/dev/zero")
    (tmp_path / "big.kas").write_text("x" * 11)
    with pytest.raises(OSError, match="larger than 0 MiB"):
        read_text(str(tmp_path / "big.kas"), limit=10)
    os.mkfifo(tmp_path / "pipe")
    writer = subprocess.Popen(["sh", "-c", f"cat {source} > {tmp_path / 'pipe'}"])
    try:
        assert irfuse.compile(str(tmp_path / "pipe"), backend="cpu").inputs == irfuse.compile(source,
                                                                                             backend="cpu").inputs
    finally:
        writer.wait(timeout=60)
