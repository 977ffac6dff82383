"""The probes' shared loop: write a module of functions, import it, compile each function
whose name starts with `prefix` for the CPU in float64, print one line a function."""

import importlib.util
import os
import tempfile
import time

import irfuse


def compile_each(src: str, prefix: str, module: str) -> None:
    path = os.path.join(tempfile.mkdtemp(), f"{module}.py")  # (the functions' module: written, imported)
    with open(path, "w") as f:
        f.write(src)
    spec = importlib.util.spec_from_file_location(module, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    names = sorted((n for n in dir(mod) if n.startswith(prefix)), key=lambda n: getattr(mod, n).__code__.co_firstlineno)
    for n in names:
        t = time.time()
        try:
            p = irfuse.compile(getattr(mod, n), backend="cpu", dtype="f64")
            res = f"COMPILED inputs={p.inputs} outputs={p.outputs}"
        except Exception as e:  # noqa: BLE001 -- what irfuse said, printed
            res = f"{type(e).__module__}.{type(e).__name__}: {str(e).replace(chr(10), ' | ')[:300]}"
        print(f"{n:20s} {time.time() - t:5.2f}s {res}", flush=True)
