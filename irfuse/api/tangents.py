"""A mesh program's tangent as a sparse matrix over its nodes (`tangent_matrix`) and its
diagonal (`diagonal`), on the host or the GPU, in the arrays' own family.

For a nodal output `of` made by a scatter and a nodal input `wrt` gathered through the same
connectivity, each element's block (K, D, K, D) is the per-element Jacobian of the part
between the gathers and the scatter (`driver.element_jacobian`). Each entry is summed where it
is computed: the owner-computes kernel (`driver.rows_assembly`, compiled once per program,
backend, index width and GPU) runs a thread per node that adds its elements' block rows, in
ascending element order, into the node's rows of the CSR values, using the connectivity's
`irfuse.mesh.assembly.SparsePattern` and each node's slot lists (made once, kept on the
`Connectivity`): no blocks, no per-slot map, the same bits on every call. A program whose
element part the kernel cannot run, or arrays not where the program's backend runs, are
assembled by a compiled scatter of the blocks through the pattern's per-slot map. The matrix
comes back as its inputs' family: `scipy.sparse.csr_matrix` for
NumPy arrays, `cupyx.scipy.sparse.csr_matrix` for CuPy arrays, `torch.sparse_csr_tensor` for
PyTorch tensors (on their device; on a GPU its index arrays are the pattern's own); `out=`
takes a matrix an earlier call returned (its values rewritten in place: the same pattern,
else refused).

Dirichlet conditions: `fixed`, a boolean array shaped as `wrt` (True at a fixed component) or
the flat indices of the fixed components, read as `linear_operator` reads it (`api.dirichlet`):
identity rows and columns there (1 on the diagonal, 0 elsewhere in the row and column); the
diagonal is 1 there.
"""

from __future__ import annotations

import os
import weakref

import numpy as np

from irfuse.api.arguments import bind_inputs, check_array, host_array, host_scalar
from irfuse.api.device_arrays import device_array
from irfuse.api.dirichlet import fixed_mask, host_values
from irfuse.artifact.arrays import AOS, describe_batch_shape
from irfuse.artifact.arrays import fits as fits_shape
from irfuse.diagnostics import UsageError, refuse_grad
from irfuse.mesh.assembly import SparsePattern, apply_fixed, check_blocks, node_slots, slots_key

_JACOBIANS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # program -> {(of, wrt): _Jacobian}
_SCATTERS: dict = {}  # (slots, size, options) -> the compiled scatter program
ROWS_SWITCH = "IRFUSE_TANGENT_ROWS"  # "0": the scatter of per-slot blocks for every program
TANGENT_SEARCH = 400  # configurations the fusion search analyses for a tangent's assembly or diagonal


def jacobian(source, *, of: str, wrt, prefix: str = "d", filename: str | None = None):
    """`irfuse.jacobian`: of a compiled program over a mesh and a nodal output `of`, a
    `Tangent` (its call the sparse matrix d of / d wrt); else the per-element Jacobian
    (`irfuse.api.jacobian`)."""
    from irfuse.api import Program, StagedProgram
    from irfuse.api import jacobian as per_element

    if isinstance(source, (Program, StagedProgram)) and isinstance(of, str) and of in source.nodal:
        return Tangent(source, of=of, wrt=wrt, who="irfuse.jacobian")
    return per_element(source, of=of, wrt=wrt, prefix=prefix, filename=filename)


def hessian(source, *, of: str, wrt: str, prefix: str = "d", filename: str | None = None):
    """`irfuse.hessian`: of a compiled program over a mesh and a nodal input `wrt`, the
    `Tangent` of the gradient of `of` (an energy summed over the elements) by `wrt`, whose
    reverse derivative turns the gather of `wrt` into a scatter: its call the Hessian as a
    sparse matrix; else the per-element Hessian (`irfuse.api.hessian`)."""
    from irfuse.api import Program, StagedProgram, grad
    from irfuse.api import hessian as per_element

    if isinstance(source, (Program, StagedProgram)) and isinstance(wrt, str) and wrt in source.nodal:
        # (the gradient is the Tangent's own: named apart from every input and output, such as
        # a gradient the program already returns under `grad_<wrt>`)
        taken = set(source.inputs) | set(source.outputs)
        step = next(f"grad{k or ''}_" for k in range(len(taken) + 2) if k != 1 and f"grad{k or ''}_{wrt}" not in taken)
        return Tangent(grad(source, of=of, wrt=wrt, prefix=step), of=f"{step}{wrt}", wrt=wrt, who="irfuse.hessian")
    return per_element(source, of=of, wrt=wrt, prefix=prefix, filename=filename)


