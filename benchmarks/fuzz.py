"""Robustness, long mode: thousands of fuzzed inputs and random programs, in parallel.

    python benchmarks/fuzz.py [--fuzz-cases 10000] [--programs 1000] [--plans 3] [--jobs 2]
                              [--first-seed 0] [--keep tests/regressions] [--json fuzz.json] [--nvrtc] [--chunks]
                              [--layouts aos soa] [--derivatives] [--python]

Fuzz cases (split between the kinds by the weights in WEIGHTS, each case with its own seed):
  mutated   an example mutated 1-3 times (deleted tokens, swapped types, wrong arity, unknown
            ops, huge numbers, non-ASCII, truncation, duplicated lines, self cycles, empty
            files): it compiles, or every diagnostic names file, line and column;
  text      random text over KAS's own tokens and arbitrary characters: the same contract;
  ir        an example's printed IR with a span replaced by a damaging fragment: it parses and
            verifies, or gets a parse or verifier diagnostic;
  inputs    an .npz input file, valid or damaged (missing, extra, misshapen, object, special,
            huge or integer arrays, truncated, garbage, a plain .npy): refused naming the
            file, or run on the CPU and verified;
  flags     an `irfuse` command line over its subcommands and options, values sensible or not:
            exit 0, or a diagnostic (1, or 2 from argparse); never a traceback or a failed
            verification;
  library   the example op-library file mutated (its Python, or its definition, CUDA and
            access-pattern strings): loaded, or refused naming the file;
  cache     a compile's cache damaged (bytes flipped, files cut, emptied, swapped, removed):
            the next compile gives the same CUDA, IR and cubin, and its kernels verify
            (`irfuse.testing.contracts`);
  plan      a saved plan directory (one program, one of passes over a mesh) with its
            manifests edited at random places or a file damaged, run by `irfuse run --plan`:
            exit 0 or a diagnostic, never a traceback;
  api       a call of the Python API (compile, derivatives, a program's call, tangents,
            operators, time loops, mesh helpers) with one argument replaced by a value of
            any kind: it returns or irfuse refuses it with its own error.
Each case must finish in 10 s (a hang counts as a finding). Random programs (3 to 20
statements, chains, diamonds, fan-out, several outputs, reassignment, loops; every fifth
with dead chains and loops carrying values computed before them, every fifth dense: 20 to
120 statements reading recent values and reassigning; every fifth with batch-wide values:
uniform inputs, literals, reductions and what reads them; every fifth an element code: generic
ops on shapes square and not, masks, if/else, copies, indexed loops over per-element arrays
and uniform tables, `random_element_program`; float64 and float32 in turn, batch
sizes 1, 37 and 97) run on the CPU through their `--plans` best plans and are compared with
the NumPy reference (`--nvrtc`: every plan also compiled to sm_90; `--chunks`: every plan
also run on 601 elements in chunks, passes over them where it reduces, which must give the
bits of one call; `--layouts aos soa`: every program compiled and checked for each layout, its
inputs transposed for a structure of arrays and its outputs transposed back; `--derivatives`:
each program replaced by its forward or reverse derivative along every input that has one, a
`derivative` line, jvp and vjp by turns of five seeds; `--python`: each program also written
again as a Python function, as written, with its returns moved, with infix forms and with
`derivative` lines in turn by seed, which must trace to the same program,
`irfuse.testing.python_renderings.compare_rendering`). A failing program is shrunk to a minimal one, which is written under
`--keep` (a test runs every program there) and listed in the JSON (a Python front end's
difference is listed with its rendering, not shrunk).
"""

from __future__ import annotations

import argparse
import concurrent.futures as cf
import glob
import os
import random
import signal
import sys
import time
import traceback
import meta  # noqa: E402 -- benchmarks/meta.py: the run's meta block, the result's place

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KINDS = ("mutated", "text", "ir", "inputs", "flags", "library", "cache", "plan", "api")
WEIGHTS = {"mutated": 25, "text": 18, "ir": 18, "inputs": 15, "flags": 14, "library": 7, "cache": 3, "plan": 5,
           "api": 15}
CASE_SECONDS = 10
ALPHABET = list("abcdefxyz0123456789_ =(),;{}\n\t/*") + ["loop", "input", "return", "scalar", "vector3",
                                                        "matrix3x3", "tensor3x3x3", "mmul33(", "é", "\x00", "💥"]


class _Hang(Exception):
    pass


def _alarm(*_):
    raise _Hang()


