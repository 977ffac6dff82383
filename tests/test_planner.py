"""The fusion search: convexity, exact cover, acyclic kernel order, device limits, N best plans."""

import glob
import itertools
import os

import pytest

from conftest import EXAMPLES, LONG, ROOT, check_top_plans_on_cpu, highorder_operators
from irfuse.analysis.shared_lifetimes import peak_shared_words
from irfuse.diagnostics import CompileError
from irfuse.frontend.irgen import compile_file, compile_source
from irfuse.transforms.dead_code import eliminate_dead_code
from irfuse.planner.cost import H100, DeviceProfile
from irfuse.planner.dag import enclosing_loops, block_dag, convex_groups, is_convex
from irfuse.library.catalogue import find_implementation
from irfuse.planner.search import _kernel_cycle, external_values, plan_program
from irfuse.transforms.in_kernel import BARRIER_STEP, optimize
from irfuse.transforms.kernel_builder import build_kernel_model
from irfuse.transforms.linearization import linearize
from irfuse.verification.reference import find_program

# a -> b -> c and a -> c: {a, c} is connected but not convex (a path leaves through b and comes back).
TRIANGLE = """matrix3x3 X, A, B, C; input X;
A = mtrans33(X); B = mtrans33(A); C = madd33(A, B); return C;"""

# Two crossing pairs: a -> b, c -> d, a -> d, c -> b. {a, d} and {c, b} are each convex, but
# chosen together their kernels would need each other's outputs: a cycle.
CROSS = """matrix3x3 X, Y, A, B, C, D; input X, Y;
A = mtrans33(X); C = mtrans33(Y); B = madd33(A, C); D = msub33(C, A); return B, D;"""


def program(src):
    p = find_program(compile_source(src, "t.kas").module)
    eliminate_dead_code(p)
    return p


def example_program(name):
    """An example's program (a path under examples/, or the name of one of this file's sources)
    after kas-dce, as the search takes it."""
    from irfuse.driver.compile import run_pipeline

    if name.isupper():
        return program(globals()[name])
    return find_program(run_pipeline(compile_file(os.path.join(ROOT, "examples", name)).module, "kas-dce"))


def test_non_convex_group_is_never_proposed():
    p = program(TRIANGLE)
    dag = block_dag(p.body.block)
    a, b, c = dag.calls
    groups = convex_groups(dag, 3)
    assert (a, c) not in groups and not is_convex(dag, (1 << a) | (1 << c))
    assert (a, b) in groups and (b, c) in groups and (a, b, c) in groups
    for g in groups:  # every proposed group is convex
        assert is_convex(dag, sum(1 << i for i in g))


def test_groups_respect_max_size_and_are_listed_once():
    p = program(CROSS)
    dag = block_dag(p.body.block)
    for k in (1, 2, 3, 4):
        groups = convex_groups(dag, k)
        assert len(groups) == len(set(groups))
        assert all(len(g) <= k for g in groups)
    assert len(convex_groups(dag, 1)) == 4


def test_cyclic_kernel_pair_is_detected_and_never_chosen():
    p = program(CROSS)
    dags, plans = plan_program(p, 1 << 20, H100, 4, 2, top=20)
    dag = dags[0]
    names = {i: dag.ops[i].results[0].name_hint for i in dag.calls}
    for plan in plans:
        assert _kernel_cycle(dags, plan.configs) is None
        groups = {tuple(sorted(names[i] for i in c.group)) for c in plan.configs}
        assert not ({("A", "D"), ("B", "C")} <= groups)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_plans_are_exact_covers_distinct_and_ordered(path):
    p = find_program(compile_file(path).module)
    eliminate_dead_code(p)
    dags, plans = plan_program(p, 1 << 22, H100, 4, 8, top=10)
    assert plans
    calls = {(d, i) for d, dag in enumerate(dags) for i in dag.calls}
    seen = set()
    for plan in plans:
        chosen = [(c.dag, i) for c in plan.configs for i in c.group]
        # A call is covered by its own kernel or by the kernel that runs a loop around it.
        covered = [(d, i) for d, dag in enumerate(dags) for i in dag.calls
                   for key in [(d, i), *enclosing_loops(dags, d)] if key in chosen]
        assert sorted(covered) == sorted(calls)  # every call exactly once
        assert len(chosen) == len(set(chosen))
        key = frozenset((c.dag, c.group, tuple(i.name for i in c.impls), c.by, c.model.per_thread)
                        for c in plan.configs)
        assert key not in seen
        seen.add(key)
    times = [pl.predicted_time for pl in plans]
    assert times == sorted(times)


def test_elementwise_chain_fuses_into_one_kernel():
    p = find_program(compile_file(next(e for e in EXAMPLES if e.endswith("synctest.kas"))).module)
    _, plans = plan_program(p, 1 << 22, H100, 4, 8, top=1)
    assert len(plans[0].configs) == 1 and len(plans[0].configs[0].group) == 4


def test_fusions_over_the_shared_memory_limit_are_never_chosen():
    small = DeviceProfile("tiny", 132, 3e12, 6e13, 3e13, shared_per_sm=64 * 1024, shared_per_block=6 * 1024)
    p = find_program(compile_file(next(e for e in EXAMPLES if e.endswith("stvenant.kas"))).module)
    dags, plans = plan_program(p, 1 << 22, small, 4, 8, top=5)
    for plan in plans:
        for c in plan.configs:
            assert c.model.shared_bytes() <= 6 * 1024
    unfused = find_program(compile_file(next(e for e in EXAMPLES if e.endswith("stvenant.kas"))).module)
    dags_big, plans_big = plan_program(unfused, 1 << 22, H100, 4, 8, top=1)
    assert max(c.model.shared_bytes() for c in plans_big[0].configs) > 6 * 1024


def test_an_op_too_big_for_the_device_is_named():
    # Its smallest kernel (27 threads per element, 2 elements per block) needs 888 bytes.
    small = DeviceProfile("small", 132, 3e12, 6e13, 3e13, shared_per_sm=64 * 1024, shared_per_block=512)
    p = program("tensor3x3x3x3 T; tensor3x3x3 R; vector3 v; input T, v; R = ttmul411(T, v); return R;")
    with pytest.raises(CompileError, match="no feasible kernel can run 'ttmul411' on this device"):
        plan_program(p, 1 << 22, small, 4, 8, top=1)


def test_linearize_is_optimal_on_small_kernels():
    """Exhaustive check: no topological order of the calls has a lower peak than fuse-linearize's."""
    import itertools

    p = find_program(compile_file(next(e for e in EXAMPLES if e.endswith("stvenant_inner.kas"))).module)
    eliminate_dead_code(p)
    dag = block_dag(p.body.block)
    impls = tuple(find_implementation(dag.ops[i].op_name, "elem") for i in dag.calls)
    model = _unoptimized(dag, impls, 8, 4)
    best = peak_shared_words(linearize(model))
    calls = model.calls()
    producer = {op.result: op for op in calls}
    loads = [op for op in model.ops if op.kind == "load"]
    stores = {op.value: op for op in model.ops if op.kind == "store"}
    for order in itertools.permutations(calls):
        pos = {id(op): k for k, op in enumerate(order)}
        if any(a in producer and pos[id(producer[a])] > pos[id(op)] for op in order for a in op.args):
            continue
        m = model.copy()
        m.ops = loads + [o for op in order for o in ([op] + ([stores[op.result]] if op.result in stores else []))]
        assert peak_shared_words(m) >= best


ELEMENT_EXAMPLES = ("p1_elastic.kas", "neo_hookean.kas", "j2_return.kas", "hex8.kas")


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_every_plan_of_the_best_plans_runs_correctly_on_the_cpu(path):
    """The 5 best plans of every example (10 with `IRFUSE_FUZZ_LONG=1`, and in
    `benchmarks/fuzz.py`'s long runs) against the reference."""
    top = 10 if LONG else 5
    if os.path.basename(path) in ELEMENT_EXAMPLES and top == 5:
        # Their best plan is the whole routine in one kernel (two block shapes of it lead); the
        # plans after put each call in a kernel of its own, the unfused form every example runs
        # through `fuse-each` elsewhere (hex8's 85 such kernels: 40 s for five plans).
        top = 2
    assert check_top_plans_on_cpu(path, top, "f32", 97) >= 1


TTMUL = """tensor3x3x3x3 T; tensor3x3x3 A, B; matrix3x3 M; vector3 v; input T, M, v;
A = ttmul411(T, v); B = ttmul3212(A, M); return B;"""


def _unoptimized(dag, impls, by: int, itemsize: int):
    inputs, outputs = external_values(dag, tuple(dag.calls))
    return build_kernel_model([dag.ops[i] for i in dag.calls], impls, inputs, outputs, by, itemsize)


def _two_op_kernel(mapping: str, by: int, itemsize: int):
    dag = block_dag(program(TTMUL).body.block)
    impls = tuple(find_implementation(dag.ops[i].op_name, mapping) for i in dag.calls)
    inputs, outputs = external_values(dag, tuple(dag.calls))
    model = optimize(_unoptimized(dag, impls, by, itemsize), stop_before=BARRIER_STEP)
    return model, [v.type.size for v in inputs] + [v.type.size for v in outputs]