class Tangent:
    """d `of` / d `wrt` of a compiled program over a mesh as a callable
    (`irfuse.jacobian(program, of="r", wrt="u")`, `irfuse.hessian(program, of="E",
    wrt="u")`): called with the program's arguments (and `fixed=`, `out=`), the sparse matrix
    of `tangent_matrix`; `diagonal(...)` its diagonal. The element blocks' programs are made
    on first use and kept."""

    def __init__(self, program, *, of: str, wrt: str, who: str = "irfuse.jacobian"):
        from irfuse.api import Program

        if not isinstance(program, Program):
            raise UsageError(f"{who}: the sparse tangent of a program over a mesh is taken of a compiled program "
                             f"(irfuse.compile), and of a program of gathers, element code and scatters: "
                             f"{getattr(program, 'name', type(program).__name__)} is a {type(program).__name__}")
        if not isinstance(wrt, str) or wrt not in program.nodal or wrt not in program.inputs:
            raise UsageError(f"{who}: wrt is a nodal input of {program.name}, not {wrt!r}")
        self.program, self.of, self.wrt = program, of, wrt
        _jacobian_of(program, of, wrt, who)  # (refusals now, not at the first call)

    def __call__(self, *arrays, fixed=None, out=None, **named):
        return tangent_matrix(self.program, *arrays, wrt=self.wrt, of=self.of, fixed=fixed, out=out, **named)

    def diagonal(self, *arrays, fixed=None, **named):
        return diagonal(self.program, *arrays, wrt=self.wrt, of=self.of, fixed=fixed, **named)

    def __repr__(self) -> str:
        return f"Tangent(d{self.of}/d{self.wrt} of {self.program.name})"


def tangent_matrix(program, *arrays, wrt: str, of: str | None = None, fixed=None, out=None, **named):
    """d `of` / d `wrt` of a compiled program over a mesh at these inputs, a CSR matrix of
    nodes x D rows and columns numbered node by node, in the inputs' family (see the module)."""
    jac, bound, conns, shape, family, mask = _bound(program, arrays, named, wrt, of, fixed, "tangent_matrix")
    conn = conns[jac.conn]
    d = int(np.prod(shape[1:], dtype=np.int64))
    pattern = conn.sparse_pattern(d)
    dtype = np.dtype(program.dtype)
    rows = _rows_assembly(jac, bound, conn, pattern, family)
    if rows is None:
        inputs = _gathered(jac, bound, conns, family)
        like = inputs[next(iter(jac.gathered))]  # (a gathered input: where the call runs)
        pairs = _pairs(pattern, like)
        inputs = {k: v for k, v in inputs.items() if k in jac.assembly.inputs}
    if family == "numpy":
        pattern = pattern.host()
        data = _values_of(out, pattern, family) if out is not None else np.empty(pattern.nnz, dtype)
        if data.dtype != dtype:
            raise UsageError(f"tangent_matrix: out= holds {data.dtype} values; the program's are {dtype}")
        if rows is not None:
            rows(data)
        else:
            jac.assembly(**inputs, pairs=pairs, nodes=pattern.runs, out=data.reshape(pattern.runs, *shape[1:]))
        if mask is not None:
            apply_fixed(data, pattern, mask)
        if out is not None:
            return out
        from scipy import sparse

        return _issued(pattern, sparse.csr_matrix((data, pattern.indices.copy(), pattern.indptr.copy()),
                                                  shape=pattern.shape))
    import torch

    device = _torch_of(bound[wrt]).device
    kept = _on(pattern, device)
    data = _values_of(out, pattern, family, kept) if out is not None else \
        torch.empty(pattern.nnz, dtype=getattr(torch, str(dtype)), device=device)
    if data.dtype != getattr(torch, str(dtype)):
        raise UsageError(f"tangent_matrix: out= holds {data.dtype} values; the program's are {dtype}")
    into = data.numpy() if device.type == "cpu" else data
    if rows is not None:
        rows(into)
    else:
        jac.assembly(**inputs, pairs=pairs, nodes=pattern.runs, out=into.reshape(pattern.runs, *shape[1:]))
    if mask is not None:
        row_of = kept.get("rows")
        if row_of is None:
            row_of = kept["rows"] = torch.tensor(pattern.rows(), device=device).long()
        data.masked_fill_(mask[row_of] | mask[kept["indices"].long()], 0)
        data.index_fill_(0, kept["diagonal"][mask], 1)
    if out is not None:
        return out
    # (on the GPU the matrix's index arrays are the pattern's own, shared by every matrix of
    # this connectivity: the memory is the values', not the pattern's again; read-only)
    indptr, indices = kept["indptr"], kept["indices"]
    if family == "cupy":
        import cupy
        import cupyx.scipy.sparse as cusparse

        return _issued(pattern, cusparse.csr_matrix((cupy.from_dlpack(data), cupy.from_dlpack(indices),
                                                     cupy.from_dlpack(indptr)), shape=pattern.shape))
    return _issued(pattern, torch.sparse_csr_tensor(indptr, indices, data, size=pattern.shape, check_invariants=False))


