"""GPU-only: every example on the real device at N = 4194304 and with tails, and the Python API on
GPU arrays. Skipped without a GPU."""

import os
import re

import numpy as np
import pytest

from conftest import EXAMPLES, recorded, requires_gpu

pytestmark = requires_gpu


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_on_gpu(path, dtype):
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import DTYPES, random_inputs, run_references, uniform_names
    from irfuse.verification.verify import check_outputs, subset, verified_elements

    plan, _ = compile_program(path, None, dtype)
    whole = uniform_names(plan.reference_program)  # no batch axis
    # A program with loops is checked on a seeded sample of 100,000 elements at the large size,
    # as `irfuse run` does: its reference runs every iteration several times (the allowance).
    looped = "kas.loop" in str(plan.reference_program)
    dev = CudaDevice(plan)
    try:
        for n in (1, 97, 4_194_304 if dtype == "f32" else 1_000_003):
            inputs = random_inputs(plan.reference_program, n, n, DTYPES[dtype])
            got = Executor(plan, dev).run(inputs, n).outputs
            index = verified_elements(plan.reference_program, n, "sample" if looped else "all")
            if index is not None:
                inputs, got = subset(inputs, index, whole), subset(got, index, whole)
            want = run_references(plan.reference_program, inputs, dtype, len(index), plan.sum_by)
            checks = check_outputs(got, want, dtype)
            assert all(c.ok for c in checks), [c.describe() for c in checks]
    finally:
        dev.close()


def test_batch_over_two_to_the_31_floats():
    """64-bit offsets: synctest on 2^31/9 + 4097 elements, checked at both ends of the batch."""
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor

    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))
    plan, _ = compile_program(path, None, "f32")
    n = 2**31 // 9 + 4097
    assert n * 9 > 2**31
    a = np.random.default_rng(0).random((n, 3, 3), dtype=np.float32)
    dev = CudaDevice(plan)
    try:
        got = Executor(plan, dev).run({"A": a}, n).outputs["F"]
    finally:
        dev.close()
    for sl in (slice(0, 4096), slice(n - 4096, n)):
        want = 5 * a[sl].astype(np.float64)  # F = A + (A + (A + (A + A)))
        np.testing.assert_allclose(got[sl], want, rtol=1e-6)
    assert not np.isnan(got).any()


def test_a_run_is_one_cuda_graph_that_computes_what_the_launches_compute():
    """rotation_loop one op per kernel: the loop unrolls into launches (and the copy of R into
    the loop; between iterations R trades buffers instead), captured as one graph (one node
    per step) whose results equal those of the same steps launched one by one, bit for bit,
    over outputs poisoned before each replay."""
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.cuda_graph import CudaGraph
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import random_inputs, run_reference
    from irfuse.verification.verify import check_outputs

    path = next(p for p in EXAMPLES if p.endswith("rotation_loop.kas"))
    plan, _ = compile_program(path, "kas-dce,fuse-each", "f32")
    n = 100_003
    inputs = random_inputs(plan.reference_program, n, 3, np.float32)
    results = {}
    for graphs in (False, True):
        dev = CudaDevice(plan, graphs=graphs)
        try:
            rec = Executor(plan, dev).prepare(inputs, n)
            if graphs:
                # 4 iterations of 3 launches, then venorm3; R copied into the loop
                assert isinstance(rec.replay, CudaGraph) and rec.replay.nodes == 4 * 3 + 1 + 1
            for buf, shape in rec.results.values():
                dev.drv.memset_d8(buf, 0xFF, int(np.prod(shape)) * 4)
            rec.replay()
            results[graphs] = rec.outputs()
        finally:
            dev.close()
    assert all(c.ok for c in check_outputs(results[True], run_reference(plan.reference_program, inputs), "f32"))
    for name in results[False]:
        assert np.array_equal(results[True][name], results[False][name]), name


def test_calibrate_measures_and_saves_a_profile(tmp_path, monkeypatch):
    from rich.console import Console

    from irfuse.planner.cost import load_profile
    from irfuse.tools.calibrate import calibrate

    monkeypatch.setenv("IRFUSE_PROFILE_DIR", str(tmp_path))
    p = calibrate(Console(), save=True)
    assert 1e11 < p.bandwidth < 1e14 and 0 < p.launch_overhead < 1e-3 and p.sms > 0
    # Multiply-adds at tens of Tflop/s, float64 no faster than float32; an IEEE division,
    # reciprocal or square root is an instruction sequence, dearer than one multiply-add.
    assert 1e12 < p.fp64_flops <= p.fp32_flops < 1e15
    assert 2 < p.slow_op_flops < 200 and 2 < p.slow_op_flops_f64 < 200
    assert load_profile(p.name) == p  # found again by the GPU's name


def test_tune_on_gpu_times_verifies_and_saves_the_fastest(tmp_path):
    import json

    from test_cli import irfuse

    path = next(p for p in EXAMPLES if p.endswith("stvenant_inner.kas"))
    out, best = tmp_path / "t.json", tmp_path / "best"
    p = irfuse("tune", path, "--top", "3", "--n", str(1 << 20), "--repeat", "6", "--rounds", "2",
               "--json", str(out), "--save-best", str(best), "--plot", str(tmp_path / "t.png"))
    assert p.returncode == 0, p.stdout + p.stderr
    d = json.loads(out.read_text())
    assert d["backend"] == "cuda" and d["device"] and len(d["plans"]) == 3
    for r in d["plans"]:
        assert r["verified"] and len(r["times_s"]) == 6
        assert 1e-6 < r["measured_s"] < 1.0 and 0 <= r["spread"] < 1.0
    assert d["best"]["measured_s"] == min(r["measured_s"] for r in d["plans"])
    import importlib.util

    if importlib.util.find_spec("matplotlib"):
        assert (tmp_path / "t.png").read_bytes()[:4] == b"\x89PNG"
    p = irfuse("run", "--plan", str(best), "--n", str(1 << 20))
    assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr


def test_run_on_gpu_takes_uniform_scalars_and_sums_whole_rows():
    """`irfuse run --backend cuda` uploads a uniform scalar input as the scalar it is (its
    copy for the GPU once made it shaped (1,), refused by the call), and a loaded value
    summed over the batch and read in part by a call is summed whole (in registers it held
    the word its reader takes alone: fuzzer seed 98018). Both verified against NumPy."""
    from test_cli import irfuse

    cfl = next(p for p in EXAMPLES if p.endswith("cfl_step.kas"))
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    shrunk = os.path.join(root, "tests", "regressions", "random_seed98018_renderings.kas")
    for path, dtype in ((cfl, "f32"), (shrunk, "f64"), (shrunk, "f32")):
        p = irfuse("run", path, "--backend", "cuda", "--dtype", dtype, "--n", "4099", "--repeat", "1")
        assert p.returncode == 0 and "verified against the NumPy reference" in p.stdout, p.stdout + p.stderr


def _torch():
    return pytest.importorskip("torch")


def test_api_on_torch_tensors_in_place_on_the_callers_stream():
    """PyTorch CUDA tensors are read and written in place (outputs are new tensors, out=
    tensors are written), the call is ordered on the current torch stream, and nothing
    grows with the number of calls."""
    import irfuse
    from irfuse.verification.reference import random_inputs, run_references
    from irfuse.verification.verify import check_outputs

    torch = _torch()
    path = next(p for p in EXAMPLES if p.endswith("stvenant.kas"))
    prog = irfuse.compile(path, backend="cuda")
    n = 100_003
    host = random_inputs(prog.compiled.reference_program, n, 5, np.float32)
    args = {k: torch.from_numpy(v).cuda() for k, v in host.items()}
    before = {k: v.clone() for k, v in args.items()}
    out = prog(**args)
    assert all(isinstance(o, torch.Tensor) and o.is_cuda for o in out)
    got = {k: v.cpu().numpy() for k, v in out.items()}
    assert all(c.ok for c in check_outputs(got, run_references(prog.compiled.reference_program, host, "f32"), "f32"))
    assert all(torch.equal(args[k], before[k]) for k in args)  # inputs only read
    t3 = torch.empty_like(out.ten3help2)
    v3 = torch.empty_like(out.vec3nodestiff)
    again = prog(**args, out=(t3, v3))
    assert again.ten3help2.data_ptr() == t3.data_ptr() and torch.equal(t3, out.ten3help2)
    # The caller's stream: inputs produced by a torch kernel on a side stream, irfuse's call
    # and the read of its result queued on the same stream, no synchronization in between.
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        scaled = {k: v * 2 for k, v in args.items()}
        result = prog(**scaled).vec3nodestiff * 1
    side.synchronize()
    want = run_references(prog.compiled.reference_program, {k: v * 2 for k, v in host.items()}, "f32")
    assert all(c.ok for c in check_outputs({"vec3nodestiff": result.cpu().numpy()},
                                           {"vec3nodestiff": want.float64["vec3nodestiff"]}, "f32"))
    # Repeated calls: the same recorded run, no growth of torch's memory.
    for _ in range(10):
        prog(**args, out=(t3, v3))
    torch.cuda.synchronize()
    used = torch.cuda.memory_allocated()
    for _ in range(2000):
        prog(**args, out=(t3, v3))
    torch.cuda.synchronize()
    assert torch.cuda.memory_allocated() == used and len(prog._bound) == 1
    # The same arrays again and again: captured once into a graph, then replayed; two sets of
    # arrays in turn (ping-pong): two graphs, each giving its own results.
    assert len(prog._bound[("gpu", n)].graphs) == 1
    t3b, v3b = torch.empty_like(t3), torch.empty_like(v3)
    for _ in range(3):
        prog(**args, out=(t3b, v3b))
        prog(**scaled, out=(t3, v3))
    torch.cuda.synchronize()
    assert len(prog._bound[("gpu", n)].graphs) == 3
    assert torch.equal(t3b, out.ten3help2) and torch.equal(v3, result)
    # The same tensor objects again: the fast path launches the graph, reading the inputs'
    # current values; another tensor (or a changed one) goes the full way.
    ordered = [args[k] for k in prog.inputs]
    for _ in range(3):
        again = prog(*ordered, out=(t3, v3))
    assert prog._fast is not None and again.ten3help2 is t3
    ordered[3].mul_(2)  # mat33help1, in place: same address
    prog(*ordered, out=(t3, v3))
    torch.cuda.synchronize()
    assert torch.equal(v3, 2 * out.vec3nodestiff)  # (2 M1) phi w: doubling is exact
    ordered[3].div_(2)
    fresh = ordered[3].clone()
    prog(*ordered[:3], fresh, ordered[4], out=(t3, v3))
    torch.cuda.synchronize()
    assert torch.equal(t3, out.ten3help2)


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_calls_back_to_back_are_dependent_launches_that_see_the_previous_calls_writes(layout, monkeypatch):
    """On sm_90 and newer, a call issued while the program's previous call still runs is a
    programmatic dependent launch, whose kernel waits for the previous kernel's writes: a chain
    of calls each reading what the one before wrote (two arrays in turn) gives, bit for bit,
    what NumPy and the same calls one at a time give."""
    import irfuse
    from irfuse.runtime import dependent_launch

    torch = _torch()
    dependent = []
    launch = dependent_launch.DependentLaunch.launch_on
    monkeypatch.setattr(dependent_launch.DependentLaunch, "launch_on",
                        lambda self, handle: (dependent.append(handle), launch(self, handle)))
    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))  # F = A + (A + (A + (A + A)))
    prog = irfuse.compile(path, backend="cuda", layout=layout)
    # 1.2 GB a call: 360 us at least on an H100, 250 on an H200, well above a call's host
    # time on the full path (these calls alternate between two pairs of arrays).
    n, steps = 16_777_216, 8
    shape = (n, 3, 3) if layout == "aos" else (3, 3, n)
    a = np.random.default_rng(7).random(shape, dtype=np.float32)
    want = a.copy()
    for _ in range(steps):
        want = want + (want + (want + (want + want)))

    first, second = torch.empty(shape, device="cuda"), torch.empty(shape, device="cuda")

    def chain(one_at_a_time: bool):
        first.copy_(torch.from_numpy(a))
        x, y = first, second
        for _ in range(steps):
            prog(x, out=y)
            if one_at_a_time:
                torch.cuda.synchronize()
            x, y = y, x
        torch.cuda.synchronize()
        return x.cpu().numpy()

    one_by_one = chain(True)
    assert dependent == []  # never while the previous call may have finished
    back_to_back = chain(False)
    # (the program may be one an earlier test compiled and ran in chunks: its run on these n)
    assert len(prog._bound[("gpu", n)].graphs) == 2
    if torch.cuda.get_device_capability() >= (9, 0):
        # Every call a captured graph by now (the same two arrays): after the first, each is
        # issued while the one before certainly runs.
        assert len(dependent) >= steps // 2, f"{len(dependent)} of {steps} calls were dependent launches"
    else:
        assert dependent == []
    np.testing.assert_array_equal(one_by_one, want)
    np.testing.assert_array_equal(back_to_back, want)


def test_api_refuses_what_the_kernels_cannot_take_on_the_gpu():
    import irfuse

    torch = _torch()
    path = next(p for p in EXAMPLES if p.endswith("synctest.kas"))
    prog = irfuse.compile(path, backend="cuda")
    a = torch.rand(1001, 3, 3, device="cuda")
    with pytest.raises(irfuse.UsageError, match="not 16-byte aligned"):
        prog(a[1:])
    with pytest.raises(irfuse.UsageError, match="out= array for 'F' overlaps input 'A'"):
        prog(a, out=a)
    # two outputs in one memory: the CPU backend's check and message, for programs and meshes
    energy = irfuse.compile(next(p for p in EXAMPLES if p.endswith("strain_energy.kas")), backend="cuda")
    eps, vol, C = torch.rand(64, 6, device="cuda"), torch.rand(64, device="cuda"), torch.rand(6, 6, device="cuda")
    sig = torch.empty(64, 6, device="cuda")
    with pytest.raises(irfuse.UsageError, match="out= array for 'e' overlaps the out= array for 'sig': each output "
                                                "needs memory of its own"):
        energy(eps, vol, C, out=(sig, sig.view(-1)[:64], torch.empty((), device="cuda")))
    from irfuse.mesh import Connectivity, box_tetrahedra
    from irfuse.testing.contracts import MESH_TOTAL

    total = irfuse.compile(MESH_TOTAL, backend="cuda")
    X, conn = box_tetrahedra(2)
    prepared = Connectivity(conn, len(X))
    u, r = torch.rand(X.shape, device="cuda"), torch.empty(X.shape, device="cuda")
    with pytest.raises(irfuse.UsageError, match="out= array for 'r' overlaps the out= array for 'S'"):
        total(u, prepared, out={"S": r[0, 0], "r": r})
    with pytest.raises(irfuse.UsageError, match="out= array for 'r' overlaps an input's memory"):
        total(u, prepared, out={"r": u})
    # out= naming some outputs, called again: the others are new each call (a kept call wrote
    # the first call's again, under its result; the mesh call's ended in a KeyError)
    first = total(u, prepared, out={"r": r})
    S = first.S.clone()
    again = total(2 * u, prepared, out={"r": r})
    assert first.r is r and again.r is r and again.S is not first.S and torch.equal(first.S, S)
    assert torch.equal(again.S, total(2 * u, prepared).S)
    e = energy(eps, vol, C, out={"sig": sig}).e
    e_first = e.clone()
    assert energy(2 * eps, vol, C, out={"sig": sig}).e is not e and torch.equal(e, e_first)
    with pytest.raises(irfuse.UsageError, match="input 'A' holds float64"):
        prog(a.double())
    with pytest.raises(irfuse.UsageError, match="with inputs on the GPU out= takes GPU arrays"):
        prog(a, out=np.empty((1001, 3, 3), np.float32))
    assert prog.check(a).ok