def _examples() -> list[str]:
    return [open(p).read() for p in sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas")))]


def fuzz_chunk(kind: str, seeds: list[int]) -> dict:
    """Runs one chunk of fuzz cases; returns counts and the findings (crashes, hangs)."""
    from irfuse.frontend.irgen import compile_source
    from irfuse.dialects.context import module_text
    from irfuse.testing.mutations import check_frontend, check_ir

    if kind in ("inputs", "flags", "library", "cache", "plan", "api"):
        return contract_chunk(kind, seeds)
    sources = _examples()
    irs = [module_text(compile_source(s, "x.kas").module) for s in sources] if kind == "ir" else []
    out = {"cases": 0, "accepted": 0, "diagnosed": 0, "findings": []}
    for seed in seeds:
        rng = random.Random(seed)

        def case(state, rng=rng):
            text = state["input"] = _fuzz_input(kind, rng, sources, irs)
            return check_frontend(text) if kind != "ir" else check_ir(text)
        _run_case(out, kind, seed, CASE_SECONDS, case)
    return out


def _run_case(out: dict, kind: str, seed: int, seconds: int, case) -> None:
    """Runs one case under a time limit: `case(state)` puts its input in state["input"] before
    checking it and returns whether it was accepted; a hang or any escaping exception is
    recorded as a finding, with the input."""
    signal.signal(signal.SIGALRM, _alarm)
    state = {"input": ""}
    signal.alarm(seconds)
    try:
        out["accepted" if case(state) else "diagnosed"] += 1
    except _Hang:
        out["findings"].append({"kind": kind, "seed": seed, "failure": "hang", "input": state["input"]})
    except BaseException as e:  # noqa: BLE001 - every escape is the finding being looked for
        out["findings"].append({"kind": kind, "seed": seed, "failure": type(e).__name__,
                                "detail": traceback.format_exc()[-2000:], "input": state["input"]})
    finally:
        signal.alarm(0)
    out["cases"] += 1


def contract_chunk(kind: str, seeds: list[int]) -> dict:
    """Cases of the contracts on input files, flags, library files and the cache."""
    import tempfile

    from irfuse.testing import contracts

    out = {"cases": 0, "accepted": 0, "diagnosed": 0, "findings": []}
    library = open(os.path.join(ROOT, "examples", "extending", "mdet.py")).read()
    with tempfile.TemporaryDirectory(prefix=f"irfuse-fuzz-{kind}-") as work:
        contracts.prepare_flag_files(work)
        plans = contracts.prepare_plans(work, os.path.join(ROOT, "examples")) if kind == "plan" else []
        for seed in seeds:
            rng = random.Random(seed)

            def case(state, seed=seed, rng=rng):
                if kind == "inputs":
                    path = os.path.join(work, "in.npz")
                    state["input"] = contracts.random_inputs_file(rng, path)
                    return contracts.check_inputs_file(path, work, "f32" if seed % 2 else "f64") == "verified"
                if kind == "flags":
                    argv = contracts.random_argv(rng, work)
                    state["input"] = " ".join(argv)
                    return contracts.check_cli(argv) == 0
                if kind == "library":
                    text = state["input"] = contracts.random_library(rng, library)
                    path = os.path.join(work, f"lib{seed}.py")
                    with open(path, "w") as f:
                        f.write(text)
                    return contracts.check_library_file(path)
                if kind == "plan":
                    state["input"] = f"plan damage, seed {seed}"
                    return contracts.check_plan(rng, plans, work) == 0
                if kind == "api":
                    state["input"], call = contracts.random_api_call(rng, os.path.join(ROOT, "examples"))
                    return contracts.check_api_call(call)
                state["input"] = f"cache damage, seed {seed}"
                contracts.check_cache(rng, work)
                return True
            _run_case(out, kind, seed, CASE_SECONDS * (3 if kind == "cache" else 1), case)
    return out


def _fuzz_input(kind: str, rng: random.Random, sources: list[str], irs: list[str]) -> str:
    """The input of one fuzz case (see the module docstring for the three kinds)."""
    from irfuse.testing.mutations import MUTATIONS, mutate, mutate_ir

    if kind == "mutated":
        text = rng.choice(sources)
        for _ in range(rng.randint(1, 3)):
            text = mutate(text, rng, rng.choice(MUTATIONS))
        return text
    if kind == "text":
        text = "".join(rng.choice(ALPHABET) if rng.random() < 0.8 else chr(rng.randrange(1, 0x2FFFF))
                       for _ in range(rng.randint(0, 200)))
        return text.encode("utf-8", "replace").decode("utf-8", "replace")
    return mutate_ir(rng.choice(irs), rng)


def program_case(seed: int, plans: int, keep: str | None, nvrtc: bool = False, chunks: bool = False,
                 layouts: tuple[str, ...] = ("aos",), derivatives: bool = False, python: bool = False) -> dict:
    """One random program through its best plans on the CPU, compiled for each of `layouts`
    (each plan compiled to sm_90 with NVRTC too with `nvrtc`, each run in chunks too with
    `chunks`; with `derivatives`, the program's forward or reverse derivative along every
    input that has one, by seed); a failure is shrunk and kept."""
    from irfuse.testing.differential import Budget, check_source, shrink_failure
    from irfuse.testing.random_programs import random_element_program, random_program

    rng = random.Random(seed)
    shape = ("plain", "dead", "dense", "wide", "element")[seed % 5]
    calls = rng.randint(20, 120) if shape == "dense" else rng.randint(3, 20)
    if shape == "element":  # generic ops, masks, branches, copies, indexed loops over arrays
        src = random_element_program(seed, calls, batch_wide=seed % 2 == 0)
    else:
        src = random_program(seed, calls, dead=shape == "dead", dense=shape == "dense", batch_wide=shape == "wide")
    if derivatives:
        from irfuse.dialects.kas import program_of
        from irfuse.frontend.irgen import compile_source
        from irfuse.testing.derivatives import differentiable_inputs

        mode = ("jvp", "vjp")[seed // 5 % 2]
        wrt = differentiable_inputs(program_of(compile_source(src, "random.kas").module))
        src += f"\nderivative {mode} wrt {', '.join(wrt)};\n"
        shape += f"+{mode}"
    n = rng.choice([1, 37, 97])
    t0 = time.perf_counter()
    if python:  # (the Python front end first: a difference there is reported as it is)
        import tempfile

        from irfuse.testing.python_renderings import compare_rendering, derivative_lines

        inline, infix, derive = (seed % 4 == 1, seed % 4 == 2, seed % 4 == 3)
        with tempfile.TemporaryDirectory() as directory:
            verdict, detail = compare_rendering(src + (derivative_lines(src, seed) if derive and not derivatives else ""),
                                                seed, directory, inline=inline, infix=infix)
        if verdict == "differ":
            return {"seed": seed, "shape": shape, "calls": calls, "plans": 0, "seconds": time.perf_counter() - t0,
                    "failure": "PYTHON_FRONTEND", "detail": detail[-3000:], "program": src}
    ran = 0  # plans run, over the layouts
    for layout in layouts:
        budget = Budget(top=plans, dtype="f64" if seed % 2 == 0 else "f32", n=n, seed=seed, nvrtc=nvrtc,
                        chunks=chunks, layout=layout)
        outcome = check_source(src, budget)
        ran += outcome.plans
        if not outcome.ok:
            break
    row = {"seed": seed, "shape": shape, "calls": calls, "dtype": budget.dtype, "n": budget.n, "layout": budget.layout,
           "plans": ran, "seconds": time.perf_counter() - t0, "failure": outcome.failure}
    if outcome.invalid:
        row["failure"] = "generator produced an invalid program"
        row["detail"] = outcome.detail
    elif not outcome.ok:
        small, again = shrink_failure(src, budget)
        row.update(detail=outcome.detail[-3000:], program=src, shrunk=small, shrunk_detail=again.detail[-3000:])
        if keep:
            os.makedirs(keep, exist_ok=True)
            path = os.path.join(keep, f"random_seed{seed}_{outcome.failure.lower()}.kas")
            header = [f"// Found by benchmarks/fuzz.py: random program seed {seed}, {budget.dtype}, n = {budget.n}, "
                      f"{budget.layout},",
                      f"// failure: {outcome.failure} ({outcome.detail.splitlines()[0][:150] if outcome.detail else ''}).",
                      "// Shrunk from the program below it; kept as a regression test."]
            with open(path, "w") as f:
                f.write("\n".join(header) + "\n" + small)
            row["kept"] = os.path.relpath(path, ROOT)
    return row


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fuzz-cases", type=int, default=10000)
    ap.add_argument("--programs", type=int, default=1000)
    ap.add_argument("--plans", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--first-seed", type=int, default=0)
    ap.add_argument("--keep", default=os.path.join(ROOT, "tests", "regressions"))
    ap.add_argument("--json", default=meta.result_path("robustness"))
    ap.add_argument("--nvrtc", action="store_true", help="also compile every plan to sm_90 with NVRTC")
    ap.add_argument("--chunks", action="store_true", help="also run every plan in chunks against one call")
    ap.add_argument("--layouts", nargs="+", choices=["aos", "soa"], default=["aos"],
                    help="the global arrays' layouts every program is compiled for and checked in (default aos)")
    ap.add_argument("--derivatives", action="store_true",
                    help="check every random program's forward or reverse derivative (by seed) instead")
    ap.add_argument("--python", action="store_true",
                    help="also write every random program as a Python function and check it traces to the same program")
    args = ap.parse_args(argv)
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn
    from rich.table import Table

    console = Console()
    os.environ.setdefault("IRFUSE_CACHE_DIR", os.path.join(ROOT, ".fuzz-cache"))
    fuzz = {k: {"cases": 0, "accepted": 0, "diagnosed": 0, "findings": []} for k in KINDS}
    programs: list[dict] = []
    t0 = time.perf_counter()
    total_weight = sum(WEIGHTS.values())
    per_kind = {k: args.fuzz_cases * WEIGHTS[k] // total_weight for k in KINDS}
    chunk = {k: 25 if k == "cache" else 250 for k in KINDS}
    chunks = [(k, list(range(args.first_seed + s, args.first_seed + min(s + chunk[k], per_kind[k]))))
              for k in KINDS for s in range(0, per_kind[k], chunk[k])]
    todo = list(range(args.first_seed, args.first_seed + args.programs))
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
               TimeRemainingColumn())
    with Progress(*columns, console=console) as bar:
        t_fuzz = bar.add_task("fuzz cases", total=sum(per_kind.values()))
        t_prog = bar.add_task("random programs", total=len(todo))
        retries: dict = {}
        while chunks or todo:
            # A worker killed by a crash in generated code breaks the pool: the cases in flight
            # are recorded as findings and the rest go on in a fresh pool.
            with cf.ProcessPoolExecutor(args.jobs) as pool:
                futures = {pool.submit(fuzz_chunk, k, seeds): ("fuzz", (k, seeds)) for k, seeds in chunks}
                futures.update({pool.submit(program_case, s, args.plans, args.keep, args.nvrtc, args.chunks,
                                             tuple(args.layouts), args.derivatives, args.python): ("program", s)
                                for s in todo})
                chunks, todo = [], []
                unfinished = []
                for fut in cf.as_completed(futures):
                    what, key = futures[fut]
                    try:
                        res = fut.result()
                    except cf.process.BrokenProcessPool:
                        unfinished.append((what, key))
                        continue
                    except Exception as e:  # a harness error: recorded, the run goes on
                        res = ({"cases": len(key[1]), "accepted": 0, "diagnosed": 0,
                                "findings": [{"kind": key[0], "seed": key[1][0], "failure": f"harness {e!r}"}]}
                               if what == "fuzz" else {"seed": key, "failure": f"harness {e!r}"})
                    if what == "fuzz":
                        acc = fuzz[key[0]]
                        for f in ("cases", "accepted", "diagnosed"):
                            acc[f] += res[f]
                        acc["findings"] += res["findings"]
                        bar.advance(t_fuzz, res["cases"])
                    else:
                        programs.append(res)
                        bar.advance(t_prog)
                        if res.get("failure"):
                            console.print(f"[red]program seed {res['seed']}: {res['failure']}[/red] "
                                          f"{res.get('kept', '')}")
                for what, key in unfinished:
                    case = key if what == "program" else (key[0], key[1][0])
                    retries[case] = tries = retries.get(case, 0) + 1
                    if tries <= 2:  # the process that died took its case with it: run again
                        (todo if what == "program" else chunks).append(key)
                    elif what == "program":
                        programs.append({"seed": key, "failure": "worker process died (crash in generated code)"})
                        bar.advance(t_prog)
                    else:
                        fuzz[key[0]]["findings"].append({"kind": key[0], "seed": key[1][0],
                                                         "failure": "worker process died"})
    elapsed = time.perf_counter() - t0
    ok_programs = [p for p in programs if not p.get("failure")]
    summary = {
        "date": time.strftime("%Y-%m-%d"),
        "command": " ".join([os.path.relpath(sys.argv[0], ROOT), *(argv if argv is not None else sys.argv[1:])]),
        "cores": os.cpu_count(), "jobs": args.jobs, "seconds": elapsed,
        "fuzz": {k: {f: (v[f] if f != "findings" else len(v[f])) for f in v} for k, v in fuzz.items()},
        "fuzz_findings": [f for v in fuzz.values() for f in v["findings"]],
        "programs": {"run": len(programs), "passed": len(ok_programs),
                     "plans_run": sum(p.get("plans", 0) for p in programs),
                     "statements": sum(p.get("calls", 0) for p in programs),
                     "failures": [p for p in programs if p.get("failure")]},
    }
    t = Table(title=f"robustness long mode: {elapsed / 60:.1f} min, {args.jobs} jobs")
    for c in ("what", "cases", "accepted", "diagnosed", "findings"):
        t.add_column(c, justify="right" if c != "what" else "left")
    for k, v in fuzz.items():
        t.add_row(f"fuzz: {k}", str(v["cases"]), str(v["accepted"]), str(v["diagnosed"]), str(len(v["findings"])))
    t.add_row(f"random programs ({summary['programs']['plans_run']} plans run)", str(len(programs)),
              str(len(ok_programs)), "-", str(len(programs) - len(ok_programs)))
    console.print(t)
    with open(args.json, "w") as f:
        meta.dump(summary, f, indent=1)
    console.print(f"wrote {args.json}")
    return 0 if not summary["fuzz_findings"] and len(ok_programs) == len(programs) else 1


if __name__ == "__main__":
    sys.exit(main())