def _issued(pattern: SparsePattern, matrix):
    """`matrix`, remembered (weakly) as one of `pattern`'s for a later `out=`."""
    issued = pattern.kept.setdefault("issued", {})
    key = id(matrix)
    issued[key] = weakref.ref(matrix, lambda _: issued.pop(key, None))
    return matrix


def diagonal(program, *arrays, wrt: str, of: str | None = None, fixed=None, **named):
    """The diagonal of `tangent_matrix` without the matrix (for a Jacobi preconditioner): a
    nodal array shaped as `wrt` in its family, each entry its elements' blocks' diagonal
    entries added in the scatter's fixed order (to rounding the matrix's: another order of
    the same sums); 1 at `fixed` components. Where no element names a node twice, one
    program computes it as the residual is computed (`_Jacobian.diagonal`: the gathers, each
    block's diagonal entries alone, the scatter; no block stored); otherwise from the blocks."""
    jac, bound, conns, shape, family, mask = _bound(program, arrays, named, wrt, of, fixed, "diagonal")
    conn = conns[jac.conn]
    if not _names_a_node_twice(conn):
        made, out = jac.diagonal
        sums = made(**{name: conns.get(name, bound.get(name)) for name in made.inputs}, nodes=shape[0])[out]
        if family != "numpy":
            sums = _torch_of(sums)
        sums = sums.reshape(shape)
    else:
        blocks = _blocks_of(jac, bound, conns, shape, family)
        check_blocks(blocks, conn.shape, "diagonal")
        # Row (a, i)'s diagonal entry: the block entries (a, i, b, i) of every b naming a's
        # node (b = a alone but where an element names a node twice), added in ascending b.
        if family == "numpy":
            same = conn.conn[:, :, None] == conn.conn[:, None, :]
            rows = np.where(same[..., None], np.diagonal(blocks, axis1=2, axis2=4), 0).sum(axis=2)  # (E, K, D)
        else:
            index = _indices(conn, blocks.device)
            same = index[:, :, None] == index[:, None, :]
            rows = blocks.diagonal(dim1=2, dim2=4).where(same[..., None], 0).sum(dim=2)
        sums = _scatter(rows, conn, shape[0], jac.options).reshape(shape)
    if mask is not None:
        mask = mask.reshape(shape)
        sums = np.where(mask, 1.0, sums).astype(sums.dtype) if family == "numpy" else sums.masked_fill_(mask, 1)
    return _in_family(sums, family)


def _names_a_node_twice(conn) -> bool:
    """Whether an element of `conn` (a `Connectivity`) names one node in two slots (kept with
    it: its node numbers do not change)."""
    twice = conn.kept.get("names a node twice")
    if twice is None:
        if conn.on_gpu is not None:  # (prepared on a GPU: looked for there, no copy to the host)
            ordered = conn.on_gpu[0].sort(dim=1).values
            twice = bool((ordered[:, 1:] == ordered[:, :-1]).any())
        else:
            ordered = np.sort(conn.conn, axis=1)
            twice = bool(np.any(ordered[:, 1:] == ordered[:, :-1]))
        conn.kept["names a node twice"] = twice
    return twice