def test_api_on_cupy_arrays_in_place():
    import irfuse

    cupy = pytest.importorskip("cupy")
    path = next(p for p in EXAMPLES if p.endswith("transform44.kas"))
    prog = irfuse.compile(path, backend="cuda")
    rng = np.random.default_rng(3)
    host = {k: rng.uniform(-1, 1, (5000, *prog.shapes[k])).astype(np.float32) for k in prog.inputs}
    args = {k: cupy.asarray(v) for k, v in host.items()}
    out = prog(**args)
    assert all(isinstance(o, cupy.ndarray) for o in out)
    assert prog.check(**args).ok
    np.testing.assert_array_equal(cupy.asnumpy(out.q), prog(**host).q)
    # By keyword with out=, the same arrays again: the fast path launches the captured graph
    # and reads the inputs' current values (p doubled in place doubles q, exactly).
    outs = {k: cupy.empty_like(v) for k, v in out.items()}
    for _ in range(3):
        again = prog(**args, out=outs)
    assert prog._fast is not None and again.q is outs["q"]
    args["p"] *= 2
    prog(**args, out=outs)
    cupy.cuda.get_current_stream().synchronize()
    np.testing.assert_array_equal(cupy.asnumpy(outs["q"]), 2 * cupy.asnumpy(out.q))


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_example_on_gpu_in_structure_of_arrays(path):
    """Kernels planned and emitted for (*shape, N) arrays compute what the reference does,
    with tails: on batches whose word runs are not 16-byte multiples (registers loaded
    directly), and on one whose full blocks stage their loads in 16-byte runs (4,100)."""
    from irfuse.dialects.layouts import arrays_from_aos, arrays_to_aos
    from irfuse.driver.compile import compile_program
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import random_inputs, run_references, uniform_names
    from irfuse.verification.verify import check_outputs, subset, verified_elements

    plan, _ = compile_program(path, None, "f32", layout="soa")
    whole = uniform_names(plan.reference_program)  # no batch axis, no layout
    looped = "kas.loop" in str(plan.reference_program)  # checked on a sample (test_example_on_gpu)
    dev = CudaDevice(plan)
    try:
        for n in (1, 97, 4_100, 1_000_003):
            inputs = random_inputs(plan.reference_program, n, n, np.float32)
            got = Executor(plan, dev).run(arrays_from_aos(inputs, "soa", whole), n).outputs
            assert all(v.shape[-1] == n for k, v in got.items() if k not in whole)
            got = arrays_to_aos(got, "soa", whole)
            index = verified_elements(plan.reference_program, n, "sample" if looped else "all")
            inputs, got = subset(inputs, index, whole), subset(got, index, whole)
            checks = check_outputs(got, run_references(plan.reference_program, inputs, "f32", len(index),
                                                       plan.sum_by), "f32")
            assert all(c.ok for c in checks), [c.describe() for c in checks]
    finally:
        dev.close()


def test_a_cuda_tensor_that_requires_grad_is_refused_by_name_as_on_the_cpu():
    """As PyTorch's `__cuda_array_interface__` refuses it: a CUDA tensor that requires grad
    given to a program's call (which autograd does not record) is refused by name, for an
    input and for an `out=` tensor; its `.detach()` runs."""
    import irfuse

    torch = _torch()
    prog = irfuse.compile("matrix3x3 A, C; uniform scalar s;\ninput A, s;\nC = smmul33(A, s);\nreturn C;\n",
                          backend="cuda")
    A = torch.rand(1000, 3, 3, device="cuda")
    with pytest.raises(irfuse.UsageError, match="input 'A' is a PyTorch tensor that requires grad"):
        prog(A.clone().requires_grad_(), 2.0)
    with pytest.raises(irfuse.UsageError, match="is a PyTorch tensor that requires grad"):
        prog(A, 2.0, out=torch.empty_like(A).requires_grad_())
    assert torch.equal(prog(A.clone().requires_grad_().detach(), 2.0).C, 2.0 * A)


def test_api_structure_of_arrays_on_torch_and_cupy():
    """(*shape, N) tensors go through the program's SoA variant in place: the results are the
    array-of-structures call's, transposed; out= in SoA is written; SoA kernels take an
    address aligned to one word, which the AoS kernels' 16-byte copies refuse (and then load
    directly what they stage in 16-byte runs from an aligned one: the same bits)."""
    import irfuse

    torch = _torch()
    path = next(p for p in EXAMPLES if p.endswith("bigfusion.kas"))
    prog = irfuse.compile(path, backend="cuda")
    n = 20_012  # a multiple of 4: the aligned calls' full blocks stage their loads
    rng = np.random.default_rng(7)
    host = {k: rng.uniform(-1, 1, (n, *prog.shapes[k])).astype(np.float32) for k in prog.inputs}
    aos = {k: torch.from_numpy(v).cuda() for k, v in host.items()}
    soa = {k: v.movedim(0, -1).contiguous() for k, v in aos.items()}
    want = prog(**aos).F
    got = prog(**soa).F
    assert got.shape == (5, 5, n) and prog.for_layout("soa").layout == "soa"
    assert torch.allclose(got.movedim(-1, 0), want, rtol=1e-5, atol=1e-6)  # the same device functions
    assert prog.check(**soa).ok
    out = torch.empty(5, 5, n, device="cuda")
    for _ in range(3):  # the last calls replay a captured graph
        prog(*[soa[k] for k in prog.inputs], out=out)
    torch.cuda.synchronize()
    assert torch.equal(out, got)
    # One word off a 16-byte boundary: fine for SoA, refused for AoS.
    flat = torch.empty(9 * n + 1, device="cuda")
    shifted = flat[1:].view(3, 3, n)
    shifted.copy_(soa["A"])
    assert shifted.data_ptr() % 16 == 4
    assert torch.equal(prog(**{**soa, "A": shifted}).F, got)  # the same kernels
    with pytest.raises(irfuse.UsageError, match="not 16-byte aligned"):
        prog(**{**aos, "A": flat[1:1 + 9 * n].view(n, 3, 3)})
    cupy = pytest.importorskip("cupy")
    soa_cupy = {k: cupy.asarray(v.cpu().numpy()) for k, v in soa.items()}
    res = prog(**soa_cupy).F
    assert isinstance(res, cupy.ndarray) and res.shape == (5, 5, n)
    np.testing.assert_array_equal(cupy.asnumpy(res), got.cpu().numpy())


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_host_batches_stream_through_the_gpu_in_chunks(layout):
    """NumPy arrays through the GPU in chunks on two streams: the results of one chunk, bit
    for bit; a budget of a quarter of the batch gives at least four chunks; nothing piles up
    on the GPU over calls with other batch sizes."""
    import irfuse
    from irfuse.verification.reference import random_inputs
    from irfuse.runtime.streaming import LANES, bytes_per_element, chunk_elements

    prog = irfuse.compile(next(p for p in EXAMPLES if p.endswith("bigfusion.kas")), backend="cuda", layout=layout)
    n = 300_001
    aos = random_inputs(prog.compiled.reference_program, n, 9, np.float32)
    host = aos if layout == "aos" else {k: np.ascontiguousarray(np.moveaxis(v, 0, -1)) for k, v in aos.items()}
    want = prog(**host)
    assert prog.last_chunks == -(-n // chunk_elements(prog.compiled, n, 1 << 40)) >= 2  # MIN_CHUNKS where they hold
    quarter = bytes_per_element(prog.compiled) * LANES * n // 4
    got = prog(**host, memory_budget=quarter)
    assert prog.last_chunks >= 4
    run = next(b for key, b in prog._bound.items() if key[0] == "chunks" and b.chunk < n)
    assert not any(run.locked.values())  # NumPy's pageable arrays: staged
    for k in prog.outputs:
        np.testing.assert_array_equal(got[k], want[k])
    assert prog.check(**host).ok
    # Page-locked arrays go straight to and from the device; views of larger arrays are staged.
    pinned = {k: irfuse.pinned_empty(v.shape, v.dtype) for k, v in host.items()}
    for k, v in host.items():
        pinned[k][...] = v
    outs = {k: irfuse.pinned_empty(want[k].shape, np.float32) for k in prog.outputs}
    prog(**pinned, out=outs, memory_budget=quarter)
    assert all(run.locked.values()) and prog.last_chunks >= 4
    for k in prog.outputs:
        np.testing.assert_array_equal(outs[k], want[k])
    wider = {k: np.stack([v, v], axis=-1)[..., 0] for k, v in host.items()}
    assert not any(v.flags.c_contiguous for v in wider.values())
    staged = prog(**wider, memory_budget=quarter)
    assert not any(run.locked[k] for k in prog.inputs) and prog.last_chunks >= 4
    for k in prog.outputs:
        np.testing.assert_array_equal(staged[k], want[k])
    # The device memory this process's runs hold (not the GPU's free memory, which the suite's
    # other workers move by hundreds of MB): every allocation tracked until collected.
    import gc
    import weakref

    drv = prog.opened_device().drv
    live: dict[int, int] = {}
    allocate = drv.mem_alloc

    def tracked(nbytes):
        buf = allocate(nbytes)
        live[int(buf)] = nbytes
        weakref.finalize(buf, live.pop, int(buf), None)
        return buf
    drv.mem_alloc = tracked
    try:
        held = []
        for _ in range(3):  # (the first round's live memory is the steady state's: runs made again)
            for m in range(1000, 1010):
                prog(**{k: v[:m] if layout == "aos" else np.ascontiguousarray(v[..., :m]) for k, v in host.items()},
                     memory_budget=quarter)
            prog(**host, memory_budget=quarter)
            gc.collect()
            held.append(sum(live.values()))
        assert held[0] > 0 and held[2] - held[0] < 16 << 20, held
    finally:
        drv.mem_alloc = allocate


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_host_batches_that_reduce_stream_in_passes_with_the_bits_of_one_call(layout):
    """Programs that reduce over the batch, in chunks of whole reducing blocks on two streams:
    each reduction combined once over all chunks' partials on the GPU, the passes after it
    reading the combined value; the results of one chunk, bit for bit, from pageable and
    from page-locked arrays."""
    import irfuse
    from irfuse.verification.reference import random_inputs
    from irfuse.runtime.streaming import LANES, bytes_per_element, reduction_bytes

    two_levels = ("vector3 x, y, z; scalar s, t; uniform scalar m, q, r; input x;\n"
                  "s = venorm3(x); m = max(s); r = srcp(m); y = svmul3(x, r); t = venorm3(y); q = sum(t);\n"
                  "z = svmul3(y, q); loop 3 { z = svmul3(z, r); z = vadd3(z, y); }\nreturn z, q, m;")
    for source in ("strain_energy.kas", "cfl_step.kas", two_levels):
        path = next((p for p in EXAMPLES if p.endswith(source)), None)
        prog = irfuse.compile(path or source, backend="cuda", layout=layout)
        n = 200_001  # one chunk without a budget (16 MB a lane)
        aos = random_inputs(prog.compiled.reference_program, n, 4, np.float32)
        host = aos if layout == "aos" else {k: v if k in prog.uniform else np.ascontiguousarray(np.moveaxis(v, 0, -1))
                                            for k, v in aos.items()}
        want = prog(**host)
        assert prog.last_chunks == 1
        quarter = bytes_per_element(prog.compiled) * LANES * n // 4 + reduction_bytes(prog.compiled, n)
        got = prog(**host, memory_budget=quarter)
        assert prog.last_chunks >= 4
        pinned = {k: irfuse.pinned_empty(v.shape, v.dtype) for k, v in host.items()}
        for k, v in host.items():
            pinned[k][...] = v
        direct = prog(**pinned, memory_budget=quarter)
        for k in prog.outputs:
            np.testing.assert_array_equal(got[k], want[k], err_msg=f"{source}: {k}")
            np.testing.assert_array_equal(direct[k], want[k], err_msg=f"{source}: {k}, page-locked")
        assert prog.check(**host).ok


def test_numpy_arrays_locked_for_a_block_of_calls_stream_straight():
    """`irfuse.page_locked`: ordinary NumPy arrays copied straight by the lanes' streams inside
    the block (as pinned arrays are), the same results; unlocked when the block ends; an
    array already locked (nested blocks, a view of a locked array) left as it is."""
    import irfuse
    from irfuse.runtime.streaming import LANES, bytes_per_element, chunk_elements, is_page_locked

    prog = irfuse.compile(next(p for p in EXAMPLES if p.endswith("synctest.kas")), backend="cuda")
    n = 300_001
    a = np.random.default_rng(3).random((n, 3, 3), dtype=np.float32)
    want = prog(a).F
    out = np.zeros_like(a)
    quarter = bytes_per_element(prog.compiled) * LANES * n // 4
    assert not is_page_locked(a) and not is_page_locked(out)
    with irfuse.page_locked(a, out):
        assert is_page_locked(a) and is_page_locked(out)
        with irfuse.page_locked(a, a[10:20]):  # already locked: the inner block leaves them
            pass
        assert is_page_locked(a)
        prog(a, out=out, memory_budget=quarter)
        run = prog._bound[("chunks", chunk_elements(prog.compiled, n, quarter))]
        assert prog.last_chunks >= 4 and all(run.locked.values())
        np.testing.assert_array_equal(out, want)
    assert not is_page_locked(a) and not is_page_locked(out)
    out[...] = 0
    prog(a, out=out, memory_budget=quarter)  # staged again
    assert not any(run.locked.values())
    np.testing.assert_array_equal(out, want)


def _compiled_with_inputs(name: str, n: int, seed: int):
    """An example compiled for the GPU, random float32 inputs in [-1, 1) of n elements, and its
    outputs on them (computed from host arrays)."""
    import irfuse

    prog = irfuse.compile(next(p for p in EXAMPLES if p.endswith(name)), backend="cuda")
    rng = np.random.default_rng(seed)
    host = {k: rng.uniform(-1, 1, (n, *prog.shapes[k])).astype(np.float32) for k in prog.inputs}
    return prog, host, prog(**host)


class _DLPackOnly:
    """An array known only through DLPack (as JAX's are to irfuse): a torch tensor behind it."""

    def __init__(self, tensor):
        self.tensor = tensor

    def __dlpack__(self, stream=None):
        return self.tensor.__dlpack__(stream=stream)

    def __dlpack_device__(self):
        return self.tensor.__dlpack_device__()


def test_api_on_dlpack_only_and_pycuda_arrays_in_place():
    """An object with only `__dlpack__` is read in place (outputs then go into out= arrays,
    irfuse having no library to allocate them in); PyCUDA GPUArrays in place, outputs new
    GPUArrays."""
    import irfuse

    torch = _torch()
    n = 4099
    prog, host, want = _compiled_with_inputs("transform44.kas", n, 11)
    tensors = {k: torch.from_numpy(v).cuda() for k, v in host.items()}
    wrapped = {k: _DLPackOnly(v) for k, v in tensors.items()}
    outs = {k: torch.full((n, *prog.shapes[k]), float("nan"), device="cuda") for k in prog.outputs}
    prog(**wrapped, out=outs)
    torch.cuda.synchronize()
    for k in prog.outputs:
        np.testing.assert_array_equal(outs[k].cpu().numpy(), want[k])
    with pytest.raises(irfuse.UsageError, match="cannot allocate outputs in the library of a _DLPackOnly: "
                                                "pass out= arrays"):
        prog(**wrapped)
    import pycuda.gpuarray as gpuarray

    arrays = {k: gpuarray.to_gpu(v) for k, v in host.items()}
    got = prog(**arrays)
    assert all(isinstance(o, gpuarray.GPUArray) for o in got)
    for k in prog.outputs:
        np.testing.assert_array_equal(got[k].get(), want[k])


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_strided_gpu_views_are_read_and_written_in_place(layout):
    """Views of larger tensors go to kernels compiled for their strides: no copy, results
    bit for bit those of contiguous tensors, nothing outside an out= view written."""
    import irfuse

    torch = _torch()
    path = next(p for p in EXAMPLES if p.endswith("stvenant_inner.kas"))
    prog = irfuse.compile(path, backend="cuda", layout=layout)
    n = 100_003
    gen = torch.Generator(device="cuda").manual_seed(5)

    def batch(shape, pad):  # a view: every other element (AoS) or a padded batch axis (SoA)
        if layout == "aos":
            return torch.rand(2 * n, *shape, device="cuda", generator=gen)[::2]
        return torch.rand(*shape, n + pad, device="cuda", generator=gen)[..., :n]
    views = {k: batch(prog.shapes[k], 13) for k in prog.inputs}
    assert not any(v.is_contiguous() for v in views.values() if v.ndim > 1)
    want = prog(**{k: v.contiguous() for k, v in views.items()})
    got = prog(**views)
    bigs = {k: torch.full((2 * n, *prog.shapes[k]) if layout == "aos" else (*prog.shapes[k], n + 5), -7.0,
                          device="cuda") for k in prog.outputs}
    outs = {k: (b[1::2] if layout == "aos" else b[..., 5:]) for k, b in bigs.items()}
    prog(**views, out=outs)
    torch.cuda.synchronize()
    for k in prog.outputs:
        assert torch.equal(got[k], want[k]) and torch.equal(outs[k], want[k])
        rest = bigs[k][0::2] if layout == "aos" else bigs[k][..., :5]
        assert torch.all(rest == -7.0)
    variant = prog._for(layout, prog._view_strides(
        {k: irfuse.api.device_arrays.device_array(v) for k, v in views.items()}, None, layout))
    assert variant.strides and variant.source != prog.source
    assert prog.check(**views).ok
    # Outputs in the other layout: new tensors in it, written by the kernels in place.
    other = "soa" if layout == "aos" else "aos"
    moved = prog(**{k: v.contiguous() for k, v in views.items()}, out_layout=other, verify=True)
    torch.cuda.synchronize()
    for k in prog.outputs:
        expected = want[k].movedim(0, -1) if other == "soa" else want[k].movedim(-1, 0)
        assert moved[k].is_contiguous() and torch.equal(moved[k], expected)


def test_api_on_jax_arrays_gives_jax_arrays_in_memory_irfuse_allocated():
    """JAX arrays are read in place; outputs are new JAX arrays over memory irfuse allocated
    and handed over through DLPack (no copy), freed when JAX lets go; no growth over calls."""
    import gc
    import weakref

    from irfuse.api import dlpack_export
    from irfuse.api.dlpack_export import exported_tensors

    jax = pytest.importorskip("jax")
    jnp = jax.numpy
    if jax.default_backend() != "gpu":
        pytest.skip("JAX has no GPU here")
    prog, host, want = _compiled_with_inputs("stvenant_inner.kas", 50_001, 12)
    arrays = {k: jnp.asarray(v) for k, v in host.items()}
    before = exported_tensors()
    got = prog(**arrays)
    for k in prog.outputs:
        assert isinstance(got[k], jax.Array) and got[k].shape == want[k].shape
        np.testing.assert_array_equal(np.asarray(got[k]), want[k])
        # JAX reads the memory the kernels wrote: its buffer is irfuse's allocation.
        assert got[k].unsafe_buffer_pointer() % 256 == 0
    assert exported_tensors() == before + len(prog.outputs)
    assert float(jnp.sum(got[prog.outputs[0]])) == pytest.approx(float(want[prog.outputs[0]].sum(dtype=np.float64)),
                                                                 rel=1e-4, abs=1e-3)  # usable in JAX code
    del got
    gc.collect()
    assert exported_tensors() == before

    # The device memory this process's outputs hold (not the GPU's free memory, which the
    # suite's other workers move as they allocate): every output allocation tracked until freed.
    live: dict[int, int] = {}
    made = dlpack_export.DeviceMemory.__init__

    def tracked(self, nbytes, device):
        made(self, nbytes, device)
        live[id(self)] = nbytes
        weakref.finalize(self, live.pop, id(self), None)
    for _ in range(5):
        prog(**arrays)
    dlpack_export.DeviceMemory.__init__ = tracked
    try:
        gc.collect()
        for _ in range(200):
            out = prog(**arrays)
        assert live and sum(live.values()) >= sum(want[k].nbytes for k in prog.outputs)  # (the last call's, held)
        del out
        gc.collect()
        assert sum(live.values()) == 0, live
    finally:
        dlpack_export.DeviceMemory.__init__ = made
    assert exported_tensors() == before


def _gpu_doc_blocks() -> list[str]:
    """The documentation's Python blocks marked `<!-- gpu -->`, as `page:line`."""
    from test_docs import PAGES, blocks

    return [f"{b.page}:{b.line}" for page in PAGES for b in blocks(page) if b.lang == "python" and b.marker == "gpu"]


@pytest.mark.parametrize("where", _gpu_doc_blocks())
def test_the_documentations_gpu_examples_run(where):
    """The README's and docs' examples on GPU arrays (PyTorch, CuPy) run as written, each in a
    process of its own from the checkout (`tests/test_docs.py` runs the others on the CPU)."""
    from test_docs import blocks, run_python

    page, line = where.rsplit(":", 1)
    (b,) = [b for b in blocks(page) if b.line == int(line)]
    for module in re.findall(r"^import (torch|cupy|jax)", b.code, flags=re.M):
        pytest.importorskip(module)
    p = run_python([b])
    assert p.returncode == 0, p.stdout[-4000:] + p.stderr[-8000:]


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_loop_kernels_with_barriers_inside_on_gpu(layout):
    """A loop kernel mixing 3-thread and remapped 1-thread calls (carried values in shared
    memory, barriers around the back edge) on the device, at a batch with a partial last block,
    against the reference."""
    from test_loops import MAPPINGS, _plans_with_several_mappings

    from irfuse.dialects.layouts import from_aos, to_aos
    from irfuse.driver.compile import compile_text
    from irfuse.passes.registry import partition_pipeline
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import random_inputs, run_references
    from irfuse.verification.verify import check_outputs

    top, keep = 20, 4
    k = _plans_with_several_mappings(MAPPINGS, top, keep, layout)[0]
    plan, _ = compile_text(MAPPINGS, "mappings.kas", partition_pipeline(top, k, 8, 1 << 22, "h100", keep=keep),
                           "f32", layout=layout)
    assert any(kern.bx == 3 for kern in plan.kernels) and "fuse.loop" in str(plan.module)
    dev = CudaDevice(plan)
    try:
        n = 1_000_003
        inputs = random_inputs(plan.reference_program, n, 2, np.float32)
        got = Executor(plan, dev).run({name: from_aos(v, layout) for name, v in inputs.items()}, n).outputs
        got = {name: to_aos(v, layout) for name, v in got.items()}
        checks = check_outputs(got, run_references(plan.reference_program, inputs, "f32"), "f32")
        assert all(c.ok for c in checks), [c.describe() for c in checks]
    finally:
        dev.close()


def test_reductions_on_gpu_give_the_same_bits_every_run_and_take_gpu_arrays():
    """A sum and a maximum over 2,097,155 elements (16,385 block partials: more than the
    combine kernel's 8,192 lanes): verified, the same bits over 20 runs, the same bits as
    the CPU backend (whose combine runs the cluster's steps in the same order), and the same
    bits through the API on host arrays, torch tensors and CuPy arrays (a uniform input
    passed as a GPU array too)."""
    import irfuse

    torch = pytest.importorskip("torch")
    cupy = pytest.importorskip("cupy")
    n = 2 * 8192 * 128 + 3
    energy = irfuse.compile(next(p for p in EXAMPLES if p.endswith("strain_energy.kas")), backend="cuda")
    cfl = irfuse.compile(next(p for p in EXAMPLES if p.endswith("cfl_step.kas")), backend="cuda")
    rng = np.random.default_rng(11)
    eps = rng.uniform(-1, 1, (n, 6)).astype(np.float32)
    vol = rng.uniform(0, 1, n).astype(np.float32)
    C = rng.uniform(-1, 1, (6, 6)).astype(np.float32)
    first = energy(eps, vol, C, verify=True)
    assert first.U.shape == ()
    for _ in range(20):
        assert energy(eps, vol, C).U.tobytes() == first.U.tobytes()
    on_cpu = irfuse.compile(next(p for p in EXAMPLES if p.endswith("strain_energy.kas")), backend="cpu", profile="h100")
    assert on_cpu(eps, vol, C).U.tobytes() == first.U.tobytes()
    on_torch = energy(torch.from_numpy(eps).cuda(), torch.from_numpy(vol).cuda(), torch.from_numpy(C).cuda())
    torch.cuda.synchronize()
    assert isinstance(on_torch.U, torch.Tensor) and on_torch.U.shape == ()
    assert on_torch.U.cpu().numpy().tobytes() == first.U.tobytes()
    np.testing.assert_array_equal(on_torch.sig.cpu().numpy(), first.sig)
    x = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    v = rng.uniform(-1, 1, (n, 3)).astype(np.float32)
    step = cfl(x, v, np.float32(0.1) * np.ones((), np.float32), verify=True)
    speeds = np.sqrt((v.astype(np.float64) ** 2).sum(axis=1))
    assert abs(float(step.dt) - 0.1 / speeds.max()) < 1e-6 * float(step.dt)
    cfl_cpu = irfuse.compile(next(p for p in EXAMPLES if p.endswith("cfl_step.kas")), backend="cpu", profile="h100")
    assert cfl_cpu(x, v, np.float32(0.1) * np.ones((), np.float32)).dt.tobytes() == step.dt.tobytes()
    on_cupy = cfl(cupy.asarray(x), cupy.asarray(v), cupy.asarray(np.float32(0.1)))
    assert cupy.asnumpy(on_cupy.dt).tobytes() == step.dt.tobytes()
    np.testing.assert_array_equal(cupy.asnumpy(on_cupy.xn), step.xn)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("by, per_thread", [(48, 1), (64, 1), (128, 1), (256, 1), (64, 4), (256, 4)])
def test_block_trees_of_odd_sizes_on_gpu_have_the_cpu_bits(by, per_thread, dtype):
    """A scalar's block tree takes its last steps on the first warp's registers on the GPU (warp
    shuffles) and through shared memory on the CPU: the same bits for blocks of 48 (not a power
    of two: the warp steps start at 32), 64, 128 and 256 elements, for sums, maxima and minima of
    batches whose last block holds 1, 31, 33 or all of its elements, and for a vector sum (which
    stays in shared memory throughout), in float32 and float64. The CPU reduces the per-element
    values the GPU made (its own may differ in the last bit: the GPU contracts multiply-adds).
    With four elements a thread, the trees run over the same elements on a quarter of the threads."""
    import irfuse

    decl = "vector3 v; scalar s; uniform scalar t, hi, lo; uniform vector3 c;\n"
    trees = "t = sum(s);\nhi = max(s);\nlo = min(s);\nc = sum(v);\n"
    pipeline = f"kas-dce,fuse-each{{by={by} per_thread={per_thread}}}"
    gpu = irfuse.compile(decl + "input v;\ns = vdot3(v, v);\n" + trees + "return s, t, hi, lo, c;",
                         backend="cuda", pipeline=pipeline, filename="trees.kas", dtype=dtype)
    cpu = irfuse.compile(decl + "input v, s;\n" + trees + "return t, hi, lo, c;",
                         backend="cpu", pipeline=pipeline, filename="trees_cpu.kas", dtype=dtype)
    assert {(k.by, k.per_thread) for k in gpu.compiled.kernels if any(k.reduced)} == {(by, per_thread)}
    rng = np.random.default_rng(by)
    for n in (1, 31, by * 37 + 1, by * 37 + 31, by * 37 + 33, by * 64):
        v = rng.uniform(-1, 1, (n, 3)).astype(np.float32 if dtype == "f32" else np.float64)
        got = gpu(v, verify=True)
        want = cpu(v, got.s)
        for name in ("t", "hi", "lo", "c"):
            assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), (by, n, name)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
