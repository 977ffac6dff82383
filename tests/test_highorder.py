"""The bake-off examples (`examples/highorder/bp1.kas`, `bp3.kas`: order 3, sum factorization
written with `reshape` and `contract`, one element a thread) against the float64 references of
tests/highorder_reference.py on randomly numbered meshes, in float64 and float32, the same
bits run after run and in chunks; their CUDA compiled by NVRTC."""

import os

import numpy as np
import pytest

import highorder_reference as ref
import irfuse
from conftest import LONG, ROOT, highorder_operators
from irfuse.mesh import Connectivity, box_hexahedra

P, Q = 3, 5
SYMMETRIC = ((0, 0), (0, 1), (0, 2), (1, 1), (1, 2), (2, 2))  # gxx, gxy, gxz, gyy, gyz, gzz


def _box(order: int, cells: tuple[int, int, int], seed: int):
    """A randomly numbered box of elements of `order` with q = order + 2 points an axis: (nodes'
    coordinates, connectivity, B, D, wdet, G, u, the six factors G_ij as arrays)."""
    q = order + 2
    X, conn = box_hexahedra(*cells, order=order, numbering="random", seed=seed)
    B, D, _ = ref.lagrange_tables(order, q)
    wdet, G = ref.geometric_factors(X, conn, order, q)
    u = np.random.default_rng(seed).standard_normal(len(X))
    return X, conn, B, D, wdet, G, u, [np.ascontiguousarray(G[..., i, j]) for i, j in SYMMETRIC]


def _problem(name: str, dtype: str, seed: int):
    """(program, its arguments, the reference's y) on a 3 x 2 x 2 box in a random numbering,
    slightly distorted (the cells are no longer boxes, so the stored factors vary by point)."""
    X, conn = box_hexahedra(3, 2, 2, order=P, numbering="random", seed=seed)
    X = X + 0.02 * np.sin(3 * X[:, [1, 2, 0]])
    B, D, _ = ref.lagrange_tables(P, Q)
    wdet, G = ref.geometric_factors(X, conn, P, Q)
    u = np.random.default_rng(seed).standard_normal(len(X))
    prog = irfuse.compile(os.path.join(ROOT, "examples", "highorder", f"{name}.kas"), backend="cpu", dtype=dtype)
    real = prog.dtype
    prepared = Connectivity(conn, len(X))
    if name == "bp1":
        args, want = (u.astype(real), prepared, B.astype(real), wdet.astype(real)), ref.bp1(u, conn, P, wdet)
    else:
        args = (u.astype(real), prepared, B.astype(real), D.astype(real),
                *(G[..., i, j].astype(real) for i, j in SYMMETRIC))
        want = ref.bp3(u, conn, P, G)
    return prog, args, want


@pytest.mark.parametrize("dtype, rtol", [("f64", 1e-13), ("f32", 2e-5)])
@pytest.mark.parametrize("name", ["bp1", "bp3"])
def test_the_bake_off_operators_are_the_references_and_give_the_same_bits_in_chunks(name, dtype, rtol):
    prog, args, want = _problem(name, dtype, seed=4)
    y = prog(*args).y
    np.testing.assert_allclose(y, want, rtol=0, atol=rtol * np.abs(want).max())
    assert np.array_equal(prog(*args).y, y)
    told = []
    chunked = prog(*args, memory_budget=_budget_of_one_group(prog, len(args[1].conn), len(args[0])),
                   progress=lambda done, total: told.append(total)).y
    assert told[-1] == 3 and np.array_equal(chunked, y)  # (4 of the 12 elements at a time: one scatter group)


def _budget_of_one_group(prog, elements: int, nodes: int) -> int:
    """The least device-memory budget (in steps of 256 bytes) a call runs within, in chunks
    of one scatter group (4 elements of 64 nodes)."""
    from irfuse.diagnostics import UsageError
    from irfuse.runtime.mesh_runs import mesh_chunk_elements

    budget = 256
    while True:
        try:
            if mesh_chunk_elements(prog.artifact, elements, nodes, budget) >= 4:
                return budget
        except UsageError:
            pass
        budget += 256


@pytest.mark.parametrize("name", ["bp1", "bp3"])
def test_the_bake_off_examples_compile_for_the_gpu(name):
    """NVRTC compiles them (the search stopped early: the kernels of a plan among its first
    configurations)."""
    from irfuse.driver.front import search_budget

    prog = irfuse.compile(os.path.join(ROOT, "examples", "highorder", f"{name}.kas"), backend="cuda", dtype="f32",
                          pipeline=search_budget(400))
    element = prog.kernels[0]
    assert element.startswith(f"{name}_k0") and prog.artifact.resources(element).registers > 0


