"""Every example through the whole pipeline, executed on the CPU from the generated CUDA C."""

import os

import numpy as np
import pytest
from conftest import EXAMPLES

from irfuse.dialects import fuse
from irfuse.driver.compile import SPILL_BYTES_KEPT, build, compile_program
from irfuse.runtime.executor import CpuDevice, Executor
from irfuse.verification.reference import (
    DTYPES,
    random_inputs,
    run_reference,
    run_references,
)
from irfuse.verification.verify import check_outputs

_plans = {}


def plan_for(path, dtype, pipeline=None):
    """The plan (compiled for sm_90 too where it is the default pipeline's) and its CPU device."""
    key = (path, dtype, pipeline)
    if key not in _plans:
        plan, _ = compile_program(path, pipeline, dtype, compile_gpu=pipeline is None, arch="sm_90")
        _plans[key] = (plan, CpuDevice(plan))
    return _plans[key]


def run_and_check(path, dtype, n, pipeline=None, seed=0):
    plan, dev = plan_for(path, dtype, pipeline)
    inputs = random_inputs(plan.reference_program, n, seed, DTYPES[dtype])
    got = Executor(plan, dev).run(inputs, n).outputs
    want = run_references(plan.reference_program, inputs, dtype)
    checks = check_outputs(got, want, dtype)
    assert all(c.ok for c in checks), [c.describe() for c in checks]
    return got, want.float64


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_compiles_for_sm90_within_the_spills_kept_and_matches_the_reference(path, dtype):
    """Every example's default plan, planned once for both checks: NVRTC compiles it for sm_90
    (as CI can without a GPU) spilling at most `SPILL_BYTES_KEPT`, the ptxas report naming every kernel and its
    shared memory; and the CPU backend runs it to the reference's results at 1, 97 and 1,000
    elements (float32) or 97 (float64)."""
    plan, _ = plan_for(path, dtype)
    assert plan.cubin.arch == "sm_90"
    assert plan.cubin.cubin[:4] == b"\x7fELF"
    assert set(plan.cubin.resources) == {k.name for k in plan.kernels}
    for k in plan.kernels:
        r = plan.cubin.resources[k.name]
        assert 0 < r.registers <= 255
        # (a word or two spilled is kept where the resident blocks would halve for it: `build`)
        assert r.spill_stores + r.spill_loads <= SPILL_BYTES_KEPT and r.stack_bytes <= SPILL_BYTES_KEPT, (k.name, r)
        # float32 kernels keep 1024 threads an SM (at most 64 registers), but for the one
        # thread of a kernel over one element and hex8's loop of 85 calls (128 registers, known):
        # a kernel that spills there is re-emitted with fewer threads an SM, which is slower where
        # bytes bound it (promoting a value read whole and in part to registers did that to
        # neo_hookean's, 63 -> 116 registers: see transforms.promotion).
        if dtype == "f32" and k.threads > 1 and not k.name.startswith("hex8_k0"):
            assert k.threads * k.min_blocks >= 1024, (k.name, k.threads, k.min_blocks, r.registers)
        # Static shared memory is what ptxas reports: the planned buffer and the arrays apart
        # from it (uniform inputs' block copies, reductions' staging), 16-byte aligned; above
        # 48 KB together they are all taken at launch.
        assert (k.total_shared_bytes(plan.itemsize) > 48 * 1024) == k.dynamic_shared
        assert r.shared_bytes == k.static_shared_bytes(plan.itemsize), (k.name, r)
    for n in (1, 97, 1000) if dtype == "f32" else (97,):
        got, want = run_and_check(path, dtype, n)
        assert all(got[name].dtype == DTYPES[dtype] for name in want)


@pytest.mark.parametrize("variant", ["fuse-promote-registers{inputs=true outputs=true}",
                                     "fuse-allocate-shared{pad-banks=false}"])
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_matches_reference_through_pass_variants(path, variant):
    """The non-default pass options emit correct kernels too (loads and stores from registers;
    unpadded shared values)."""
    from irfuse.passes.registry import DEFAULT_PIPELINE

    name = variant.split("{")[0]
    run_and_check(path, "f32", 97, DEFAULT_PIPELINE.replace(name, variant, 1))


@pytest.mark.parametrize("n", [63, 64, 65, 129])
def test_tail_blocks(n):
    # by=64: exactly one block, one element short, one over, two blocks and one element.
    path = next(p for p in EXAMPLES if p.endswith("stvenant.kas"))
    run_and_check(path, "f32", n, pipeline="kas-dce,fuse-each{by=64}")


