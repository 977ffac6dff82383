"""Compilation is a pure function of its inputs: the same source and options give the same
IR and CUDA whatever the cache holds, and the batch size given reaches the cost model."""

import json
import os
import re
import subprocess
import sys

import pytest

from conftest import EXAMPLES
from irfuse.dialects.context import module_text
from irfuse.driver.compile import PlanningOptions, compile_program
from irfuse.passes import fuse_partition


def _compile(path, cache, dtype="f32", planning=None):
    os.environ["IRFUSE_CACHE_DIR"] = str(cache)
    fuse_partition._PLANS.clear()  # the in-process memo of searches, too, must not carry anything over
    program, _ = compile_program(path, None, dtype, compile_gpu=True, arch="sm_90", planning=planning)
    return module_text(program.module), program.source, program


def _poison(cache, table: dict[str, int]):
    """What a cache could hold that once changed plans: a register table of the user's cache
    claiming 255 registers for every kernel, and cubin entries whose reports claim spills
    (the checksum left as it was) or whose cubins are cut short."""
    with open(os.path.join(cache, "registers.json"), "w") as f:
        json.dump({k: 255 for k in table}, f)
    for dirpath, _, files in os.walk(cache):
        for name in files:
            p = os.path.join(dirpath, name)
            if name.endswith(".json") and "cubin" in dirpath:
                data = json.load(open(p))
                for r in data["resources"].values():
                    r["spill_stores"] = r["spill_loads"] = 1024
                json.dump(data, open(p, "w"))
            elif name.endswith(".cubin"):
                data = open(p, "rb").read()
                open(p, "wb").write(data[: len(data) // 3])


# Every example in float32; in float64 a few whose plans differ from float32's (shared memory
# twice the bytes: other blocks, other registers): what the caches hold does not depend on the
# element type, and each case plans three times (hex8's float64 search alone took two minutes
# of CI's ten, three times over).
F64_CACHE_CASES = ("neo_hookean.kas", "cfl_step.kas", "power_iteration.kas")
CACHE_CASES = [(p, "f32") for p in EXAMPLES] + [(p, "f64") for p in EXAMPLES if os.path.basename(p) in F64_CACHE_CASES]


@pytest.mark.parametrize("path, dtype", CACHE_CASES, ids=lambda x: os.path.basename(x) if "/" in x else x)
def test_cold_warm_and_poisoned_caches_give_the_same_ir_and_cuda(path, dtype, tmp_path):
    cold_ir, cold_cuda, program = _compile(path, tmp_path / "c", dtype)
    warm_ir, warm_cuda, _ = _compile(path, tmp_path / "c", dtype)
    _poison(tmp_path / "c", program.register_table())
    poisoned_ir, poisoned_cuda, _ = _compile(path, tmp_path / "c", dtype)
    assert cold_ir == warm_ir == poisoned_ir
    assert cold_cuda == warm_cuda == poisoned_cuda


def test_the_poison_would_change_plans_if_it_were_read(tmp_path):
    """The register table of the poisoned cache, named explicitly, does change what is
    compiled: so the test above would see a silent read of it."""
    for path in EXAMPLES:  # (one example whose plan it changes is enough)
        ir, _, program = _compile(path, tmp_path / "c")
        table = tmp_path / "poison.json"
        table.write_text(json.dumps({k: 255 for k in program.register_table()}))
        poisoned_ir, _, _ = _compile(path, tmp_path / "c", planning=PlanningOptions(registers=str(table)))
        if poisoned_ir != ir:
            return
    pytest.fail("a register table claiming 255 registers for every kernel changed no example's plan")


def test_a_register_table_written_by_compile_is_an_explicit_input(tmp_path):
    """`irfuse compile -o DIR` writes DIR/registers.json; naming it gives the plan the planner
    makes with those counts, and the same plan every time."""
    path = next(e for e in EXAMPLES if e.endswith("bigfusion.kas"))
    _, _, program = _compile(path, tmp_path / "c")
    program.save(str(tmp_path / "out"))
    table = json.load(open(tmp_path / "out" / "registers.json"))
    assert table and all(isinstance(v, int) and 0 < v <= 255 for v in table.values())
    planning = PlanningOptions(registers=str(tmp_path / "out" / "registers.json"))
    a, _, _ = _compile(path, tmp_path / "d", planning=planning)
    b, _, _ = _compile(path, tmp_path / "e", planning=planning)
    assert a == b


def _plan(n: int, path: str) -> tuple[str, list[float]]:
    p = subprocess.run([sys.executable, "-m", "irfuse.tools.cli", "plan", path, "--top", "3", "--n", str(n)],
                       capture_output=True, text=True, env={**os.environ, "COLUMNS": "250"})
    assert p.returncode == 0, p.stderr
    return p.stdout, [float(x) for x in re.findall(r"(\d+\.\d+) ms", p.stdout)]


def test_plan_predicts_for_the_batch_size_given():
    path = next(e for e in EXAMPLES if e.endswith("bigfusion.kas"))
    small_text, small = _plan(1000, path)
    large_text, large = _plan(4194304, path)
    assert "n = 1000," in small_text and "n = 4194304," in large_text
    assert small and large
    # 4194 times the elements: the transfer time grows with them, the launch cost does not.
    assert 100 * small[0] < large[0] < 4194 * small[0]