def test_the_operators_written_for_any_order_are_the_files_at_order_3():
    from irfuse.frontend.irgen import compile_file, compile_source

    ops = highorder_operators()
    for name, make in (("bp1", ops.bp1_source), ("bp3", ops.bp3_source)):
        path = os.path.join(ROOT, "examples", "highorder", f"{name}.kas")
        assert str(compile_source(make(3, 5), path).module) == str(compile_file(path).module)


# Orders 7 and 8 take a minute each on two cores (the CPU's compile of their element kernels),
# order 5 15-18 s for the paths order 4 takes too (past 64 entries an axis, an element's rows
# one group): in the long runs (`IRFUSE_FUZZ_LONG=1`), with the fuzzing. So is BP3 at order 6
# (14 s: the host compiler on its 1 MB of element code): BP1 takes its gathers and scatter of
# 343-node elements, the slots numbered in two bytes.
ORDERS = [1, 2, 4, 5, 6, 7, 8] if LONG else [1, 2, 4, 6]


@pytest.mark.heavy
@pytest.mark.parametrize("order", ORDERS)
def test_the_operators_of_orders_1_to_8_are_the_references(order):
    """Orders 4 and 5 too: connectivities of 125 and 216 nodes and the vectors gathered through
    them (past 64 entries an axis), each element's rows scattered whole in one group; orders 6
    to 8 (343 to 729 nodes an element): each element a scatter group of its own, its slots
    numbered in two bytes."""
    ops = highorder_operators()
    q = order + 2
    X, conn = box_hexahedra(2, 2, 1, order=order, numbering="random", seed=order)
    B, D, _ = ref.lagrange_tables(order, q)
    wdet, G = ref.geometric_factors(X, conn, order, q)
    u = np.random.default_rng(order).standard_normal(len(X))
    y1 = irfuse.compile(ops.bp1_source(order, q), backend="cpu", dtype="f64")(u, conn, B, wdet).y
    np.testing.assert_allclose(y1, ref.bp1(u, conn, order, wdet), rtol=0, atol=1e-14)
    if order < 6 or LONG:
        y3 = irfuse.compile(ops.bp3_source(order, q), backend="cpu", dtype="f64")(
            u, conn, B, D, *(G[..., i, j] for i, j in SYMMETRIC)).y
        np.testing.assert_allclose(y3, ref.bp3(u, conn, order, G), rtol=0, atol=1e-13)


@pytest.mark.parametrize("order, profile", [(1, "cpu"), (3, "cpu"), (3, "h100"), (5, "h100")])
def test_the_element_operators_alone_are_the_references_on_elements_of_their_own(order, profile):
    """BK1 and BK3 (`bk1_source`, `bk3_source`: the element operators without gather and
    scatter) on each element's own values: the references' BP1 and BP3 on a mesh whose elements
    share no node, element by element, in float64, the same bits run after run. Planned for the
    H100 (what a GPU call plans with), BK3 at orders 3 and 5 spreads each element over the threads
    of lines along the tensors' first index (`line` mappings), run here by the CPU backend; so
    planned, the kernels with the values their lines read loaded by those threads
    (`fuse-load-by-readers{every=true}`, what the driver does where shared memory bounds a
    kernel) give the very bits of the kernels as planned."""
    ops = highorder_operators()
    q = order + 2
    n = order + 1
    X, conn = box_hexahedra(2, 1, 2, order=order, numbering="random", seed=order + 5)
    X = X + 0.02 * np.sin(3 * X[:, [1, 2, 0]])
    B, D, _ = ref.lagrange_tables(order, q)
    wdet, G = ref.geometric_factors(X, conn, order, q)
    ue = np.random.default_rng(order).standard_normal((len(conn), n, n, n))
    own = np.arange(ue.size).reshape(len(conn), n ** 3)  # (each element its own nodes)
    bk1 = irfuse.compile(ops.bk1_source(order, q), backend="cpu", dtype="f64", profile=profile)
    bk3 = irfuse.compile(ops.bk3_source(order, q), backend="cpu", dtype="f64", profile=profile)
    if profile != "cpu":
        assert "[line: one thread per line along the first index" in bk3.artifact.source
    g = [np.ascontiguousarray(G[..., i, j]) for i, j in SYMMETRIC]
    y1, y3 = bk1(ue, B, wdet).ye, bk3(ue, B, D, *g).ye
    assert y1.shape == y3.shape == ue.shape
    np.testing.assert_allclose(y1.reshape(-1), ref.bp1(ue.reshape(-1), own, order, wdet), rtol=0, atol=1e-14)
    np.testing.assert_allclose(y3.reshape(-1), ref.bp3(ue.reshape(-1), own, order, G), rtol=0, atol=1e-13)
    assert np.array_equal(bk1(ue, B, wdet).ye, y1) and np.array_equal(bk3(ue, B, D, *g).ye, y3)
    if profile != "cpu":
        from irfuse.passes.registry import DEFAULT_PIPELINE

        every = DEFAULT_PIPELINE.replace("fuse-load-by-readers", "fuse-load-by-readers{every=true}")
        for source, planned, args, y in ((ops.bk1_source(order, q), bk1, (ue, B, wdet), y1),
                                         (ops.bk3_source(order, q), bk3, (ue, B, D, *g), y3)):
            loaded = irfuse.compile(source, backend="cpu", dtype="f64", profile=profile, pipeline=every)
            assert loaded.artifact.source != planned.artifact.source
            assert loaded(*args).ye.tobytes() == y.tobytes()