@pytest.mark.parametrize("by, per_thread", [(48, 1), (128, 1), (256, 2)])
def test_reductions_finished_by_the_last_block_have_the_combine_kernels_bits(by, per_thread, dtype):
    """A reducing kernel whose last block combines the partials (fuse-each{finish=last-block}):
    sums, maxima, minima and a vector sum, all in one kernel's last block, give the bits of
    the combine kernels (finish=kernels) and of the CPU backend, run after run, for batches
    whose partials are 1, 37, 8,191, 8,192 (every lane one partial) and 8,193 (more than the
    lanes: that launch leaves them to the combine kernels), on 48 threads (the lanes' tree
    on the first 32), 128 and 128 running two elements each."""
    import irfuse

    src = ("vector3 v; scalar s; uniform scalar t, hi, lo; uniform vector3 c;\ninput v;\n"
           "s = vdot3(v, v);\nt = sum(s);\nhi = max(s);\nlo = min(s);\nc = sum(v);\nreturn s, t, hi, lo, c;")
    programs = {}
    for finish in ("last-block", "kernels"):
        pipeline = f"kas-dce,fuse-each{{by={by} per_thread={per_thread} finish={finish}}}"
        programs[finish] = irfuse.compile(src, backend="cuda", pipeline=pipeline, filename="fin.kas", dtype=dtype)
    assert any(k.finish_parts == 8192 for k in programs["last-block"].compiled.kernels)
    assert not any(k.finish_parts for k in programs["kernels"].compiled.kernels)
    cpu = irfuse.compile(src, backend="cpu", pipeline=f"kas-dce,fuse-each{{by={by} per_thread={per_thread} "
                         "finish=last-block}", filename="fin.kas", dtype=dtype)
    rng = np.random.default_rng(by)
    for parts in (1, 37, 8191, 8192, 8193):
        n = (parts - 1) * by + 1 + (by // 3 if parts > 1 else 0)
        v = (rng.integers(-1000, 1000, (n, 3)) / 8).astype(np.float32 if dtype == "f32" else np.float64)
        last = programs["last-block"](v, verify=True)
        kernels = programs["kernels"](v)
        on_cpu = cpu(v)
        for _ in range(3):
            again = programs["last-block"](v)
            assert all(getattr(again, k).tobytes() == getattr(last, k).tobytes() for k in ("t", "hi", "lo", "c"))
        for name in ("t", "hi", "lo", "c"):
            assert getattr(last, name).tobytes() == getattr(kernels, name).tobytes(), (parts, name)
            assert getattr(last, name).tobytes() == getattr(on_cpu, name).tobytes(), (parts, name)


def test_the_default_plans_finish_their_reductions_with_the_combine_kernels_bits():
    """The examples that reduce, planned by default (the cost model choosing the last block or
    the combine kernels) and with finish=kernels, give the same bits on the GPU at 4,194,304
    elements, run after run."""
    import irfuse
    from irfuse.passes.registry import DEFAULT_PIPELINE

    rng = np.random.default_rng(5)
    n = 4_194_304
    x, v = (rng.uniform(-1, 1, (n, 3)).astype(np.float32) for _ in range(2))
    eps, vol = rng.uniform(-1, 1, (n, 6)).astype(np.float32), rng.uniform(0, 1, n).astype(np.float32)
    C = rng.uniform(-1, 1, (6, 6)).astype(np.float32)
    cases = {"cfl_step.kas": ((x, v, np.float32(0.1)), ("xn", "dt")),
             "strain_energy.kas": ((eps, vol, C), ("sig", "e", "U"))}
    kernels_only = DEFAULT_PIPELINE.replace("fuse-partition", "fuse-partition{finish=kernels}", 1)
    for name, (args, outputs) in cases.items():
        path = next(p for p in EXAMPLES if p.endswith(name))
        default = irfuse.compile(path, backend="cuda")
        kernels = irfuse.compile(path, backend="cuda", pipeline=kernels_only)
        assert not any(k.finish_parts for k in kernels.compiled.kernels)
        first, other = default(*args, verify=True), kernels(*args)
        for _ in range(5):
            again = default(*args)
            assert all(getattr(again, k).tobytes() == getattr(first, k).tobytes() for k in outputs), name
        assert all(getattr(other, k).tobytes() == getattr(first, k).tobytes() for k in outputs), name


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_threads_running_several_elements_give_the_cpu_bits_on_gpu(dtype):
    """The default plan runs this program's reducing kernel with several elements a thread
    (every statement a loop over the thread's elements, the block tree over all of them): on
    the GPU its sums, maxima and minima have the bits of the CPU backend running the same
    plan (planned for the H100 on both: the CPU backend's own profile may choose other blocks),
    for batches of 1, 1,000 and 1,000,003 elements. The per-element values are exact
    (eighths squared and added: nothing rounds, contracted or not), so a difference could
    only come from the order in which the trees combine them."""
    import irfuse

    src = ("vector3 v; scalar s; uniform scalar t, hi, lo; uniform vector3 c;\ninput v;\n"
           "s = vdot3(v, v);\nt = sum(s);\nhi = max(s);\nlo = min(s);\nc = sum(v);\nreturn t, hi, lo, c;")
    gpu = irfuse.compile(src, backend="cuda", filename="rows.kas", dtype=dtype)
    cpu = irfuse.compile(src, backend="cpu", profile="h100", filename="rows.kas", dtype=dtype)
    assert [k.to_json() for k in gpu.compiled.kernels] == [k.to_json() for k in cpu.compiled.kernels]
    assert max(k.per_thread for k in gpu.compiled.kernels) > 1
    rng = np.random.default_rng(7)
    for n in (1, 1000, 1_000_003):
        v = (rng.integers(-1000, 1000, (n, 3)) / 8).astype(np.float32 if dtype == "f32" else np.float64)
        got, want = gpu(v, verify=True), cpu(v)
        for name in ("t", "hi", "lo", "c"):
            assert getattr(got, name).tobytes() == getattr(want, name).tobytes(), (n, name)


def test_a_loop_kernel_reading_literals_and_a_uniform_input_on_gpu():
    """Literals and a uniform input read from the block's copy inside a loop that runs in the
    kernel (a guarded loop: only present elements' threads run it), with a partial last block."""
    import irfuse
    from irfuse.dialects import fuse

    src = ("vector3 x, c; scalar s;\nuniform vector3 d;\ninput x, d;\n"
           "loop 5 { x = svmul3(x, 0.5); c = vadd3(x, d); s = vdot3(c, c); x = svmul3(c, -1.5); }\nreturn x, s;")
    prog = irfuse.compile(src, backend="cuda", filename="literal_loop.kas")
    assert any(isinstance(op, fuse.LoopOp) for op in prog.compiled.module.walk())
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (100_003, 3)).astype(np.float32)
    d = rng.uniform(-1, 1, 3).astype(np.float32)
    out = prog(x, d, verify=True)
    assert out.x.shape == (100_003, 3) and out.s.shape == (100_003,)


