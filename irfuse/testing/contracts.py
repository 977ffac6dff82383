"""Fuzzing contracts beyond the frontend: input files, command-line flags, op-library files and
the compile cache. Each `random_*` makes one case from a seed; each `check_*` runs it and
returns what happened, or raises `AssertionError` for a broken contract (a traceback, a wrong
result, a result that depends on what the cache held).

- inputs: an `.npz` file, valid or damaged in any of many ways, given to `irfuse run`: refused
  with a diagnostic naming the file, or run and verified against the reference;
- flags: a command line of `irfuse` with options from its grammar, sensible or not: exit 0 or a
  diagnostic (status 1, or 2 for argparse), never an escaping exception, never a failed
  verification;
- library: `examples/extending/mdet.py` mutated: loaded, or refused with a diagnostic naming
  the file;
- cache: the cache of a compile damaged (bytes flipped, files cut short, swapped or removed):
  the next compile gives the same CUDA and IR, and its kernels run correctly;
- plan: a saved plan directory (`irfuse compile -o`, one program or one of passes over a mesh)
  with its manifests edited (values replaced by others of any type, keys dropped, lists cut
  or reordered) or its files damaged, run by `irfuse run --plan`: exit 0 or a diagnostic
  (status 1), never an escaping exception;
- api: a call of the Python API with one argument replaced by a value of any kind (`JUNK`):
  it returns, or irfuse refuses it with its own error (`IrfuseError`), never one from inside;
- pass options: `irfuse-opt` running one pass with one option given a value out of its range
  or of another kind: the pass runs, or a diagnostic (status 1), within seconds.
"""

from __future__ import annotations

import contextlib
import io
import json
import multiprocessing
import os
import random
import re
import shutil
import zipfile

import numpy as np

from irfuse.diagnostics import IrfuseError
from irfuse.dialects.context import module_text
from irfuse.driver.compile import compile_program
from irfuse.driver.implementation_check import check_implementation
from irfuse.library.catalogue import Library, define_catalogue, load_library_file
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import load_inputs, random_inputs, run_references
from irfuse.verification.verify import check_outputs
from irfuse.testing.mutations import mutate
from irfuse.tools import cli

# What the contracts run: suffixed and generic ops, a branch, and a loop reading a per-element
# array (shaped (N, 2) in an input file) at its index.
PROGRAM = ("matrix3x3 A, M; vector3 v, w; scalar s, d; scalar e[2];\ninput A, v, e;\n"
           "M = mmul33(A, A);\nw = mvmul33(M, v);\ns = venorm3(w);\nd = det(A);\n"
           "if (d > 0) {\n  s = max(s, d);\n}\nloop q 2 {\n  w = scale(w, e[q]);\n}\nreturn M, s, w;\n")
SHAPES = {"A": (3, 3), "v": (3,), "e": (2,)}


def write_program(directory: str) -> str:
    path = os.path.join(directory, "contract.kas")
    if not os.path.exists(path):
        with open(path, "w") as f:
            f.write(PROGRAM)
    return path


# --- inputs -------------------------------------------------------------------------------------