class _Jacobian:
    """A program's element blocks of d of / d wrt: the compiled per-element Jacobian, the
    same adding its blocks into a matrix's values (`assembly`) and the program of their
    diagonal over the mesh (`diagonal`), each compiled when first used; its
    gathered inputs (name -> (nodal input, connectivity input)), the scatter's connectivity
    input, the blocks' output, the options the program was compiled with."""

    def __init__(self, program, of: str, wrt: str, who: str):
        from irfuse.api import compiled_options
        from irfuse.driver.front import element_jacobian
        from irfuse.driver.options import constant_numbers

        options = compiled_options(program, who)
        self.source = options.pop("source")
        # (the uniform inputs it was compiled with fixed, `constants=`: fixed in the element
        # programs as they are made, so that those are compiled, and the rows kernel built, without them)
        self.constants = constant_numbers(options.pop("constants", None))
        self.of, self.wrt, self.who, self.compile_options = of, wrt, who, options
        self.module, self.gathered, self.conn, self.out = element_jacobian(self.source, of, wrt, who, self.constants)
        self.options = {k: options[k] for k in ("dtype", "backend", "profile", "arch") if k in options}
        self.dtype = np.dtype(program.dtype)
        self.inputs, self.nodal = tuple(program.inputs), frozenset(program.nodal)
        self.uniform, self.shapes = frozenset(program.uniform), dict(program.shapes)
        self._program = self._assembly = self._diagonal = None
        self._rows: dict = {}  # (backend, device, wide, widest) -> (artifact or None, its device)

    @property
    def program(self):
        """The per-element Jacobian compiled (the element blocks: `diagonal`)."""
        if self._program is None:
            from irfuse.api import compile

            self._program = compile(self.module, **self.compile_options)
        return self._program

    @property
    def diagonal(self):
        """(the program over the mesh of the tangent's diagonal where no element names a node
        twice (`driver.front.element_diagonal`), compiled as the program was, the search
        stopped as for `assembly` (its one element kernel found among the first: the same
        kernels as the whole search on the P1 and Neo-Hookean residuals, in both types, under
        the GPU and CPU profiles); its output's name)."""
        if self._diagonal is None:
            from irfuse.api import compile
            from irfuse.driver.front import element_diagonal, search_budget

            module, out = element_diagonal(self.source, self.of, self.wrt, self.who, self.constants)
            options = dict(self.compile_options)
            if options.get("pipeline") is None:
                options["pipeline"] = search_budget(TANGENT_SEARCH)
            self._diagonal = (compile(module, **options), out)
        return self._diagonal

    @property
    def assembly(self):
        """The Jacobian adding its blocks into a matrix's values, compiled. Its plan is one
        kernel and the scatter's, found among the first the search analyses: the search stops
        after `TANGENT_SEARCH` of them where the program's pipeline is the default (the same
        kernels as the whole search on the P1 tangent, in a fifth of the time)."""
        if self._assembly is None:
            from irfuse.api import compile
            from irfuse.driver.front import element_assembly, search_budget

            module = element_assembly(self.source, self.of, self.wrt, self.who, self.constants)[0]
            options = dict(self.compile_options)
            if options.get("pipeline") is None:
                options["pipeline"] = search_budget(TANGENT_SEARCH)
            self._assembly = compile(module, **options)
        return self._assembly


def _rows_assembly(jac: _Jacobian, bound: dict, conn, pattern: SparsePattern, family: str):
    """The owner-computes assembly (`backend.rows_emit`) of this call, as a function of the
    values array it fills (a NumPy array, or a CUDA tensor), or None where it does not run:
    the program's element part is not of its form, or the arrays are not where the program's
    backend runs (NumPy arrays or CPU tensors for 'cpu', CUDA tensors and arrays for 'cuda').
    What is kept with the connectivity: the nodes' slot lists (E * K + N + 1 words) and, on
    the GPU where the kernel reads them, each slot's nodes' places in its row (E * K * K
    bytes, `_places`); no element blocks. `IRFUSE_TANGENT_ROWS=0` turns it off (the scatter
    path for every program: comparisons)."""
    if os.environ.get(ROWS_SWITCH, "1").strip() == "0":  # (read at every call: a switch, not a setting)
        return None
    backend = jac.options.get("backend", "cpu")
    x = bound[jac.wrt]
    if family == "numpy":
        device = None
    else:
        device = _torch_of(x).device
        if device.type == "cpu":
            device = None
    if (backend == "cpu") != (device is None):
        return None
    e, k = conn.shape
    d = pattern.d
    wide = str(pattern.indices.dtype).endswith("int64")  # (NumPy's int64 or torch.int64)
    widest = pattern.kept.get("widest")
    if widest is None:
        ends = pattern.indptr[::d]
        gaps = ends[1:] - ends[:-1]
        widest = pattern.kept["widest"] = int(gaps.max()) // (d * d) if len(gaps) else 0
    key = (backend, None if device is None else device.index, wide, widest)
    made = jac._rows.get(key)
    if made is None:
        from irfuse.driver.front import element_rows
        from irfuse.driver.rows_assembly import rows_artifact

        arch = rows = None
        if device is not None:
            major, minor = _torch().cuda.get_device_capability(device)
            arch = f"sm_{major}{minor}"
            rows = element_rows(jac.source, jac.of, jac.wrt, jac.who, jac.constants)
        artifact = rows_artifact(jac.module, tuple(jac.gathered), jac.out, jac.options["dtype"], backend, arch, k, d, wide,
                                 widest, rows)
        if artifact is None:
            made = (None, None)
        elif device is None:
            from irfuse.runtime.cpu_device import CpuDevice

            made = (artifact, CpuDevice(artifact))
        else:
            from irfuse.runtime.cuda_device import CudaDevice

            made = (artifact, CudaDevice(artifact, device.index or 0))
            _close_at_exit(made[1])
        jac._rows[key] = made
    artifact, dev = made
    if artifact is None:
        return None
    dtype = jac.dtype
    kernel = artifact.kernels[0]
    args = []
    lists_at = len(kernel.inputs) - 5 - ("places" in kernel.inputs)
    for name in kernel.inputs[:lists_at]:  # (the Jacobian's inputs, then the connectivity, the lists, the places)
        nodal = jac.gathered[name][0] if name in jac.gathered else None
        given = bound[nodal or name]
        rows = conn.nodes if nodal else None if name in jac.uniform else e
        words = _words(given, jac.shapes[nodal or name], rows, dtype, device, f"input '{nodal or name}'")
        if words is None:
            return None  # (an argument the kernel does not take as it is: the program's own call checks it)
        args.append(words)
    lists = conn.kept.get(slots_key(device))
    if lists is None:
        lists = conn.kept[slots_key(device)] = node_slots(conn.conn if device is None else _indices(conn, device, False),
                                                    conn.nodes)
    if device is None:
        host = pattern.host()
        args += [np.ascontiguousarray(conn.conn, np.int32), *lists, host.indptr, host.indices]

        def run(values):
            dev.launcher(kernel.name, [*args, values], conn.nodes)()
        return run
    kept = _on(pattern, device)
    args += [_indices(conn, device, False), *lists, kept["indptr"], kept["indices"]]
    handle = int(_torch().cuda.current_stream(device).cuda_stream)
    if "places" in kernel.inputs:  # (made by the artifact's kernel that writes them)
        maker = next(k.name for k in artifact.kernels if k.outputs == ["places"])
        args.append(_places(dev, maker, conn, args[lists_at:], device, handle))

    def run_on_gpu(values):
        pointers = [a.data_ptr() for a in (*args, values)]
        dev.on_stream(handle, dev.launcher(kernel.name, pointers, conn.nodes))
    return run_on_gpu


