"""The NumPy reference: executes a `kas.program` op by op, and the data it runs on.

Arrays are shaped ``(N, *value shape)`` (scalars ``(N,)``), keyed by the
program's variable names; a uniform input or output (one value for the batch) is shaped
``(*value shape)``. The reference is what every backend is checked against; it evaluates
each op from its index-notation definition, a uniform operand of a per-element call
broadcast over the batch, and a reduction over the whole batch in float64.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from xdsl.dialects.builtin import ModuleOp
from xdsl.ir import SSAValue

from irfuse.artifact import program_io
from irfuse.artifact.arrays import ELEMENT_TYPES, element_type
from irfuse.artifact.program_io import Interface
from irfuse.artifact.records import record
from irfuse.diagnostics import CompileError
from irfuse.dialects.fuse import COMBINE_LANES
from irfuse.dialects.kas import (
    nodal_values,
    CallOp,
    ConstantOp,
    TableOp,
    GatherOp,
    IndexType,
    KasType,
    LoopOp,
    ProgramOp,
    ReduceOp,
    ReturnOp,
    ScatterOp,
    YieldOp,
    is_uniform,
    program_of,
    remembers_uniformity,
)
from irfuse.library.catalogue import Library, default_library
from irfuse.mesh.scatter import scatter_add
from irfuse.verification.op_evaluation import bounded_by_entries, evaluate, evaluate_by_entries

DTYPES = {name: t.numpy for name, t in ELEMENT_TYPES.items()}


def find_program(module: ModuleOp) -> ProgramOp:
    """`kas.program_of`, its refusal as a diagnostic."""
    try:
        return program_of(module)
    except ValueError as e:
        raise CompileError(str(e)) from None


def value_shape(t: KasType, n: int, uniform: bool = False) -> tuple[int, ...]:
    return program_io.value_shape(tuple(t.shape), n, uniform)


def value_shapes(program: ProgramOp) -> dict[str, tuple[int, ...]]:
    """The value shape (one element's, or a uniform value's) of each input and output by name."""
    return {**{k: tuple(t.shape) for k, t in zip(program.inputs, program.input_types())},
            **{k: tuple(t.shape) for k, t in zip(program.outputs, program.output_types())}}


def uniform_inputs(program: ProgramOp) -> set[str]:
    return set(program.uniform)


def uniform_outputs(program: ProgramOp) -> set[str]:
    return {name for name, v in zip(program.outputs, program.return_op.values) if is_uniform(v)}


def uniform_names(program: ProgramOp) -> set[str]:
    """The inputs and outputs that hold one value for the whole batch (no batch axis)."""
    return uniform_inputs(program) | uniform_outputs(program)


def has_reductions(program: ProgramOp) -> bool:
    """Whether an output depends on many elements at once (a reduction over the batch, a
    scatter into nodes): its reference needs every element."""
    return any(isinstance(op, (ReduceOp, ScatterOp)) for op in program.walk())


def mesh_nodes(program: ProgramOp, inputs: dict[str, np.ndarray], nodes: int | None = None) -> int:
    """The node count of a program's mesh: `nodes` when given, else its nodal inputs' length
    (0 for a program without nodal values)."""
    if nodes is not None:
        return nodes
    nodal = [inputs[k] for k in program.inputs if k in program.nodal]
    return len(nodal[0]) if nodal else 0


def _gathered(values: np.ndarray, conn: np.ndarray) -> np.ndarray:
    """Row a of element e: the node conn[e][a] of `values`."""
    return values[np.asarray(conn, dtype=np.int64)]


def _scattered(values: np.ndarray, conn: np.ndarray, nodes: int) -> np.ndarray:
    """Each node's rows added in ascending (element, position) order, as the kernels add them."""
    return scatter_add(values, np.asarray(conn, dtype=np.int64), nodes)


def interface_of(program) -> Interface:
    """The interface (names, value shapes, uniform ones) of a `kas.program`, or `program` itself
    when it is one already (an `Interface` made from a saved plan's host steps)."""
    if isinstance(program, Interface):
        return program
    return Interface(tuple(program.inputs), tuple(program.outputs),
                     {k: tuple(t.shape) for k, t in zip(program.inputs, program.input_types())},
                     frozenset(uniform_inputs(program)), frozenset(uniform_outputs(program)),
                     {k: tuple(t.shape) for k, t in zip(program.outputs, program.output_types())})