def random_inputs_file(rng: random.Random, path: str) -> str:
    """Writes one `.npz` case for PROGRAM; returns what it is."""
    n = rng.choice([0, 1, 2, 5, 37])
    arrays = {k: np.random.default_rng(rng.randrange(2**32)).uniform(-1, 1, (n, *s)) for k, s in SHAPES.items()}
    kind = rng.choice(["valid", "missing", "extra", "shape", "length", "dtype", "object", "special", "huge",
                       "int", "f32", "truncated", "garbage", "npy", "empty_zip", "scalar"])
    if kind == "missing":
        arrays.pop(rng.choice(list(arrays)))
    elif kind == "extra":
        arrays["zzz"] = np.zeros((n, 2))
    elif kind == "shape":
        k = rng.choice(list(arrays))
        arrays[k] = np.zeros((n, *(d + rng.choice([-1, 1]) for d in SHAPES[k])))
    elif kind == "length":
        arrays["v"] = np.zeros((n + 1, 3))
    elif kind == "dtype":
        arrays["A"] = arrays["A"].astype(rng.choice(["complex64", "bool", "U3", "datetime64[s]"]))
    elif kind == "object":
        arrays["v"] = np.array([[object()] * 3] * max(n, 1), dtype=object)
    elif kind == "special":
        a = arrays["A"].reshape(-1)
        for _ in range(min(3, a.size)):
            a[rng.randrange(a.size)] = rng.choice([np.nan, np.inf, -np.inf, 0.0, 1e-40])
    elif kind == "huge":
        arrays["A"] = arrays["A"] * rng.choice([1e19, 1e30, 1e39, 1e300])
    elif kind == "int":
        arrays["A"] = (arrays["A"] * 10).astype(rng.choice(["int8", "int64", "uint16"]))
    elif kind == "f32":
        arrays = {k: v.astype(np.float32) for k, v in arrays.items()}
    elif kind == "scalar":
        arrays["v"] = np.float64(1.0)
    if kind == "npy":
        with open(path, "wb") as f:
            np.save(f, arrays["A"])
        return kind
    if kind == "garbage":
        with open(path, "wb") as f:
            f.write(bytes(rng.randrange(256) for _ in range(rng.randrange(0, 300))))
        return kind
    if kind == "empty_zip":
        with zipfile.ZipFile(path, "w"):
            pass
        return kind
    if kind == "object":
        _savez_objects(path, arrays)
    else:
        np.savez(path, **arrays)
    if kind == "truncated":
        data = open(path, "rb").read()
        with open(path, "wb") as f:
            f.write(data[: rng.randrange(len(data))])
    return kind


def _savez_objects(path: str, arrays: dict) -> None:
    with zipfile.ZipFile(path, "w") as z:
        for k, v in arrays.items():
            buf = io.BytesIO()
            np.save(buf, v, allow_pickle=True)
            z.writestr(k + ".npy", buf.getvalue())


def check_inputs_file(path: str, workdir: str, dtype: str = "f32") -> str:
    """'refused' (a diagnostic naming the file) or 'verified'."""
    plan, _ = compile_program(write_program(workdir), None, dtype, compile_gpu=False)
    program = plan.reference_program
    try:
        inputs = load_inputs(path, program, np.float32 if dtype == "f32" else np.float64)
    except IrfuseError as e:
        assert all(d.file == path for d in e.diagnostics), [d.render() for d in e.diagnostics]
        return "refused"
    n = next(iter(inputs.values())).shape[0]
    if n < 1:
        return "refused"  # `irfuse run` refuses an empty batch (tested there)
    got = Executor(plan, CpuDevice(plan)).run(inputs, n).outputs
    checks = check_outputs(got, run_references(program, inputs, dtype, n), dtype)
    assert all(c.ok for c in checks), [c.describe() for c in checks]
    return "verified"


# --- flags --------------------------------------------------------------------------------------

_VALUES = {
    "--n": ["1", "3", "0", "-5", "x", "1e3", "99999999999999"], "--seed": ["0", "7", "-1", "a"],
    "--dtype": ["f32", "f64", "f16"], "--backend": ["cpu", "numpy", "cuda", "auto", "tpu"],
    "--repeat": ["0", "1", "-1"], "--pipeline": ["kas-dce,fuse-each", "fuse-partition{top=2}", "nope", "",
                                                 "kas-dce,fuse-partition{max-size=1},fuse-verify-races",
                                                 "builtin.module(kas-dce,fuse-each)", "fuse-each{by=0}"],
    "--profile": ["h100", "h200", "tpu9", "/nonexistent.json"], "--registers": ["/nonexistent.json", "{dir}/bad.json"],
    "--top": ["1", "2", "0", "-1"], "--max-size": ["1", "3", "0"], "--rounds": ["1", "0"],
    "--inputs": ["{dir}/none.npz", "{dir}/bad.json"], "--save": ["{dir}/out.npz", "{dir}", "{dir}/no/such/out.npz"],
    "--plan": ["{dir}", "{dir}/compiled"], "-o": ["{dir}/compiled", "{dir}/bad.json"], "--library": ["{dir}/none.py"],
    "--arch": ["sm_90", "sm_x"], "--back-to-back": ["1", "0"],
}
_OPTIONS = {
    "run": ["--n", "--seed", "--dtype", "--backend", "--repeat", "--pipeline", "--profile", "--registers",
            "--inputs", "--save", "--plan", "--library"],
    "compile": ["-o", "--dtype", "--pipeline", "--arch", "--profile", "--registers"],
    "plan": ["--top", "--max-size", "--n", "--dtype", "--profile", "--registers"],
    "tune": ["--backend", "--top", "--rounds", "--repeat", "--n", "--back-to-back", "--dtype"],
    "ops": ["--library"],
}