def _places(dev, maker: str, conn, lists: list, device, handle: int):
    """Where each slot's nodes lie in its node's row, a byte each (E * K * K bytes), made by
    the kernel `maker` (`backend.rows_emit`'s PLACES_KERNEL) on the caller's stream at the
    first call on a connectivity and device and kept with it: the places of a node in its row
    are its neighbours' order, the same for every program and element type over the
    connectivity. The first call waits for them, so that calls on any stream read them whole."""
    key = ("tangent places", str(device))
    places = conn.kept.get(key)
    if places is None:
        torch = _torch()
        e, k = conn.shape
        places = torch.empty(e * k * k, dtype=torch.uint8, device=device)
        pointers = [a.data_ptr() for a in (*lists, places)]
        dev.on_stream(handle, dev.launcher(maker, pointers, conn.nodes))
        torch.cuda.current_stream(device).synchronize()
        conn.kept[key] = places
    return places


def _close_at_exit(device) -> None:
    """Closes `device` at exit, before PyCUDA's own clean-up at its module's unloading (which
    aborts the process where a context it pushed is still on the stack), as `Program`s
    holding a device are closed (`irfuse.api.programs`)."""
    import atexit

    def close() -> None:
        device.make_current()
        device.close()
    atexit.register(close)


def _words(given, shape: tuple, rows: int | None, dtype, device, what: str):
    """An argument of the owner-computes kernel as contiguous words where it runs (a NumPy
    array, or a tensor on `device`): `rows` values shaped `shape` (an array of structures), or
    one such value where `rows` is None (a uniform input; a number converted as a program's
    call converts it). None for anything else (another layout, element type, shape or
    device): the scatter path then runs the program's own call, which takes or refuses it."""
    want = tuple(shape) if rows is None else (rows, *shape)
    if device is None:
        if rows is None:
            number = host_scalar(what, given, dtype) if tuple(shape) == () else None
            if number is not None:
                return number.reshape(1)
        if type(given).__module__.startswith("torch"):
            given = given.numpy() if given.device.type == "cpu" else None
        if not isinstance(given, np.ndarray) or given.dtype != dtype or tuple(given.shape) != want:
            return None
        return np.ascontiguousarray(given)
    torch = _torch()
    if rows is None and tuple(shape) == ():
        number = host_scalar(what, given, dtype) if not hasattr(given, "__dlpack__") else None
        if number is not None:
            return torch.tensor(number.reshape(1), device=device)
    try:
        t = _torch_of(given)
    except Exception:  # noqa: BLE001 -- (not an array PyTorch takes: the program's call says what it is)
        return None
    if t.device != device or t.dtype != getattr(torch, str(dtype)) or tuple(t.shape) != want:
        return None
    return t.contiguous()


def _jacobian_of(program, of: str, wrt: str, who: str) -> _Jacobian:
    kept = _JACOBIANS.setdefault(program, {})
    if (of, wrt) not in kept:
        kept[(of, wrt)] = _Jacobian(program, of, wrt, who)
    return kept[(of, wrt)]