def test_calls_from_threads_that_end_leave_no_context_behind():
    """A program opened in one thread and called from another (a Dask worker's task threads, a
    thread pool's), both threads ending before the process: each thread's push of the GPU
    context is popped when it ends, so PyCUDA does not abort the process at exit."""
    import subprocess
    import sys

    script = (
        "import threading, numpy as np, irfuse\n"
        f"prog = irfuse.compile({next(p for p in EXAMPLES if p.endswith('synctest.kas'))!r}, backend='cuda')\n"
        "a = np.random.default_rng(0).random((1000, 3, 3), dtype=np.float32)\n"
        "got = {}\n"
        "def call(k):\n"
        "    got[k] = prog(a).F\n"
        "for k in range(3):  # the first opens the device; each thread ends after its call\n"
        "    t = threading.Thread(target=call, args=(k,))\n"
        "    t.start(); t.join()\n"
        "assert all(np.array_equal(got[k], got[0]) for k in got) and len(got) == 3\n"
        "np.testing.assert_allclose(got[0], 5 * a, rtol=1e-6)\n"
        "print('done')\n")
    p = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300)
    assert p.returncode == 0 and p.stdout.strip() == "done", p.stderr
    assert "context stack was not empty" not in p.stderr


@pytest.mark.parametrize("layout", ["aos", "soa"])
def test_numpy_arrays_on_the_gpu_whose_input_a_kernel_reassigns_before_another_reads_it(layout):
    """NumPy arrays on the GPU go through the chunked path: an output returned under an input's
    name, given by the first kernel while the second still reads the input, was once computed
    into the input's chunk buffer (the second kernel then read the new value)."""
    import irfuse
    from test_robustness import REASSIGNED

    prog = irfuse.compile(REASSIGNED, backend="cuda", layout=layout)
    order = [(k.inputs, k.outputs) for k in prog.compiled.kernels]
    assert "v" in order[0][1] and "v" in order[1][0], order
    rng = np.random.default_rng(9)
    n = 100_003
    args = [rng.random((n, 3, 3), np.float32), rng.random((n, 3, 3), np.float32), rng.random((n, 3), np.float32)]
    if layout == "soa":
        args = [np.ascontiguousarray(np.moveaxis(a, 0, -1)) for a in args]
    cpu = irfuse.compile(REASSIGNED, backend="cpu", profile="h100", layout=layout)(*args)
    for budget in (None, 4_000_000):
        got = prog(*args, memory_budget=budget)
        assert prog.check(*args).ok
        np.testing.assert_allclose(got.w, cpu.w, rtol=2e-6)
        np.testing.assert_allclose(got.v, cpu.v, rtol=2e-6)