def random_argv(rng: random.Random, workdir: str) -> list[str]:
    """One `irfuse` command line over its real subcommands and options, values sensible or not."""
    command = rng.choice(list(_OPTIONS))
    argv = [command]
    if command == "ops":
        argv += rng.choice([[], ["mmul33"], ["nosuchop"]])
    elif rng.random() < 0.9:
        argv.append(rng.choice([write_program(workdir), os.path.join(workdir, "missing.kas")]))
    for opt in rng.sample(_OPTIONS[command], k=min(len(_OPTIONS[command]), rng.randint(0, 3))):
        argv += [opt, rng.choice(_VALUES[opt]).replace("{dir}", workdir)]
    if command == "tune":  # keep a tuning run short: the CPU, few plans, few timings
        argv += ["--backend", "cpu", "--top", "1", "--repeat", "1", "--rounds", "1", "--n", "3",
                 "--json", os.path.join(workdir, "t.json")]
    if command == "run" and "--n" not in argv:
        argv += ["--n", "3"]
    if command in ("run",) and "--backend" not in argv:
        argv += ["--backend", "cpu"]
    return argv


def check_cli(argv: list[str], failed_ok: bool = False) -> int:
    """The command's exit status (0, 1, or 2 from argparse); AssertionError for anything else
    (a traceback; a failed verification, unless `failed_ok`: a damaged plan may compute
    something else, which the check against its reference then reports)."""
    code, out, err = _exit_status(cli.main, argv)
    assert failed_ok or "verification FAILED" not in out, (argv, out)
    return code


def _exit_status(main, argv: list[str]) -> tuple[int, str, str]:
    """A command's `main(argv)` run in this process: (its exit status, what it printed to
    stdout, to stderr); AssertionError for a status other than 0, 1 or 2 (argparse's) or a
    traceback printed. An exception escaping `main` propagates."""
    out, err = io.StringIO(), io.StringIO()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(argv)
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 2
    assert code in (0, 1, 2), (argv, code)
    assert "Traceback" not in err.getvalue(), (argv, err.getvalue())
    return code, out.getvalue(), err.getvalue()


# Values out of range or of another kind for a pass's option: zero, negative, text, a number
# beyond 64 bits (an option bounding a search must not run away with it).
PASS_OPTION_VALUES = ("0", "-1", "x", "99999999999999999999")


def every_pass_option(sources: list[str]):
    """`irfuse-opt` command lines running each registered pass on each of `sources` with each
    of its options given each of `PASS_OPTION_VALUES`, in a fixed order."""
    from xdsl.passes import get_pass_option_infos

    from irfuse.passes.registry import PASSES

    for source in sources:
        for p in PASSES:
            for option in get_pass_option_infos(p.cls):
                for value in PASS_OPTION_VALUES:
                    yield [source, "-p", f"{p.name}{{{option[0]}={value}}}"]


def check_opt(argv: list[str]) -> int:
    """`irfuse-opt`'s exit status (0, or 1 with a diagnostic): as `_exit_status` checks it."""
    from irfuse.tools import opt

    return _exit_status(opt.main, argv)[0]


def prepare_flag_files(workdir: str) -> None:
    with open(os.path.join(workdir, "bad.json"), "w") as f:
        f.write("[1, 2]")


# --- op library files ---------------------------------------------------------------------------


def random_library(rng: random.Random, text: str) -> str:
    """Mutates the file's Python, or (half the time) only inside one of its string literals: the
    definition, the CUDA source, an access pattern, so that the library's own checks see it."""
    strings = [m for m in re.finditer(r'"""(?:.|\n)*?"""|"[^"\n]*"', text)]
    if strings and rng.random() < 0.5:
        m = rng.choice(strings)
        inner = m.group(0)
        for _ in range(rng.randint(1, 2)):
            inner = mutate(inner, rng)
        return text[:m.start()] + inner + text[m.end():]
    for _ in range(rng.randint(1, 3)):
        text = mutate(text, rng)
    return text