def test_nan_and_infinity_propagate_like_the_reference():
    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))
    plan, dev = plan_for(path, "f32")
    inputs = random_inputs(plan.reference_program, 10, 0, np.float32)
    inputs["A"][3, 1, 1] = np.nan
    inputs["A"][5, 0, 0] = np.inf
    got = Executor(plan, dev).run(inputs, 10).outputs["F"]
    want = run_reference(plan.reference_program, inputs)["F"]
    assert np.isnan(got[3, 1, 1]) and np.isinf(got[5, 0, 0])
    assert all(c.ok for c in check_outputs({"F": got}, {"F": want}, "f32"))


def test_shared_memory_no_thread_wrote_reads_as_nan_in_every_block(emulated_gpu):
    """Shared memory is filled with NaN before every block: a kernel whose load into shared
    memory is missing gives NaN in every element, also in blocks after the first (which
    would otherwise read the previous block's words)."""
    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))
    plan, _ = compile_program(path, None, "f32", compile_gpu=False)
    assert len(plan.kernels) == 1 and plan.kernels[0].by < 200
    lines = plan.source.splitlines()
    loads = [i for i, line in enumerate(lines) if "irf_load_async16(smem" in line]
    assert len(loads) == 2  # one in the GPU kernel, one in its host function
    del lines[loads[1]]
    plan.source = "\n".join(lines) + "\n"
    inputs = random_inputs(plan.reference_program, 200, 0, np.float32)
    got = Executor(plan, CpuDevice(plan)).run(inputs, 200).outputs
    assert np.isnan(got["F"]).all()


def _without_barrier(module, k: int):
    """A copy of lowered `module` with its k-th barrier deleted, built for the CPU."""
    clone = module.clone()
    victim = [op for op in clone.walk() if isinstance(op, fuse.BarrierOp)][k]
    victim.detach()
    victim.erase()
    return build(clone, compile_gpu=False)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_every_deleted_barrier_changes_the_cpu_results(path, emulated_gpu):
    """The CPU backend keeps barriers exact: a region's threads all finish before the next
    region starts, in a given order. Deleting any barrier of any example lets a thread read
    a word another thread has not written yet (NaN, shared memory being poisoned) or has
    already overwritten, in the forward or the reverse thread order."""
    intact, _ = plan_for(path, "f32")  # (the default plan, shared with the tests above)
    module = intact.module
    count = sum(isinstance(op, fuse.BarrierOp) for op in module.walk())
    assert count
    n = 300
    program = intact.reference_program
    inputs = random_inputs(program, n, 0, np.float32)
    want = run_references(program, inputs, "f32")  # (a sum over the batch rounds in its own order)
    for k in range(count):
        plan = _without_barrier(module, k)
        wrong = []
        for reverse in (False, True):
            got = Executor(plan, CpuDevice(plan, reverse_threads=reverse)).run(inputs, n).outputs
            wrong.append(not all(c.ok for c in check_outputs(got, want, "f32")))
        assert any(wrong), f"barrier {k} of {count} deleted, and the results are still right"
    for reverse in (False, True):
        got = Executor(intact, CpuDevice(intact, reverse_threads=reverse)).run(inputs, n).outputs
        assert all(c.ok for c in check_outputs(got, want, "f32"))


def test_results_do_not_depend_on_worker_threads_or_thread_order(monkeypatch):
    """Blocks are independent and every region's threads finish before the next region: any
    number of worker threads and either thread order give the same bits."""
    path = next(p for p in EXAMPLES if p.endswith("bigfusion.kas"))
    plan, _ = compile_program(path, None, "f32", compile_gpu=False)
    n = 40 * plan.kernels[0].by + 5  # 41 blocks, the last one short
    inputs = random_inputs(plan.reference_program, n, 3, np.float32)
    results = []
    for threads in ("1", "2", "3", "7"):
        monkeypatch.setenv("IRFUSE_CPU_THREADS", threads)
        for reverse in (False, True):
            results.append(Executor(plan, CpuDevice(plan, reverse_threads=reverse)).run(inputs, n).outputs["F"])
    assert not np.isnan(results[0]).any()
    for r in results[1:]:
        np.testing.assert_array_equal(r, results[0])


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5"])
def test_a_bad_worker_thread_count_is_refused(monkeypatch, value):
    from irfuse.diagnostics import UsageError

    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))
    plan, _ = plan_for(path, "f32")
    monkeypatch.setenv("IRFUSE_CPU_THREADS", value)
    with pytest.raises(UsageError, match=f"IRFUSE_CPU_THREADS must be a positive whole number of threads, not '{value}'"):
        CpuDevice(plan)