def _bound(program, arrays: tuple, named: dict, wrt: str, of: str | None, fixed, who: str):
    """(the program's `_Jacobian`; its arguments bound by name; each connectivity input as a
    `Connectivity`; the shape of `wrt`; the inputs' family; `fixed` as a flat boolean mask on
    the inputs' side, or None)."""
    from irfuse.api import Program
    from irfuse.mesh import Connectivity

    from irfuse.api.staged_programs import StagedProgram

    if isinstance(program, StagedProgram):  # (a program with nodal statements: passes over elements and nodes)
        raise UsageError(f"{who}: {program.name} runs in passes over the elements and the nodes (it has nodal "
                         "statements); tangent matrices and their diagonals are made of a program of gathers, "
                         "element code and scatters (irfuse.linear_operator takes this one)")
    if not isinstance(program, Program):
        raise UsageError(f"{who} takes a compiled program over a mesh (irfuse.compile), not a "
                         f"{type(program).__name__}")
    if of is None:
        if len(program.outputs) != 1:
            raise UsageError(f"{who}: {program.name} has outputs {', '.join(program.outputs)}: name one as of=")
        of = program.outputs[0]
    if not isinstance(of, str):
        raise UsageError(f"{who}: of takes an output's name, not {of!r}")
    if not isinstance(wrt, str) or wrt not in program.nodal or wrt not in program.inputs:
        raise UsageError(f"{who}: wrt is a nodal input of {program.name}, not {wrt!r}")
    jac = _jacobian_of(program, of, wrt, who)
    bound = bind_inputs(program.inputs, arrays, named, program)
    for name in program.inputs:  # (every argument read by the programs made from the call's: refused here, by name)
        refuse_grad(f"{who}: input '{name}'", bound[name])
        if name in program.nodal:
            _check_nodal(program, name, bound[name], who)
    family = _family(bound[wrt])
    x = bound[wrt]
    fixed = fixed_mask(fixed, np.shape(x), wrt, who)
    nodes = int(np.shape(x)[0])
    for name in program.inputs:
        if name in program.nodal and name != wrt and len(np.shape(bound[name])) and np.shape(bound[name])[0] != nodes:
            raise UsageError(f"{who}: input '{name}' holds {np.shape(bound[name])[0]} nodes and '{wrt}' {nodes}: the "
                             "nodal inputs are values at the same nodes")
    conns = {}
    for name in program.index_inputs:
        given = bound[name]
        conns[name] = given if isinstance(given, Connectivity) else Connectivity(given, nodes)
        if conns[name].nodes != nodes:
            raise UsageError(f"{who}: input '{name}' is a Connectivity of {conns[name].nodes} nodes; '{wrt}' holds "
                             f"{nodes}")
    if family == "numpy":
        mask = None if fixed is None else host_values(fixed).reshape(-1)
    else:
        torch = _torch()
        mask = None if fixed is None else _torch_of(fixed).to(device=_torch_of(x).device,
                                                               dtype=torch.bool).reshape(-1)
    return jac, bound, conns, tuple(np.shape(x)), family, mask


def _check_nodal(program, name: str, value, who: str) -> None:
    """A nodal input as the tangents read it (a row a node, the program's element type, as its
    call takes it; nothing cast), or a refusal naming it: the programs made from it (the
    Jacobian's, the assembly's) would otherwise name their own inputs, or read it cast."""
    a = device_array(value)
    if a is None:
        a = host_array(f"{who}: input '{name}'", value, program.dtype)
    shape = program.shapes[name]
    if not fits_shape(tuple(a.shape), shape, AOS):
        raise UsageError(f"{who}: input '{name}' has shape {tuple(a.shape)}; a nodal input of the tangents is "
                         f"shaped {describe_batch_shape(AOS, shape)}, a row a node")
    check_array(f"{who}: input '{name}'", a, shape, program.dtype, None, AOS)


def _gathered(jac, bound: dict, conns: dict, family: str) -> dict:
    """The per-element inputs of the Jacobian's element part: the gathered rows (a NumPy
    array, or for GPU arrays and tensors a PyTorch tensor), and the rest as given."""
    if family == "numpy":
        inputs = {name: np.asarray(bound[nodal])[conns[c].conn] for name, (nodal, c) in jac.gathered.items()}
    else:
        device = _torch_of(bound[jac.wrt]).device
        inputs = {name: _torch_of(bound[nodal])[_indices(conns[c], device)]
                  for name, (nodal, c) in jac.gathered.items()}
    inputs.update({name: bound[name] for name in jac.inputs
                   if name not in inputs and name not in conns and name not in jac.nodal})
    return inputs