def check_library_file(path: str) -> bool:
    """True when the file loads into a fresh library; False when refused with a diagnostic naming it."""
    lib = Library(check_implementation)
    define_catalogue(lib)
    try:
        load_library_file(path, lib)
        return True
    except IrfuseError as e:
        assert all(d.file == path for d in e.diagnostics), [d.render() for d in e.diagnostics]
        return False


# --- the cache ----------------------------------------------------------------------------------


def damage_cache(rng: random.Random, cache: str) -> list[str]:
    """Damages a few entries of a cache directory in place; returns what was done."""
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(cache) for f in fs if not f.endswith(".lock"))
    done = []
    for path in rng.sample(files, k=min(len(files), rng.randint(1, 4))):
        how = rng.choice(["flip", "truncate", "remove", "empty", "swap"])
        data = open(path, "rb").read()
        if how == "flip" and data:
            i = rng.randrange(len(data))
            data = data[:i] + bytes([data[i] ^ (1 << rng.randrange(8))]) + data[i + 1:]
        elif how == "truncate":
            data = data[: rng.randrange(len(data) + 1)]
        elif how == "empty":
            data = b""
        elif how == "swap":
            other = rng.choice(files)
            data = open(other, "rb").read() if os.path.exists(other) else b""
        if how == "remove":
            os.unlink(path)
        else:
            with open(path, "wb") as f:
                f.write(data)
        done.append(f"{how} {os.path.relpath(path, cache)}")
    return done


def _fill_cache(path: str, dtype: str, cache: str) -> None:
    os.environ["IRFUSE_CACHE_DIR"] = cache
    program, _ = compile_program(path, None, dtype, compile_gpu=True, arch="sm_90")
    CpuDevice(program)  # the host library lands in the cache too


def check_cache(rng: random.Random, workdir: str, dtype: str = "f32") -> list[str]:
    """Compiles PROGRAM into a fresh cache, damages it, compiles again: the same CUDA and IR, and
    the kernels (built through the damaged host cache) verify. Returns the damage done."""
    cache = os.path.join(workdir, "cache")
    shutil.rmtree(cache, ignore_errors=True)
    old = os.environ.get("IRFUSE_CACHE_DIR")
    os.environ["IRFUSE_CACHE_DIR"] = cache
    try:
        path = write_program(workdir)
        # The cache is filled by another process, as an earlier run would: damaging a host
        # library this process has loaded would pull the pages from under its own feet.
        ctx = multiprocessing.get_context("spawn")
        with ctx.Pool(1) as pool:
            pool.apply(_fill_cache, (path, dtype, cache))
        first, _ = compile_program(path, None, dtype, compile_gpu=True, arch="sm_90")
        done = damage_cache(rng, cache)
        again, _ = compile_program(path, None, dtype, compile_gpu=True, arch="sm_90")
        assert again.source == first.source and module_text(again.module) == module_text(first.module), done
        assert again.cubin.cubin == first.cubin.cubin, done
        inputs = random_inputs(again.reference_program, 5, 1, np.float32 if dtype == "f32" else np.float64)
        got = Executor(again, CpuDevice(again)).run(inputs, 5).outputs
        checks = check_outputs(got, run_references(again.reference_program, inputs, dtype), dtype)
        assert all(c.ok for c in checks), (done, [c.describe() for c in checks])
        return done
    finally:
        if old is None:
            os.environ.pop("IRFUSE_CACHE_DIR", None)
        else:
            os.environ["IRFUSE_CACHE_DIR"] = old


# --- saved plan directories ---------------------------------------------------------------------

# The plans the plan contract damages: one program, and one of passes over a mesh's nodes and
# elements (its manifest lists stages, each a plan directory of its own).
PLAN_SOURCES = ("neo_hookean.kas", "mesh/explicit_step.kas")