LOOPS = """
matrix3x3 R, Q, T, S; vector3 x, v;
input R, Q, x;
loop 3 {
  T = mmul33(R, Q);
  Q = madd33(R, Q);
  R = madd33(T, Q);
  loop 2 { S = mmul33(R, R); R = madd33(S, Q); }
  v = mvmul33(R, x);
  x = mvmul33(Q, v);
}
return R, Q, x, v;
"""


def test_loop_carried_values_through_every_plan(tmp_path):
    """Loop-carried values trade buffers with the values the body's kernels yield instead of
    being copied (values an inner loop yields are still copied): with two values carried by
    the outer loop and one by the inner loop, every plan of the search agrees with the
    reference, in both thread orders."""
    from conftest import check_top_plans_on_cpu

    path = tmp_path / "loops.kas"
    path.write_text(LOOPS)
    assert check_top_plans_on_cpu(str(path), 6, "f32", 300) >= 3
    plan, _ = compile_program(str(path), None, "f32", compile_gpu=False)
    inputs = random_inputs(plan.reference_program, 300, 1, np.float32)
    want = run_references(plan.reference_program, inputs, "f32")
    for reverse in (False, True):
        got = Executor(plan, CpuDevice(plan, reverse_threads=reverse)).run(inputs, 300).outputs
        assert all(c.ok for c in check_outputs(got, want, "f32"))


def _both_renderings(plan, n: int, seed: int):
    """The plan's outputs from the CPU twin (IRFUSE_CPU_RENDERER=emulate) and from its
    kernels as loops over elements (`render_cpu_loop`, the default)."""
    from irfuse.driver.binaries import with_cpu_rendering

    twin_plan, looped = with_cpu_rendering(plan, "emulate"), with_cpu_rendering(plan, "loop")
    inputs = random_inputs(plan.reference_program, n, seed, DTYPES[plan.element.name])
    twin = Executor(twin_plan, CpuDevice(twin_plan)).run(inputs, n).outputs
    loop = Executor(looped, CpuDevice(looped)).run(inputs, n).outputs
    return twin, loop, inputs


LOOP_EXAMPLES = [("bigfusion_bench.kas", "f32"), ("synctest.kas", "f64"), ("stvenant.kas", "f32"),
                 ("stvenant_inner.kas", "f32"), ("power_iteration.kas", "f64"), ("cfl_step.kas", "f32"),
                 ("precession.kas", "f64"), ("transform44.kas", "f32")]


@pytest.mark.parametrize("name, dtype", LOOP_EXAMPLES)
def test_kernels_as_loops_over_elements_give_the_twins_bits(name, dtype):
    """Examples with the loop renderer (each a host library more to build: the seed
    workloads, loops, a reduction, uniform values): the twin's bits (the same implementations
    in the same order), on a batch ending in a partial block; the five seed workloads'
    kernels are all rendered as loops (they are one thread an element), others where it takes
    them."""
    path = next(p for p in EXAMPLES if os.path.basename(p) == name)
    plan, _ = plan_for(path, dtype)
    twin, loop, _ = _both_renderings(plan, 300, 7)
    for name in twin:
        assert twin[name].tobytes() == loop[name].tobytes(), name
    seeds = ("bigfusion_bench", "synctest", "stvenant", "stvenant_inner", "power_iteration")
    if os.path.basename(path)[:-4] in seeds:
        assert plan.source.count("defined(IRFUSE_CPU_LOOP)") == len(plan.kernels)


UNIFORM_OPERANDS = """
uniform matrix3x3 R;
matrix3x3 A, B, C;
input A, R;
B = mmul33(R, A);
C = mmul33(A, R);
C = madd33(C, B);
return B, C;
"""


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("source", ["strain_energy.kas", "uniform operands"])
def test_uniform_words_made_once_per_launch_give_the_twins_bits(source, dtype, tmp_path):
    """Calls with a uniform operand take its words in vectors made before the loop over blocks
    (`render_uniform_vectors`: the stiffness times each strain; a uniform matrix on either side
    of a product, whose lanes read different words of the element's matrix): every output the
    twin's bits, on a batch ending in a partial block."""
    if source.endswith(".kas"):
        path = next(p for p in EXAMPLES if os.path.basename(p) == source)
    else:
        path = tmp_path / "uniform.kas"
        path.write_text(UNIFORM_OPERANDS)
    plan, _ = plan_for(str(path), dtype)
    hoisted = plan.source.count("_hoisted(irf_h")
    assert hoisted == (1 if source.endswith(".kas") else 2)
    twin, loop, _ = _both_renderings(plan, 300, 11)
    for name in twin:
        assert twin[name].tobytes() == loop[name].tobytes(), name