def _element_blocks(program, arrays: tuple, named: dict, wrt: str, of: str | None, fixed, who: str):
    """(each element's block of d of / d wrt (E, K, D, K, D): a NumPy array, or a PyTorch
    tensor for GPU arrays and tensors; the scatter's `Connectivity`; the shape of `wrt`; the
    inputs' family; `fixed` as a flat boolean mask on the blocks' side, or None; the
    program's `_Jacobian`)."""
    jac, bound, conns, shape, family, mask = _bound(program, arrays, named, wrt, of, fixed, who)
    return _blocks_of(jac, bound, conns, shape, family), conns[jac.conn], shape, family, mask, jac


def _blocks_of(jac, bound: dict, conns: dict, shape: tuple, family: str):
    """Each element's block of the Jacobian's d of / d wrt (E, K, D, K, D) at the bound
    arguments: a NumPy array, or a PyTorch tensor for GPU arrays and tensors."""
    conn = conns[jac.conn]
    inputs = _gathered(jac, bound, conns, family)
    blocks = jac.program(**{k: v for k, v in inputs.items() if k in jac.program.inputs})[jac.out]
    if family != "numpy":
        blocks = _torch_of(blocks)
    e, k = conn.shape
    d = int(np.prod(shape[1:], dtype=np.int64))
    return blocks.reshape(e, k, d, k, d)


def _indices(conn, device, wide: bool = True):
    """A `Connectivity`'s node numbers as a contiguous PyTorch tensor on `device`, int64
    (indices for PyTorch's gathers) or, not `wide`, int32 (the owner-computes kernel's); kept
    with it."""
    torch = _torch()
    dtype = torch.int64 if wide else torch.int32
    key = ("indices", str(device), str(dtype))
    kept = conn.kept.get(key)
    if kept is None:
        gpu = conn.on_gpu
        source = gpu[0] if gpu is not None and str(gpu[0].device) == str(device) else torch.tensor(conn.conn)
        kept = conn.kept[key] = source.to(device=device, dtype=dtype).contiguous()
    return kept


def _pairs(pattern: SparsePattern, like):
    """The pattern's node pairs as a prepared `Connectivity` where `like` lives (kept)."""
    from irfuse.mesh import Connectivity

    key = ("pairs", "host" if isinstance(like, np.ndarray) else str(like.device))
    kept = pattern.kept.get(key)
    if kept is None:
        if isinstance(like, np.ndarray) or like.device.type != "cuda":
            kept = Connectivity(pattern.host().pairs, pattern.runs)
        elif not isinstance(pattern.pairs, np.ndarray) and pattern.pairs.device == like.device:
            kept = Connectivity(pattern.pairs, pattern.runs)  # (made on this GPU: prepared there)
        else:
            kept = Connectivity(_torch().tensor(pattern.host().pairs, device=like.device), pattern.runs)
        pattern.kept[key] = kept
    return kept


def _on(pattern: SparsePattern, device) -> dict:
    """The pattern's CSR arrays as PyTorch tensors on `device` (kept with it)."""
    key = ("csr", str(device))
    kept = pattern.kept.get(key)
    if kept is None:
        torch = _torch()
        if not isinstance(pattern.indices, np.ndarray) and pattern.indices.device == device:
            kept = {"indptr": pattern.indptr, "indices": pattern.indices, "diagonal": pattern.diagonal.long()}
        else:
            host = pattern.host()
            kept = {"indptr": torch.tensor(host.indptr, device=device),
                    "indices": torch.tensor(host.indices, device=device),
                    "diagonal": torch.tensor(host.diagonal, device=device).long()}
        pattern.kept[key] = kept
    return kept