def test_the_bake_off_operators_planned_for_the_gpu_are_one_kernel_of_lines_to_the_scatter():
    """BP1 and BP3 at order 4 in float64, planned for the H100 (what a GPU call plans with):
    the element's values reshaped back into the 125-word vector the scatter takes are made by
    lines too (thread t the vector's words 25 k + t, `implementations._vector_lines`), so the
    whole operator is one kernel of 25 or 36 threads an element; before, that reshape had
    one thread an element copy all 125 words (BP3 at order 5 ran 2.9x slower on an H200).
    Run here by the CPU backend: the references' values, the same bits run after run."""
    ops = highorder_operators()
    order, q = 4, 6
    X, conn, B, D, wdet, G, u, g = _box(order, (2, 2, 1), 11)
    bp1 = irfuse.compile(ops.bp1_source(order, q), backend="cpu", dtype="f64", profile="h100")
    bp3 = irfuse.compile(ops.bp3_source(order, q), backend="cpu", dtype="f64", profile="h100")
    for prog in (bp1, bp3):
        planned = [k for k in prog.kernels if not k.startswith("irf_")]
        assert len(planned) == 1, planned
        assert "irf_reshape_125_5x5x5_line_" in prog.artifact.source
    y1, y3 = bp1(u, conn, B, wdet).y, bp3(u, conn, B, D, *g).y
    np.testing.assert_allclose(y1, ref.bp1(u, conn, order, wdet), rtol=0, atol=1e-14)
    np.testing.assert_allclose(y3, ref.bp3(u, conn, order, G), rtol=0, atol=1e-13)
    assert np.array_equal(bp1(u, conn, B, wdet).y, y1) and np.array_equal(bp3(u, conn, B, D, *g).y, y3)


def test_factors_loaded_by_their_readers_where_shared_memory_bounds_the_blocks():
    """BP3 at order 6 in float64, planned for the H100: its six stored factors, copied into
    shared memory, filled 141 KB of a block, one block an SM where ptxas's 128 registers a
    thread let two run. After NVRTC's figures show it (here, compiled for the GPU without one),
    the driver builds the module again with the kernel marked, its factors loaded by the
    threads that read them (`driver.reader_loads`): two blocks an SM by the shared memory
    left. At order 5 the registers bound the blocks first and the kernel is left as planned.
    The marked kernel's arithmetic is unchanged: run by the CPU backend (the pass taking every
    kernel as marked) it gives the reference's values and the very bits of the kernel as
    planned, and its shared memory holds no factor."""
    from irfuse.passes.registry import DEFAULT_PIPELINE

    ops = highorder_operators()
    gpu = {order: irfuse.compile(ops.bp3_source(order, order + 2), backend="cuda", dtype="f64", profile="h100")
           for order in (5, 6)}
    for order, prog in gpu.items():
        (kernel,) = [k for k in prog.artifact.kernels if k.calls]
        marked = "loads_by_readers" in prog.artifact.program_text
        assert marked == (order == 6), order
        figures = prog.artifact.resources(kernel.name)
        held = 228 * 1024 // (kernel.total_shared_bytes(8) + 1024)  # (an sm_90 SM's shared memory)
        by_registers = 65536 // (-(-figures.registers * 32 // 256) * 256 * -(-kernel.threads // 32))
        assert held >= by_registers >= 2 and figures.spill_stores <= 32, (order, held, by_registers)

    order, q = 6, 8
    X, conn, B, D, _, G, u, g = _box(order, (2, 1, 1), 6)
    every = DEFAULT_PIPELINE.replace("fuse-load-by-readers", "fuse-load-by-readers{every=true}")
    planned, loaded = (irfuse.compile(ops.bp3_source(order, q), backend="cpu", dtype="f64", profile="h100",
                                      pipeline=p) for p in (None, every))
    (k0,), (k1,) = ([k for k in p.artifact.kernels if k.calls] for p in (planned, loaded))
    assert k1.shared_words <= k0.shared_words - 6 * q ** 3 * k0.by // 2, (k0.shared_words, k1.shared_words)
    y = loaded(u, conn, B, D, *g).y
    np.testing.assert_allclose(y, ref.bp3(u, conn, order, G), rtol=0, atol=1e-13)
    assert y.tobytes() == planned(u, conn, B, D, *g).y.tobytes()