def prepare_plans(workdir: str, examples: str) -> list[str]:
    """Saves the plans of PLAN_SOURCES (from the `examples` directory) under `workdir`."""
    plans = []
    for k, name in enumerate(PLAN_SOURCES):
        plans.append(os.path.join(workdir, f"plan{k}"))
        check_cli(["compile", os.path.join(examples, name), "-o", plans[-1]])
    return plans


def _json_places(value, at=()) -> list[tuple]:
    """Every place in a JSON value: the paths (keys and indices) to each of its parts."""
    places = [at]
    if isinstance(value, dict):
        for k, v in value.items():
            places += _json_places(v, (*at, k))
    elif isinstance(value, list):
        for k, v in enumerate(value):
            places += _json_places(v, (*at, k))
    return places


def damage_manifest(rng: random.Random, value):
    """A JSON value edited at one to three random places; returns it."""
    for _ in range(rng.randint(1, 3)):
        places = [p for p in _json_places(value) if p]
        if not places:
            break
        where = rng.choice(places)
        parent = value
        for key in where[:-1]:
            parent = parent[key]
        key, old = where[-1], parent[where[-1]]
        how = rng.choice(["drop", "none", "text", "number", "negative", "huge", "float", "list", "object",
                          "shorter", "reversed", "twice"])
        if how == "drop":
            del parent[key]
            continue
        new = {"none": None, "text": rng.choice(["", "x", "../x", "stage0", "u", "f32"]),
               "number": rng.randint(0, 9), "negative": -rng.randint(1, 9), "huge": 10 ** rng.randint(9, 30),
               "float": rng.random() * 10, "list": [], "object": {},
               "shorter": old[:-1] if isinstance(old, (list, str)) else old,
               "reversed": old[::-1] if isinstance(old, (list, str)) else old,
               "twice": old * 2 if isinstance(old, (list, str)) else old}[how]
        parent[key] = new
    return value


def check_plan(rng: random.Random, plans: list[str], workdir: str) -> int:
    """One of `plans` copied, damaged (its manifests edited, or a file cut short, emptied or
    removed) and run by `irfuse run --plan` on the CPU: the exit status (0 or 1, with a
    diagnostic); AssertionError for a traceback (`check_cli`)."""
    target = os.path.join(workdir, "damaged")
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(rng.choice(plans), target)
    files = sorted(os.path.join(d, f) for d, _, fs in os.walk(target) for f in fs)
    manifests = [f for f in files if f.endswith("manifest.json")]
    for path in rng.sample(manifests, k=rng.randint(1, len(manifests))):
        with open(path) as f:
            value = json.load(f)
        with open(path, "w") as f:
            json.dump(damage_manifest(rng, value), f)
    if rng.random() < 0.3:
        path = rng.choice(files)
        how = rng.choice(["truncate", "empty", "remove"])
        if how == "remove":
            os.unlink(path)
        else:
            data = open(path, "rb").read()
            with open(path, "wb") as f:
                f.write(data[:rng.randrange(len(data) + 1)] if how == "truncate" else b"")
    code = check_cli(["run", "--plan", target, "--backend", "cpu", "--n", str(rng.choice([1, 7, 40]))], failed_ok=True)
    assert code in (0, 1), code
    return code


# --- the Python API's arguments -----------------------------------------------------------------

# Values of every kind for an argument: none, text, bytes, containers, numbers out of range or
# not whole, special floats, bools, arrays of the wrong shape, objects of no kind at all.
JUNK = (None, "", "x", "f64", b"x", [], [1], ("u",), {}, {"u": 1}, {"u"}, 0, -1, 2, 1.5, float("nan"),
        float("inf"), 10 ** 30, True, complex(1, 1), np.float32(1), np.array([]), np.zeros((2, 2)),
        np.ones(3, np.int64), object())


