"""The fingerprint of what irfuse makes of every example: each program's plan (its lowered
IR), emitted source (CUDA C and the CPU rendering), and outputs on fixed random inputs on the
CPU backend, hashed, for each element type and planning profile. Run it before and after a
change that must not change what is compiled (a refactoring): the two JSON files are equal.

    python benchmarks/fingerprint.py --json before.json      # then, after the change:
    python benchmarks/fingerprint.py --json after.json --compare before.json

Programs over a mesh run on a box mesh of tetrahedra (`irfuse.mesh.box_tetrahedra`) with
random nodal values, the high-order examples (`examples/highorder/`, order 3) on a box of
hexahedra of their order (`irfuse.mesh.box_hexahedra`) with random tables and quadrature data;
a program of several passes is fingerprinted pass by pass. Compiling
goes through an empty program cache of its own, so nothing cached stands in for the compiler.
"""

from __future__ import annotations

import argparse
import glob
import hashlib
import json
import os
import sys
import tempfile
import warnings

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SEED = 7


def _digest(data: bytes | str) -> str:
    return hashlib.sha256(data.encode() if isinstance(data, str) else data).hexdigest()[:16]


def _programs(prog) -> list:
    """The compiled programs a program runs: itself, or each of its stages'."""
    return list(getattr(prog, "programs", None) or [prog])


def _inputs(prog, rng, mesh):

    X, conn = mesh
    arrays = {}
    for name in prog.inputs:
        shape = prog.shapes[name]
        if name in prog.index_inputs:
            arrays[name] = conn
        elif name in prog.uniform:
            arrays[name] = rng.uniform(0.5, 1.5, shape).astype(prog.dtype)
        elif name in prog.nodal:
            arrays[name] = (X if shape == (3,) else rng.uniform(0.5, 1.5, (len(X), *shape))).astype(prog.dtype)
        else:
            n = len(conn) if prog.index_inputs else 37
            arrays[name] = rng.uniform(-1, 1, (n, *shape)).astype(prog.dtype)
    return arrays


def fingerprint(path: str, dtype: str, profile: str) -> dict:
    import numpy as np

    import irfuse
    from irfuse.mesh import box_hexahedra, box_tetrahedra

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        prog = irfuse.compile(path, backend="cpu", dtype=dtype, profile=profile)
    # (the high-order examples are of order 3: elements of 64 nodes)
    mesh = box_hexahedra(2, order=3) if os.sep + "highorder" + os.sep in path else box_tetrahedra(3)[:2]
    out: dict = {"programs": []}
    for p in _programs(prog):
        artifact = p.artifact
        out["programs"].append({"name": p.name, "plan": _digest(artifact._program_text or ""),
                                "source": _digest(artifact.source), "kernels": [k.name for k in artifact.kernels]})
    arrays = _inputs(prog, np.random.default_rng(SEED), mesh)
    results = prog(**arrays)
    out["outputs"] = {name: _digest(np.ascontiguousarray(np.asarray(v)).tobytes()) for name, v in results.items()}
    return out


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="where to write the fingerprint")
    parser.add_argument("--compare", default=None, help="an earlier fingerprint: report every difference")
    parser.add_argument("--profiles", nargs="+", default=["cpu", "h100"])
    parser.add_argument("--dtypes", nargs="+", default=["f32", "f64"])
    args = parser.parse_args(argv)
    os.environ["IRFUSE_CACHE_DIR"] = tempfile.mkdtemp(prefix="irfuse-fingerprint-")
    paths = sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas")) +
                   glob.glob(os.path.join(ROOT, "examples", "mesh", "*.kas")) +
                   glob.glob(os.path.join(ROOT, "examples", "highorder", "*.kas")))
    table = {}
    for path in paths:
        for dtype in args.dtypes:
            for profile in args.profiles:
                key = f"{os.path.relpath(path, ROOT)} {dtype} {profile}"
                table[key] = fingerprint(path, dtype, profile)
                print(key, json.dumps(table[key]["outputs"]), flush=True)
    with open(args.json, "w") as f:
        json.dump(table, f, indent=1, sort_keys=True)
    if args.compare:
        with open(args.compare) as f:
            before = json.load(f)
        differ = [k for k in sorted(set(before) | set(table)) if before.get(k) != table.get(k)]
        for k in differ:
            print(f"differs: {k}\n  before {json.dumps(before.get(k))}\n  now    {json.dumps(table.get(k))}")
        print(f"{len(table)} fingerprints, {len(differ)} differ")
        return 1 if differ else 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