def test_mesh_residual_on_gpu_is_verified_and_deterministic():
    """The P1 elasticity residual through a connectivity on the GPU: checked against the
    float64 reference, and the same bits in 20 runs (the scatter adds in a fixed order)."""
    import irfuse
    from irfuse.mesh import Connectivity, box_tetrahedra, reorder, renumber
    from irfuse.runtime.executor import Executor

    coords, conn = box_tetrahedra(24, numbering="random", seed=1)[:2]
    conn, coords = renumber(conn, *reorder(conn, coords, method="morton"), coords)
    rng = np.random.default_rng(0)
    X = coords.astype(np.float32)
    u = (1e-2 * rng.standard_normal(X.shape)).astype(np.float32)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    prog = irfuse.compile(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas"), backend="cuda")
    args = (X, u, conn, dN, np.float32(1.5), np.float32(0.75))
    first = prog(*args, verify=True).r
    prepared = Connectivity(conn, len(X))
    run = Executor(prog._with_binary(), prog.opened_device()).prepare(
        {"X": X, "u": u, "conn": prepared.conn, "dN": dN, "lam": np.float32(1.5), "mu": np.float32(0.75)},
        len(conn), nodes=len(X), inverses={"conn": prepared.inverse})
    seen = set()
    for _ in range(20):
        run.replay()
        seen.add(run.outputs()["r"].tobytes())
    assert seen == {first.tobytes()}


def test_gpu_scatter_gives_the_bits_of_the_fixed_order_on_irregular_meshes():
    """The GPU's scatter (several lanes a node, shuffles) adds in the order of
    `irfuse.mesh.scatter_add` and of the CPU backend: a node named by every element (thousands
    of rows), nodes named twice in one element, nodes no element names, a node count that is
    no multiple of a block's, values over ten decades with both signs and negative zeros."""
    import irfuse
    from irfuse.mesh import scatter_add

    source = """
nodal vector3 r; index4 conn; matrix4x3 f;
input conn, f;
r = scatter(f, conn);
return r;"""
    gpu, cpu = irfuse.compile(source, backend="cuda"), irfuse.compile(source, backend="cpu", profile="h100")
    rng = np.random.default_rng(7)
    for elements, nodes in ((1, 1), (3000, 1037), (20000, 70001)):
        conn = rng.integers(0, max(1, nodes // 3), size=(elements, 4)).astype(np.int32)  # most nodes unused
        conn[:, 0] = 0  # node 0 in every element
        conn[::7, 2] = conn[::7, 1]  # a node twice in one element
        f = (rng.standard_normal((elements, 4, 3)) * 10.0 ** rng.integers(-5, 5, size=(elements, 4, 3)))
        f = f.astype(np.float32)
        f[::5, 1, :] = -0.0
        want = scatter_add(f, conn, nodes)
        got_gpu = gpu(conn, f, nodes=nodes).r
        got_cpu = cpu(conn, f, nodes=nodes).r
        assert got_gpu.tobytes() == want.tobytes() == got_cpu.tobytes(), (elements, nodes)
        # in chunks of about 1000 elements (nodal sums kept whole): the same bits
        chunked = gpu(conn, f, nodes=nodes, memory_budget=nodes * 12 + (nodes + 1) * 8 + 1000 * 96).r
        assert chunked.tobytes() == want.tobytes(), (elements, nodes)
        # scatter="atomic": any order of the same additions, within their rounding bound
        atomic = gpu(conn, f, nodes=nodes, scatter="atomic").r
        exact = scatter_add(f.astype(np.float64), conn, nodes)
        terms = np.bincount(conn.ravel(), minlength=nodes)[:, None]
        bound = terms * np.finfo(np.float32).eps * scatter_add(np.abs(f).astype(np.float64), conn, nodes)
        assert np.all(np.abs(atomic - exact) <= bound + 1e-30), (elements, nodes)


def _p1_residual_on_a_cube(cubes: int, draw: int, **numbering):
    """The P1 residual example compiled for the GPU, and its arguments on a cube of `cubes`^3
    hexahedra cut into tetrahedra (`numbering`: box_tetrahedra's): (program, X, u, conn, dN,
    lam, mu), u drawn from the seed `draw`."""
    import irfuse
    from irfuse.mesh import box_tetrahedra

    coords, conn = box_tetrahedra(cubes, **numbering)[:2]
    X = coords.astype(np.float32)
    u = (1e-2 * np.random.default_rng(draw).standard_normal(X.shape)).astype(np.float32)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    prog = irfuse.compile(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas"), backend="cuda")
    return prog, X, u, conn, dN, np.float32(1.5), np.float32(0.75)


@pytest.mark.parametrize("scatter", ["ordered", "atomic"])
def test_a_plain_gpu_connectivity_written_between_calls_is_checked_again(scatter):
    """A connectivity given as a plain CUDA tensor may be written between calls: a call made
    again checks its node numbers again and reads the new ones. With `scatter="atomic"` the
    call was kept for its fast path with the tensor as it was, so a node number written past
    the nodes would be read and added to out of bounds."""
    import torch

    from irfuse.diagnostics import UsageError

    prog, X, u, conn, dN, lam, mu = _p1_residual_on_a_cube(3, 4)
    t = {k: torch.from_numpy(a).cuda() for k, a in (("X", X), ("u", u), ("dN", dN))}
    for out in (None, {"r": torch.zeros_like(t["X"])}):
        given = {} if out is None else {"out": out}
        c = torch.from_numpy(conn.astype(np.int32)).cuda()
        for _ in range(3):
            prog(t["X"], t["u"], c, t["dN"], lam, mu, scatter=scatter, **given)
        c[3, 1] = 10**6
        with pytest.raises(UsageError, match="element 3, position 1 names node 1000000"):
            prog(t["X"], t["u"], c, t["dN"], lam, mu, scatter=scatter, **given)
        c[3] = torch.from_numpy(conn[5].astype(np.int32)).cuda()
        got = prog(t["X"], t["u"], c, t["dN"], lam, mu, scatter=scatter, **given).r.clone()
        want = prog(t["X"], t["u"], c.clone(), t["dN"], lam, mu).r
        assert torch.allclose(got, want, rtol=1e-5, atol=1e-6)


def test_a_mesh_prepared_on_the_gpu_is_the_hosts_and_runs_calls():
    """A `Connectivity` of a torch CUDA tensor (and of a CuPy array, and of a NumPy array with
    device=0) has the host's node numbers and scatter order entry for entry, kept on the GPU
    for calls (the bits of calls with the host's); a bad entry is refused by element and
    position; a Morton `reorder` and `renumber` of GPU arrays give the host's permutations
    and arrays."""
    import cupy
    import torch

    from irfuse.diagnostics import UsageError
    from irfuse.mesh import Connectivity, renumber, reorder

    prog, X, u, conn, dN, lam, mu = _p1_residual_on_a_cube(7, 2, numbering="random", seed=11)
    host = Connectivity(conn, len(X))
    for given in (torch.from_numpy(conn).cuda(), cupy.asarray(conn.astype(np.int32)), conn):
        gpu = Connectivity(given, len(X), device=0 if isinstance(given, np.ndarray) else None)
        assert gpu.on_gpu is not None and gpu.on_gpu[0].is_cuda
        for name, w, g in zip(host.inverse._fields, host.inverse, gpu.on_gpu[1]):
            assert np.array_equal(w, g.cpu().numpy()), name
        assert np.array_equal(gpu.conn, host.conn) and gpu.shape == host.shape
    t = {k: torch.from_numpy(a).cuda() for k, a in (("X", X), ("u", u), ("dN", dN))}
    want = prog(t["X"], t["u"], host, t["dN"], lam, mu).r
    got = prog(t["X"], t["u"], gpu, t["dN"], lam, mu).r
    assert torch.equal(got, want)
    # The caller's tensor written afterwards (int32, contiguous: kept as it was before, so the
    # kernels read the new numbers behind the check; a number past the nodes read out of bounds)
    given = torch.from_numpy(conn.astype(np.int32)).cuda()
    own = Connectivity(given, len(X))
    given.fill_(10**6)
    assert torch.equal(prog(t["X"], t["u"], own, t["dN"], lam, mu).r, want)
    bad = conn.copy()
    bad[5, 2] = len(X)
    with pytest.raises(UsageError, match=f"element 5, position 2 names node {len(X)}, outside"):
        Connectivity(torch.from_numpy(bad).cuda(), len(X))
    node_order, element_order = reorder(conn, X)
    g_nodes, g_elements = reorder(torch.from_numpy(conn).cuda(), torch.from_numpy(X).cuda())
    assert np.array_equal(g_nodes.cpu().numpy(), node_order)
    assert np.array_equal(g_elements.cpu().numpy(), element_order)
    new = renumber(conn, node_order, element_order, X)
    g_new = renumber(torch.from_numpy(conn).cuda(), g_nodes, g_elements, torch.from_numpy(X).cuda())
    assert all(np.array_equal(a, b.cpu().numpy()) for a, b in zip(new, g_new))


def test_mesh_calls_on_gpu_arrays_give_the_bits_of_host_calls_and_check_connectivities_on_the_gpu():
    """CuPy and PyTorch arrays in, arrays of the same library out: the bits of the call on
    NumPy arrays, with the connectivity as a GPU array (checked on the GPU; its inverse made
    on the host), as a `Connectivity` (uploaded once) and with atomics; an entry outside
    [0, M) on the GPU is refused by element and position before anything runs."""
    import cupy
    import torch

    import irfuse
    from irfuse.mesh import Connectivity

    prog, X, u, conn, dN, lam, mu = _p1_residual_on_a_cube(6, 1, numbering="random", seed=3)
    want = prog(X, u, conn, dN, lam, mu).r
    Xc, uc, cc = cupy.asarray(X), cupy.asarray(u), cupy.asarray(conn)
    got = prog(Xc, uc, cc, dN, lam, mu, verify=True).r
    assert isinstance(got, cupy.ndarray) and cupy.asnumpy(got).tobytes() == want.tobytes()
    prepared = Connectivity(conn, len(X))
    for _ in range(2):
        assert cupy.asnumpy(prog(Xc, uc, prepared, dN, lam, mu).r).tobytes() == want.tobytes()
    # the kept run on other arrays of the same sizes (r is linear in u: twice u, twice r, exactly)
    doubled = prog(Xc, 2 * uc, prepared, dN, np.float32(1.5), np.float32(0.75)).r
    assert cupy.asnumpy(doubled).tobytes() == (2 * want).tobytes()
    atomic = cupy.asnumpy(prog(Xc, uc, cc, dN, lam, mu, scatter="atomic").r)
    np.testing.assert_allclose(atomic, want, rtol=0, atol=1e-5 * np.abs(want).max())
    Xt, ut, ct = (torch.from_numpy(a).cuda() for a in (X, u, conn))
    got_t = prog(Xt, ut, ct, dN, lam, mu).r
    assert isinstance(got_t, torch.Tensor) and got_t.cpu().numpy().tobytes() == want.tobytes()
    bad = cc.copy()
    bad[123, 2] = len(X)
    with pytest.raises(irfuse.UsageError, match=rf"element 123, position 2 names node {len(X)}, outside \[0, {len(X)}\)"):
        prog(Xc, uc, bad, dN, lam, mu)
    # int64 node numbers: checked and narrowed on the GPU into a copy of irfuse's own, the same bits
    wide = cc.astype(cupy.int64)
    assert cupy.asnumpy(prog(Xc, uc, wide, dN, lam, mu).r).tobytes() == want.tobytes()
    wide[7, 1] = 2**40
    with pytest.raises(irfuse.UsageError, match=r"element 7, position 1 names node 1099511627776, outside"):
        prog(Xc, uc, wide, dN, lam, mu)
    with pytest.raises(irfuse.UsageError, match="a connectivity on the GPU is a contiguous int32 or int64 array"):
        prog(Xc, uc, cc.astype(cupy.float32), dN, lam, mu)
    # structures of arrays: rearranged on the GPU into copies and back, the same bits
    soa = prog(cupy.ascontiguousarray(Xc.T), cupy.ascontiguousarray(uc.T), prepared, dN, lam, mu).r
    assert soa.shape == (3, len(X)) and cupy.asnumpy(soa).tobytes() == np.ascontiguousarray(want.T).tobytes()
    out = cupy.empty((3, len(X)), cupy.float32)
    assert prog(cupy.ascontiguousarray(Xc.T), cupy.ascontiguousarray(uc.T), cc, dN, lam, mu, out=out,
                scatter="atomic").r is out
    np.testing.assert_allclose(cupy.asnumpy(out), want.T, rtol=0, atol=1e-5 * np.abs(want).max())
    with pytest.raises(irfuse.UsageError, match="with GPU arrays, a nodal array is a GPU array too"):
        prog(X, uc, cc, dN, lam, mu)


def test_nodal_statements_on_the_gpu_give_one_set_of_bits():
    """The explicit step (nodal statements before and after the elements) on host arrays, in
    chunks and on CuPy arrays (the values passed between passes staying on the GPU): one set
    of bits, checked against the reference and near the CPU backend's."""
    import cupy

    import irfuse
    from irfuse.mesh import box_tetrahedra

    coords, conn = box_tetrahedra(8, numbering="random", seed=2)[:2]
    rng = np.random.default_rng(3)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    X = coords.astype(np.float32)
    u = (1e-2 * rng.standard_normal(X.shape)).astype(np.float32)
    v = rng.standard_normal(X.shape).astype(np.float32)
    m = rng.uniform(0.5, 1.5, len(X)).astype(np.float32)
    args = dict(X=X, u=u, v=v, m=m, conn=conn, dN=dN, lam=np.float32(1.5), mu=np.float32(0.7), dt=np.float32(1e-3))
    path = os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "explicit_step.kas")
    gpu, cpu = irfuse.compile(path, backend="cuda"), irfuse.compile(path, backend="cpu", profile="h100")
    want = cpu(**args)
    got = gpu(**args, verify=True)
    chunked = gpu(**args, memory_budget=200_000)
    on_gpu = gpu(**{k: cupy.asarray(a) if k in ("X", "u", "v", "m", "conn") else a for k, a in args.items()},
                 verify=True)
    for name, w, g, c, d in zip(gpu.outputs, want, got, chunked, on_gpu):
        assert isinstance(d, cupy.ndarray)
        assert g.tobytes() == c.tobytes() == cupy.asnumpy(d).tobytes(), name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6 * np.abs(w).max())


@pytest.mark.parametrize("elements, nodes", [(300, 120), (100, 400)])
def test_nodal_reductions_and_one_value_through_two_connectivities_on_the_gpu(elements, nodes):
    """The two wrong results of mesh programs (a reduction of a nodal input or of a scatter's
    sums over E entries instead of M; one computed value scattered through two
    connectivities summed by one's groups) on the GPU, on meshes with E > M and E < M: host
    and CuPy arrays, ordered and atomic, against the reference and the CPU backend's bits."""
    import cupy

    import irfuse

    src = """
    nodal vector3 X, r, r1, r2; index4 c1, c2; matrix4x3 Xe, w; uniform vector3 Q, R; uniform scalar a;
    input X, c1, c2, a;
    Q = sum(X);
    Xe = gather(X, c1);
    w = scale(Xe, a);
    r1 = scatter(w, c1);
    r2 = scatter(w, c2);
    R = max(r1);
    return Q, R, r1, r2;
    """
    rng = np.random.default_rng(11)
    args = dict(X=rng.uniform(-1, 1, (nodes, 3)).astype(np.float32),
                c1=rng.integers(0, nodes, (elements, 4)).astype(np.int32),
                c2=rng.integers(0, nodes, (elements, 4)).astype(np.int32), a=np.float32(1.5))
    gpu, cpu = irfuse.compile(src, backend="cuda"), irfuse.compile(src, backend="cpu", profile="h100")
    want = cpu(**args)
    got = gpu(**args, verify=True)
    on_gpu = gpu(**{k: cupy.asarray(v) if k != "a" else v for k, v in args.items()}, verify=True)
    atomic = gpu(**args, scatter="atomic", verify=True)
    for name, w, g, d in zip(gpu.outputs, want, got, on_gpu):
        assert g.tobytes() == cupy.asnumpy(d).tobytes() == w.tobytes(), name
    np.testing.assert_allclose(atomic.r2, want.r2, rtol=1e-5, atol=1e-5)


def test_a_second_pass_over_the_elements_and_its_reverse_derivative_on_the_gpu():
    """A gather of a value made from a scatter's sums (a second pass over the elements), and
    the gradient of an energy whose nodal statements after the scatter are not linear (its
    reverse pass gathers the sums' cotangent): on the GPU against the reference, on CuPy
    arrays too (one set of bits), near the CPU backend's (tanh is the device's own)."""
    import cupy

    import irfuse
    from irfuse.mesh import box_tetrahedra

    from irfuse.testing.derivatives import NODAL_AFTER_SCATTER

    X, conn = box_tetrahedra(6, numbering="random", seed=4)[:2]
    u = np.random.default_rng(5).uniform(-0.3, 0.3, X.shape).astype(np.float32)
    module = irfuse.grad(NODAL_AFTER_SCATTER, of="E", wrt="u")
    gpu, cpu = irfuse.compile(module, backend="cuda"), irfuse.compile(module, backend="cpu", profile="h100")
    assert [p.over for p in gpu.stages] == ["elements", "nodes", "elements"]
    want = cpu(u, conn, np.float32(0.8))
    got = gpu(u, conn, np.float32(0.8), verify=True)
    on_gpu = gpu(cupy.asarray(u), cupy.asarray(conn), np.float32(0.8), verify=True)
    for name, w, g, d in zip(gpu.outputs, want, got, on_gpu):
        assert g.tobytes() == cupy.asnumpy(d).tobytes(), name
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-5 * np.abs(w).max())


def test_mesh_calls_with_prepared_connectivities_are_ordered_on_the_callers_stream():
    """With every connectivity a `Connectivity` a call on GPU arrays waits for nothing: on a
    CuPy stream of the caller's (given, and as the current stream), after work the caller
    queued there that writes the input, it reads what that work wrote; the outputs are
    there once the caller's stream is synchronized. A host uniform value is uploaded once
    per value, not once per call."""
    import cupy

    import irfuse
    from irfuse.mesh import Connectivity

    prog, X, u, conn, dN, lam, mu = _p1_residual_on_a_cube(40, 5)  # 384,000 elements: long enough to overlap
    want = prog(X, u, conn, dN, lam, mu).r
    prepared = Connectivity(conn, len(X))
    Xc, uc = cupy.asarray(X), cupy.asarray(u)
    stream = cupy.cuda.Stream(non_blocking=True)
    for k in range(3):
        doubled = cupy.empty_like(uc)
        with stream:
            cupy.multiply(uc, 2 ** k, out=doubled)  # queued on the caller's stream before the call
            got = prog(Xc, doubled, prepared, dN, lam, mu, stream=stream if k % 2 else None).r
        stream.synchronize()
        assert cupy.asnumpy(got).tobytes() == (want * 2 ** k).tobytes(), k
        if k == 0:  # dN, lam and mu uploaded by the first call (the program may be shared: count new ones)
            uploaded = len(prog.opened_device()._constants)
    dev = prog.opened_device()
    assert len(dev._constants) == uploaded  # none again
    with pytest.raises(irfuse.UsageError, match="stream= orders a call on GPU arrays"):
        prog(X, u, conn, dN, lam, mu, stream=stream)


def test_a_gradient_and_its_hessian_vector_product_on_gpu_are_verified_and_deterministic():
    """The gradient of a Neo-Hookean energy and its Hessian-vector product (`derivative`
    lines) on the GPU: verified against the reference (every element and the sums), the
    same bits over runs; on the CPU backend verified too (its log is the host's, not the
    GPU's: not the same bits)."""
    import irfuse
    from irfuse.testing.derivatives import NEO_HOOKEAN_ENERGY

    src = NEO_HOOKEAN_ENERGY + "derivative grad of E wrt F;\nderivative jvp wrt F;\n"
    gpu = irfuse.compile(src, backend="cuda", filename="hvp.kas")
    cpu = irfuse.compile(src, backend="cpu", filename="hvp.kas")
    rng = np.random.default_rng(2)
    n = 300_001
    F = (np.eye(3) + 0.2 * rng.uniform(-1, 1, (n, 3, 3))).astype(np.float32)
    dF = rng.uniform(-1, 1, (n, 3, 3)).astype(np.float32)
    mu, lam = np.float32(0.8), np.float32(1.5)
    assert gpu.check(F=F, mu=mu, lam=lam, dF=dF, sample=None).ok
    assert cpu.check(F=F, mu=mu, lam=lam, dF=dF, sample=None).ok
    got, again = gpu(F=F, mu=mu, lam=lam, dF=dF), gpu(F=F, mu=mu, lam=lam, dF=dF)
    for name in gpu.outputs:
        assert getattr(got, name).tobytes() == getattr(again, name).tobytes(), name


def test_the_torch_operator_on_cuda_tensors_runs_on_the_callers_stream_and_compiles_with_inductor():
    """`irfuse.torch.op` on CUDA tensors: the results and gradients of the CUDA backend agree
    with the operator's on CPU tensors, calls on a side stream see the writes queued before
    them on it, numbers for uniform scalars give 0-d tensors' bits, and `torch.compile`
    (inductor, one graph) gives the eager values."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    import irfuse.torch
    from irfuse.testing.derivatives import NEO_HOOKEAN_ENERGY

    energy = irfuse.torch.op(NEO_HOOKEAN_ENERGY.replace("return E;", "return W, E;"), name="gpu_energy")
    rng = np.random.default_rng(5)
    n = 200_003
    F64 = np.eye(3) + 0.2 * rng.uniform(-1, 1, (n, 3, 3))
    results = {}
    for device in ("cpu", "cuda"):
        F = torch.tensor(F64, dtype=torch.float32, device=device, requires_grad=True)
        mu = torch.tensor(0.8, device=device, requires_grad=True)
        lam = torch.tensor(1.5, device=device, requires_grad=True)
        W, E = energy(F, mu, lam)
        (E + W[::7].sum()).backward()
        results[device] = [t.detach().cpu().numpy() for t in (W, E, F.grad, mu.grad, lam.grad)]
    for name, got, want in zip(("W", "E", "F.grad", "mu.grad", "lam.grad"), results["cuda"], results["cpu"]):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5, err_msg=name)
    # a side stream: the scaling queued on it before the call is what the call reads
    stream = torch.cuda.Stream()
    F = torch.tensor(F64, dtype=torch.float32, device="cuda")
    mu, lam = torch.tensor(0.8, device="cuda"), torch.tensor(1.5, device="cuda")
    torch.cuda.synchronize()
    with torch.cuda.stream(stream):
        scaled = F * 1.5
        W, E = energy(scaled, mu, lam)
    stream.synchronize()
    W_want, _ = energy(F * 1.5, mu, lam)
    torch.cuda.synchronize()
    assert torch.equal(W, W_want)
    # numbers for the uniform scalars: 0-d tensors of F's type on its GPU, the same bits
    W_numbers, E_numbers = energy(F * 1.5, 0.8, np.float64(1.5))
    assert W_numbers.device == F.device and torch.equal(W_numbers, W_want)

    def loss(F, mu):
        W, E = energy(F, mu, mu * 2)
        return E + (W ** 2).sum()

    F = torch.tensor(F64, dtype=torch.float32, device="cuda", requires_grad=True)
    mu = torch.tensor(0.8, device="cuda", requires_grad=True)
    got = torch.compile(loss, fullgraph=True)(F, mu)
    got.backward()
    g = F.grad.clone()
    F.grad = None
    want = loss(F, mu)
    want.backward()
    np.testing.assert_allclose(got.item(), want.item(), rtol=1e-5)
    np.testing.assert_allclose(g.cpu().numpy(), F.grad.cpu().numpy(), rtol=1e-5, atol=1e-6)


def test_operator_calls_on_memory_seen_before_launch_its_graph(monkeypatch):
    """A PyTorch operator's tensors are new objects at every call, mostly on memory a call had
    before (PyTorch's allocator hands freed blocks out again): such a call, forward and
    backward (from autograd's thread), launches the graph captured for that memory without
    going through the program's call; other memory and another stream take the call. Every
    result is the CPU operator's, and no tensor stays alive in irfuse after a call."""
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("PyTorch has no CUDA here")
    import collections
    import weakref

    import irfuse.torch
    from irfuse.testing.derivatives import NEO_HOOKEAN_ENERGY

    energy = irfuse.torch.op(NEO_HOOKEAN_ENERGY.replace("return E;", "return W, E;"), name="gpu_energy_again")
    rng = np.random.default_rng(8)
    F64 = np.eye(3) + 0.2 * rng.uniform(-1, 1, (50_001, 3, 3))
    mu, lam = torch.tensor(0.8), torch.tensor(1.5)
    W_cpu, _ = energy(torch.tensor(F64, dtype=torch.float32), mu, lam)
    F = torch.tensor(F64, dtype=torch.float32, device="cuda", requires_grad=True)
    mu_g, lam_g = mu.cuda(), lam.cuda()
    forward = energy.program.program("primal", "f32", "cuda")
    calls: collections.Counter = collections.Counter()
    real = type(forward).__call__

    def counting(self, *args, **named):
        calls[id(self)] += 1
        return real(self, *args, **named)

    monkeypatch.setattr(type(forward), "__call__", counting)

    def run():
        W, E = energy(F, mu_g, lam_g)
        E.backward()
        return W.detach().cpu().numpy()

    first = run()
    grad_first = F.grad.clone()
    F.grad = None
    for _ in range(4):  # (each memory's graph is captured the second time it is seen)
        run()
        F.grad = None
    calls.clear()
    for _ in range(5):
        np.testing.assert_array_equal(run(), first)
        assert torch.equal(F.grad, grad_first)
        F.grad = None
    assert sum(calls.values()) <= 2, calls  # (10 without the graphs: one forward and one backward a run)
    np.testing.assert_allclose(first, W_cpu.numpy(), rtol=2e-4, atol=1e-5)
    W, E = energy(F, mu_g, lam_g)
    held = weakref.ref(W)
    del W, E
    assert held() is None  # nothing of irfuse's holds the outputs
    # other memory (another input tensor) and another stream: the call, and right results
    calls.clear()
    F2 = torch.tensor(F64[::-1].copy(), dtype=torch.float32, device="cuda")
    W2, _ = energy(F2, mu_g, lam_g)
    assert calls[id(forward)] == 1
    np.testing.assert_allclose(W2.cpu().numpy(), first[::-1], rtol=1e-6, atol=1e-6)
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        W3, _ = energy(F2 * 2, mu_g, lam_g)
    stream.synchronize()
    W_want, _ = energy(torch.tensor(2 * F64[::-1].copy(), dtype=torch.float32), mu, lam)
    np.testing.assert_allclose(W3.cpu().numpy(), W_want.numpy(), rtol=2e-4, atol=1e-5)


def test_the_jax_function_on_the_gpu_runs_inside_jit_with_its_derivatives():
    """`irfuse.jax.op` on GPU arrays: under `jax.jit` the program, its forward derivative
    (`jax.jvp`) and its reverse derivative (`jax.grad`) run on XLA's stream and agree with the
    same function on the CPU."""
    jax = pytest.importorskip("jax")
    if jax.default_backend() != "gpu":
        pytest.skip("JAX has no GPU here")
    import irfuse.jax
    from irfuse.testing.derivatives import NEO_HOOKEAN_ENERGY

    f = irfuse.jax.op(NEO_HOOKEAN_ENERGY.replace("return E;", "return W, E;"))
    rng = np.random.default_rng(6)
    n = 100_003
    F = (np.eye(3) + 0.2 * rng.uniform(-1, 1, (n, 3, 3))).astype(np.float32)
    dF = rng.uniform(-1, 1, (n, 3, 3)).astype(np.float32)
    mu, lam = np.float32(0.8), np.float32(1.5)

    def everything(F, mu, lam, dF):
        (W, E), (dW, dE) = jax.jvp(lambda F: f(F, mu, lam), (F,), (dF,))
        g = jax.grad(lambda F, mu: f(F, mu, lam)[1] + f(F, mu, lam)[0][::5].sum(), argnums=(0, 1))(F, mu)
        return W, E, dW, dE, *g

    results = {}
    for kind in ("gpu", "cpu"):
        device = jax.devices(kind)[0]
        args = [jax.device_put(a, device) for a in (F, mu, lam, dF)]
        results[kind] = [np.asarray(r) for r in jax.jit(everything)(*args)]
    for k, (got, want) in enumerate(zip(results["gpu"], results["cpu"])):
        np.testing.assert_allclose(got, want, rtol=2e-4, atol=1e-5, err_msg=str(k))


# Simulations: scalars as numbers, time loops, calls captured by PyTorch ----------------------

def _neo_hookean(torch, n=1000):
    import irfuse

    prog = irfuse.compile(next(p for p in EXAMPLES if p.endswith("neo_hookean.kas")), backend="cuda")
    rng = np.random.default_rng(0)
    F = torch.from_numpy((np.eye(3) + 0.1 * rng.standard_normal((n, 3, 3))).astype(np.float32)).cuda()
    return prog, F


def test_uniform_scalars_as_numbers_next_to_gpu_tensors_change_at_every_call():
    """Python numbers and NumPy scalars beside torch tensors: the bits of 0-d tensors, call
    after call with a changing value (the fast path with out= writes each new value in the
    stream's order, and none where the value repeats)."""
    torch = _torch()
    prog, F = _neo_hookean(torch)
    outs = [torch.empty_like(F), torch.empty_like(F), torch.empty(1000, device="cuda")]
    for k in [0, 1, 2, 2, 3, 1]:
        mu = 0.5 + 0.25 * k
        got = prog(F, mu, np.float64(2.0), out=outs)
        want = prog(F, torch.tensor(mu, device="cuda"), torch.tensor(2.0, device="cuda"))
        torch.cuda.synchronize()
        assert all(torch.equal(a, b) for a, b in zip(got, want)), k
    # the fast path: the same tensors again, the number changed
    for k in range(4):
        prog(F, 1.0 + k, 2.0, out=outs)
        assert prog._fast is not None or k == 0
        want = prog(F, torch.tensor(1.0 + k, device="cuda"), torch.tensor(2.0, device="cuda"))
        assert all(torch.equal(a, b) for a, b in zip(outs, want)), k
    with pytest.raises(irfuse_usage_error(), match=r"input 'mu' is 1e\+300, beyond the float32 range"):
        prog(F, 1e300, 2.0)


def irfuse_usage_error():
    from irfuse.diagnostics import UsageError

    return UsageError


def _explicit_step_on(torch, cubes=6, seed=2):
    import irfuse
    from irfuse.mesh import Connectivity, box_tetrahedra

    coords, conn = box_tetrahedra(cubes, numbering="random", seed=seed)
    rng = np.random.default_rng(seed)
    X = coords.astype(np.float32)
    t = {"X": X, "u": (1e-3 * rng.standard_normal(X.shape)).astype(np.float32),
         "v": (1e-2 * rng.standard_normal(X.shape)).astype(np.float32),
         "m": rng.uniform(0.5, 1.5, len(X)).astype(np.float32),
         "dN": np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)}
    args = {k: torch.from_numpy(a).cuda() for k, a in t.items()}
    path = os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "explicit_step.kas")
    return irfuse.compile(path, backend="cuda"), args, Connectivity(conn, len(X)), t


def test_a_time_loop_on_gpu_tensors_gives_the_bits_of_its_steps_one_by_one():
    """The explicit step on torch tensors: 70 steps (three called, four launches of 16
    captured, three called) give the bits of 70 calls, torch tensors come back, the caller's
    u and v are not written; the CPU backend's loop is close."""
    import irfuse

    torch = _torch()
    step, args, conn, host = _explicit_step_on(torch)
    u0, v0 = args["u"].clone(), args["v"].clone()
    uu, vv = args["u"], args["v"]
    for k in range(70):
        uu, vv = step(X=args["X"], u=uu, v=vv, m=args["m"], conn=conn, dN=args["dN"], lam=1.5, mu=0.75, dt=1e-3)
    got = irfuse.time_loop(step, 70, {"u": "u1", "v": "v1"}, conn=conn, lam=1.5, mu=0.75, dt=1e-3, **args)
    torch.cuda.synchronize()
    assert isinstance(got.u1, torch.Tensor) and got.u1.is_cuda
    assert torch.equal(got.u1, uu) and torch.equal(got.v1, vv)
    assert torch.equal(args["u"], u0) and torch.equal(args["v"], v0)
    cpu = irfuse.compile(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "explicit_step.kas"), backend="cpu")
    want = irfuse.time_loop(cpu, 70, {"u": "u1", "v": "v1"}, conn=conn, lam=1.5, mu=0.75, dt=1e-3, **host)
    np.testing.assert_allclose(got.u1.cpu().numpy(), want.u1, rtol=1e-4, atol=1e-6)