def effective_bytes(program, n: int, itemsize: int) -> int:
    """The bytes a run must move at least (`program_io.effective_bytes`)."""
    return program_io.effective_bytes(interface_of(program), n, itemsize)


def random_inputs(program, n: int, seed: int = 0, dtype=np.float32) -> dict[str, np.ndarray]:
    """Uniform values in [-1, 1) for every input (`program_io.random_inputs`)."""
    return program_io.random_inputs(interface_of(program), n, seed, dtype)


def load_inputs(path: str, program, dtype, layout: str = "aos",
                converted: list[str] | None = None) -> dict[str, np.ndarray]:
    """An .npz file's inputs, checked (`program_io.load_inputs`)."""
    return program_io.load_inputs(path, interface_of(program), dtype, layout, converted)


def batch_size(inputs: dict[str, np.ndarray], program=None) -> int:
    """Elements in a batch of arrays of structures (the first per-element input's)."""
    return program_io.batch_size(inputs, interface_of(program) if program is not None else None)


# The order in which the kernels combine a sum (`cuda_emit`): a tree over a block's elements,
# each lane of the combine kernel adding every COMBINE_LANES-th block partial in turn, then a
# tree over those lanes. A sum of n values in it rounds at most `sum_depth` times along any
# value's path: its error is at most sum_depth * eps * sum(|x|).