def _values_of(out, pattern: SparsePattern, family: str, kept: dict | None = None):
    """The values of `out=`, a matrix an earlier call returned for this pattern, to be
    rewritten in place; anything else refused by name."""
    what = {"numpy": "a scipy.sparse CSR matrix", "cupy": "a cupyx.scipy.sparse CSR matrix",
            "torch": "a torch.sparse_csr_tensor"}[family]
    given = {"scipy": "numpy", "cupyx": "cupy", "torch": "torch"}.get(type(out).__module__.split(".")[0])
    if given is not None and given != family:
        raise UsageError(f"tangent_matrix: out= is a {type(out).__module__.split('.')[0]} "
                         f"{type(out).__name__}; this call's arrays take {what} an earlier call returned")
    mine = pattern.kept.get("issued", {}).get(id(out))
    nnz = getattr(out, "nnz", None) if family != "torch" else None
    if mine is not None and mine() is out and family != "numpy" and (family == "torch" or nnz == pattern.nnz):
        # (a matrix this pattern made on a device: its index arrays are the pattern's own, which
        # the caller reads and does not write; only a change of its size is looked for, not a
        # comparison of every index. A SciPy matrix holds copies, which the caller may replace
        # or write: compared below, at 2-4% of a host assembly's time)
        return _writable_values(out.values() if family == "torch" else _torch_of(out.data), pattern.nnz)
    if family == "torch":
        torch = _torch()
        ok = isinstance(out, torch.Tensor) and out.layout == torch.sparse_csr
        same = ok and tuple(out.shape) == pattern.shape and out.col_indices().numel() == pattern.nnz and \
            torch.equal(out.crow_indices(), kept["indptr"]) and torch.equal(out.col_indices(), kept["indices"])
        values = out.values() if same else None
    else:
        ok = getattr(out, "format", None) == "csr" and hasattr(out, "indices")
        same = ok and tuple(out.shape) == pattern.shape and out.indices.size == pattern.nnz
        if same and family == "numpy":
            same = np.array_equal(out.indptr, pattern.indptr) and np.array_equal(out.indices, pattern.indices)
        elif same:
            torch = _torch()
            same = torch.equal(_torch_of(out.indptr), kept["indptr"]) and torch.equal(_torch_of(out.indices),
                                                                                   kept["indices"])
        values = (out.data if family == "numpy" else _torch_of(out.data)) if same else None
    if not ok:
        raise UsageError(f"tangent_matrix: out= takes {what} an earlier call returned, not a {type(out).__name__}")
    if not same:
        raise UsageError(f"tangent_matrix: out= is a matrix of another pattern ({tuple(out.shape)}); this "
                         f"connectivity's is {pattern.shape[0]} x {pattern.shape[1]} with {pattern.nnz} entries")
    return _writable_values(values, pattern.nnz)


def _writable_values(values, nnz: int):
    """An `out=` matrix's value array, which the assembly writes word by word from its start:
    refused unless it holds `nnz` contiguous, writable values (a matrix's `data` may have been
    replaced by the caller since: a shorter array would be written past its end, a strided
    view written as if contiguous, a read-only one written all the same)."""
    if isinstance(values, np.ndarray):
        size, contiguous, writable = values.size, values.flags.c_contiguous, values.flags.writeable
    else:  # (a tensor: PyTorch's, or CuPy's values seen through DLPack)
        size, contiguous, writable = values.numel(), values.is_contiguous(), True
    if values.ndim != 1 or size != nnz:
        raise UsageError(f"tangent_matrix: out= holds {size} values shaped {tuple(values.shape)}; its pattern has "
                         f"{nnz} entries (was its value array replaced?)")
    if not contiguous:
        raise UsageError("tangent_matrix: the values of out= are a strided view; the assembly writes contiguous "
                         "values")
    if not writable:
        raise UsageError("tangent_matrix: the values of out= are read-only")
    return values


def _scatter(rows, conn, nodes: int, options: dict):
    """`rows` (E, K, *size) added over `conn` (a `Connectivity`) by a compiled scatter in the
    options of a program (`_Jacobian.options`; kept per shape and options): (nodes, *size) on
    `rows`' side."""
    from irfuse.api import compile

    slots, size = rows.shape[1], int(np.prod(rows.shape[2:], dtype=np.int64))
    key = (slots, size, tuple(sorted(options.items())))
    prog = _SCATTERS.get(key)
    if prog is None:
        nodal, element = ("scalar", f"vector{slots}") if size == 1 else (f"vector{size}", f"matrix{slots}x{size}")
        source = (f"nodal {nodal} sums;\nindex{slots} conn;\n{element} rows;\ninput rows, conn;\n"
                  "sums = scatter(rows, conn);\nreturn sums;\n")
        prog = _SCATTERS[key] = compile(source, **options)
    flat = rows.reshape(rows.shape[0], slots) if size == 1 else rows.reshape(rows.shape[0], slots, size)
    sums = prog(flat, conn, nodes=nodes).sums
    if not isinstance(rows, np.ndarray):
        sums = _torch_of(sums)
    return sums.reshape(nodes, *rows.shape[2:])


def _family(a) -> str:
    d = device_array(a)
    if d is not None:
        return "cupy" if d.family == "cupy" else "torch"
    return "torch" if type(a).__module__.startswith("torch") else "numpy"


def _torch():
    try:
        import torch
    except ImportError:
        raise UsageError("a tangent of GPU arrays is assembled with PyTorch, which is not installed") from None
    return torch


def _torch_of(a):
    torch = _torch()
    if isinstance(a, torch.Tensor):
        return a
    if isinstance(a, np.ndarray):
        return torch.from_numpy(a)
    return torch.from_dlpack(a)


def _in_family(a, family: str):
    if family == "cupy":
        import cupy

        return cupy.from_dlpack(a)
    return a