def test_an_entry_of_a_scatters_sums_read_per_node_on_the_gpu():
    """`z = r[2]` of a scatter's sums (its node kernel keeping the one word it reads) and
    `zeros(r)` (keeping none) on the GPU: host and CuPy arrays, ordered and atomic, against the
    reference and the CPU backend's bits (both kernels were refused before)."""
    import cupy

    from test_nodal_statements import ENTRY_OF_SUMS as src

    import irfuse
    from irfuse.mesh import box_tetrahedra

    X, conn = box_tetrahedra(6, numbering="random", seed=3)[:2]
    X = np.random.default_rng(4).standard_normal(X.shape).astype(np.float32)
    zeros = src.replace("nodal scalar z, q;", "nodal scalar q; nodal vector3 z;").replace("z = r[2];", "z = zeros(r);")
    for text in (src, zeros):
        gpu, cpu = irfuse.compile(text, backend="cuda"), irfuse.compile(text, backend="cpu", profile="h100")
        want = cpu(X, conn)
        got = gpu(X, conn, verify=True)
        on_gpu = gpu(cupy.asarray(X), cupy.asarray(conn), verify=True)
        atomic = gpu(X, conn, scatter="atomic", verify=True)
        for name, w, g, d in zip(gpu.outputs, want, got, on_gpu):
            assert g.tobytes() == cupy.asnumpy(d).tobytes() == w.tobytes(), name
        np.testing.assert_allclose(atomic[0], want[0], rtol=1e-5, atol=1e-5 * np.abs(want[0]).max())


def test_the_node_pass_after_the_scatter_runs_in_the_kernel_adding_its_sums_on_the_gpu():
    """On GPU tensors the explicit step runs its fused stages (the pass over the nodes after the
    elements launched by the elements stage, adding each node's partials itself): the bits of
    its passes one by one, in a call, made again (graph) and in a time loop; the host's
    Connectivity and one made on the GPU alike."""
    import irfuse
    from irfuse.api.staged_programs import StagedProgram
    from irfuse.mesh import Connectivity

    torch = _torch()
    step, args, conn, host = _explicit_step_on(torch, cubes=5, seed=4)
    assert [s.over for s in step.artifact.fused] == ["nodes", "elements"]
    apart = StagedProgram(step.artifact, "cuda", [])
    apart.fused_programs = None  # (the passes one by one)
    on_gpu = Connectivity(torch.from_numpy(conn.conn).cuda(), len(host["X"]))
    kw = dict(lam=1.5, mu=0.75, dt=1e-3)
    want = apart(conn=conn, **kw, **args)
    for c in (conn, on_gpu):
        for _ in range(3):  # (the third call made again replays a graph)
            got = step(conn=c, **kw, **args)
        torch.cuda.synchronize()
        assert torch.equal(got.u1, want.u1) and torch.equal(got.v1, want.v1)
    fused = irfuse.time_loop(step, 20, {"u": "u1", "v": "v1"}, conn=conn, **kw, **args)
    one_by_one = irfuse.time_loop(apart, 20, {"u": "u1", "v": "v1"}, conn=conn, **kw, **args)
    torch.cuda.synchronize()
    assert torch.equal(fused.v1, one_by_one.v1) and torch.equal(fused.u1, one_by_one.u1)
    apart.close()


def test_a_time_loop_made_again_replays_its_kept_graphs_with_the_bits_of_calls():
    """Loops made again on the same arguments reuse the graphs they keep: from the last
    loop's outputs (copied in), for 37, 2 and 1 steps (graphs of 16 and of one step), after a
    non-carried input changed in place, with dt changed (graphs of their own): each the bits of its steps
    called one by one; what a loop returns is the caller's, not written by later loops."""
    import irfuse

    torch = _torch()
    step, args, conn, _ = _explicit_step_on(torch, cubes=4, seed=5)

    def calls(u, v, count, dt=1e-3):
        for _ in range(count):
            u, v = step(X=args["X"], u=u, v=v, m=args["m"], conn=conn, dN=args["dN"], lam=1.5, mu=0.75, dt=dt)
        return u, v

    def loop(u, v, count, dt=1e-3):
        got = irfuse.time_loop(step, count, {"u": "u1", "v": "v1"}, X=args["X"], u=u, v=v, m=args["m"], conn=conn,
                               dN=args["dN"], lam=1.5, mu=0.75, dt=dt)
        return got.u1, got.v1

    def kept():
        return {id(k) for k in getattr(step, "_time_loops", {}).values()}

    before = kept()
    u, v = loop(args["u"], args["v"], 20)
    made = kept() - before
    assert len(made) == 1  # (the program object is shared with other tests: count only new loops)
    first = u.clone()
    for count in (37, 2, 1):
        want = calls(u, v, count)
        u, v = loop(u, v, count)
        assert torch.equal(u, want[0]) and torch.equal(v, want[1]), count
    assert kept() == made | before
    m0 = args["m"].clone()
    args["m"].mul_(1.25)  # (read in place by the kept graphs)
    want = calls(u, v, 19)
    got = loop(u, v, 19)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    args["m"].copy_(m0)
    want = calls(u, v, 17, dt=2e-3)
    got = loop(u, v, 17, dt=2e-3)
    assert torch.equal(got[0], want[0]) and torch.equal(got[1], want[1])
    assert len(kept() - before - made) == 1
    torch.cuda.synchronize()
    assert not torch.equal(first, u)  # (the first loop's result is its own, unchanged by later loops)
    assert torch.equal(first, loop(args["u"], args["v"], 20)[0])


def test_calls_captured_in_a_torch_cuda_graph_replay_with_new_values():
    """A plain program and a program over a mesh with a Connectivity, each called once
    outside, then captured in torch.cuda.graph and replayed on new values in the same
    tensors: the bits of direct calls. A first call inside a capture is refused by name."""
    import irfuse
    from irfuse.diagnostics import NotCapturable

    torch = _torch()
    prog, F = _neo_hookean(torch)
    mu, lam = torch.tensor(0.8, device="cuda"), torch.tensor(1.5, device="cuda")
    outs = [torch.empty_like(F), torch.empty_like(F), torch.empty(1000, device="cuda")]
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        prog(F, mu, lam, out=outs)  # (the warm-up torch asks for)
        prog(F, mu, lam, out=outs)
    torch.cuda.current_stream().wait_stream(side)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        prog(F, mu, lam, out=outs)
    F.mul_(1.01)
    g.replay()
    want = prog(F, mu, lam)
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(outs, want))

    step, args, conn, _ = _explicit_step_on(torch)
    res = irfuse.compile(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas"), backend="cuda")
    r = torch.empty_like(args["u"])
    call = lambda: res(args["X"], args["u"], conn, args["dN"], 1.5, 0.75, out=r)  # noqa: E731
    with torch.cuda.stream(side):
        call()
    torch.cuda.current_stream().wait_stream(side)
    g2 = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g2):
        call()
    args["u"].mul_(2)
    g2.replay()
    want = res(args["X"], args["u"], conn, args["dN"], 1.5, 0.75)
    torch.cuda.synchronize()
    assert torch.equal(r, want.r)

    fresh = irfuse.compile(next(p for p in EXAMPLES if p.endswith("neo_hookean.kas")), backend="cuda",
                           dtype="f64")
    F64 = F.double()
    g3 = torch.cuda.CUDAGraph()
    with pytest.raises(NotCapturable, match="make one call outside the capture first"):
        with torch.cuda.graph(g3):
            fresh(F64, 0.8, 1.5)


def test_calls_without_out_take_the_fast_path_and_make_new_tensors():
    """Calls on the same tensors without out=: from the second on the fast path makes the
    outputs (new tensors while the caller holds the last ones; a loop that lets go of each
    call's outputs gets the two sets it let go of handed back, never one a view still
    holds) and gives the bits of a call through the slow path."""
    torch = _torch()
    prog, F = _neo_hookean(torch)
    held = [prog(F, 0.8, 1.5) for _ in range(4)]
    assert prog._fast is not None and prog._fast.made is not None
    assert len({o.P.data_ptr() for o in held}) == 4
    addresses = []
    for _ in range(6):
        last = prog(F, 0.8, 1.5)  # (the outputs before let go: handed back)
        addresses.append(last.P.data_ptr())
    assert len(set(addresses)) == 2 and addresses[2:] == addresses[:2] * 2
    assert not {o.P.data_ptr() for o in held} & set(addresses)
    want = prog(F, torch.tensor(0.8, device="cuda"), torch.tensor(1.5, device="cuda"))
    torch.cuda.synchronize()
    for got in [*held, last]:
        assert all(isinstance(a, torch.Tensor) and torch.equal(a, b) for a, b in zip(got, want))
    view, at = last.P[:7], last.P.data_ptr()
    before = view.clone()
    del last  # (its set now held by the view alone)
    for _ in range(4):
        other = prog(F, 0.9, 1.5)
        assert other.P.data_ptr() != at
    other_want = prog(F, torch.tensor(0.9, device="cuda"), torch.tensor(1.5, device="cuda"))
    torch.cuda.synchronize()
    assert torch.equal(view, before) and all(torch.equal(a, b) for a, b in zip(other, other_want))