class _ApiFixtures:
    """The programs and arrays the API contract calls with, made once a process."""

    def __init__(self, examples: str):
        from irfuse.api import compile
        from irfuse.mesh import box_tetrahedra

        self.examples = examples
        self.neo_path = os.path.join(examples, "neo_hookean.kas")
        self.neo = compile(self.neo_path, backend="cpu", dtype="f64")
        self.mesh = compile(os.path.join(examples, "mesh", "p1_residual.kas"), backend="cpu", dtype="f64")
        self.X, self.conn = box_tetrahedra(2)
        rng = np.random.default_rng(0)
        self.u = 1e-3 * rng.standard_normal(self.X.shape)
        self.F = np.eye(3)[None].repeat(5, 0) + 0.01 * rng.standard_normal((5, 3, 3))
        self.dN = np.array([[-1.0, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]])
        self.energy_path = os.path.join(examples, "mesh", "neo_hookean_energy.kas")
        self.step = compile(os.path.join(examples, "mesh", "explicit_step.kas"), backend="cpu", dtype="f64")
        # A mesh program with a uniform output beside a nodal one, for out= mappings whose
        # entries are spoiled one at a time (a uniform output's once ended in an AttributeError).
        self.total = compile(MESH_TOTAL, backend="cpu", dtype="f64", filename="<mesh total>")
        self.neo_out = dict(zip(self.neo.outputs, self.neo(self.F, 1.3, 0.7)))
        self.total_out = dict(zip(self.total.outputs, self.total(self.u, self.conn)))


# (the sum of an element's gathered displacements' squares over the mesh, and the rows scattered back)
MESH_TOTAL = """nodal vector3 u, r;
index4 conn;
matrix4x3 ue;
matrix3x3 M;
scalar s;
uniform scalar S;
input u, conn;
ue = gather(u, conn);
M = mtmul(ue, ue);
s = trace(M);
S = sum(s);
r = scatter(ue, conn);
return S, r;
"""


_FIXTURES: dict = {}


def _api_calls(f: _ApiFixtures) -> dict:
    """Each API function with its arguments as a valid call gives them (positional by index,
    keywords by name): what `random_api_call` spoils one of."""
    from irfuse.api import compile, grad, jacobian, jvp, vjp
    from irfuse.api.operators import linear_operator
    from irfuse.api.tangents import diagonal, hessian, tangent_matrix
    from irfuse.api.tangents import jacobian as mesh_jacobian
    from irfuse.api.time_loops import time_loop
    from irfuse.mesh import (Connectivity, box_hexahedra, box_tetrahedra, check_connectivity, gauss_legendre,
                             gauss_lobatto, inverse_connectivity, partition, renumber, reorder, scatter_add)
    from irfuse.runtime.streaming import pinned_empty

    mesh_args = (f.X, f.u, f.conn, f.dN, 1.3, 0.7)
    step_args = (f.X, f.u, f.u, np.ones(len(f.X)), f.conn, f.dN, 1.3, 0.7, 0.01)
    tangent = mesh_jacobian(f.mesh, of="r", wrt="u")  # (a `Tangent`: called as the program is)
    return {
        "compile": (compile, (f.neo_path,), {"backend": "cpu", "dtype": "f64", "pipeline": None, "n": None,
                                                    "profile": None, "arch": None, "filename": None, "layout": None,
                                                    "registers": None, "tuning": None}),
        "jvp": (jvp, (f.neo_path,), {"wrt": "F", "prefix": "d", "filename": None, "with_outputs": True}),
        "vjp": (vjp, (f.neo_path,), {"wrt": "F", "prefix": "bar_", "loops": "auto"}),
        "grad": (grad, (f.neo_path,), {"of": "W", "wrt": "F", "prefix": "grad_"}),
        "jacobian": (jacobian, (f.neo_path,), {"of": "P", "wrt": "F", "prefix": "d"}),
        "call": (f.neo, (f.F, 1.3, 0.7), {}),
        "call out=": (f.neo, (f.F, 1.3, 0.7), {"out": None}),
        "call out= by name": (f.neo, (f.F, 1.3, 0.7), {"out": f.neo_out}),
        "mesh call out= by name": (f.total, (f.u, f.conn), {"out": f.total_out}),
        "mesh call": (f.mesh, mesh_args, {"nodes": None, "scatter": None}),
        "tangent_matrix": (tangent_matrix, (f.mesh, *mesh_args), {"wrt": "u", "of": "r", "fixed": None, "out": None}),
        "diagonal": (diagonal, (f.mesh, *mesh_args), {"wrt": "u", "of": "r", "fixed": None}),
        "linear_operator": (linear_operator, (f.mesh, *mesh_args), {"wrt": "u", "of": "r", "fixed": None,
                                                                    "nodes": None}),
        "time_loop": (time_loop, (f.neo, 2, {"F": "P"}, f.F, 1.3, 0.7), {"nodes": None}),
        "box_tetrahedra": (box_tetrahedra, (2,), {"ny": None, "nz": None, "numbering": "random", "seed": 0,
                                                      "index_dtype": np.int32}),
        "box_hexahedra": (box_hexahedra, (2,), {"order": 2, "numbering": "random", "seed": 0}),
        "gauss_lobatto": (gauss_lobatto, (3,), {}),
        "gauss_legendre": (gauss_legendre, (3,), {}),
        "reorder": (reorder, (f.conn, f.X), {"method": "morton", "nodes": None}),
        "renumber": (renumber, (f.conn, np.arange(len(f.X)), np.arange(len(f.conn)), f.X), {}),
        "Connectivity": (Connectivity, (f.conn, len(f.X)), {}),
        "scatter_add": (scatter_add, (np.ones((len(f.conn), 4, 3)), f.conn, len(f.X)), {}),
        "partition": (partition, (f.conn, 2), {"nodes": None}),
        "inverse_connectivity": (inverse_connectivity, (f.conn, len(f.X)), {}),
        "check_connectivity": (check_connectivity, (f.conn,), {"nodes": None, "what": "conn", "first": 0}),
        "hessian": (hessian, (f.energy_path,), {"of": "E", "wrt": "u"}),
        "jacobian of a mesh program": (mesh_jacobian, (f.mesh,), {"of": "r", "wrt": "u"}),
        "tangent call": (tangent, mesh_args, {"fixed": None, "out": None}),
        "tangent diagonal": (tangent.diagonal, mesh_args, {"fixed": None}),
        "pinned_empty": (pinned_empty, ((3, 3),), {"dtype": np.float32}),
        "check": (f.neo.check, (f.F, 1.3, 0.7), {"sample": 100, "seed": 0}),
        "time": (f.neo.time, (f.F, 1.3, 0.7), {"repeat": 2, "warmup": 1, "out": None, "memory_budget": None}),
        "mesh check": (f.mesh.check, mesh_args, {}),
        "mesh time": (f.mesh.time, mesh_args, {"repeat": 2, "warmup": 0, "nodes": None, "scatter": None}),
        "for_layout": (f.neo.for_layout, ("soa",), {}),
        "call with nodal statements": (f.step, step_args, {"nodes": None, "scatter": None}),
        "time_loop with nodal statements": (time_loop, (f.step, 2, {"u": "u1", "v": "v1"}, *step_args),
                                            {"nodes": None}),
        **_dask_calls(f),
    }