def test_transfer_time_follows_the_bytes_a_multiprocessor_has_in_flight():
    from irfuse.planner.cost import kernel_cost

    # 27 threads per element, 8 elements per block: 4 blocks of 8 * 93 words fit on an SM.
    model, sizes = _two_op_kernel("entry", 8, 8)
    regs = 72
    c = kernel_cost(model, 1 << 22, H100, sizes, regs)
    in_flight = c.resident_blocks * 8 * 93 * 8
    needed = H100.bandwidth / H100.sms * H100.turnaround
    assert c.resident_blocks == 4 and in_flight < needed
    roofline = 32 * sum((1 << 22) // 8 * -(-8 * s * 8 // 32) for s in sizes) / H100.bandwidth
    assert c.t_mem == pytest.approx(roofline * needed / in_flight)
    # Twice the turnaround: twice the bytes in flight needed, twice the transfer time.
    slower = kernel_cost(model, 1 << 22, replace_profile(turnaround=2 * H100.turnaround), sizes, regs)
    assert slower.t_mem == pytest.approx(2 * c.t_mem)
    # One thread per element, 64 elements per block: far more than enough in flight, though
    # only 8 warps per SM (measured at 103% of the copy rate; the 27-thread version at 67%).
    elem, esizes = _two_op_kernel("elem", 64, 8)
    e = kernel_cost(elem, 1 << 22, H100, esizes, 125)
    assert e.resident_blocks * 2 == 8 and e.t_mem == pytest.approx(roofline)
    assert e.time < c.time


def replace_profile(**kw):
    import dataclasses

    return dataclasses.replace(H100, **kw)


def test_a_profile_saved_by_an_older_irfuse_still_loads(tmp_path):
    import json

    from irfuse.planner.cost import load_profile

    old = {k: v for k, v in H100.to_json().items() if k != "turnaround"}
    old.update(latency_warps=12, bandwidth=2.9e12)  # a figure this version no longer reads
    path = tmp_path / "old.json"
    path.write_text(json.dumps(old))
    p = load_profile(str(path))
    assert p.bandwidth == 2.9e12 and p.turnaround == H100.turnaround
    path.write_text(json.dumps([1, 2]))
    with pytest.raises(CompileError, match="not a device profile"):
        load_profile(str(path))
    for text, said in (("{not json", "not a device profile .Expecting property name"),
                       (json.dumps({**old, "sms": "many"}), "'sms' is 'many', not a whole number above 0"),
                       (json.dumps({**old, "sms": 13.5}), "'sms' is 13.5, not a whole number"),
                       (json.dumps({**old, "bandwidth": -1.0}), "'bandwidth' is -1.0, not a number above 0"),
                       # (a rate of 0 made every predicted time infinite: ZeroDivisionError)
                       (json.dumps({**old, "bandwidth": 0}), "'bandwidth' is 0, not a number above 0"),
                       (json.dumps({**old, "fp32_flops": 0.0}), "'fp32_flops' is 0.0, not a number above 0"),
                       (json.dumps({**old, "barrier_cost": -1}), "'barrier_cost' is -1, not a number at least 0"),
                       (json.dumps({**old, "bandwidth": True}), "'bandwidth' is True, not a number"),
                       (json.dumps({**old, "kind": 3}), "'kind' is 3, not a name")):
        path.write_text(text)
        with pytest.raises(CompileError, match=said):
            load_profile(str(path))
    path.write_text(json.dumps({**old, "sms": 132.0}))  # (a whole number written as a float)
    assert load_profile(str(path)).sms == 132 and type(load_profile(str(path)).sms) is int


def test_a_batch_or_profile_far_past_any_machine_is_planned_with_its_times_scaled(tmp_path):
    """The cover's objective is CP-SAT integers of a tenth of a nanosecond: `n=10**30` (the
    API contract's seed 80486) made them past 64 bits, a TypeError from OR-Tools. The times
    are scaled down together there, the program plans and runs; a time that is no number is
    refused by name."""
    import json
    import math

    import numpy as np

    import irfuse
    from irfuse.planner.search import OBJECTIVE_LONGEST, OBJECTIVE_UNITS, objective_scale

    class Timed:
        def __init__(self, t):
            self.weighted_time = t

    assert objective_scale([Timed(1e-3), Timed(2e-3)]) == OBJECTIVE_UNITS
    scale = objective_scale([Timed(1e20), Timed(3.0)])
    assert scale < OBJECTIVE_UNITS and round(1e20 * scale) <= OBJECTIVE_LONGEST
    with pytest.raises(CompileError, match="infinite or not a number"):
        objective_scale([Timed(math.inf)])
    for n in (10**30, 2**62):
        prog = irfuse.compile(os.path.join(ROOT, "examples", "synctest.kas"), backend="cpu", n=n)
        rng = np.random.default_rng(0)
        args = {k: rng.uniform(-1, 1, prog.shapes[k] if k in prog.uniform else (64, *prog.shapes[k]))
                .astype(np.float32) for k in prog.inputs}
        prog(**args, verify=True)
    path = tmp_path / "far.json"
    path.write_text(json.dumps({**H100.to_json(), "bandwidth": 1e-3}))  # (a TypeError from OR-Tools before)
    irfuse.compile(os.path.join(ROOT, "examples", "synctest.kas"), backend="cpu", profile=str(path))


def test_a_search_cut_short_by_its_budget_says_so_and_stays_deterministic(tmp_path):
    """Dense programs made the search take minutes; its budget is counted in analysed
    configurations (not seconds), so the same program gives the same plan on any machine,
    and the plan says it is the best among what was searched."""
    import numpy as np

    from irfuse.driver.compile import compile_program, run_pipeline
    from irfuse.runtime.executor import CpuDevice, Executor
    from irfuse.verification.reference import random_inputs, run_references
    from irfuse.verification.verify import check_outputs
    from irfuse.testing.random_programs import random_program

    path = tmp_path / "dense.kas"
    path.write_text(random_program(1, 60, dense=True, loops=False))
    p = find_program(run_pipeline(compile_file(str(path)).module, "kas-dce"))
    # (Without whole phases first: the program's one phase makes a kernel at the memory floor,
    # after which no budget is spent on smaller groups, as the last lines show.)
    full_dags, full = plan_program(p, 1 << 22, H100, 4, 8, top=1, budget=None, cover_budget=600, phases=False)
    small_dags, small = plan_program(p, 1 << 22, H100, 4, 8, top=1, budget=50, phases=False)
    assert not full[0].notes
    assert small[0].notes and "stopped at its budget of 50 analysed configurations" in small[0].notes[0]
    assert small[0].predicted_time >= full[0].predicted_time  # it found no better than the whole search
    again_dags, again = plan_program(p, 1 << 22, H100, 4, 8, top=1, budget=50, phases=False)
    assert [(c.dag, c.group, c.by) for c in again[0].configs] == [(c.dag, c.group, c.by) for c in small[0].configs]
    # The plan of the cut search compiles and runs correctly.
    plan, _ = compile_program(str(path), "kas-dce,fuse-partition{budget=50 phases=false},fuse-verify-races", "f64",
                              compile_gpu=False)
    inputs = random_inputs(plan.reference_program, 37, 1, np.float64)
    got = Executor(plan, CpuDevice(plan)).run(inputs, 37).outputs
    assert all(c.ok for c in check_outputs(got, run_references(plan.reference_program, inputs, "f64"), "f64"))
    _, phased = plan_program(p, 1 << 22, H100, 4, 8, top=1, budget=50)
    assert not phased[0].notes and len(phased[0].configs) == 1
    assert phased[0].predicted_time <= full[0].predicted_time


def _searched_with_and_without_margin(monkeypatch, name, profile, itemsize, margin):
    """The best plan of example `name` with the search's margin to a block's floor as it is and
    with `margin` (a name in `planner.search`) set to 0, and the groups each search analysed."""
    import irfuse.planner.search as search

    p = example_program(name)
    analysed = []
    real = search.group_configs
    monkeypatch.setattr(search, "group_configs", lambda *a, **k: analysed.append(a[2]) or real(*a, **k))
    _, quick = plan_program(p, 1 << 22, profile, itemsize, 8, top=1)
    groups = len(analysed)
    monkeypatch.setattr(search, margin, 0.0)
    _, whole = plan_program(p, 1 << 22, profile, itemsize, 8, top=1)
    return quick[0], groups, whole[0], len(analysed) - groups


def test_on_the_cpu_profile_a_one_kernel_block_within_2_percent_of_its_floor_ends_the_search(monkeypatch):
    """J2's return mapping on the CPU profile: its one kernel is predicted 1.55% over the
    block's floor (its uniform values' arithmetic counted in it), within the CPU's 2% margin,
    so the search analyses the whole phase and single calls only, a tenth of the groups, and
    plans what the whole search (no margin) plans."""
    from irfuse.planner.profiles import CPU

    quick, groups, whole, all_groups = _searched_with_and_without_margin(monkeypatch, "j2_return.kas", CPU, 4,
                                                                          "CPU_FLOOR_MARGIN")
    assert 10 * groups < all_groups
    assert [(c.dag, c.group, c.by) for c in quick.configs] == [(c.dag, c.group, c.by) for c in whole.configs]


def test_on_a_gpu_profile_a_one_kernel_block_within_5_percent_of_its_floor_ends_the_search(monkeypatch):
    """hex8 in float64 on the H100 profile: its one kernel is predicted 3.8% over the block's
    floor (its compute term above the bytes), within the GPU's 5% margin, so the search stops at
    it instead of spending its budget of 1,000 configurations on smaller groups (0.75-0.85 s of
    a 2.1-2.8 s compile on two cores), and plans what the whole search plans."""
    quick, groups, whole, all_groups = _searched_with_and_without_margin(monkeypatch, "hex8.kas", H100, 8,
                                                                          "FLOOR_MARGIN")
    assert 10 * groups < all_groups
    assert [(c.dag, c.group, c.by) for c in quick.configs] == [(c.dag, c.group, c.by) for c in whole.configs]
    assert len(quick.configs) == 1


@pytest.mark.parametrize("name", ["hex8.kas", "rotation_loop.kas", "mesh/neo_hookean_energy.kas", "cfl_step.kas",
                                  "highorder/bp3.kas"])
def test_the_values_crossing_a_set_of_nodes_from_the_block_tables_are_those_the_ir_says(name):
    """`search.crossing_values` (from `dag.node_values`: the search's groups and rests) finds
    the values `external_values` finds by walking the IR, in the same order, for the whole
    block, every node alone and 60 random sets of nodes of every block (loop bodies and their
    loops included)."""
    import random

    from irfuse.planner.dag import program_dags
    from irfuse.planner.search import crossing_values

    p = example_program(name)
    rng = random.Random(7)
    checked = 0
    for dag in program_dags(p):
        n = len(dag.ops)
        sets = [set(range(n))] + [{i} for i in range(n)] + [set(rng.sample(range(n), rng.randint(1, n)))
                                                             for _ in range(60 if n > 1 else 0)]
        for nodes in sets:
            group = tuple(sorted(nodes))
            assert crossing_values(dag, group) == external_values(dag, group), (name, group)
            checked += 1
    assert checked > 60


@pytest.mark.parametrize("name", ["mesh/p1_residual.kas", "mesh/neo_hookean_residual.kas", "highorder/bp1.kas",
                                  "rotation_loop.kas", "precession.kas", "cfl_step.kas", "CROSS"])
def test_groups_whose_floor_passes_a_known_cover_are_left_out_and_the_best_plan_stays(monkeypatch, name):
    """A group whose floor, with the floor of the kernels that must run the block's other
    calls (`_rest_floor`), passes the predicted time of a cover made of the block's whole
    phases and single calls (`_cover_bound`) is not analysed: the best plan is the one the
    whole search finds (blocks of one phase, loops, reductions, and crossing pairs whose
    kernels would form a cycle), and over a mesh or a high-order element most groups are left
    out."""
    import math

    import irfuse.planner.search as search

    p = example_program(name)
    analysed = []
    real = search.group_configs

    def counted(*a, **k):
        out = real(*a, **k)
        analysed.append(out[1] > 0)
        return out

    monkeypatch.setattr(search, "group_configs", counted)
    # (a mesh's one-kernel block at its floor ends its search before the bound is needed)
    monkeypatch.setattr(search, "FLOOR_MARGIN", 0.0)
    _, bounded = plan_program(p, 1 << 22, H100, 4, 8, top=1)
    left_out = analysed.count(False)
    analysed.clear()
    monkeypatch.setattr(search, "_cover_bound", lambda *a: math.inf)
    _, whole = plan_program(p, 1 << 22, H100, 4, 8, top=1)

    def described(plan):
        return [(c.dag, c.group, c.by, [i.name for i in c.impls]) for c in plan.configs], plan.predicted_time

    assert described(bounded[0]) == described(whole[0])
    if name.startswith(("mesh/", "highorder/")):
        assert 4 * left_out > 3 * len(analysed), (left_out, len(analysed))


# A mesh program of one gather and one scatter (the planner's tests of gathered and scattered words).
GATHER_SCATTER = """
nodal vector3 X, r; index4 conn; matrix4x3 Xe, A; matrix3x3 H;
input X, conn;
Xe = gather(X, conn);
H = mtmul(Xe, Xe);
A = mmul(Xe, H);
r = scatter(A, conn);
return r;"""


@pytest.mark.parametrize("name, dtype", [("mesh/neo_hookean_energy.kas", 4), ("mesh/p1_residual.kas", 4),
                                         ("mesh/neo_hookean_residual.kas", 8)])
def test_gathered_rows_count_in_a_group_s_floor_and_end_a_mesh_search_at_its_one_kernel(monkeypatch, name, dtype):
    """On a GPU profile a group's floor counts the rows it gathers through the caches
    (`cost.gather_time`, the same for every configuration): every configuration analysed costs
    at least its group's floor, and a mesh element phase's one kernel, bound by its gathers, is
    at its floor, so the search analyses it alone and plans what it planned with the rows out of
    the floors (the mesh Neo-Hookean energy with its gradient: 230 groups to the budget then,
    its one kernel chosen); asked for the plans after the best, it analyses single calls too."""
    import irfuse.planner.search as search

    p = example_program(name)
    groups = []
    real = search.group_configs

    def checked(*a, **k):
        configs, work, floor = real(*a, **k)
        assert all(c.cost.time >= search._floor_time(floor) for c in configs)
        groups.append(floor[3])
        return configs, work, floor

    monkeypatch.setattr(search, "group_configs", checked)
    _, quick = plan_program(p, 1 << 22, H100, dtype, 8, top=1)
    assert max(groups) > 0 and len(quick[0].configs) == 1 and not quick[0].notes
    analysed = len(groups)
    assert analysed == 1
    groups.clear()
    _, two = plan_program(p, 1 << 22, H100, dtype, 8, top=2)
    assert len(groups) > 1 and len(two) == 2 and two[0].predicted_time == quick[0].predicted_time
    groups.clear()
    monkeypatch.setattr(search, "gather_time", lambda *a: 0.0)
    _, before = plan_program(p, 1 << 22, H100, dtype, 8, top=1)
    assert 3 * analysed < len(groups)
    assert [(c.dag, c.group, c.by) for c in quick[0].configs] == [(c.dag, c.group, c.by) for c in before[0].configs]
    assert quick[0].predicted_time == before[0].predicted_time


@pytest.mark.parametrize("itemsize", [4, 8])
def test_a_gathering_kernel_s_rows_cost_more_the_fewer_blocks_an_sm_holds(itemsize):
    """`cost.block_tail`: a gathering kernel's rows are priced over (1 - BLOCK_TAIL / resident
    blocks), its blocks' warps waiting for the slowest. The P1 residual's element kernel in blocks
    of 64 and of 128, alike to every other term at the same resident threads, is planned in blocks
    of 64 (measured 2-5.5% faster on an H100, benchmarks/NOTES.md), the plan of 128 next; the
    search's floors stay below both (`gather_time`, the rows without the tail: the test above)."""
    from irfuse.planner.cost import BLOCK_TAIL, block_tail

    _, plans = plan_program(example_program("mesh/p1_residual.kas"), 1 << 22, H100, itemsize, 8, top=2)
    (small,), (large,) = plans[0].configs, plans[1].configs
    assert (small.by, large.by) == (64, 128) and small.model.bx == large.model.bx == 1
    assert small.cost.resident_blocks > large.cost.resident_blocks
    assert small.cost.time < large.cost.time
    tails = [block_tail(c.cost.resident_blocks) for c in (small, large)]
    assert tails == [1 / (1 - BLOCK_TAIL / c.cost.resident_blocks) for c in (small, large)] and 1 < tails[0] < tails[1]
    assert small.cost.t_gather / tails[0] == pytest.approx(large.cost.t_gather / tails[1])


def test_slow_operations_weigh_what_the_profile_measured_for_their_precision():
    from irfuse.library.catalogue import default_library
    from irfuse.planner.cost import op_flops

    venorm3 = default_library().ops["venorm3"]  # 3 products, 2 sums, one square root (6 flops)
    assert (venorm3.flops, venorm3.slow_ops) == (6, 1)
    p = replace_profile(slow_op_flops=10.0, slow_op_flops_f64=30.0)
    assert op_flops(venorm3, p, 4) == 5 + 10 and op_flops(venorm3, p, 8) == 5 + 30


@pytest.mark.parametrize("name, dtype, blocks", [
    ("synctest.kas", "f32", 10),  # 4.6 KB of loads a block: 8 blocks would keep 37 KB in flight
    ("synctest.kas", "f64", 8),  # twice the bytes: 8 blocks keep 74 KB
    ("bigfusion.kas", "f32", 8),
    ("power_iteration.kas", "f32", 8),  # a loop kernel is bound by its arithmetic, not by loads
])
def test_kernels_that_load_little_ask_ptxas_for_more_resident_blocks(name, dtype, blocks):
    from irfuse.kernel.bridge import model_from_kernel
    from irfuse.kernel.policies import IN_FLIGHT_BYTES, launch_min_blocks
    from irfuse.driver.compile import compile_program

    plan, _ = compile_program(next(p for p in EXAMPLES if p.endswith(name)), None, dtype, compile_gpu=True,
                              arch="sm_90")
    (kernel,) = [op for op in plan.module.walk() if op.name == "fuse.kernel"]
    model, _ = model_from_kernel(kernel, plan.itemsize)
    assert launch_min_blocks(model) == blocks
    (k,) = plan.kernels
    r = plan.resources(k.name)
    assert k.min_blocks == blocks and r.spill_stores == 0 and r.spill_loads == 0
    # ptxas honours the bound: the registers let that many blocks be resident.
    assert r.registers * k.threads * blocks <= 65536
    if blocks > 8:
        loaded = model.by * plan.itemsize * 9
        assert 8 * loaded < IN_FLIGHT_BYTES <= blocks * loaded


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_a_kernel_that_gathers_asks_ptxas_for_1280_threads_an_sm(dtype):
    """`GATHER_THREADS`: the mesh energy's element kernel (gathers, no loop) asks for 1280
    threads an SM (20 blocks of 64); ptxas fits float32's without spilling, while float64's
    spills there and is compiled again asking fewer (`driver.compile.build`), never spilling."""
    from irfuse.driver.compile import compile_program
    from irfuse.kernel.bridge import model_from_kernel
    from irfuse.kernel.policies import GATHER_THREADS, launch_min_blocks

    path = os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "neo_hookean_energy.kas")
    plan, _ = compile_program(path, None, dtype, compile_gpu=True, arch="sm_90")
    gathering = [op for op in plan.module.walk() if op.name == "fuse.kernel"
                 and model_from_kernel(op, plan.itemsize)[0].gathers()]
    assert len(gathering) == 1
    model, _ = model_from_kernel(gathering[0], plan.itemsize)
    assert not model.has_loops() and launch_min_blocks(model) * model.threads == GATHER_THREADS
    (k,) = [k for k in plan.kernels if k.name == gathering[0].sym_name.data]
    r = plan.resources(k.name)
    assert r.spill_stores == 0 and r.spill_loads == 0 and r.registers * k.threads * k.min_blocks <= 65536
    asked = k.min_blocks * k.threads
    assert asked == GATHER_THREADS if dtype == "f32" else asked < GATHER_THREADS