def test_calls_again_into_the_same_out_run_as_graphs_and_follow_values_and_numbers():
    """Calls again into the same out= tensors: the P1 residual launches its run's graph, the
    explicit step the graph of its three passes (captured once, at its second call made
    again), each with its scalars' words written before it; without out=, the explicit step's
    graphs by the addresses of the outputs torch makes; values written into the inputs
    between calls and numbers that stay or change give the bits of calls on fresh tensors
    (made after the loop, so that the loop's calls stay the kept ones)."""
    import irfuse

    torch = _torch()
    step, args, conn, _ = _explicit_step_on(torch, cubes=5, seed=7)
    res = irfuse.compile(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas"), backend="cuda")
    r = torch.empty_like(args["u"])
    out = [torch.empty_like(args["u"]), torch.empty_like(args["v"])]
    seen, graphs = [], []
    for k in range(9):
        args["u"].mul_(1.125)
        args["v"].add_(0.5)
        mu, dt = 0.75 + k, 1e-3 * (1 + k // 4)  # (dt: four calls of one value, four of another, one more)
        got = res(args["X"], args["u"], conn, args["dN"], 1.5, mu, out=r)
        s = step(args["X"], args["u"], args["v"], args["m"], conn, args["dN"], 1.5, 0.75, dt, out=out)
        assert got.r is r and s[0] is out[0] and s[1] is out[1]
        graphs.append(next((f.graphs.get(((), ())) for f in step._fast if f.made is None), None))
        made = step(args["X"], args["u"], args["v"], args["m"], conn, args["dN"], 1.5, 0.75, dt)
        seen.append(({name: a.clone() for name, a in args.items()}, mu, dt, r.clone(), [a.clone() for a in out],
                     [a.clone() for a in made]))
        del made  # (let go: the next call's outputs may take its addresses, and their graph)
    assert any(res._mesh_fast[0].run.graphs.values())  # (the residual's calls into r: its run's graph)
    assert graphs[1] is None and graphs[2] is not None and all(g is graphs[2] for g in graphs[2:])
    graphs_of_r = len(res._mesh_fast[0].run.graphs)
    for _ in range(12):  # (torch's allocator settles on the addresses the last outputs let go of)
        made = step(args["X"], args["u"], args["v"], args["m"], conn, args["dN"], 1.5, 0.75, 1e-3)
        rr = res(args["X"], args["u"], conn, args["dN"], 1.5, 0.5)
        del made, rr
    assert any(f.made is not None and f.graphs for f in step._fast)  # (without out=: graphs by address)
    assert len(res._mesh_fast[0].run.graphs) > graphs_of_r
    args["u"].mul_(1.5)
    made = step(args["X"], args["u"], args["v"], args["m"], conn, args["dN"], 1.5, 0.75, 3e-3)
    rr = res(args["X"], args["u"], conn, args["dN"], 1.5, 0.25)
    seen.append(({name: a.clone() for name, a in args.items()}, 0.25, 3e-3, rr.r.clone(), None,
                 [a.clone() for a in made]))
    del made, rr
    for k, (fresh, mu, dt, r_got, s_got, made_got) in enumerate(seen):
        want = res(fresh["X"], fresh["u"], conn, fresh["dN"], 1.5, mu)
        want_s = step(fresh["X"], fresh["u"], fresh["v"], fresh["m"], conn, fresh["dN"], 1.5, 0.75, dt)
        torch.cuda.synchronize()
        assert r_got is None or torch.equal(r_got, want.r), k
        assert s_got is None or all(torch.equal(a, b) for a, b in zip(s_got, want_s)), k
        assert all(torch.equal(a, b) for a, b in zip(made_got, want_s)), k


def test_calls_over_a_mesh_again_on_the_same_tensors_follow_their_values_and_numbers(monkeypatch):
    """The P1 residual and the explicit step called again on the same torch tensors (the fast
    paths of a mesh call and of a program of passes), with new values written into them and
    new numbers for the scalars, with out= and without: the bits of calls on fresh tensors; a
    number the step's passes share is written once a call."""
    import irfuse

    torch = _torch()
    step, args, conn, _ = _explicit_step_on(torch)
    res = irfuse.compile(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas"), backend="cuda")
    r = torch.empty_like(args["u"])
    out = [torch.empty_like(args["u"]), torch.empty_like(args["v"])]
    for k in range(5):
        args["u"].mul_(1.25)
        got = res(args["X"], args["u"], conn, args["dN"], 1.5, 0.75 + k, out=r)
        made = res(args["X"], args["u"], conn, args["dN"], 1.5, 0.75 + k)
        s = step(args["X"], args["u"], args["v"], args["m"], conn, args["dN"], 1.5, 0.75, 1e-3 * (k + 1), out=out)
        fresh = {name: a.clone() for name, a in args.items()}
        want = res(fresh["X"], fresh["u"], conn, fresh["dN"], torch.tensor(1.5, device="cuda"),
                   torch.tensor(0.75 + k, device="cuda"))
        want_s = step(fresh["X"], fresh["u"], fresh["v"], fresh["m"], conn, fresh["dN"], np.float32(1.5),
                      np.float32(0.75), np.float32(1e-3 * (k + 1)))
        torch.cuda.synchronize()
        assert got.r is r and torch.equal(r, want.r) and torch.equal(made.r, want.r), k
        assert s[0] is out[0] and all(torch.equal(a, b) for a, b in zip(s, want_s)), k
    assert res._mesh_fast and step._fast
    # dt, read by two of the passes, is one word of the step's graph: a new dt, one memset.
    from irfuse.runtime.cuda_device import CudaDevice

    for dt in (2e-3, 3e-3, 4e-3):  # (made again: pass by pass twice, then its graph is captured)
        step(args["X"], args["u"], args["v"], args["m"], conn, args["dN"], 1.5, 0.75, dt, out=out)
    assert any(fast.graphs for fast in step._fast)
    writes = recorded(monkeypatch, CudaDevice, "_set_words")
    s = step(args["X"], args["u"], args["v"], args["m"], conn, args["dN"], 1.5, 0.75, 7e-3, out=out)
    written = len(writes)
    fresh = {name: a.clone() for name, a in args.items()}
    want_s = step(fresh["X"], fresh["u"], fresh["v"], fresh["m"], conn, fresh["dN"], np.float32(1.5),
                  np.float32(0.75), torch.tensor(7e-3, device="cuda"))
    torch.cuda.synchronize()
    assert written == 1 and all(torch.equal(a, b) for a, b in zip(s, want_s))


def test_a_loop_feeding_a_steps_outputs_back_replays_its_graphs(monkeypatch):
    """`u, v = step(X, u, v, ...)` without out=: each call's inputs are the last call's
    outputs, new tensors alike the first call's; the outputs settle into two sets in turn,
    each call then one graph launch, and the bits are `irfuse.time_loop`'s of the same steps."""
    import irfuse
    from irfuse.api.staged_programs import _PassesGraph

    torch = _torch()
    step, args, conn, _ = _explicit_step_on(torch)
    launched = recorded(monkeypatch, _PassesGraph, "run")
    u, v, where = args["u"].clone(), args["v"].clone(), []
    for k in range(16):
        if k == 10:
            launched.clear()
        u, v = step(args["X"], u, v, args["m"], conn, args["dN"], 1.5, 0.75, 1e-3)
        where.append((u.data_ptr(), v.data_ptr()))
    want = irfuse.time_loop(step, 16, {"u": "u1", "v": "v1"}, X=args["X"], u=args["u"], v=args["v"], m=args["m"],
                            conn=conn, dN=args["dN"], lam=1.5, mu=0.75, dt=1e-3)
    torch.cuda.synchronize()
    assert torch.equal(u, want.u1) and torch.equal(v, want.v1)
    assert where[-1] == where[-3] == where[-5] and where[-2] == where[-4] and where[-1] != where[-2]
    assert launched == [True] * 6  # (the last six calls: one graph launch each)


def _loop_on_new_inputs(torch, call, x, seen: list, steps: int = 14, after: int = 8):
    """`steps` calls `y = call(x)`, each followed by `x = torch.add(x, y, alpha=1e-3)` (a new
    `x` at every call; the last `y` held while the next call runs, as a loop holds it), `seen`
    cleared before call `after`: every call's input and result, stacked."""
    ins, outs = (torch.empty((steps, *x.shape), device="cuda") for _ in range(2))
    for k in range(steps):
        if k == after:
            seen.clear()
        y = call(x)
        ins[k].copy_(x)
        outs[k].copy_(y)
        x = torch.add(x, y, alpha=1e-3)
    return ins, outs


def test_a_loop_making_a_new_input_at_every_call_replays_a_programs_graphs(monkeypatch):
    """SyncTest without out= on a new `A` at every call (`A = torch.add(A, F, alpha=h)`): the
    arrays alike the first call's take its place, the run's graph kept by their addresses
    (the last six calls launch one each), and each result has the bits of a call on that `A`
    through the whole call's checks (out=: not the fast path)."""
    import irfuse
    from irfuse.api.gpu_calls import GpuInPlaceRun

    torch = _torch()
    prog = irfuse.compile(next(p for p in EXAMPLES if p.endswith("synctest.kas")), backend="cuda")
    A = torch.from_numpy(np.random.default_rng(5).random((1000, 3, 3), dtype=np.float32)).cuda()
    launched = recorded(monkeypatch, GpuInPlaceRun, "launch_kept")
    ins, outs = _loop_on_new_inputs(torch, lambda A: prog(A).F, A, launched)
    assert launched == [True] * 6
    monkeypatch.undo()
    for k in range(14):
        want = torch.empty_like(A)
        prog(ins[k].clone(), out=want)
        assert torch.equal(outs[k], want), k


def test_a_loop_making_a_new_input_at_every_call_replays_a_mesh_programs_graphs(monkeypatch):
    """The P1 residual without out= on a new `u` at every call (`u = torch.add(u, r, alpha=h)`):
    the arrays alike the first call's take their place, the run's graph kept by their
    addresses (each of the last six calls launches one graph and runs no kernel by itself),
    and each result has the bits of a call on that `u` through the whole call's checks
    (out=: not the fast path)."""
    import irfuse
    from irfuse.mesh import Connectivity, box_tetrahedra
    from irfuse.runtime.cuda_graph import CudaGraph
    from irfuse.runtime.mesh_runs import MeshInPlaceRun

    torch = _torch()
    X, conn = box_tetrahedra(5, numbering="random", seed=4)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    t = {"X": torch.from_numpy(X.astype(np.float32)).cuda(), "dN": torch.from_numpy(dN).cuda()}
    u = torch.from_numpy((1e-2 * np.random.default_rng(4).standard_normal(X.shape)).astype(np.float32)).cuda()
    res = irfuse.compile(os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas"), backend="cuda")
    c = Connectivity(conn, len(X))
    seen: list = []  # ("graph": a graph launched, "run": the run's kernels launched one by one)
    launch_on, run = CudaGraph.launch_on, MeshInPlaceRun.run
    monkeypatch.setattr(CudaGraph, "launch_on", lambda self, h: (seen.append("graph"), launch_on(self, h))[1])
    monkeypatch.setattr(MeshInPlaceRun, "run", lambda self, *a, **k: (seen.append("run"), run(self, *a, **k))[1])
    us, rs = _loop_on_new_inputs(torch, lambda u: res(t["X"], u, c, t["dN"], 1.5, 0.75).r, u, seen)
    assert seen == ["graph"] * 6
    monkeypatch.undo()
    for k in range(14):
        want = torch.empty_like(u)
        res(t["X"], us[k].clone(), c, t["dN"], 1.5, 0.75, out=want)
        assert torch.equal(rs[k], want), k


def test_a_linear_operator_on_torch_tensors_is_the_host_one():
    """`irfuse.linear_operator` of the P1 residual on CUDA tensors (a boolean mask of fixed
    components on the GPU too): its products are the CPU backend's operator's."""
    import torch

    import irfuse
    from irfuse.mesh import Connectivity, box_tetrahedra

    X, conn = box_tetrahedra(3, numbering="random", seed=2)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], float)
    path = os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas")
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    host = irfuse.linear_operator(irfuse.compile(path, backend="cpu", dtype="f64"), X, np.zeros_like(X),
                                  Connectivity(conn, len(X)), dN, 1.5, 0.75, wrt="u", fixed=fixed)
    t = {k: torch.from_numpy(a).cuda() for k, a in (("X", X), ("dN", dN), ("fixed", fixed))}
    gpu = irfuse.linear_operator(irfuse.compile(path, backend="cuda", dtype="f64"), t["X"], torch.zeros_like(t["X"]),
                                 Connectivity(conn, len(X)), t["dN"], 1.5, 0.75, wrt="u", fixed=t["fixed"])
    v = np.random.default_rng(3).standard_normal(X.size)
    got = gpu.matvec(torch.from_numpy(v).cuda())
    assert isinstance(got, torch.Tensor) and got.is_cuda and gpu.shape == host.shape
    np.testing.assert_allclose(got.cpu().numpy(), host.matvec(v), rtol=1e-12, atol=1e-12)
    dofs = irfuse.linear_operator(irfuse.compile(path, backend="cuda", dtype="f64"), t["X"], torch.zeros_like(t["X"]),
                                  Connectivity(conn, len(X)), t["dN"], 1.5, 0.75, wrt="u",
                                  fixed=torch.from_numpy(np.flatnonzero(fixed)).cuda())  # (flat indices on the GPU)
    assert dofs.matvec(torch.from_numpy(v).cuda()).cpu().numpy().tobytes() == got.cpu().numpy().tobytes()
    back = gpu.rmatvec(torch.from_numpy(v).cuda())  # (the reverse derivative on the GPU: the host's transpose)
    assert isinstance(back, torch.Tensor) and back.is_cuda
    np.testing.assert_allclose(back.cpu().numpy(), host.rmatvec(v), rtol=1e-12, atol=1e-12)
    assert (gpu.T @ torch.from_numpy(v).cuda()).cpu().numpy().tobytes() == back.cpu().numpy().tobytes()
    column = gpu.matvec(torch.from_numpy(v).cuda().reshape(-1, 1))
    assert tuple(column.shape) == (X.size, 1) and column.cpu().numpy().tobytes() == got.cpu().numpy().tobytes()
    with pytest.raises(irfuse.UsageError, match=f"a product takes a vector of {X.size} values"):
        gpu.matvec(torch.ones(5, dtype=torch.float64, device="cuda"))


def test_a_tangent_matrix_of_gpu_arrays_is_assembled_there_in_the_fixed_order():
    """`irfuse.tangent_matrix` of the P1 residual on CUDA tensors with a `Connectivity` made on
    the GPU: a `torch.sparse_csr_tensor` on the GPU whose values are the NumPy reference's
    assembly of the element blocks (to rounding: the owner-computes kernel makes its blocks
    itself), the same bits again and through `out=`, the host float64 matrix to float32
    rounding; CuPy arrays get a `cupyx` CSR matrix of the same bits; the diagonal and
    Dirichlet rows alike (the diagonal's program: a CuPy array from CuPy arrays, the same bits
    through a connectivity prepared on the host); the nodes' slot lists made on the GPU are the host's; tensors of
    another width, type or shape are refused by name."""
    torch = pytest.importorskip("torch")
    from scipy import sparse

    import irfuse
    from irfuse.api.tangents import _element_blocks
    from irfuse.mesh import Connectivity, box_tetrahedra
    from irfuse.mesh.assembly import assemble

    X, conn = box_tetrahedra(4, numbering="random", seed=5)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    u = (1e-2 * np.random.default_rng(2).standard_normal(X.shape)).astype(np.float32)
    path = os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas")
    prog = irfuse.compile(path, backend="cuda")
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 2] == 0] = True
    t = {k: torch.from_numpy(np.ascontiguousarray(a)).cuda() for k, a in
         (("X", X.astype(np.float32)), ("u", u), ("dN", dN), ("fixed", fixed))}
    prepared = Connectivity(torch.from_numpy(conn).cuda(), len(X))
    args = (t["X"], t["u"], prepared, t["dN"], 1.5, 0.75)
    M = irfuse.tangent_matrix(prog, *args, wrt="u")
    made_here, on_host = prepared.sparse_pattern(3), Connectivity(conn, len(X)).sparse_pattern(3)
    for name in ("pairs", "indptr", "indices", "diagonal"):  # (the pattern made on the GPU: the host's)
        assert getattr(made_here, name).is_cuda
        assert np.array_equal(getattr(made_here, name).cpu().numpy(), getattr(on_host, name)), name
    assert M.layout == torch.sparse_csr and M.is_cuda and M.col_indices().dtype == torch.int32
    blocks = _element_blocks(prog, args, {}, "u", None, None, "test")[0]
    want = assemble(blocks.cpu().numpy(), conn, len(X))  # (the blocks stored, then added)
    first = M.values().cpu().numpy()
    np.testing.assert_allclose(first, want.data, rtol=0, atol=1e-6 * abs(want.data).max())
    assert np.array_equal(M.col_indices().cpu().numpy(), want.indices)
    again = irfuse.tangent_matrix(prog, *args, wrt="u", out=M)
    assert again is M and M.values().cpu().numpy().tobytes() == first.tobytes()
    host = irfuse.tangent_matrix(irfuse.compile(path, backend="cpu", dtype="f64"), X, u.astype(float),
                                 Connectivity(conn, len(X)), dN.astype(float), 1.5, 0.75, wrt="u")
    assert abs(sparse.csr_matrix(want) - host).max() < 1e-5 * abs(host).max()
    F = irfuse.tangent_matrix(prog, *args, wrt="u", fixed=t["fixed"])
    dense = F.to_dense().cpu().numpy()
    flat = fixed.reshape(-1)
    assert np.array_equal(dense[flat][:, flat], np.eye(flat.sum())) and not dense[flat][:, ~flat].any()
    d = irfuse.diagonal(prog, *args, wrt="u", fixed=t["fixed"])
    assert d.is_cuda
    np.testing.assert_allclose(d.cpu().numpy().reshape(-1), np.diagonal(dense), rtol=1e-5)
    dofs = torch.from_numpy(np.flatnonzero(fixed)).cuda()  # (the same components as flat indices on the GPU)
    assert irfuse.tangent_matrix(prog, *args, wrt="u", fixed=dofs).values().cpu().numpy().tobytes() == \
        F.values().cpu().numpy().tobytes()
    assert irfuse.diagonal(prog, *args, wrt="u", fixed=dofs).cpu().numpy().tobytes() == d.cpu().numpy().tobytes()
    cupy = pytest.importorskip("cupy")
    c = irfuse.tangent_matrix(prog, cupy.asarray(X.astype(np.float32)), cupy.asarray(u), prepared,
                              cupy.asarray(dN), 1.5, 0.75, wrt="u")
    assert type(c).__module__.startswith("cupyx") and c.data.get().tobytes() == first.tobytes()
    # (the diagonal's program over the mesh: CuPy arrays get a CuPy array, and a connectivity
    # prepared on the host the GPU-prepared one's order: the same bits)
    dc = irfuse.diagonal(prog, cupy.asarray(X.astype(np.float32)), cupy.asarray(u), prepared, cupy.asarray(dN),
                         1.5, 0.75, wrt="u", fixed=cupy.asarray(fixed))
    assert isinstance(dc, cupy.ndarray) and dc.get().tobytes() == d.cpu().numpy().tobytes()
    host_prepared = Connectivity(conn, len(X))
    dh = irfuse.diagonal(prog, *args[:2], host_prepared, *args[3:], wrt="u", fixed=t["fixed"])
    assert dh.is_cuda and dh.cpu().numpy().tobytes() == d.cpu().numpy().tobytes()
    assert not prepared.kept["names a node twice"] and not host_prepared.kept["names a node twice"]
    # (the owner-computes kernel ran, keeping each node's slot lists, made on the GPU as on the host)
    starts, slots = prepared.kept[("node slots", str(t["u"].device))]
    from irfuse.mesh.assembly import node_slots
    assert [a.cpu().tolist() for a in (starts, slots)] == [a.tolist() for a in node_slots(conn, len(X))]
    for bad, match in [((t["X"][:, :2].contiguous(), *args[1:]), "has shape"),
                       ((t["X"].double(), *args[1:]), "holds float64"),
                       ((*args[:3], t["dN"][:2], 1.5, 0.75), "'dN' has shape")]:
        with pytest.raises(irfuse.UsageError, match=match):
            irfuse.tangent_matrix(prog, *bad, wrt="u")


def test_the_tangents_scatter_path_on_gpu_arrays_gives_the_rows_kernels_matrix(monkeypatch):
    """The scatter of per-slot blocks (the assembly of programs the owner-computes kernel cannot
    run; forced by `IRFUSE_TANGENT_ROWS=0`) on CUDA tensors: the P1 tangent it writes into a
    matrix of the pattern is the owner-computes kernel's to float32 rounding (both add each
    entry's terms in element order), the same bits again through `out=`, Dirichlet rows alike."""
    torch = pytest.importorskip("torch")

    import irfuse
    import irfuse.api.tangents as tangents
    from irfuse.mesh import Connectivity, box_tetrahedra

    X, conn = box_tetrahedra(5, numbering="random", seed=7)
    dN = np.array([[-1, -1, -1], [1, 0, 0], [0, 1, 0], [0, 0, 1]], np.float32)
    u = (1e-2 * np.random.default_rng(3).standard_normal(X.shape)).astype(np.float32)
    fixed = np.zeros(X.shape, bool)
    fixed[X[:, 0] == 0] = True
    path = os.path.join(os.path.dirname(EXAMPLES[0]), "mesh", "p1_residual.kas")
    prog = irfuse.compile(path, backend="cuda")
    t = {k: torch.from_numpy(np.ascontiguousarray(a)).cuda() for k, a in
         (("X", X.astype(np.float32)), ("u", u), ("dN", dN), ("fixed", fixed))}
    args = (t["X"], t["u"], Connectivity(torch.from_numpy(conn).cuda(), len(X)), t["dN"], 1.5, 0.75)
    rows = irfuse.tangent_matrix(prog, *args, wrt="u")
    held = irfuse.tangent_matrix(prog, *args, wrt="u", fixed=t["fixed"])
    monkeypatch.setenv(tangents.ROWS_SWITCH, "0")
    M = irfuse.tangent_matrix(prog, *args, wrt="u")
    assert torch.equal(M.crow_indices(), rows.crow_indices()) and torch.equal(M.col_indices(), rows.col_indices())
    want = rows.values().cpu().numpy()
    first = M.values().cpu().numpy()
    np.testing.assert_allclose(first, want, rtol=0, atol=1e-6 * abs(want).max())
    again = irfuse.tangent_matrix(prog, *args, wrt="u", out=M)
    assert again is M and M.values().cpu().numpy().tobytes() == first.tobytes()
    F = irfuse.tangent_matrix(prog, *args, wrt="u", fixed=t["fixed"])
    np.testing.assert_allclose(F.values().cpu().numpy(), held.values().cpu().numpy(), rtol=0,
                               atol=1e-6 * abs(want).max())