def test_a_hoisted_form_called_from_several_kernels_is_defined_once(tmp_path):
    """Each op its own kernel (`fuse-each`): the two products by the uniform matrix call one
    hoisted form from two loop renderings of one source: each rendering carries its definition
    under a guard, so the host build sees one (it rejected the second before the guard)."""
    path = tmp_path / "twice.kas"
    path.write_text(UNIFORM_OPERANDS.replace("C = mmul33(A, R);", "C = mmul33(R, B);"))
    plan, _ = plan_for(str(path), "f32", "kas-dce,fuse-each")
    assert len(plan.kernels) == 3 and plan.source.count("_hoisted(irf_h") == 2
    assert plan.source.count("#ifndef IRF_DEFINED_irf_mmul33_elem_uss_hoisted") == 2
    twin, loop, _ = _both_renderings(plan, 300, 5)
    for name in twin:
        assert twin[name].tobytes() == loop[name].tobytes(), name


def test_an_unknown_cpu_rendering_is_refused_by_name(monkeypatch):
    from irfuse.backend.host_compile import cpu_renderer_flags
    from irfuse.diagnostics import UsageError

    monkeypatch.setenv("IRFUSE_CPU_RENDERER", "vector")
    with pytest.raises(UsageError, match="IRFUSE_CPU_RENDERER='vector'.*'emulate', 'loop'"):
        cpu_renderer_flags()
    monkeypatch.delenv("IRFUSE_CPU_RENDERER")
    assert cpu_renderer_flags() == ["-DIRFUSE_CPU_LOOP"] and cpu_renderer_flags("emulate") == []
    monkeypatch.setenv("IRFUSE_CPU_RENDERER", "emulate")
    assert cpu_renderer_flags() == []


def test_the_loop_renderer_overrides_only_the_emitters_named_hooks():
    """The CPU's loop over elements is the emitter's walk with other statements: of
    `KernelEmitter`'s methods it overrides only those `RENDERER_HOOKS` names (the interface the
    renderers share), and every name there is a method of the emitter."""
    from irfuse.backend.cuda_emit import RENDERER_HOOKS, KernelEmitter
    from irfuse.backend.render_cpu_loop import ElementLoopEmitter

    overridden = {name for name, f in vars(ElementLoopEmitter).items()
                  if callable(f) and name != "__init__" and hasattr(KernelEmitter, name)}
    assert overridden and overridden <= RENDERER_HOOKS, overridden - RENDERER_HOOKS
    assert all(callable(getattr(KernelEmitter, name, None)) for name in RENDERER_HOOKS)


def test_a_kernels_emission_walks_its_ops_once_for_every_values_register_pattern(monkeypatch):
    """The emitters ask every value's register pattern of one `Patterns` a kernel (one walk of
    its ops), and the CPU renderer reads each region's words once: asked anew for each value,
    a 2,000-call program took 38 s to emit, quadratic in its ops. Counted, not timed: the
    patterns made for a 300-call program's kernels, whatever their values."""
    import irfuse.kernel.model as model
    from irfuse.backend.cuda_emit import emit_module
    from irfuse.dialects.element_types import module_element_type
    from irfuse.driver.compile import compile_text, cpu_loop_kernel
    from irfuse.testing.random_programs import random_program

    plan, _ = compile_text(random_program(3, 300, loops=True), "wide.kas", compile_gpu=False)
    made, real = [], model.Patterns.__init__

    def counted(self, m):
        made.append(len(m.ops))
        real(self, m)
    monkeypatch.setattr(model.Patterns, "__init__", counted)
    emitted = emit_module(plan.module, module_element_type(plan.module), {}, cpu_loop=cpu_loop_kernel)
    values = sum(len(op.results) for op in plan.module.walk())
    assert values > 300 and 1 <= len(made) <= 2 * len(emitted.kernels)  # (the CUDA emitter's, the CPU loop's)