def _spilling_above(monkeypatch, most: int) -> list:
    """NVRTC as `build` calls it, as if ptxas could not fit a kernel in its registers above `most`
    resident blocks (spilling past `SPILL_BYTES_KEPT`): the list it fills with each compile's
    blocks asked, kernel by kernel."""
    import dataclasses

    from irfuse.driver import compile as driver

    real, asked = driver.compiler_for, []

    class Spills:
        def compile(self, source, kernels, element, arch):
            cubin = real("cuda").compile(source, kernels, element, arch)
            asked.append([k.min_blocks for k in kernels])
            for k in kernels:
                if k.min_blocks > most:
                    cubin.resources[k.name] = dataclasses.replace(cubin.resources[k.name],
                                                                  spill_stores=driver.SPILL_BYTES_KEPT + 4)
            return cubin

    monkeypatch.setattr(driver, "compiler_for", lambda name: Spills())
    return asked


def test_the_compiles_side_by_side_follow_the_cores_runnable_now_not_the_minutes_average(monkeypatch, tmp_path):
    """`_width` counts the threads runnable at this instant (/proc/loadavg's fourth field), so a
    machine that has just finished other work (its one-minute average still high) compiles a
    spilling kernel's steps beside its first compile; one whose cores are all busy compiles one
    at a time; without the file, the load average; without either, one at a time."""
    from irfuse.driver import compile as driver

    real_busy_cores, cores = driver._busy_cores, 4
    monkeypatch.setattr(driver.os, "cpu_count", lambda: cores)
    monkeypatch.setattr(driver.os, "getloadavg", lambda: (3.9, 3.0, 1.0))
    quiet = tmp_path / "loadavg"
    quiet.write_text("3.90 3.00 1.00 1/412 5120\n")  # (the average high, only this compile runnable)
    assert driver._busy_cores(str(quiet)) == 1.0
    busy = tmp_path / "busy"
    busy.write_text("0.10 0.05 0.01 5/412 5120\n")  # (the average low, every core runnable now)
    assert driver._busy_cores(str(busy)) == 5.0
    assert driver._busy_cores(str(tmp_path / "none")) == 3.9  # (no such file: the average)
    for runnable, width in ((1.0, driver.WIDTH), (2.0, 3), (4.0, 1), (9.0, 1)):
        monkeypatch.setattr(driver, "_busy_cores", lambda runnable=runnable: runnable)
        assert driver._width() == width, runnable

    def no_average():
        raise OSError("no load average")

    monkeypatch.setattr(driver.os, "getloadavg", no_average)
    assert real_busy_cores(str(tmp_path / "none")) == cores