def sum_depth(n: int, by: int = 1) -> int:
    blocks = -(-n // by)
    return max(1, (by - 1).bit_length() + -(-blocks // COMBINE_LANES) + (COMBINE_LANES - 1).bit_length())


def _call_operands(op: CallOp, env: dict[SSAValue, np.ndarray], n: int) -> list[np.ndarray]:
    """A call's operands from `env`: each as a batch of one for a uniform call, else with its
    uniform operands broadcast over the batch's n elements."""
    if is_uniform(op.res):
        return [env[a][None] for a in op.args]
    return [np.broadcast_to(env[a], (n, *env[a].shape)) if is_uniform(a) else env[a] for a in op.args]


@remembers_uniformity
def run_reference(program: ProgramOp, inputs: dict[str, np.ndarray], n: int | None = None,
                  library: Library | None = None, dtype=np.float64, by_entries: bool = False,
                  perturb: tuple[float, int] | None = None, sum_by: int = 1,
                  nodes: int | None = None, numbers=None) -> dict[str, np.ndarray]:
    """Executes the program on the inputs in `dtype` (float64 by default): each op's
    definition evaluated on the whole batch (`OpDef.reference`), or with `by_entries` through
    its per-entry trees, the generated code's arithmetic in its order (`op_evaluation`).
    `perturb=(eps, seed)`: every op's result entry is multiplied by 1 + eps*u, u uniform in
    [-1, 1] from a generator of that seed: one sample of what rounding at relative `eps` may do;
    a sum's result by up to what its rounding in the kernels' order may do (`sum_depth`, with
    `sum_by` elements per block). A gather reads node rows through its connectivity; a
    scatter adds each node's rows in ascending (element, position) order (the kernels'), its
    perturbed sum moved by up to what that order may round. `nodes`: the mesh's node count
    (by default its nodal inputs' length). `numbers`: the element type the program's literals
    and tables (`constants=`) are rounded to first, as its kernels read them (a number given
    at a call is one of that type too): a float32 program's v - 0.3 is 0 where v is 0.3's
    float32, not a negative number whose square root is NaN."""
    rng = np.random.default_rng(perturb[1]) if perturb else None
    lib = library or default_library()
    n = batch_size(inputs, program) if n is None else n
    nodes = mesh_nodes(program, inputs, nodes)
    env: dict[SSAValue, np.ndarray] = {}
    for name, arg in zip(program.inputs, program.body.block.args):
        env[arg] = np.asarray(inputs[name], dtype=np.int64 if name in program_indices(program) else dtype)
    per_node = nodal_values(program)  # (a nodal statement's batch is the nodes)

    def run_block(block) -> list[np.ndarray]:
        for op in block.ops:
            if isinstance(op, CallOp):
                opdef = lib.get(op.op_name)
                assert opdef is not None, op.op_name
                evaluated = evaluate_by_entries if by_entries else evaluate
                result = evaluated(opdef, *_call_operands(op, env, nodes if op.res in per_node else n))
                env[op.res] = (result[0] if is_uniform(op.res) else result).astype(dtype, copy=False)
                if rng is not None:
                    noise = rng.random(env[op.res].shape, dtype=np.float32) * 2 - 1
                    env[op.res] = env[op.res] * (1 + perturb[0] * noise)
            elif isinstance(op, ConstantOp):
                env[op.res] = np.asarray(np.asarray(op.number, dtype=numbers or dtype), dtype=dtype)
            elif isinstance(op, TableOp):
                env[op.res] = np.asarray(np.asarray(op.numbers, dtype=numbers or dtype), dtype=dtype).reshape(
                    op.res.type.shape)  # type: ignore[attr-defined]
            elif isinstance(op, GatherOp):
                env[op.res] = _gathered(env[op.nodal], env[op.index])
            elif isinstance(op, ScatterOp):
                r = _scattered(env[op.value], env[op.index], nodes)
                if rng is not None:
                    counts = np.bincount(env[op.index].ravel(), minlength=nodes).reshape(-1, *[1] * (r.ndim - 1))
                    bound = counts * perturb[0] * _scattered(np.abs(env[op.value]).astype(np.float64),  # type: ignore
                                                              env[op.index], nodes)
                    r = r + bound * (rng.random(r.shape) * 2 - 1)
                env[op.res] = np.asarray(r).astype(dtype)
            elif isinstance(op, ReduceOp):
                x = env[op.operand].astype(np.float64)
                kind = op.reduce_kind.value
                with np.errstate(invalid="ignore"):
                    r = x.sum(axis=0) if kind == "sum" else x.max(axis=0) if kind == "max" else x.min(axis=0)
                if rng is not None and kind == "sum":
                    bound = sum_depth(len(x), sum_by) * perturb[0] * np.abs(x).sum(axis=0)  # type: ignore[index]
                    r = r + bound * (rng.random(r.shape) * 2 - 1)
                env[op.res] = np.asarray(r).astype(dtype)
            elif isinstance(op, LoopOp):
                carried = [env[v] for v in op.iter_args]
                last: list[np.ndarray] = []
                for _ in range(op.trip_count.data):
                    for arg, val in zip(op.body.block.args, carried):
                        env[arg] = val
                    last = run_block(op.body.block)
                    carried = last[: len(op.iter_args)]
                for r, val in zip(op.res, last):
                    env[r] = val
            elif isinstance(op, (ReturnOp, YieldOp)):
                return [env[v] for v in op.values]
            else:
                raise CompileError(f"the reference cannot execute '{op.name}'")
        return []

    outs = run_block(program.body.block)
    uniform = uniform_outputs(program)
    return {name: np.array(v, dtype=dtype).reshape(value_shape(t, nodes if name in program.nodal else n,
                                                               name in uniform))
            for name, v, t in zip(program.outputs, outs, program.output_types())}


def program_indices(program: ProgramOp) -> set[str]:
    """The inputs that are connectivities."""
    return {k for k, t in zip(program.inputs, program.input_types()) if isinstance(t, IndexType)}


@remembers_uniformity
def rounding_bounds(program: ProgramOp, inputs: dict[str, np.ndarray], dtype: str, n: int | None = None,
                    sum_by: int = 1, library: Library | None = None,
                    nodes: int | None = None) -> dict[str, np.ndarray] | None:
    """Bounds on the rounding error of each output as the generated code evaluates it in
    `dtype` (its per-entry trees, every node rounded once: `op_evaluation.bounded_by_entries`), the
    inputs taken as exact; a sum over the batch adds its rounding in the kernels' order
    (`sum_depth`), a scatter a node's count of terms' worth. Shaped as the outputs. None for a
    program with a loop: its iterations
    compound first-order bounds past use (the Monte Carlo samples of `run_references` cover
    those)."""
    if any(isinstance(op, LoopOp) for op in program.walk()):
        return None
    et = element_type(dtype).numpy
    u = float(np.finfo(et).eps) / 2
    lib = library or default_library()
    n = batch_size(inputs, program) if n is None else n
    nodes = mesh_nodes(program, inputs, nodes)
    val: dict[SSAValue, np.ndarray] = {}
    err: dict[SSAValue, np.ndarray] = {}
    indices = program_indices(program)
    for name, arg in zip(program.inputs, program.body.block.args):
        val[arg] = np.asarray(inputs[name], dtype=np.int64 if name in indices else np.float64)
        err[arg] = np.zeros(val[arg].shape)
    per_node = nodal_values(program)  # (a nodal statement's batch is the nodes)
    with np.errstate(all="ignore"):
        for op in program.body.block.ops:
            if isinstance(op, CallOp):
                opdef = lib.get(op.op_name)
                assert opdef is not None, op.op_name
                rows = nodes if op.res in per_node else n
                v, e = bounded_by_entries(opdef, _call_operands(op, val, rows), _call_operands(op, err, rows), u)
                val[op.res], err[op.res] = (v[0], e[0]) if is_uniform(op.res) else (v, e)
            # (a literal's or a table's numbers as the kernels read them, rounded to the element
            # type; their allowance kept, as before)
            elif isinstance(op, ConstantOp):
                val[op.res] = np.asarray(np.asarray(op.number, dtype=et), dtype=np.float64)
                err[op.res] = np.asarray(u * abs(op.number))
            elif isinstance(op, TableOp):
                val[op.res] = np.asarray(np.asarray(op.numbers, dtype=et), dtype=np.float64).reshape(
                    op.res.type.shape)  # type: ignore[attr-defined]
                err[op.res] = u * np.abs(val[op.res])
            elif isinstance(op, GatherOp):
                val[op.res] = _gathered(val[op.nodal], val[op.index])
                err[op.res] = _gathered(err[op.nodal], val[op.index])
            elif isinstance(op, ScatterOp):
                conn, x = val[op.index], val[op.value]
                val[op.res] = _scattered(x, conn, nodes)
                counts = np.bincount(conn.ravel(), minlength=nodes).reshape(-1, *[1] * (x.ndim - 2))
                err[op.res] = (_scattered(err[op.value], conn, nodes)
                               + counts * u * _scattered(np.abs(x), conn, nodes))
            elif isinstance(op, ReduceOp):
                x, ex = val[op.operand], err[op.operand]
                if op.reduce_kind.value == "sum":
                    val[op.res] = x.sum(axis=0)
                    err[op.res] = ex.sum(axis=0) + sum_depth(len(x), sum_by) * u * np.abs(x).sum(axis=0)
                else:  # a maximum or minimum moves by at most its operands' largest error
                    val[op.res] = x.max(axis=0) if op.reduce_kind.value == "max" else x.min(axis=0)
                    err[op.res] = ex.max(axis=0)
            elif isinstance(op, ReturnOp):
                uniform = uniform_outputs(program)
                return {name: np.array(err[v], dtype=np.float64).reshape(
                            value_shape(t, nodes if name in program.nodal else n, name in uniform))
                        for name, v, t in zip(program.outputs, op.values, program.output_types())}
            else:
                return None
    return None


MONTE_CARLO_SAMPLES = 3  # perturbed evaluations behind the allowance of programs with loops


@record
class References:
    """The float64 reference of a run, and the reference in the run's own precision (for a
    float64 run of a program without loops, None): the verification allows what an honest
    evaluation in that precision loses."""

    float64: dict[str, np.ndarray]
    run_precision: dict[str, np.ndarray] | None
    uniform: frozenset[str] = frozenset()  # outputs with one value for the batch
    # `rounding_bounds` in the run's precision for some elements (None: all of them), found
    # only where an entry misses the rest of its allowance (their cost is several float64
    # references); None where they are not available.
    rounding: Callable[[np.ndarray | None], dict[str, np.ndarray] | None] | None = None


def run_references(program: ProgramOp, inputs: dict[str, np.ndarray], dtype: str,
                   n: int | None = None, sum_by: int = 1, nodes: int | None = None) -> References:
    """`sum_by`: the fewest elements per block of a kernel that sums over the batch (1 when
    unknown: the widest allowance); `nodes`: the mesh's node count (see `run_reference`)."""
    et = element_type(dtype)
    nodes = mesh_nodes(program, inputs, nodes)
    ref64 = run_reference(program, inputs, n, nodes=nodes, numbers=et.numpy)
    # What an honest evaluation in the run's precision loses depends on the order of its
    # operations: the kernels' order, the trees' (a matrix product's own order can depart
    # from it by O(1) where the iteration is chaotic). In float64 the two references differ by
    # that order alone: nothing beyond rounding for a straight program, but a loop compounds it
    # over its iterations (a hundred steps of a power iteration), which the kernels' own order
    # does too.
    # A sum over the batch rounds along its own order too: Monte Carlo samples with its
    # rounding bound (`sum_depth`) cover it the same way.
    has_loop = any(isinstance(op, LoopOp) for op in program.walk())
    sums = any(isinstance(op, ReduceOp) and op.reduce_kind.value == "sum" or isinstance(op, ScatterOp)
               for op in program.walk())
    uniform = frozenset(uniform_outputs(program))
    # One honest evaluation may happen to stay near float64 on an element whose value cancels
    # (a dot product of terms near 1 giving 1e-4) while the kernels' fused multiply-adds, in
    # the same order, do not: a bound on what rounding can do there holds whatever the luck.
    whole = uniform_inputs(program)
    reduces = has_reductions(program)

    def rounding(elements: np.ndarray | None) -> dict[str, np.ndarray] | None:
        if elements is None or reduces:  # (a reduction's bound needs every element)
            bounds = rounding_bounds(program, inputs, dtype, n, sum_by, nodes=nodes)
            if bounds is None or elements is None:
                return bounds
            return {k: v if k in uniform else v[elements] for k, v in bounds.items()}
        some = {k: v if k in whole else v[elements] for k, v in inputs.items()}
        return rounding_bounds(program, some, dtype, len(elements), sum_by)
    if et.itemsize == 8 and not has_loop and not sums:
        return References(ref64, None, uniform, rounding)
    run = run_reference(program, inputs, n, dtype=et.numpy, by_entries=True, nodes=nodes)
    if has_loop or sums:
        # Through a loop, one honest order may happen to stay near float64 on an element where
        # another (the GPU's fused multiply-adds) departs much further: iterations compound
        # rounding as the element's conditioning dictates. The allowance takes, entry by entry,
        # the farthest of the run-precision evaluations in the kernels' order and in the batch
        # evaluator's, and of MONTE_CARLO_SAMPLES float64 evaluations with every op's result
        # moved by a random relative error of the run precision's rounding (Monte Carlo
        # arithmetic: their spread is that conditioning).
        eps = float(np.finfo(et.numpy).eps) / 2
        with np.errstate(all="ignore"):  # an overflow on the way is judged by the verification
            samples = [run_reference(program, inputs, n, dtype=et.numpy, nodes=nodes)]
            samples += [run_reference(program, inputs, n, perturb=(eps, seed), sum_by=sum_by, nodes=nodes,
                                      numbers=et.numpy) for seed in range(MONTE_CARLO_SAMPLES)]
        for other in samples:
            for name, a in run.items():
                o, w = other[name], ref64[name]
                with np.errstate(invalid="ignore"):
                    # NaN in any honest evaluation first (the kernel may give it too), then an
                    # infinity (one cannot evaluate it in the run's precision), then the farther.
                    farther = (np.isnan(o) | (~np.isfinite(o) & np.isfinite(a))
                               | (np.isfinite(o) & np.isfinite(a) & (np.abs(o - w) > np.abs(a - w))))
                run[name] = np.where(farther & ~np.isnan(a), o, a)
    return References(ref64, run, uniform, rounding)