def _dask_calls(f: _ApiFixtures) -> dict:
    """`irfuse.dask.apply` on an element program, a mesh program and one with nodal statements
    (where Dask is installed), its Dask arrays computed: a bad argument may be found when the graph is made
    or when its tasks run, and either way it is refused by name."""
    try:
        import dask.array as da

        import irfuse.dask
    except ImportError:
        return {}

    def computed(*args, **kwargs):
        import dask

        with dask.config.set(scheduler="synchronous"):
            return dask.compute(*irfuse.dask.apply(*args, **kwargs))

    F = da.from_array(f.F, chunks=(2, 3, 3))
    conn = da.from_array(f.conn, chunks=(7, 4))
    return {
        "dask apply": (computed, (f.neo, F, 1.3, 0.7), {}),
        "dask apply over a mesh": (computed, (f.mesh, f.X, f.u, conn, f.dN, 1.3, 0.7), {"nodes": None,
                                                                                        "scatter": "ordered"}),
        "dask apply with nodal statements": (computed, (f.step, f.X, f.u, f.u, np.ones(len(f.X)), conn, f.dN, 1.3,
                                                        0.7, 0.01), {"nodes": None, "scatter": "ordered"}),
    }


def random_api_call(rng: random.Random, examples: str) -> tuple[str, object]:
    """One API call with one of its arguments (or a keyword it does not take) replaced by a
    value from `junk_values()`: (what it is, a function making the call)."""
    name, (fn, args, kwargs) = rng.choice(sorted(_api_calls(_fixtures(examples)).items()))
    junk = rng.choice(junk_values())
    return _spoiled(name, fn, args, kwargs, rng.choice(_places(name, args, kwargs)), junk)