@pytest.mark.parametrize("most", [8, 4])
def test_a_kernel_that_spills_at_the_raised_minimum_is_compiled_at_1024_threads(monkeypatch, most):
    """SyncTest's kernel asks for 10 blocks; as if ptxas spilled it above `most`, it is
    stepped to 8, then 4. One core: one compile at a time, stopping at the first step that
    does not spill. Two: the first compile beside the first step (8), then two steps a round.
    Four: the first compile beside the first three steps, in one round."""
    from irfuse.driver import compile as driver

    asked = _spilling_above(monkeypatch, most)
    one = {8: [[10], [8]], 4: [[10], [8], [4]]}[most]
    two = {8: [[10], [8]], 4: [[10], [8], [4], [2]]}[most]  # (rounds of two: 10 and 8, then 4 and 2)
    four = [[10], [8], [4], [2]]  # (one round: 10 beside its first three steps)
    for width, then in ((1, one), (2, two), (4, four)):  # (cores idle: `driver._width`)
        monkeypatch.setattr(driver, "_width", lambda width=width: width)
        asked.clear()
        plan, _ = driver.compile_program(next(p for p in EXAMPLES if p.endswith("synctest.kas")), None, "f32",
                                         compile_gpu=True, arch="sm_90")
        assert sorted(asked, reverse=True) == then and plan.kernels[0].min_blocks == most, width
        assert width == 1 and asked == then or sorted(asked[:width], reverse=True) == then[:width]


@pytest.mark.parametrize("counted, first", [(60, 10), (140, 8), (200, 4), (700, 1)])
def test_a_kernel_counted_far_past_a_steps_registers_is_first_compiled_below_it(monkeypatch, counted, first):
    """SyncTest's kernel asks for 10 blocks of 128 threads (51 registers a thread), then 8 (64),
    4 (128), 2 (255), 1. Where the planner's count of its registers passes `SURE_SPILL` times
    a step's, that step is not compiled: the first compile asks for the first step the count
    leaves, and the steps after it follow as before (here ptxas spills above 2 blocks), on one
    core or two, ending where stepping from 10 one compile at a time ends."""
    from irfuse.driver import compile as driver
    from irfuse.planner import cost

    asked = _spilling_above(monkeypatch, 2)
    monkeypatch.setattr(cost, "peak_register_words", lambda model: counted)
    one = [b for b in (10, 8, 4, 2) if b <= first] or [1]  # (one compile at a time)
    for width in (1, 2):
        monkeypatch.setattr(driver, "_width", lambda width=width: width)
        asked.clear()
        plan, _ = driver.compile_program(next(p for p in EXAMPLES if p.endswith("synctest.kas")), None, "f32",
                                         compile_gpu=True, arch="sm_90")
        compiled = [b for (b,) in asked]  # (two at once: in the order their threads finish)
        assert compiled == one if width == 1 else max(compiled) == first and set(one) <= set(compiled) <= {*one, 1}
        assert plan.kernels[0].min_blocks == min(first, 2)


def test_the_stages_of_a_program_over_a_mesh_built_side_by_side_are_those_built_in_turn(monkeypatch):
    """`_build_modules` builds the explicit step's three passes in threads where cores are
    idle: the same sources, kernels, blocks and cubins as one after another; and a stage that
    fails raises the first failing stage's error, as in turn."""
    from irfuse.driver import compile as driver

    path = os.path.join(ROOT, "examples", "mesh", "explicit_step.kas")
    built = {}
    for width in (1, 3):
        monkeypatch.setattr(driver, "_width", lambda width=width: width)
        staged, _ = driver.compile_program(path, None, "f32", compile_gpu=True, arch="sm_90")
        built[width] = [(s.artifact.source, [(k.name, k.min_blocks) for k in s.artifact.kernels], s.artifact.cubin.cubin)
                        for s in staged.stages]
    assert len(built[1]) == 3 and built[3] == built[1]
    real = driver._build_module

    def failing(reference, module, name, *rest):  # (both passes over the nodes)
        if "pass over nodes" in name:
            raise CompileError(f"as if {name} could not be built")
        return real(reference, module, name, *rest)
    monkeypatch.setattr(driver, "_build_module", failing)
    said = {}
    for width in (1, 3):
        monkeypatch.setattr(driver, "_width", lambda width=width: width)
        with pytest.raises(CompileError, match="could not be built") as error:
            driver.compile_program(path, None, "f32", compile_gpu=True, arch="sm_90")
        said[width] = str(error.value)
    assert said[3] == said[1]


def test_the_stages_built_side_by_side_share_the_cores_compiles(monkeypatch):
    """Three passes built at once on two idle cores: at most two compiles run at a time, and
    no pass compiles a step to fewer blocks beside its first (the cores are taken by the other
    passes), so each of the explicit step's four planned kernels, none spilling, is compiled
    once in a unit of its own, and the library's kernels (the element pass's scatter) once."""
    import threading
    import time

    from irfuse.driver import compile as driver

    real = driver.compiler_for
    lock, running, most, compiled = threading.Lock(), [0], [0], []

    class Counted:
        def compile(self, source, kernels, element, arch):
            with lock:
                running[0] += 1
                most[0] = max(most[0], running[0])
                compiled.append([k.name for k in kernels])
            try:
                time.sleep(0.05)  # (so that compiles started together overlap)
                return real("cuda").compile(source, kernels, element, arch)
            finally:
                with lock:
                    running[0] -= 1

    monkeypatch.setattr(driver, "compiler_for", lambda name: Counted())
    monkeypatch.setattr(driver, "_width", lambda: 2)
    path = os.path.join(ROOT, "examples", "mesh", "explicit_step.kas")
    staged, _ = driver.compile_program(path, None, "f32", compile_gpu=True, arch="sm_90")
    planned = [names for names in compiled if not names[0].startswith("irf_")]
    assert len(staged.stages) == 3 and most[0] == 2 and len(compiled) == 5, (most, compiled)
    assert len(planned) == 4 and all(len(names) == 1 for names in planned)
    assert len({names[0] for names in planned}) == 4