def test_tangent_matrices_of_random_mesh_programs_on_the_gpu_are_the_cpus():
    """The GPU's owner-computes assembly (a node's rows by reverse sweeps, a thread a row) on
    random mesh programs whose tangents can be taken (the differential tests' `mesh_tangents`),
    float64 CUDA tensors and a `Connectivity` made on the GPU: every nodal output by every
    nodal input the tangent takes gives the CPU backend's matrix (same pattern; values to
    rounding, the CPU summing whole blocks of forward directions) and the same bits again."""
    torch = pytest.importorskip("torch")
    import irfuse
    from irfuse.dialects.kas import program_of
    from irfuse.driver.front import frontend
    from irfuse.driver.sources import Source
    from irfuse.mesh import Connectivity
    from irfuse.testing.derivatives import float64_inputs, random_differentiable_programs

    compared = 0
    for seed in range(12):
        source = random_differentiable_programs("mesh_tangents", seed)
        program = program_of(frontend(Source(source, "<tangent check>")).module)
        inputs, nodes = float64_inputs(program, 300, seed)
        cpu, gpu = irfuse.compile(source, backend="cpu", dtype="f64"), irfuse.compile(source, backend="cuda", dtype="f64")
        on_gpu = {}
        for name, a in inputs.items():
            a = np.asarray(a)
            if name in program.inputs and a.dtype.kind in "iu":
                on_gpu[name] = Connectivity(torch.from_numpy(np.ascontiguousarray(a)).cuda(), nodes)
            else:
                on_gpu[name] = torch.from_numpy(np.ascontiguousarray(a)).cuda() if a.ndim else float(a)
        for x in [k for k in cpu.inputs if k in cpu.nodal]:
            for y in [k for k in cpu.outputs if k in cpu.nodal]:
                try:
                    want = irfuse.tangent_matrix(cpu, **inputs, wrt=x, of=y)
                except irfuse.UsageError:
                    continue
                got = irfuse.tangent_matrix(gpu, **on_gpu, wrt=x, of=y)
                again = irfuse.tangent_matrix(gpu, **on_gpu, wrt=x, of=y)
                values = got.values().cpu().numpy()
                assert np.array_equal(got.crow_indices().cpu().numpy(), want.indptr), (seed, x, y)
                assert np.array_equal(got.col_indices().cpu().numpy(), want.indices), (seed, x, y)
                scale = max(abs(want.data).max(), 1.0)
                np.testing.assert_allclose(values, want.data, rtol=0, atol=1e-11 * scale, err_msg=f"{seed} d{y}/d{x}")
                assert values.tobytes() == again.values().cpu().numpy().tobytes()
                compared += 1
    assert compared >= 12


def _bp3_box(order: int):
    """BP3 at `order` (q = order + 2 points an axis) on a randomly numbered box of 2 x 2 x 1
    hexahedra: the reference module, the source, the nodes, connectivity, 1-D tables,
    geometric factors, a random u and the six factors as contiguous arrays."""
    import importlib.util
    import sys

    from irfuse.mesh import box_hexahedra

    sys.path.insert(0, os.path.dirname(__file__))
    import highorder_reference as ref

    spec = importlib.util.spec_from_file_location(
        "operators", os.path.join(os.path.dirname(EXAMPLES[0]), "highorder", "operators.py"))
    ops = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(ops)
    q = order + 2
    X, conn = box_hexahedra(2, 2, 1, order=order, numbering="random", seed=order)
    B, D, _ = ref.lagrange_tables(order, q)
    _, G = ref.geometric_factors(X, conn, order, q)
    u = np.random.default_rng(order).standard_normal(len(X))
    factors = [np.ascontiguousarray(G[..., i, j]) for i, j in ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))]
    return ref, ops.bp3_source(order, q), X, conn, B, D, G, u, factors


@pytest.mark.parametrize("order, registers, fixed", [(3, None, False), (5, None, False), (6, None, False),
                                                    (4, "ptxas", False), (3, None, True), (6, None, True)])
def test_the_bake_off_poisson_operator_of_high_order_on_gpu_tensors_is_the_reference(order, registers, fixed):
    """BP3 in float64 on torch tensors (a randomly numbered box, the connectivity prepared on
    the GPU): order 3 (64 nodes an element), order 5 (216, one element a scatter group) and
    order 6 (343: a group of its own, its slots numbered in two bytes; its factors, filling shared
    memory, loaded by their readers: `driver.reader_loads`), and order 4 planned on
    ptxas's figures (`registers="ptxas"`: another plan than the default's),
    against the float64 reference and the CPU backend's run, the same bits call after call.
    With `fixed`, B and D fixed when compiling (`constants=`: `__constant__` arrays of the
    module, the middle contractions along their summed axes): also the values of the program
    taking them as inputs."""
    import irfuse
    from irfuse.mesh import Connectivity

    torch = _torch()
    ref, source, X, conn, B, D, G, u, factors = _bp3_box(order)
    tables = {"B": B, "D": D} if fixed else None
    prog = irfuse.compile(source, backend="cuda", dtype="f64", registers=registers, constants=tables)
    assert ("__constant__ real_t irf_t_" in prog.artifact.source) == fixed
    given = (B, D) if not fixed else ()
    on_gpu = [torch.from_numpy(a).cuda() for a in (u, *given, *factors)]
    prepared = Connectivity(torch.from_numpy(conn).cuda(), len(X))
    y = prog(on_gpu[0], prepared, *on_gpu[1:]).y
    again = prog(on_gpu[0], prepared, *on_gpu[1:]).y
    torch.cuda.synchronize()
    got = y.cpu().numpy()
    np.testing.assert_allclose(got, ref.bp3(u, conn, order, G), rtol=0, atol=1e-13)
    assert got.tobytes() == again.cpu().numpy().tobytes()
    if order == 6 and not fixed:  # (the factors filled shared memory, one block an SM: built again, loaded by their readers)
        kernel = next(k for k in prog.artifact.kernels if k.calls)
        assert 2 * (kernel.total_shared_bytes(8) + 1024) <= 228 * 1024, kernel.total_shared_bytes(8)
    if fixed:
        plain = irfuse.compile(source, backend="cuda", dtype="f64")
        with_tables = [torch.from_numpy(a).cuda() for a in (B, D)]
        np.testing.assert_allclose(got, plain(on_gpu[0], prepared, *with_tables, *on_gpu[1:]).y.cpu().numpy(),
                                   rtol=0, atol=1e-14)
    host = irfuse.compile(source, backend="cpu", dtype="f64", constants=tables)(u, conn, *given, *factors).y
    np.testing.assert_allclose(got, host, rtol=0, atol=1e-14)


def test_the_machine_codes_nvrtc_gives_one_source_give_the_same_bits(tmp_path, monkeypatch):
    """NVRTC's machine code for some sources differs from compile to compile in one process
    (BP1 in float32: 5 to 7 cubins in 24 compiles, NVRTC 13.0 and 13.5; the loads and
    registers it keeps, not the arithmetic): the kept unit of BP1's kernel compiled again and
    again with other programs compiled between, and BP1 run with each cubin seen gives the same
    bits as with the first (benchmarks/NOTES.md, Compiling, 2026-12-01)."""
    import hashlib
    import sys

    import irfuse
    from irfuse.backend import nvrtc
    from irfuse.mesh import Connectivity, box_hexahedra

    torch = _torch()
    sys.path.insert(0, os.path.dirname(__file__))
    import highorder_reference as ref

    path = os.path.join(os.path.dirname(EXAMPLES[0]), "highorder", "bp1.kas")
    real, calls = nvrtc._compile_once, []

    def recorded_compile(source, arch, opts):
        calls.append((source, arch, opts))
        return real(source, arch, opts)

    monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path / "first"))
    monkeypatch.setattr(nvrtc, "_compile_once", recorded_compile)
    prog = irfuse.compile(path, backend="cuda")
    (kernel,) = [k for k in prog.artifact.kernels if not k.name.startswith("irf_")]
    kept = f"__launch_bounds__({kernel.threads}, {kernel.min_blocks}) {kernel.name}("
    source, arch, opts = next(c for c in calls if kept in c[0])  # (the kernel's unit as kept)
    others = [irfuse.compile(next(p for p in EXAMPLES if p.endswith(name)), backend="cuda", dtype=dtype).source
              for name, dtype in (("synctest.kas", "f32"), ("bigfusion.kas", "f64"))]
    cubins = {}
    for i in range(12):
        r = real(source, arch, opts)
        cubins.setdefault(hashlib.sha256(r.cubin).hexdigest(), r)
        real(others[i % 2], arch, opts)  # (another program compiled between)
    X, conn = box_hexahedra(12, 12, 12, order=3, numbering="random", seed=1)
    B, _, _ = ref.lagrange_tables(3, 5)
    wdet, _ = ref.geometric_factors(X, conn, 3, 5)
    u = torch.from_numpy(np.random.default_rng(0).standard_normal(len(X)).astype(np.float32)).cuda()
    prepared = Connectivity(torch.from_numpy(conn).cuda(), len(X))
    B, wdet = (torch.from_numpy(np.ascontiguousarray(a).astype(np.float32)).cuda() for a in (B, wdet))
    want = prog(u, prepared, B, wdet).y.cpu().numpy()
    for i, r in enumerate(cubins.values()):
        monkeypatch.setenv("IRFUSE_CACHE_DIR", str(tmp_path / f"cubin{i}"))
        monkeypatch.setattr(nvrtc, "_compile_once", lambda s, a, o, r=r: r if s == source else real(s, a, o))
        (tmp_path / f"kas{i}").mkdir()
        again = tmp_path / f"kas{i}" / "bp1.kas"
        again.write_text(open(path).read() + f"\n// compiled with cubin {i}\n")
        with_cubin = irfuse.compile(str(again), backend="cuda")
        assert with_cubin.source == prog.source and r.cubin in [image for image, _ in with_cubin.artifact.cubin.parts()]
        got = with_cubin(u, prepared, B, wdet).y.cpu().numpy()
        assert got.tobytes() == want.tobytes(), i


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_the_j2_tangent_built_in_place_on_gpu_is_verified_and_repeats_its_bits(dtype):
    """J2's consistent tangent, whose kernel writes each direction's tangent where it goes as
    it is made (`analysis.placements`), its unit directions literals: verified against the NumPy
    reference at 1, 97 and 100,003 elements (yielding and elastic points), the same bits on a
    second call, and on PyTorch tensors with `out=` the bits of the NumPy arrays' call."""
    import torch

    import irfuse

    prog = irfuse.compile(irfuse.jacobian(os.path.join(os.path.dirname(EXAMPLES[0]), "j2_return.kas"), of="sig",
                                          wrt="deps"), backend="cuda", dtype=dtype)
    npdt = np.float32 if dtype == "f32" else np.float64
    rng = np.random.default_rng(11)
    uniforms = (1.0, 2.0, 0.2, 0.5)  # G, K, sy0, H
    for n in (1, 97, 100_003):
        sig = rng.standard_normal((n, 3, 3)) * 0.5
        sig = ((sig + np.swapaxes(sig, 1, 2)) / 2).astype(npdt)
        sig[n // 2:] *= 0.01  # (the second half stays elastic)
        deps = rng.standard_normal((n, 3, 3)) * 1e-3
        deps = ((deps + np.swapaxes(deps, 1, 2)) / 2).astype(npdt)
        ep = np.zeros(n, npdt)
        first = prog(sig, deps, ep, *uniforms, verify=True)
        again = prog(sig, deps, ep, *uniforms)
        for name in ("sig", "ep", "dsig_ddeps"):
            assert getattr(first, name).tobytes() == getattr(again, name).tobytes(), (n, name)
        t = [torch.from_numpy(a).cuda() for a in (sig, deps, ep)]
        out = {"sig": torch.empty_like(t[0]), "ep": torch.empty_like(t[2]),
               "dsig_ddeps": torch.empty((n, 3, 3, 3, 3), dtype=t[0].dtype, device="cuda")}
        prog(*t, *uniforms, out=out)
        for name in ("sig", "ep", "dsig_ddeps"):
            assert out[name].cpu().numpy().tobytes() == getattr(first, name).tobytes(), (n, name)
    assert 0 < float((first.ep > 0).mean()) < 1  # (both branches met)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_an_energys_hessian_built_in_place_by_threads_of_two_elements_on_gpu(dtype):
    """StrainEnergy's Hessian blocks (6x6 an element, the stacked tangents of its gradient with
    their axes permuted) are built in place (`analysis.placements`) by a kernel whose threads
    run two elements each (it sums the energy over the batch): verified against the NumPy
    reference at 1, 129 and 100,003 elements, the same bits on a second call."""
    import irfuse
    from irfuse.analysis.placements import placements
    from irfuse.kernel.bridge import model_from_kernel

    prog = irfuse.compile(irfuse.hessian(os.path.join(os.path.dirname(EXAMPLES[0]), "strain_energy.kas"), of="U",
                                         wrt="eps"), backend="cuda", dtype=dtype)
    kernels = [op for op in prog.compiled.module.walk() if op.name == "fuse.kernel"]
    models = [model_from_kernel(k, 4 if dtype == "f32" else 8)[0] for k in kernels]
    assert any(placements(m) and m.per_thread > 1 for m in models)
    npdt = np.float32 if dtype == "f32" else np.float64
    rng = np.random.default_rng(3)
    C = rng.standard_normal((6, 6))
    C = (C @ C.T).astype(npdt)
    for n in (1, 129, 100_003):
        eps = rng.standard_normal((n, 6)).astype(npdt)
        vol = rng.uniform(0.5, 1.5, n).astype(npdt)
        first = prog(eps, vol, C, verify=True)
        again = prog(eps, vol, C)
        for name in prog.outputs:
            assert np.asarray(getattr(first, name)).tobytes() == np.asarray(getattr(again, name)).tobytes(), (n, name)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_a_power_of_2_1_or_minus_1_is_its_product_on_the_gpu(dtype):
    """`pow(x, 2)`, `pow(x, 1)`, `pow(x, -1)` on the GPU (literal exponents, and one given at
    the call) are x*x, x and 1/x to the bit, special values included, as on the CPU."""
    import irfuse

    npdt = np.float64 if dtype == "f64" else np.float32
    src = ("scalar x, sq, same, inv, given; uniform scalar b;\ninput x, b;\nsq = pow(x, 2);\nsame = pow(x, 1);\n"
           "inv = pow(x, -1);\ngiven = pow(x, b);\nreturn sq, same, inv, given;\n")
    prog = irfuse.compile(src, backend="cuda", dtype=dtype)
    x = np.concatenate([np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 3.0, np.finfo(npdt).tiny / 8,
                                  np.finfo(npdt).max], npdt),
                        np.random.default_rng(3).standard_normal(100_000).astype(npdt) * 1e3])
    with np.errstate(all="ignore"):
        for b, want in ((2, x * x), (1, x), (-1, npdt(1) / x)):
            got = prog(x=x, b=npdt(b))
            np.testing.assert_array_equal(got.given, want)
        np.testing.assert_array_equal(got.sq, x * x)
        np.testing.assert_array_equal(got.same, x)
        np.testing.assert_array_equal(got.inv, npdt(1) / x)


@pytest.mark.parametrize("dtype", ["f32", "f64"])
def test_floor_division_remainder_and_xor_are_numpys_on_the_gpu(dtype):
    """`floor`, `floordiv`, `mod` (Python's `//` and `%`) and `xor` of masks on the GPU are
    NumPy's to the bit, signed zeros, infinities and NaN included, as on the CPU."""
    import irfuse

    npdt = np.float64 if dtype == "f64" else np.float32
    src = ("scalar x, y, f, d, r, s; mask m, k, e;\ninput x, y;\nf = floor(x);\nd = floordiv(x, y);\n"
           "r = mod(x, y);\nm = gt(x, 0);\nk = lt(y, 1);\ne = xor(m, k);\ns = select(e, x, y);\n"
           "return f, d, r, s;\n")
    prog = irfuse.compile(src, backend="cuda", dtype=dtype)
    special = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 2.5, -7.0, 1e-30, 3.0], npdt)
    x, y = (a.ravel() for a in np.meshgrid(special, special))
    rng = np.random.default_rng(4)
    x = np.concatenate([x, (rng.standard_normal(100_000) * 100).astype(npdt)])
    y = np.concatenate([y, (rng.standard_normal(100_000) * 3).astype(npdt)])
    got = prog(x=x, y=y)
    with np.errstate(all="ignore"):
        for value, want in ((got.f, np.floor(x)), (got.d, np.floor_divide(x, y)), (got.r, np.remainder(x, y)),
                            (got.s, np.where((x > 0) ^ (y < 1), x, y))):
            np.testing.assert_array_equal(value, want)
            assert (np.signbit(value) == np.signbit(want))[~np.isnan(want)].all()