def every_api_call(examples: str):
    """Each API call with each of its arguments in turn (and a keyword it does not take)
    replaced by each of `junk_values()`: (what it is, a function making the call), in a fixed order."""
    for name, (fn, args, kwargs) in sorted(_api_calls(_fixtures(examples)).items()):
        for where in _places(name, args, kwargs):
            for junk in junk_values():
                yield _spoiled(name, fn, args, kwargs, where, junk)


def every_parted_call(examples: str, client):
    """`irfuse.dask`'s calls on a mesh cut into parts (`PartedMesh`, its `nodal`,
    `per_element` and `assemble`, `apply` and `time_loop` on it) with each argument in turn
    replaced by each of `junk_values()`, on `client`'s workers: (what it is, a function making
    the call, its Parted outputs assembled), in a fixed order."""
    import irfuse.dask

    f = _fixtures(examples)
    mesh = irfuse.dask.PartedMesh(f.conn, 2, client)
    X, u = mesh.nodal(f.X), mesh.nodal(f.u)

    def assembled(call):
        def run(*args, **kwargs):
            return [mesh.assemble(o) if isinstance(o, irfuse.dask.Parted) else o for o in call(*args, **kwargs)]
        return run

    calls = {
        "PartedMesh": (irfuse.dask.PartedMesh, (f.conn, 2, client), {"nodes": None, "workers": None, "gpu": False}),
        "PartedMesh.nodal": (mesh.nodal, (f.X,), {}),
        "PartedMesh.per_element": (mesh.per_element, (np.ones(len(f.conn)),), {}),
        "PartedMesh.assemble": (mesh.assemble, (u,), {}),
        "dask apply on parts": (assembled(irfuse.dask.apply), (f.mesh, X, u, mesh, f.dN, 1.3, 0.7),
                                {"scatter": "ordered"}),
        "dask time_loop on parts": (assembled(irfuse.dask.time_loop), (f.mesh, 2, {"u": "r"}, X, u, mesh, f.dN, 1.3,
                                                                       0.7), {"exchange": "dask", "timeout": 60.0,
                                                                                    "timings": None}),
    }
    for name, (fn, args, kwargs) in calls.items():
        for where in [k for k in range(len(args))] + list(kwargs):
            for junk in junk_values():
                yield _spoiled(name, fn, args, kwargs, where, junk)


def junk_values() -> tuple:
    """JUNK, and where PyTorch is installed a tensor that requires grad (refused by a call,
    which autograd would not record)."""
    try:
        import torch
    except ImportError:
        return JUNK
    return (*JUNK, torch.zeros((2, 3), dtype=torch.float64, requires_grad=True))


def _fixtures(examples: str) -> _ApiFixtures:
    return _FIXTURES.get(examples) or _FIXTURES.setdefault(examples, _ApiFixtures(examples))


def _places(name: str, args: tuple, kwargs: dict) -> list:
    # (a keyword no function takes: Python's own TypeError names it; a program's call names it too)
    # (an out= mapping: each of its entries in turn too, the others valid arrays)
    entries = [("out", k) for k in kwargs["out"]] if isinstance(kwargs.get("out"), dict) else []
    return ([k for k in range(len(args))] + list(kwargs) + entries +
            (["bogus"] if "call" in name or "dask" in name else []))


def _spoiled(name: str, fn, args: tuple, kwargs: dict, where, junk) -> tuple[str, object]:
    args, kwargs = list(args), dict(kwargs)
    if isinstance(where, int):
        args[where] = junk
    elif isinstance(where, tuple):  # (one entry of an out= mapping, the others fresh arrays)
        kwargs["out"] = {k: junk if k == where[1] else np.array(a) for k, a in kwargs["out"].items()}
    else:
        kwargs[where] = junk
    return f"{name}: {where} = {junk!r}", lambda: fn(*args, **kwargs)


def check_api_call(call) -> bool:
    """True when the call returns, False when irfuse refuses it with its own error;
    AssertionError (from the caller's report) for any other exception: the API's contract is
    that bad arguments get a diagnostic naming them, not an error from inside."""
    try:
        call()
        return True
    except IrfuseError:
        return False