def test_a_kernel_spilling_a_word_or_two_keeps_its_resident_blocks(monkeypatch):
    """At most `SPILL_BYTES_KEPT` spilled (stores and loads together) keeps the blocks asked;
    a byte more steps to fewer, as above."""
    import dataclasses

    from irfuse.driver import compile as driver

    real = driver.compiler_for
    for spilled, blocks in ((driver.SPILL_BYTES_KEPT, 10), (driver.SPILL_BYTES_KEPT + 1, 8)):
        class Spills:
            def compile(self, source, kernels, element, arch, spilled=spilled):
                cubin = real("cuda").compile(source, kernels, element, arch)
                for k in kernels:
                    if k.min_blocks > 8:
                        cubin.resources[k.name] = dataclasses.replace(
                            cubin.resources[k.name], spill_stores=spilled // 2, spill_loads=spilled - spilled // 2)
                return cubin

        monkeypatch.setattr(driver, "compiler_for", lambda name: Spills())
        plan, _ = driver.compile_program(next(p for p in EXAMPLES if p.endswith("synctest.kas")), None, "f32",
                                         compile_gpu=True, arch="sm_90")
        assert plan.kernels[0].min_blocks == blocks, spilled


@pytest.mark.parametrize("name", ["cfl_step.kas", "j2_return.kas", "lumped_mass.kas", "strain_energy.kas"])
def test_a_module_stepped_to_fewer_blocks_is_the_module_emitted_with_them(name):
    """`with_min_blocks` (a spilling kernel's steps set in the module emitted once) gives the
    source and kernels of emitting the module again with those minimums, for every planned
    kernel at each step, and refuses a kernel whose bounds it cannot find."""
    import dataclasses

    from irfuse.backend.cuda_emit import EmittedModule, emit_module, with_min_blocks
    from irfuse.driver import compile as driver

    path = next(p for p in EXAMPLES + glob.glob(os.path.join(ROOT, "examples", "mesh", "*.kas"))
                if p.endswith(name))
    plan, _ = driver.compile_program(path, None, "f32", compile_gpu=False)
    module = plan.module
    element = driver.module_element_type(module)
    once = emit_module(module, element, {}, cpu_loop=driver.cpu_loop_kernel)
    names = {op.sym_name.data for op in module.walk() if op.name == "fuse.kernel"}
    planned = [k for k in once.kernels if k.name in names]
    assert planned
    for step in (8, 4, 2, 1):
        levels = {k.name: min(step, k.min_blocks) for k in planned[::2]} | {planned[-1].name: step}
        again = emit_module(module, element, levels, cpu_loop=driver.cpu_loop_kernel)
        stepped = with_min_blocks(once, levels)
        assert stepped.source == again.source
        assert stepped.kernels == again.kernels
    renamed = EmittedModule(once.source, [dataclasses.replace(planned[0], name=planned[0].name + "_x")])
    with pytest.raises(CompileError, match="launch bounds found"):
        with_min_blocks(renamed, {planned[0].name + "_x": planned[0].min_blocks + 1})


@pytest.mark.parametrize("width", [1, 2, 3, 4])
def test_spilling_kernels_end_at_the_steps_one_compile_at_a_time_would_take(monkeypatch, width):
    """`build` compiles the steps to fewer resident blocks side by side once a kernel spills;
    with kernels that stop spilling at different steps (as if ptxas fitted CflStep's first
    kernel only at 2 blocks and its third at 4), the kept source and blocks are those of
    stepping one compile at a time, as `build` did before."""
    import dataclasses

    from irfuse.driver import compile as driver
    from irfuse.kernel.policies import default_min_blocks

    real = driver.compiler_for
    fits = {"_k0_": 2, "_k2_": 4}  # the most blocks at which each kernel does not spill

    class Spills:
        def compile(self, source, kernels, element, arch):
            cubin = real("cuda").compile(source, kernels, element, arch)
            for k in kernels:
                if any(part in k.name and k.min_blocks > most for part, most in fits.items()):
                    cubin.resources[k.name] = dataclasses.replace(cubin.resources[k.name],
                                                                   spill_loads=driver.SPILL_BYTES_KEPT + 8)
            return cubin

    monkeypatch.setattr(driver, "compiler_for", lambda name: Spills())
    monkeypatch.setattr(driver, "_width", lambda: width)
    path = next(p for p in EXAMPLES if p.endswith("cfl_step.kas"))
    plan, _ = driver.compile_program(path, None, "f32", compile_gpu=True, arch="sm_90")
    module = plan.module
    element = driver.module_element_type(module)
    blocks: dict = {}
    while True:  # one compile at a time
        emitted = driver.emit_module(module, element, blocks, cpu_loop=driver.cpu_loop_kernel)
        cubin = Spills().compile(emitted.source, emitted.kernels, element, "sm_90")
        spilling = [k for k in emitted.kernels if k.min_blocks > 1 and
                    cubin.resources[k.name].spill_loads + cubin.resources[k.name].spill_stores > driver.SPILL_BYTES_KEPT]
        for k in spilling:
            base = default_min_blocks(k.threads)
            blocks[k.name] = base if k.min_blocks > base else k.min_blocks // 2
        if not spilling:
            break
    assert plan.source == emitted.source
    assert [k.min_blocks for k in plan.kernels] == [k.min_blocks for k in emitted.kernels]
    stepped = {k.name: k.min_blocks for k in plan.kernels}
    assert [n for n in stepped if "_k0_" in n and stepped[n] <= 2] and [n for n in stepped if "_k2_" in n
                                                                       and stepped[n] <= 4]


def test_a_gather_costs_the_distinct_rows_a_block_takes_from_memory_and_every_row_through_the_caches():
    """Indirect traffic: a block's elements share nodes, so the rows of a gather it takes from
    memory are about its distinct nodes' (fewer per element in larger blocks, never more than
    one per row gathered); every element still reads its own rows (`t_gather`), so a kernel
    that gathers again what another gathered costs more than the one that gathers once."""
    import numpy as np

    from irfuse.kernel.model import Gathered
    from irfuse.mesh import box_tetrahedra, reorder, renumber
    from irfuse.planner.cost import gathered_sectors, global_sectors, kernel_cost
    from irfuse.planner.search import group_configs, program_dags

    rows = Gathered(4, 3, 1)  # a vector3 through an index4
    per_element = [gathered_sectors(by, rows, 4) / by for by in (32, 64, 128, 256)]
    assert per_element == sorted(per_element, reverse=True) and per_element[-1] < 0.4
    # against the sectors of 12-byte rows a Morton-ordered mesh's blocks of 128 name: within 15%
    coords, conn = box_tetrahedra(24, numbering="random", seed=1)[:2]
    conn = renumber(conn, *reorder(conn, coords, method="morton"), coords)[0]
    blocks = conn[:len(conn) // 128 * 128].reshape(-1, 512)
    measured = np.mean([len(np.unique(np.concatenate([u * 12 // 32, (u * 12 + 11) // 32])))
                        for u in map(np.unique, blocks[:500])]) / 128
    assert abs(per_element[2] - measured) < 0.15 * measured, (per_element[2], measured)
    assert gathered_sectors(1, rows, 4) == 4 * (12 / 32 + 0.25)  # one element: each row its own
    assert global_sectors(1 << 20, 128, [rows], 4) < global_sectors(1 << 20, 128, [12 + 1], 4)
    program = compile_source(GATHER_SCATTER).module.body.block.first_op
    dags = program_dags(program)
    calls = tuple(i for i, op in enumerate(dags[0].ops) if op.name == "kas.call")
    whole = group_configs(dags, 0, calls, 1 << 22, H100, 4, 1)[0][0]
    first = group_configs(dags, 0, calls[:1], 1 << 22, H100, 4, 1)[0][0]
    second = group_configs(dags, 0, calls[1:], 1 << 22, H100, 4, 1)[0][0]
    assert whole.cost.time < first.cost.time + second.cost.time
    assert kernel_cost(whole.model, 1 << 22, H100, [rows, 12]).time > 0


def test_memory_counts_the_rows_of_an_sms_resident_blocks_and_scattered_values_as_group_partials():
    """From memory a gathering kernel takes the distinct rows of the elements an SM's resident
    blocks hold (`global_sectors`' window), so blocks of 64 at 20 an SM and of 256 at 5 move the
    same rows, fewer than a block of 64 alone names; a connectivity of more nodes than a
    tetrahedron's keeps its blocks' own count. A value scatters alone add is written as one
    partial row for each distinct node of a group (`scattered_words`), fewer than its elements'
    rows, except through connectivities of more nodes; the search moves such a value's words so."""
    from irfuse.artifact.scatter_groups import group_elements
    from irfuse.kernel.model import Gathered
    from irfuse.planner.cost import distinct_rows, global_sectors, scattered_words
    from irfuse.planner.search import moved_words, program_dags

    n, tet, hexa = 1 << 22, Gathered(4, 3, 1), Gathered(8, 3, 2)
    node_numbers = n * 4 * 4 // 32  # (int32 node numbers: whole sectors in blocks of 64 and 256)
    rows = {by: global_sectors(n, by, [tet], 4, window=1280) - node_numbers for by in (64, 256)}
    assert rows[64] == pytest.approx(rows[256], rel=1e-9)
    alone = global_sectors(n, 64, [tet], 4) - node_numbers
    assert rows[64] < 0.5 * alone
    assert global_sectors(n, 64, [hexa], 4, window=1280) == global_sectors(n, 64, [hexa], 4)
    assert scattered_words(12, 4) == pytest.approx(3 * distinct_rows(group_elements(4), 4))
    assert 0.6 * 3 < scattered_words(12, 4) < 0.8 * 3 and scattered_words(8, 8) == 8
    program = compile_source(GATHER_SCATTER).module.body.block.first_op
    dag = program_dags(program)[0]
    made = next(op.res for op in dag.ops if op.name == "kas.call" and op.res.type.size == 12)
    assert moved_words(made, 4) == pytest.approx(scattered_words(12, 4))


def test_a_gathering_kernels_rows_are_priced_by_their_bytes_or_its_elements_dependent_chains():
    """`cost.gather_time`: each gathered row its bytes and `GATHER_ROW_COST` of a sector at
    `gather_rate`, but no faster than an SM finishes elements waiting on their dependent loads
    (`gathered_element_rate`): one gather of four float32 rows (the lumped mass) is bound by the
    chains, two of float64 rows (the P1 residual) by the rows; no gather, no time."""
    from irfuse.kernel.model import Gathered
    from irfuse.planner.cost import GATHER_ROW_COST, gather_time

    n = 1 << 22
    chains = n / (H100.sms * H100.gathered_element_rate)
    assert gather_time(n, H100, [Gathered(4, 3, 1), 4], 4) == pytest.approx(chains)
    rows = 32 * n * 8 * (24 / 32 + GATHER_ROW_COST) / H100.gather_rate
    assert gather_time(n, H100, [Gathered(4, 3, 2)] * 2, 8) == pytest.approx(rows) and rows > chains
    assert gather_time(n, H100, [12, 4], 4) == 0.0


def test_the_cpu_profile_costs_bytes_and_flops_at_its_rates_and_twins_at_their_factor():
    """The CPU profile's cost (`cost.cpu_kernel_cost`): a loop kernel's time is the launch and
    the larger of its bytes at the copy rate and its flops at the flop rate; a kernel of several
    threads an element runs as its twin, `twin_factor` slower in its arithmetic; a launch of
    fewer blocks than cores leaves the rest idle; a block's scratch beyond L2 is paid twice."""
    import dataclasses

    from irfuse.planner.cost import kernel_cost, renders_as_loop
    from irfuse.planner.profiles import CPU, load_profile

    assert load_profile("cpu") == CPU and CPU.kind == "cpu"
    n = 1 << 22
    elem, sizes = _two_op_kernel("elem", 64, 4)
    entry, _ = _two_op_kernel("entry", 8, 4)
    assert renders_as_loop(elem) and not renders_as_loop(entry)
    e = kernel_cost(elem, n, CPU, sizes)
    assert e.t_mem == pytest.approx(32 * sum(n // 64 * -(-64 * s * 4 // 32) for s in sizes) / CPU.bandwidth)
    assert e.time == pytest.approx(CPU.launch_overhead + max(e.t_mem, e.t_compute))
    t = kernel_cost(entry, n, CPU, sizes)
    assert t.t_compute == pytest.approx(e.t_compute * CPU.twin_factor) and t.time > e.time
    # On the GPU the same two kernels rank the other way round or close; the CPU never prefers
    # the twin.
    sixteen = dataclasses.replace(CPU, sms=16)
    few = kernel_cost(elem, 4 * 64, sixteen, sizes)  # 4 blocks on 16 cores
    assert few.time == pytest.approx(sixteen.launch_overhead + 4 * max(few.t_mem, few.t_compute))
    tight = dataclasses.replace(CPU, l2_bytes=t.shared_bytes - 1)
    spilled = kernel_cost(entry, n, tight, sizes)
    assert spilled.time == pytest.approx(t.time + 2 * (n // 8) * t.shared_bytes / CPU.bandwidth)
    # A kernel the GPU cannot run is not planned for the CPU either (the same source is both).
    assert not kernel_cost(elem, n, dataclasses.replace(CPU, shared_per_block=16), sizes).feasible


@pytest.mark.parametrize("profile", ["h100", "cpu"])
def test_the_cost_models_loop_prediction_agrees_with_the_cpu_renderer(profile):
    """`cost.renders_as_loop` (what the CPU profile charges as a loop) against what
    `render_cpu_loop` takes, on every example's and mesh example's kernels in both layouts
    (structures of arrays keep the twin; a mesh program's gathers and scatters are loops) and
    hex8 in kernels of one call."""
    from irfuse.backend.render_cpu_loop import loop_rendering
    from irfuse.dialects import fuse
    from irfuse.driver.compile import PlanningOptions, compile_program
    from irfuse.kernel.bridge import model_from_kernel
    from irfuse.planner.cost import renders_as_loop

    mesh = [p for p in sorted(glob.glob(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "*.kas")))
            if not p.endswith("explicit_step.kas")]  # (statements per node: planned pass by pass)
    seen, scattered = set(), 0
    for path in EXAMPLES + mesh:
        # (structures of arrays planned for the CPU search every group, as twins are never at
        # their floor: 10x the search time of the largest examples; their kernels are the twin
        # whatever the profile, which the h100 case checks)
        variants = [(None, "aos")] + ([(None, "soa")] if profile == "h100" and path not in mesh else []) + (
            [("kas-dce,fuse-each", "aos")] if path.endswith("hex8.kas") else [])
        for pipeline, layout in variants:
            plan, _ = compile_program(path, pipeline, "f32", compile_gpu=False, layout=layout,
                                      planning=PlanningOptions(profile=profile, n=1 << 20))
            for k in plan.module.walk():
                if not isinstance(k, fuse.KernelOp):
                    continue
                model, _ = model_from_kernel(k)
                rendered, why = loop_rendering(k, 4)
                assert renders_as_loop(model) == (rendered is not None), (path, k.sym_name.data, why)
                seen.add(rendered is not None)
                scattered += rendered is not None and any(isinstance(op, fuse.StoreOp) and op.scatters
                                                          for op in k.walk())
    assert seen == ({True, False} if profile == "h100" else {True})  # (structures of arrays: the twin)
    assert scattered >= 4  # (the mesh examples' element kernels sum their rows in groups as loops)


# A kernel of few bytes an element: 12 bytes read and 12 written (measured on the H200: blocks of
# 64 elements ran at 790 blocks a microsecond, 29% of the copy rate; 512 on 256 threads at 86%).
SCALE = """vector3 v, y; uniform scalar m; input v, m; y = svmul3(v, m); return y;"""


def test_a_kernel_of_many_small_blocks_is_priced_by_starting_them():
    import math

    from irfuse.planner.cost import kernel_cost

    prog = program(SCALE)
    call = next(op for op in prog.body.walk() if op.name == "kas.call")
    impl = find_implementation(call.op_name, "elem")
    n = 1 << 22
    dag = block_dag(prog.body.block)
    inputs, outputs = external_values(dag, tuple(dag.calls))
    costs = {}
    for by in (64, 256):
        model = optimize(build_kernel_model([call], [impl], inputs, outputs, by, 4), stop_before=BARRIER_STEP)
        costs[by] = kernel_cost(model, n, H100, [3, 0, 3])
        assert costs[by].t_blocks == pytest.approx(math.ceil(n / by / H100.sms) * H100.block_cost)
        assert costs[by].time >= costs[by].t_blocks + H100.launch_overhead
    # 64 elements a block: bound by starting its 65,536 blocks, not by its bytes.
    assert costs[64].t_blocks > costs[64].t_mem and costs[64].time > costs[256].time
    # Without the term (a profile of block_cost 0) the two cost the same.
    free = replace_profile(block_cost=0.0)
    unpriced = [kernel_cost(optimize(build_kernel_model([call], [impl], inputs, outputs, by, 4),
                                     stop_before=BARRIER_STEP), n, free, [3, 0, 3]) for by in (64, 256)]
    assert unpriced[0].t_blocks == 0 and unpriced[0].time == pytest.approx(unpriced[1].time)


def test_the_search_moves_few_bytes_an_element_in_fewer_larger_blocks():
    """The kernel of SCALE at 4,194,304 elements: 256 elements on 128 threads (fewer blocks to
    start, and two elements' loads a thread in flight), where without the block term it took 64
    elements a block; kernels that move many bytes an element keep 128 elements a block, one a
    thread (which the cost model ties with the others, `search.tie_rank`)."""
    def kernels(src, profile):
        _, plans = plan_program(program(src), 1 << 22, profile)
        return [(c.model.by, c.model.per_thread) for c in plans[0].configs]

    assert kernels(SCALE, H100) == [(256, 2)]
    assert kernels(SCALE, replace_profile(block_cost=0.0)) != [(256, 2)]
    for name in ("synctest.kas", "bigfusion.kas", "stvenant.kas"):
        src = open(os.path.join(os.path.dirname(EXAMPLES[0]), name)).read()
        assert kernels(src, H100) == [(128, 1)], name


def test_ties_go_to_128_elements_a_block_and_two_a_thread_where_the_kernel_reduces():
    from irfuse.planner.search import tie_rank

    assert tie_rank(128, 1, reduces=False) == 0 < tie_rank(64, 1, reduces=False) < tie_rank(256, 2, reduces=False)
    assert tie_rank(128, 2, reduces=True) == 0 < tie_rank(128, 1, reduces=True)
    assert tie_rank(128, 1, reduces=False, bx=4) == 1
    # (a kernel that gathers runs one element a thread, reducing or not)
    assert tie_rank(128, 1, reduces=True, gathers=True) == 0 < tie_rank(128, 2, reduces=True, gathers=True)


def test_a_mesh_energys_element_kernel_runs_one_element_a_thread():
    """The Neo-Hookean energy over a mesh reduces over its elements, which alone would make the
    tie two elements a thread; it gathers, so one a thread (measured faster on the H200)."""
    src = open(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "neo_hookean_energy.kas")).read()
    _, plans = plan_program(program(src.replace("derivative grad of E wrt u;", "")), 1 << 22, H100)
    (kernel,) = [c.model for c in plans[0].configs if c.model.gathers()]
    assert kernel.reduces() and kernel.per_thread == 1


def test_a_kernel_leaving_an_sms_schedulers_without_warps_is_not_planned_where_another_runs_its_group():
    """BP1 at order 4 in float64 was planned with a kernel copying each element's 125 sums one
    element a thread in blocks of 64 whose shared memory let one block on an SM: two warps for
    four schedulers, measured 6x slower than priced. No kernel of the plan holds so few now."""
    from irfuse.kernel.policies import SCHEDULERS_PER_SM

    _, plans = plan_program(program(highorder_operators().bp1_source(4, 6)), 1 << 22, H100, itemsize=8)
    assert min(c.cost.warps for c in plans[0].configs) >= SCHEDULERS_PER_SM


def test_a_group_whose_every_configuration_idles_schedulers_is_still_planned(monkeypatch):
    """Where no configuration of a group keeps every scheduler busy, the group keeps its best
    of them: with every configuration counted short of warps the plans are those priced as
    before (SyncTest and StrainEnergy, small enough that no budget cuts their searches)."""
    import irfuse.planner.search as search

    for name in ("synctest.kas", "strain_energy.kas"):
        src = open(os.path.join(ROOT, "examples", name)).read()
        monkeypatch.setattr(search, "SCHEDULERS_PER_SM", 0)
        _, priced = plan_program(program(src), 1 << 22, H100)
        monkeypatch.setattr(search, "SCHEDULERS_PER_SM", 1 << 30)
        _, idle = plan_program(program(src), 1 << 22, H100)
        assert [(c.group, c.model.bx, c.model.by, c.cost.time) for c in idle[0].configs] == \
            [(c.group, c.model.bx, c.model.by, c.cost.time) for c in priced[0].configs]


def test_the_runtime_steps_beside_the_planned_kernels_are_priced_by_their_bytes():
    """`cost.runtime_steps_time`: a mesh program's scatter reads each node's start and each
    partial's slot and row and writes each node's sum, at the profile's `node_sum_rate` (the
    copy rate where it has none); a reduction's combine, run as a kernel, reads every block's
    partials at the copy rate, and on a GPU either way of combining waits `COMBINE_WAIT`; a
    program of plain kernels adds nothing."""
    import dataclasses
    from irfuse.driver.compile import compile_program
    from irfuse.planner.cost import H200, load_profile, runtime_steps_time

    mesh = os.path.join(ROOT, "examples", "mesh", "p1_residual.kas")
    residual, _ = compile_program(mesh, None, "f32", compile_gpu=False)
    scatter = runtime_steps_time(residual, H200, 6000, nodes=1000, partials=3000)
    assert H200.node_sum_rate < H200.bandwidth
    assert scatter == pytest.approx(H200.launch_overhead + (1000 * (8 + 12) + 3000 * (4 + 12)) / H200.node_sum_rate)
    more = runtime_steps_time(residual, H200, 6000, nodes=1000, partials=6000)
    assert more - scatter == pytest.approx(3000 * 16 / H200.node_sum_rate)
    copy_rate = dataclasses.replace(H200, node_sum_rate=0.0)
    assert runtime_steps_time(residual, copy_rate, 6000, nodes=1000, partials=3000) == pytest.approx(
        H200.launch_overhead + (1000 * (8 + 12) + 3000 * (4 + 12)) / H200.bandwidth)
    wide, _ = compile_program(mesh, None, "f64", compile_gpu=False)
    assert runtime_steps_time(wide, H200, 6000, nodes=1000, partials=3000) > scatter  # (8-byte words)
    # The explicit step's fused elements stage: its node kernel reads the partials (no launch
    # of the scatter's own, no sums written)
    step, _ = compile_program(os.path.join(ROOT, "examples", "mesh", "explicit_step.kas"), None, "f32",
                              compile_gpu=False)
    assert runtime_steps_time(step.fused[1].artifact, H200, 6000, nodes=1000, partials=3000) == pytest.approx(
        (1000 * 8 + 3000 * (4 + 12)) / H200.node_sum_rate)
    assert runtime_steps_time(step.stages[1].artifact, H200, 6000, nodes=1000, partials=3000) == pytest.approx(scatter)

    synctest, _ = compile_program(next(p for p in EXAMPLES if p.endswith("synctest.kas")), None, "f32",
                                  compile_gpu=False)
    assert runtime_steps_time(synctest, H200, 1 << 22) == 0.0
    energy, _ = compile_program(next(p for p in EXAMPLES if p.endswith("strain_energy.kas")), None, "f32",
                                compile_gpu=False)
    cpu = load_profile("cpu")
    small, large = (runtime_steps_time(energy, cpu, n) for n in (1 << 16, 1 << 22))
    assert cpu.launch_overhead < small < large  # (more blocks' partials to combine)
    # On a GPU a launch of few enough blocks combines in its last block (a plan asked to:
    # none of the built-in profiles chooses it): priced by the last block's rounds, not left
    # out (the kernel's planned time does not hold them)
    from irfuse.dialects.fuse import finish_threads
    from irfuse.planner.cost import COMBINE_WAIT, last_block_combine_time

    finishing, _ = compile_program(next(p for p in EXAMPLES if p.endswith("strain_energy.kas")),
                                   "kas-dce,fuse-each{by=64 finish=last-block}", "f32", compile_gpu=False)
    info = next(k for k in finishing.kernels if k.finish_parts)
    few = info.by * info.finish_parts
    assert info.finishes_in_last_block(few) and not info.finishes_in_last_block(few + info.by)
    threads = finish_threads(info.bx * info.by // info.per_thread)
    last = last_block_combine_time(H200, info.finish_parts, threads, 1)
    assert runtime_steps_time(finishing, H200, few) == pytest.approx(last + COMBINE_WAIT) and last > H200.launch_overhead
    assert runtime_steps_time(finishing, H200, few + info.by) == pytest.approx(
        COMBINE_WAIT + H200.launch_overhead + (info.finish_parts + 2) * 4 / H200.bandwidth)


def test_the_cover_model_is_the_proto_or_tools_model_builder_makes_and_planning_leaves_pandas_out(tmp_path,
                                                                                                    monkeypatch):
    """`planner.cover_model` writes the cover search's model straight into OR-Tools' proto:
    for a planned example and a random program (their covers given to CP-SAT), every model it
    solves is, byte for byte, the one `cp_model.CpModel` makes from the same calls, with the
    same status, answer and deterministic time; and a process that plans a small program
    imports neither pandas (which `cp_model` imports, 0.15 s of every cold compile) nor, its
    cover found without it (`cover_exact`), OR-Tools' solver."""
    import subprocess
    import sys

    from ortools.sat.python import cp_model

    import irfuse.planner.cover_model as cover_model
    import irfuse.planner.search as search
    from irfuse.driver.compile import PlanningOptions, compile_program, compile_text
    from irfuse.passes import fuse_partition
    from irfuse.testing.random_programs import random_program

    solves = []

    class Mirrored(cover_model.CoverModel):
        def __init__(self, n):
            super().__init__(n)
            self.twin = cp_model.CpModel()
            self.x = [self.twin.NewBoolVar(f"c{i}") for i in range(n)]

        def exactly_one(self, variables):
            variables = list(variables)
            super().exactly_one(variables)
            self.twin.AddExactlyOne(self.x[i] for i in variables)

        def at_most(self, variables, bound):
            variables = list(variables)
            super().at_most(variables, bound)
            self.twin.Add(sum(self.x[i] for i in variables) <= bound)

        def minimize(self, weighted):
            weighted = list(weighted)
            super().minimize(weighted)
            self.twin.Minimize(sum(w * self.x[i] for i, w in weighted))

        def solve(self, max_deterministic_time):
            assert str(self.proto) == str(self.twin.proto)
            status = super().solve(max_deterministic_time)
            solver = cp_model.CpSolver()
            solver.parameters.num_workers = 1
            solver.parameters.max_deterministic_time = max_deterministic_time
            assert int(solver.Solve(self.twin)) == int(status)
            assert [self.value(i) for i in range(len(self.x))] == [solver.Value(v) for v in self.x]
            assert self.deterministic_time == solver.deterministic_time
            solves.append(status)
            return status

    monkeypatch.setattr(search, "unique_cover", lambda *a: None)  # (every cover to CP-SAT)
    monkeypatch.setattr(fuse_partition, "_PLANS", {})  # (searches of this process's earlier tests not reused)
    original = search.CoverModel
    search.CoverModel = Mirrored
    try:
        compile_program(os.path.join(ROOT, "examples", "bigfusion.kas"), None, "f32", compile_gpu=False,
                        planning=PlanningOptions(profile="h200"))
        compile_text(random_program(3, 60), "random.kas", None, "f64", compile_gpu=False,
                     planning=PlanningOptions(profile="cpu"))
    finally:
        search.CoverModel = original
    assert len(solves) >= 2
    code = ("import sys, irfuse; irfuse.compile(sys.argv[1], backend='cpu', pipeline=None); "
            "print('pandas' in sys.modules, 'ortools.sat.python.cp_model_helper' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code, os.path.join(ROOT, "examples", "synctest.kas")],
                         capture_output=True, text=True, cwd=ROOT, env={**os.environ, "IRFUSE_CACHE_DIR": str(tmp_path)})
    assert out.returncode == 0 and out.stdout.strip() == "False False", out.stderr


def test_the_exact_cover_search_finds_the_one_cheapest_cover_or_says_there_is_none():
    """`cover_exact.unique_cover` against every exact cover listed: on 400 random instances
    (up to 7 calls, up to 13 groups, weights from a few values so that ties are common, half of
    them near 10^12 with covers a unit apart) it returns the cheapest cover where exactly one is
    cheapest and None where two or more share the least total; a group of no call leaves the
    instance to CP-SAT."""
    import itertools
    import random

    from irfuse.planner.cover_exact import unique_cover

    rng = random.Random(7)
    unique = tied = 0
    for case in range(400):
        calls = list(range(20, 20 + rng.randint(1, 7)))
        groups = [(c,) for c in calls] + [tuple(rng.sample(calls, rng.randint(1, len(calls))))
                                          for _ in range(rng.randint(0, 6))]
        # (every other case at the scale of long kernels' weights, covers a unit apart)
        scale = 1 if case % 2 else 10**12
        weights = [rng.choice((3, 4, 5, 6)) * len(g) * scale + rng.choice((0, 1)) for g in groups]
        totals = {}
        for chosen in itertools.chain.from_iterable(itertools.combinations(range(len(groups)), r)
                                                    for r in range(1, len(calls) + 1)):
            if sorted(c for i in chosen for c in groups[i]) == calls:
                totals[chosen] = sum(weights[i] for i in chosen)
        least = min(totals.values())
        best = [list(chosen) for chosen, total in totals.items() if total == least]
        answer = unique_cover(calls, groups, weights)
        assert answer == (best[0] if len(best) == 1 else None), (calls, groups, weights)
        unique += len(best) == 1
        tied += len(best) > 1
    assert unique > 100 and tied > 40
    assert unique_cover([1, 2], [(1, 2), (7,)], [5, 1]) is None
    # Two whole covers tied first, then the one cheaper by a unit at 10^12: a bound rounded in
    # floats pruned it (an earlier form answered None here); the integer bound finds it.
    big = 10**12
    assert unique_cover([0, 1, 2], [(0,), (1,), (2,), (2, 1, 0), (1, 0, 2), (1, 2)],
                        [4 * big + 1, 5 * big, 5 * big + 2, 12 * big + 2, 12 * big + 2, 8 * big]) == [0, 5]
    # A thousand calls covered one by one, from deep in a compile's stack: left to CP-SAT (its
    # recursion stops at `DEPTH` kernels), not a RecursionError; 150 are answered.

    def deep(k, f):
        return f() if k == 0 else deep(k - 1, f)

    calls = list(range(1000))
    assert deep(150, lambda: unique_cover(calls, [(c,) for c in calls], [10 + c for c in calls])) is None
    assert unique_cover(calls[:150], [(c,) for c in calls[:150]], [10 + c for c in calls[:150]]) == list(range(150))


def test_a_cover_found_without_cp_sat_is_the_one_cp_sat_finds(monkeypatch):
    """Every cover the exact search answers (examples, a mesh example and random programs,
    under a GPU's profile and the CPU's) is the very plan CP-SAT finds for the same
    configurations, and it answers most of them. (The emitted sources of 218 compiles, J2's
    Jacobian and programs with loops among them, were the same to the byte both ways:
    benchmarks/NOTES.md, Compiling, 2026-12-02.)"""
    import irfuse.planner.search as search
    from irfuse.driver.compile import PlanningOptions, compile_text
    from irfuse.passes import fuse_partition
    from irfuse.testing.random_programs import random_program

    real_cover, real_unique = search.solve_cover, search.unique_cover
    asked = []  # (whether the exact search answered, cover by cover)

    def both(dags, configs, top, *rest):
        plans = real_cover(dags, configs, top, *rest)
        monkeypatch.setattr(search, "unique_cover", lambda *a: None)
        given = real_cover(dags, configs, top, *rest)
        monkeypatch.setattr(search, "unique_cover", recording)
        assert [[id(c) for c in p.configs] for p in plans] == [[id(c) for c in p.configs] for p in given]
        assert [p.predicted_time for p in plans] == [p.predicted_time for p in given]
        return plans

    def recording(*a):
        found = real_unique(*a)
        asked.append(found is not None)
        return found

    monkeypatch.setattr(search, "solve_cover", both)
    monkeypatch.setattr(search, "unique_cover", recording)
    monkeypatch.setattr(fuse_partition, "_PLANS", {})  # (searches of this process's earlier tests not reused)
    sources = [(name, open(os.path.join(ROOT, "examples", name)).read())
               for name in ("synctest.kas", "neo_hookean.kas", "strain_energy.kas", "mesh/p1_residual.kas")]
    sources += [(f"random{seed}", random_program(seed, 30, loops=False, dense=seed % 2 == 0)) for seed in range(3)]
    for (name, text), profile in itertools.product(sources, ("h100", "cpu")):
        compile_text(text, name, None, "f32", compile_gpu=False, planning=PlanningOptions(profile=profile))
    assert len(asked) >= 2 * len(sources) and sum(asked) >= 0.8 * len(asked)


def test_the_register_estimate_counts_the_words_a_thread_holds_of_a_value_spread_over_threads():
    """A 5x4x4 value made and read by line calls (16 threads an element, `fuse-promote-registers/
    line.mlir`) is 5 words in each thread's registers, not its 80 words (nor the 65 its emitted
    array spans): the estimate the cost model plans with counts those 5."""
    from irfuse.dialects.context import parse_module
    from irfuse.kernel.bridge import model_from_kernel
    from irfuse.planner.cost import estimate_registers, thread_words
    from irfuse.transforms.promotion import promote_registers

    text = open(os.path.join(ROOT, "tests", "filecheck", "fuse-promote-registers", "line.mlir")).read()
    (kernel,) = [op for op in parse_module(text).walk() if op.name == "fuse.kernel"]
    model = promote_registers(model_from_kernel(kernel, 8)[0])
    words = thread_words(model)
    assert list(words.values()) == [5] and model.values[next(iter(words))].size == 80
    assert estimate_registers(model) < 24 + 80


@pytest.mark.parametrize("name, dtype, profile", [("cfl_step.kas", "f32", "h100"), ("power_iteration.kas", "f64", "h200"),
                                                  ("p1_residual.kas", "f32", "h100"),
                                                  ("synctest.kas", "f32", "cpu")])
def test_a_configurations_cost_with_its_barriers_is_the_cost_model_s_price_of_it(monkeypatch, name, dtype, profile):
    """The search prices an analysed configuration once its barriers are placed from its price
    without them (`cost.cost_with_barriers`, the barrier term alone recomputed): for every
    configuration the searches of a reduction, a loop, a mesh and a CPU plan analyse, the same
    `KernelCost` as `kernel_cost` walking the kernel again, barriers counted in loops too."""
    from irfuse.driver import compile as driver
    from irfuse.passes import fuse_partition
    from irfuse.planner import cost, search

    monkeypatch.setattr(fuse_partition, "_PLANS", {})  # (searches of this process's earlier tests not reused)
    asked, compared = {}, []

    def bound_cost(model, n, p, sizes, *rest):
        asked["sizes"] = sizes
        return cost.kernel_cost(model, n, p, sizes, *rest)

    def with_barriers(priced, model, n, p):
        got = cost.cost_with_barriers(priced, model, n, p)
        compared.append((got, cost.kernel_cost(model, n, p, asked["sizes"]), cost.barrier_runs(model)))
        return got

    monkeypatch.setattr(search, "kernel_cost", bound_cost)
    monkeypatch.setattr(search, "cost_with_barriers", with_barriers)
    # (the mesh's one kernel at its floor would end its search at that kernel: groups analysed too)
    monkeypatch.setattr(search, "FLOOR_MARGIN", 0.0)
    path = next(p for p in EXAMPLES + glob.glob(os.path.join(ROOT, "examples", "mesh", "*.kas")) if p.endswith(name))
    driver.compile_program(path, None, dtype, compile_gpu=False, planning=driver.PlanningOptions(profile=profile))
    assert len(compared) > 10 and all(got == full for got, full, _ in compared)
    if profile != "cpu":
        assert any(runs and got.t_sync > 0 for got, _, runs in compared)


@pytest.mark.parametrize("blocks, threads, most, steps", [
    (10, 128, None, [8, 4, 2, 1]), (8, 128, None, [4, 2, 1]), (16, 64, None, [8, 4, 2, 1]),
    (8, 128, 5, [5, 4, 2, 1]), (10, 128, 5, [8, 5, 4, 2, 1]), (8, 128, 3, [4, 3, 2, 1]), (12, 128, 9, [9, 8, 4, 2, 1]),
    (8, 128, 8, [4, 2, 1]), (8, 128, 200, [4, 2, 1]), (8, 128, 1, [4, 2, 1]), (16, 64, 12, [12, 8, 4, 2, 1]),
])
def test_a_spilling_kernel_is_next_asked_for_the_blocks_its_shared_memory_holds(blocks, threads, most, steps):
    """The steps to fewer resident blocks: 1024 threads an SM, then half as many; where the
    kernel's shared memory holds a number of blocks an SM between two steps, that number comes
    between them (more registers for blocks that could never be resident buy nothing)."""
    from irfuse.driver.compile import _fewer_blocks

    assert _fewer_blocks(blocks, threads, most) == steps


@pytest.mark.parametrize("blocks, threads, most, steps", [
    (5, 196, 7, [4, 3, 2, 1]), (5, 200, 4, [4, 3, 2, 1]), (10, 100, 6, [9, 8, 7, 6, 5, 4, 3, 2, 1]),
    (2, 196, 2, [1]), (1, 256, 1, []), (12, 64, None, [11, 10, 9, 8, 7, 6, 5, 4, 3, 2, 1]),
    (20, 64, 3, list(range(16, 0, -1))),
])
def test_a_kernel_spreading_an_element_over_threads_steps_one_block_at_a_time(blocks, threads, most, steps):
    """A kernel of several threads an element (BX > 1) runs a few large blocks an SM, where
    halving them halves its warps: it is asked one block fewer each time, from 1024 threads an
    SM or the blocks asked (BP1 at order 5 in float64: five blocks of 196 threads spilled 56
    bytes, four spill 32 and are kept, where halving asked two). Steps above what its shared
    memory holds stay: the registers at such a step tell whether the shared memory bounds the
    kernel (`driver.reader_loads`)."""
    from irfuse.driver.compile import _fewer_blocks

    assert _fewer_blocks(blocks, threads, most, by_one=True) == steps


# Two chains of the same calls on inputs of the same shapes: each group of one chain has a
# twin of the same structure in the other (as an element routine's unrolled quadrature points).
TWIN_CHAINS = """matrix3x3 X, Y, A, B, C, D, E; input X, Y;
A = mtrans33(X); B = mmul33(A, X); C = mtrans33(Y); D = mmul33(C, Y); E = madd33(B, D); return E;"""


@pytest.mark.parametrize("name, itemsize", [("TWIN_CHAINS", 4), ("hex8.kas", 8)])
def test_configurations_of_one_structure_are_analysed_once(monkeypatch, name, itemsize):
    """The search analyses a configuration once for every group of the same structure
    (`kernel.model.structure`: the models differ only in names and locations), each still
    counting against the budget: the configurations, their costs and models' signatures and
    the plans are those of a search analysing every group afresh, with fewer analyses."""
    import irfuse.planner.search as search
    from irfuse.planner.registers import signature

    p = example_program(name)
    runs = []
    real_optimize = search.optimize
    monkeypatch.setattr(search, "optimize", lambda *a, **k: runs.append(1) or real_optimize(*a, **k))

    def search_with(group_configs):
        monkeypatch.setattr(search, "group_configs", group_configs)
        runs.clear()
        dags, configs, notes = search.candidate_configs(p, 1 << 22, H100, itemsize, 8, keep=2)
        _, plans = plan_program(p, 1 << 22, H100, itemsize, 8, top=2)
        return ([(c.dag, c.group, c.by, c.cost, signature(c.model)) for c in configs], notes,
                [([(c.dag, c.group, c.by) for c in plan.configs], plan.predicted_time) for plan in plans]), len(runs)

    real = search.group_configs
    shared, fewer = search_with(real)
    alone, every = search_with(lambda *a, **k: real(*a, **{**k, "analyses": None}))
    assert shared == alone
    assert fewer < every, (fewer, every)


def test_a_model_s_structure_holds_every_field_but_names_and_locations():
    """`kernel.model.structure` is the search's memo key: a field of the model, of a value or of
    an op that it left out would let two configurations the in-kernel steps treat differently
    share one analysis. Each field changed in turn changes the key, but a value's name and an
    op's source location (read by diagnostics alone); a field added to the model must be
    added to the key, or named here as one the steps do not read."""
    import dataclasses

    from irfuse.kernel.model import KernelModel, MOp, MValue, structure

    p = program(TWIN_CHAINS)
    dag = block_dag(p.body.block)
    ops = [dag.ops[i] for i in dag.calls]
    impls = [find_implementation(call.op_name, "elem") for call in ops]
    inputs, outputs = external_values(dag, tuple(dag.calls))
    model = build_kernel_model(ops, impls, inputs, outputs, 64, 4)
    key = structure(model)
    ignored = {(MValue, "name"), (MValue, "id"), (MOp, "location")}

    def other(value):
        """A field's new value: of its own type, and not the one it has."""
        if isinstance(value, bool):
            return not value
        if isinstance(value, int):
            return value + 7
        if isinstance(value, str):
            return value + "x"
        if isinstance(value, list):
            return [*value, 99]
        return None

    def changed(twin, owner, field, value):
        setattr(owner, field, value)
        return structure(twin) != key

    for cls, owners in ((KernelModel, lambda m: [m]), (MValue, lambda m: list(m.values.values())),
                        (MOp, lambda m: m.ops)):
        for f in dataclasses.fields(cls):
            if (cls, f.name) in ignored or f.name in ("values", "ops"):
                continue
            twin = model.copy()
            owner = next((o for o in owners(twin) if getattr(o, f.name) is not None), owners(twin)[0])
            new = other(getattr(owner, f.name))
            if f.name == "kind":
                new = next(k for k in type(owner.kind) if k != owner.kind)
            elif f.name == "impl":
                new = find_implementation("madd33", "elem") if owner.impl.op.name != "madd33" else impls[0]
            elif f.name == "type":
                new = object()  # (another kas type: any other value)
            elif f.name == "layout":
                new = "soa"
            assert new is not None, (cls.__name__, f.name)
            assert changed(twin, owner, f.name, new), (cls.__name__, f.name)
    for cls, field in ignored - {(MValue, "id")}:
        twin = model.copy()
        owner = (twin.ops if cls is MOp else list(twin.values.values()))[0]
        setattr(owner, field, "elsewhere")
        assert structure(twin) == key, field