def test_bp1_at_order_5_steps_one_block_at_a_time_to_the_blocks_it_keeps():
    """BP1 at order 5 in float64 compiled for the GPU (NVRTC here, no GPU): its kernel of 49
    threads an element, four elements a block, spills at the five blocks of 1024 threads an SM;
    asked one block fewer at a time (a kernel spreading an element over threads), it keeps the
    first step spilling at most 32 bytes a thread: four blocks, not the two that halving gave
    (116 registers, 12 warps an SM)."""
    ops = highorder_operators()
    prog = irfuse.compile(ops.bp1_source(5, 7), backend="cuda", dtype="f64", profile="h100")
    (kernel,) = [k for k in prog.artifact.kernels if k.calls]
    figures = prog.artifact.resources(kernel.name)
    assert kernel.bx > 1 and kernel.threads == 196
    assert kernel.min_blocks >= 3 and figures.spill_stores + figures.spill_loads <= 32, (kernel.min_blocks, figures)
    assert figures.registers * kernel.threads * kernel.min_blocks <= 65536


def test_order_10_is_refused_by_name_and_elements_of_343_nodes_compile_for_the_gpu():
    """A connectivity of 1,331 nodes an element (order 10) is past the 1,024 entries an axis:
    refused at its declaration, naming the type and the range. A program gathering and
    scattering through 343 nodes an element (order 6: a scatter group each, its slots numbered
    in two bytes) compiles with NVRTC, the element kernel's group sums and the scatter's
    partials reading two-byte slot numbers (the bake-off operators at order 6 run on the CPU
    above; on a GPU, tests/test_gpu.py)."""
    from irfuse.diagnostics import CompileError

    ops = highorder_operators()
    with pytest.raises(CompileError, match=r"dimension 1331 of type 'index1331' is out of range 1\.\.1024"):
        irfuse.compile(ops.bp1_source(10, 12), backend="cpu")
    src = ("nodal scalar u, y; index343 c; vector343 g, h;\ninput u, c;\n"
           "g = gather(u, c);\nh = scale(g, 2);\ny = scatter(h, c);\nreturn y;\n")
    prog = irfuse.compile(src, backend="cuda", dtype="f32")
    assert prog.artifact.resources(prog.kernels[0]).registers > 0
    source = prog.artifact.source
    assert "const unsigned short* __restrict__ irf_members0" in source  # (the element kernel's)
    assert "const unsigned short* __restrict__ members" in source  # (the scatter's partials of an input's rows)
    assert "unsigned char* const irf_m" not in source and "unsigned char* __restrict__ irf_members" not in source


def test_the_vector_of_an_element_of_order_9_is_refused_by_name_not_by_recursion():
    """BP1 at order 9 reshapes an element's 1,000 values into the vector it scatters: a sum of
    1,000 selections an entry, which as one flat sum parsed 1,000 deep and raised
    RecursionError. Written in runs, its size is checked and refused naming the statement and
    the budget, as is the same reshape written alone."""
    from irfuse.diagnostics import CompileError

    ops = highorder_operators()
    with pytest.raises(CompileError, match=r'(?s)expand to about [0-9,]+ operations and operands; at most .*'
                                           r'reshape\("1000", ye\)'):
        irfuse.compile(ops.bp1_source(9, 11), backend="cpu", filename="bp1_p9.kas")
    with pytest.raises(CompileError, match=r"expand to about"):
        irfuse.compile('tensor10x10x10 t; vector1000 v;\ninput t;\nv = reshape("1000", t);\nreturn v;\n',
                       backend="cpu")
