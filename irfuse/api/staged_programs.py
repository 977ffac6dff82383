"""Programs of several stages: a program over a mesh that works per node runs as passes over
the nodes and over the elements (`irfuse.transforms.node_phases`), each compiled as a program
of its own and held by one artifact (`irfuse.artifact.stages`), run one after another.

A call takes what the program takes (nodal arrays `(M, *shape)`, connectivities `(E, K)`,
per-element arrays `(E, *shape)`, uniform values; `nodes=`, `scatter=`, `memory_budget=`,
`out=`, `verify=` as for any program over a mesh). The passes over the nodes are ordinary
programs whose batch is the nodes; a pass over the elements is a program over the mesh. A
value one pass makes and a later one reads goes from one call to the next as an array on the
same side (host or GPU): on the GPU backend with host arrays it comes back to the host in
between, on GPU arrays it stays there. Every pass's results are those of its own program, so
the bits do not depend on how a pass over the elements runs (one piece or chunks).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

import numpy as np

from irfuse.api.arguments import (bind_inputs, bind_outputs, out_snapshot, same_arguments, same_batch_length,
                                  numbers_bits, same_out)
from irfuse.api.device_arrays import alike_address, device_array, device_of, stream_handle
from irfuse.api.gpu_calls import FAST_FAMILIES
from irfuse.api.output_sets import OutputSets
from irfuse.api.host_calls import alike_host_address, replay_at
from irfuse.api.mesh_calls import mesh_layout, mesh_verification, nodes_given, scatter_mode
from irfuse.api.outputs import Outputs
from irfuse.api.programs import Program, let_go_of_any_loops
from irfuse.artifact.arrays import SOA
from irfuse.artifact.stages import StagedArtifact
from irfuse.diagnostics import ExecutionError, UsageError
from irfuse.mesh.connectivity import Connectivity
from irfuse.runtime.cpu_device import page_aligned
from irfuse.runtime.cuda_graph import stream_capturing
from irfuse.runtime.mesh_runs import OnePieceOnly

UNIFORM_COPIES_KEPT = 64
BETWEEN_KEPT = 2  # sets of arrays passed between passes kept, for calls of different sizes
GRAPHS_KEPT = 4  # graphs of its passes a call made again keeps, one a set of output addresses


class StagedProgram:
    """A compiled program of several stages (see the module). `inputs`, `outputs`, `shapes`,
    `uniform`, `nodal` and `index_inputs` say what it takes and gives, as for a `Program`;
    `stages` are its stages (what each runs over, takes and gives) and `programs` the
    `Program` of each, in order. `stage_spec(k, text)`: (function, arguments) that compile
    stage k again from its IR (its phases, for `irfuse.dask`; as a `Program`'s `_spec`), or
    None."""

    def __init__(self, artifact: StagedArtifact, backend: str, warnings: list, stage_spec=None):
        self.artifact = artifact
        self.name = artifact.name
        self.stages = artifact.stages
        self.programs = []
        for k, stage in enumerate(artifact.stages):
            program = Program(stage.artifact, backend, [])
            text = stage.artifact.reference_text
            if stage_spec is not None and text is not None:  # (a saved plan's stages have none)
                program._spec = rebuild, spec = stage_spec(k, text)
                program._variant = _variant_of(rebuild, spec)
            self.programs.append(program)
        # The same program with an elements stage running the nodes stage after it (`fused`:
        # `irfuse.driver.fused_stages`), where the compiler made one: what a call in one piece
        # and in the scatter's order runs (`_active`).
        # (a stage both hold is run by the same `Program`)
        mine = {id(stage): program for stage, program in zip(artifact.stages, self.programs)}
        self.fused_programs = [mine.get(id(s)) or Program(s.artifact, backend, []) for s in artifact.fused] \
            if artifact.fused else None
        self._compiled = None  # the staged program with its IR (`compiled`), made on first use
        self.backend = backend
        self.warnings = list(warnings)
        self.inputs, self.outputs, self.shapes = artifact.inputs, artifact.outputs, artifact.shapes
        self.uniform, self.nodal, self.index_inputs = artifact.uniform, artifact.nodal, artifact.index_inputs
        self.dtype = self.programs[0].dtype
        self.layout = "aos"
        self.strides: dict = {}
        self.memory_budget: int | None = None
        self._spec: tuple | None = None
        self.lock = threading.Lock()
        self._calls = threading.RLock()  # (a call made again: what `again` finds, the call reads)
        self._uniform_copies: OrderedDict = OrderedDict()  # (see _uniforms_beside)
        # The arrays one pass makes and a later one reads, kept for the next call on arrays of
        # the same shapes, types and place (`_between_key`): a call allocates only its outputs,
        # and a call captured into a CUDA graph (`irfuse.time_loop`) allocates nothing.
        self._between: OrderedDict = OrderedDict()
        self._fast: list = []  # the last calls, made again without their checks (`_StagedFastCall`)

    @property
    def compiled(self):
        """The staged program with its IR (`irfuse.driver.artifact.CompiledStages`): what
        checking against the reference needs (the compiler's side)."""
        if self._compiled is None:
            from irfuse.driver.artifact import CompiledStages

            self._compiled = CompiledStages.from_artifact(self.artifact)
        return self._compiled

    @property
    def kernels(self) -> list[str]:
        return [k for p in self.programs for k in p.kernels]

    @property
    def _device(self):
        return next((p._device for p in self.programs if p._device is not None), None)

    def __repr__(self) -> str:
        over = ", ".join(s.over for s in self.stages)
        return f"<irfuse program {self.name}: passes over {over}; {len(self.kernels)} kernels, backend {self.backend}>"

    def __call__(self, *args, out=None, verify: bool = False, stream=None, out_layout: str | None = None,
                 memory_budget: int | None = None, progress=False, nodes: int | None = None,
                 scatter: str | None = None, **named) -> Outputs:
        """Runs the passes in order (see the module); the arguments are those of a call of a
        program over a mesh (`Program.__call__`)."""
        if out_layout is not None:
            raise UsageError("out_layout= is not taken by a program over a mesh: its calls run on arrays of "
                             "structures")
        scatter, nodes = scatter_mode(scatter), nodes_given(nodes)
        if not verify and progress is False and memory_budget is None and self.memory_budget is None:
            with self._calls:
                outputs = self._again(args, named, out, stream, nodes, scatter)
            if outputs is not None:
                return outputs
        bound = bind_inputs(self.inputs, args, named, self)
        given = bind_outputs(self.outputs, out) if out is not None else {}
        budget = memory_budget if memory_budget is not None else self.memory_budget
        layout = mesh_layout(self, bound)
        self._check_layout(bound, layout)
        m = self._nodes(bound, nodes)
        key = self._between_key(bound, stream, m, scatter)
        made = self._run_passes(bound, given, budget, layout, m, self._between.get(key, {}), stream, progress, scatter)
        if key not in self._between and layout != SOA:  # (structures of arrays: made by each call)
            if len(self._between) >= BETWEEN_KEPT:
                self._between.popitem(last=False)
            self._between[key] = {k: v for k, v in made.items() if k not in self.outputs}
        if key in self._between:
            self._between.move_to_end(key)
            if not verify and progress is False and budget is None:
                fast = _StagedFastCall(self, args, named, out, stream, nodes, scatter, given, layout, m,
                                       self._between[key], {k: made[k] for k in self.outputs})
                if fast.usable:
                    for dropped in self._fast[1:]:
                        dropped.let_go()
                    self._fast = [fast, *self._fast[:1]]
        outputs = Outputs(self.outputs, [made[k] for k in self.outputs])
        if verify:
            report = self._verification(bound, outputs, m)
            if not report.ok:
                raise ExecutionError(f"{self.name}: the outputs disagree with the NumPy reference: {report}")
        return outputs

    def _again(self, args: tuple, named: dict, out, stream, nodes, scatter: str) -> Outputs | None:
        """A call made again (`_StagedFastCall`): its outputs, or None where none matches."""
        for fast in self._fast:
            if fast.again(args, named, out, stream, nodes, scatter):
                # The outputs: out= arrays, or made here (on the GPU a set let go of, `OutputSets`;
                # on the CPU as a pass makes them, the passes writing into them).
                # (The outputs `made` by the sets are the program's, in its order: handed back as
                # they are where the passes' graph runs, their dict built only where it does not.)
                made, key = fast.made.make(fast.handle) if fast.made is not None else (None, ())
                given = fast.host_outputs() if fast.host_shapes is not None else fast.given if made is None \
                    else None
                if fast.replay is not None:
                    fast.replay.run(fast.bits, fast.places, given, fast.places is fast.kept_places and
                                    given is fast.given)
                    return fast.returned(made, given)
                key = (fast.addresses, key)  # (the arrays' addresses, the outputs')
                graph = fast.graphs.get(key) if fast.graphable else None
                if graph is not None and graph.run(fast):
                    return fast.returned(made, given)
                if given is None:
                    given = dict(zip(fast.made.names, made))
                calls: list = []
                bound = {**dict(zip(self.inputs, args)), **named}
                made = self._run_passes(bound, given, None, fast.layout, fast.m, fast.between, stream,
                                        False, scatter, calls)
                if self.backend == "cpu" and fast.replay is None:
                    fast.replay = _PassesReplay.of(self, calls, given, bound)
                elif fast.graphable:
                    _PassesGraph.again(self, fast, bound, given, key, scatter)
                if fast.made is not None:
                    self._forget_pass_calls()
                return Outputs(self.outputs, [made[k] for k in self.outputs])
        return None

    def _forget_pass_calls(self) -> None:
        """Drops the fast calls the passes' programs kept of a call run pass by pass: without
        `out=` they hold the call's arrays and outputs, which the staged call's output sets
        (`OutputSets`) must see let go of to hand them back (a loop `u, v = step(X, u, v, ...)`
        then alternates between two sets, whose graphs it replays)."""
        for program in (*self.programs, *(self.fused_programs or ())):
            program._fast = None
            program._mesh_fast = []

    def _active(self, budget, layout: str, scatter: str) -> tuple[list, list]:
        """(stages, programs) a call runs: the fused stages where the compiler made them and
        the call runs in one piece (no budget asked: a call that the default budget would cut
        into chunks runs the stages one by one, `_run_passes`) in the scatter's order, on
        arrays of structures; else the stages one by one. Both give the same bits."""
        if self.fused_programs is not None and scatter == "ordered" and budget is None and layout != SOA:
            return self.artifact.fused, self.fused_programs
        return self.stages, self.programs

    def _run_passes(self, bound: dict, given: dict, budget, layout: str, m, between: dict, stream, progress,
                    scatter: str, calls: list | None = None) -> dict:
        """Runs each pass on the call's arguments and what the passes before it made (into
        `given` out= arrays, and the kept arrays `between` passes); everything made, by name.
        `calls`, where given, receives each pass's (program, arguments, out= arrays)."""
        stages, programs = self._active(budget, layout, scatter)
        if programs is not self.programs:
            try:
                return self._run_stages(stages, programs, bound, given, budget, layout, m, between, stream, progress,
                                        scatter, calls)
            except OnePieceOnly:  # (the default budget cuts the elements into chunks)
                if calls is not None:
                    calls.clear()
        return self._run_stages(self.stages, self.programs, bound, given, budget, layout, m, between, stream,
                                progress, scatter, calls)

    def _run_stages(self, stages: list, programs: list, bound: dict, given: dict, budget, layout: str, m,
                    between: dict, stream, progress, scatter: str, calls: list | None) -> dict:
        made: dict[str, object] = {}
        for step, program in zip(stages, programs):
            arguments = {k: made[k] if k in made and k not in bound else bound[k] for k in step.inputs}
            mine = {k: v for k, v in given.items() if k in step.outputs}
            mine.update({k: between[k] for k in step.outputs if k in between and k not in mine})
            if step.over == "elements":  # (told the call's layout: its own arrays may fit both)
                results = program._call_on_mesh((), arguments, mine or None, False, stream, None, budget, progress,
                                                m, scatter, layout)
            else:
                arguments = _uniforms_beside(program, arguments, self._uniform_copies)
                results = program(**arguments, out=mine or None, stream=stream, memory_budget=budget,
                                  out_layout=layout if layout == SOA and not mine else None)
            made.update(zip(step.outputs, results))
            if calls is not None:
                calls.append((program, arguments, mine))
        return made

    def _between_key(self, bound: dict, stream, m, scatter: str) -> tuple:
        """What the arrays passed from one pass to the next depend on: the arguments' shapes,
        types and place, and on the GPU the stream (calls on two streams do not share them)."""

        key, model = [m, scatter], None
        for name, value in bound.items():
            a = device_array(value) if not hasattr(value, "conn") else None
            model = model or a
            key.append((name, type(value), getattr(value, "shape", None), getattr(value, "dtype", None),
                        a.device if a is not None else None))
        key.append(stream_handle(stream, model) if model is not None else None)
        return tuple(key)

    def _check_layout(self, bound: dict, layout: str) -> None:
        """Every nodal and per-element argument in the call's layout, those no pass reads too
        (each pass checks only its own)."""
        from irfuse.api.arguments import check_array, host_array

        for name, value in bound.items():
            if name in self.index_inputs or name in self.uniform:
                continue
            what = f"input '{name}'"
            a = device_array(value) or host_array(what, value, self.dtype)
            check_array(what, a, self.shapes[name], self.dtype, None, layout)

    def _nodes(self, bound: dict, nodes: int | None) -> int | None:
        """M: from the nodal inputs (each node pass checks its arrays agree), else `nodes=`."""

        last = mesh_layout(self, bound) == SOA
        counts = {}
        for k in self.inputs:
            if k in self.nodal:
                a = bound[k]
                dev = device_array(a)
                shape = dev.shape if dev is not None else np.shape(a)
                if len(shape) >= 1:
                    counts[k] = shape[-1] if last else shape[0]
        # (every nodal input at once: a pass reading few of them could not say which is odd)
        count = same_batch_length(counts)
        if count is None:
            return nodes
        if nodes is not None and nodes != count:
            raise UsageError(f"nodes={nodes} disagrees with nodal input '{next(iter(counts))}', which holds {count} "
                             "nodes")
        return int(count)

    def _verification(self, bound: dict, outputs: Outputs, m: int | None):
        from irfuse.api.verification import to_host

        def host(a):
            dev = device_array(a)
            if dev is None:
                return np.asarray(a)
            device = self._device
            device.synchronize()
            return to_host(device, dev)

        soa = mesh_layout(self, bound) == SOA

        def aos(name: str, a):  # (the reference reads arrays of structures)
            a = a.conn if hasattr(a, "conn") else host(a)
            return np.moveaxis(a, -1, 0) if soa and name not in self.uniform and name not in self.index_inputs else a

        arrays = {k: aos(k, v) for k, v in bound.items()}
        n = next(len(arrays[k]) for k in self.inputs if k in self.index_inputs)
        results = Outputs(self.outputs, [aos(k, o) for k, o in zip(self.outputs, outputs)])
        return mesh_verification(self, arrays, results, n, m)

    def time(self, *args, repeat: int = 20, warmup: int = 1, out=None, memory_budget: int | None = None,
             nodes: int | None = None, scatter: str | None = None, **named) -> list[float]:
        """Seconds of each of `repeat` calls on these arrays (after `warmup` more), each end to
        end, every pass included (`irfuse.api.timing.time_calls`)."""
        from irfuse.api.timing import time_calls

        return time_calls(self, args, named, out, repeat, warmup, nodes=nodes, scatter=scatter,
                          memory_budget=memory_budget)

    def opened_device(self):
        """The device the passes run on (each pass is a program of its own on the same one)."""
        return self.programs[0].opened_device()

    def check(self, *args, nodes: int | None = None, **named):
        """Runs the program and checks every element and node against the float64 reference."""
        bound = bind_inputs(self.inputs, args, named, self)
        outputs = self(**bound, nodes=nodes)
        return self._verification(bound, outputs, self._nodes(bound, nodes))

    def _for(self, layout: str, strides: dict) -> "StagedProgram":
        if layout != "aos" or strides:
            raise UsageError(f"program {self.name} runs over a mesh on arrays of structures only")
        return self

    def for_layout(self, layout: str) -> "StagedProgram":
        return self._for(layout, {})

    def close(self) -> None:
        """Releases each pass's device and what calls again keep (their graphs launch the
        passes' kernels; the arrays between passes)."""
        for fast in self._fast:
            fast.let_go()
        self._fast = []
        self._between.clear()
        let_go_of_any_loops(self)
        for p in {id(p): p for p in [*self.programs, *(self.fused_programs or [])]}.values():
            p.close()

    def __reduce__(self):
        """Pickled as what it was compiled from, as a `Program` is."""
        if self._spec is None:
            raise TypeError(f"program {self.name} cannot be pickled: compile it from its source")
        rebuild, spec = self._spec
        return (rebuild, (spec, self.layout, ()))

    def __enter__(self) -> "StagedProgram":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


class _StagedFastCall:
    """A call of a staged program made again with the same arrays (by position or name, `out=`
    the same objects; NumPy arrays, PyTorch tensors or CuPy arrays unchanged in shape, type and
    strides, `Connectivity` objects) and any numbers for its uniform scalars: the passes run
    without the binding and checks of the whole call (each pass's own call takes its fast
    path in turn); without `out=`, arrays alike the kept ones too (`_alike` on the GPU, the
    passes' graphs kept by their addresses; `_host_alike` on the CPU, the passes' replay set to
    them). `usable`: whether the call's arguments allow it."""

    def __init__(self, program, args: tuple, named: dict, out, stream, nodes, scatter: str, given: dict, layout: str,
                 m, between: dict, results: dict):
        self.inputs = program.inputs
        self.args, self.named, self.stream, self.nodes, self.scatter = args, dict(named), stream, nodes, scatter
        self.out = out_snapshot(out)
        self.given, self.layout, self.m, self.between = given, layout, m, between
        # (the out= arrays as the call returns them, the same at every call made again)
        self.outputs = program.outputs
        self.out_outputs = Outputs(program.outputs, [given[k] for k in program.outputs]) \
            if all(k in given for k in program.outputs) else None
        # Numbers, taken by value (`same_arguments`): position, or name, -> input
        self.numbers = {k: name for k, name in enumerate(program.inputs[:len(args)]) if _is_number(args[k])}
        self.numbers |= {name: name for name, v in named.items() if _is_number(v)}
        self.dtype = program.dtype
        held = [v for k, v in enumerate(args) if k not in self.numbers]
        held += [v for name, v in named.items() if name not in self.numbers] + list(given.values())
        signatures = [_signature(v) for v in held]
        self.usable = len(args) + len(named) == len(program.inputs) and all(s is not None for s in signatures)
        # What `again` reads again of each: its signature's own function (a Connectivity,
        # immutable, only by identity), made once here, not looked up at every call.
        self.held = [(v, _signature_of(v), signature) for v, signature in zip(held, signatures)
                     if signature != ()]
        self.bits: list = []  # (input, bytes) of the numbers of the call made again (`again`)
        self.replay: _PassesReplay | None = None  # (on the CPU, made at the first call again)
        # On the GPU, the stream the kept arrays between passes belong to (`_between_key`).
        self.model = next((a for a in map(device_array, held) if a is not None), None) if self.usable else None
        self.handle = stream_handle(stream, self.model) if self.model is not None else None
        # On the GPU, the passes as one graph for each set of output addresses (`_PassesGraph`):
        # the out= arrays', or, without out=, those of outputs made with the library's `empty`
        # (`made`), which repeat where a loop lets go of its last outputs.
        self.graphable = self.model is not None and program.backend == "cuda" and \
            (all(name in given for name in program.outputs) or not given and self.model.family in FAST_FAMILIES)
        self.made = None
        if self.graphable and not given:
            self.made = OutputSets(self.model, {name: tuple(device_array(a).shape) for name, a in results.items()},
                                   self.dtype)
        self.graphs: OrderedDict[tuple, _PassesGraph] = OrderedDict()
        self.seen: OrderedDict[tuple, None] = OrderedDict()  # (made pass by pass once: `_PassesGraph.again`)
        # On the GPU without out=, arrays alike the kept ones (`_alike`) take their place: a loop
        # feeding a call's outputs back as its inputs gives new arrays at every call. The
        # passes' graphs are kept by the arrays' addresses too (`addresses`: () for the kept ones).
        self.addresses: tuple = ()
        self.slots = []  # (position or name, kept argument, its signature's function, signature)
        for k, v in [*((k, args[k]) for k in range(len(args)) if k not in self.numbers),
                     *((name, v) for name, v in named.items() if name not in self.numbers)]:
            signature_of = None if isinstance(v, Connectivity) else _signature_of(v)
            self.slots.append((k, v, signature_of, None if signature_of is None else signature_of(v)))
        self.alike = self.made is not None and all(
            signature_of is None and isinstance(v, Connectivity) or device_of(v) is not None and signature[-1] is True
            for _, v, signature_of, signature in self.slots)
        # On the CPU without out=: each output's shape, made at every call (`host_outputs`), and
        # (`host_alike`) NumPy arrays alike the kept ones (C-contiguous, 16-byte aligned, the
        # same shape and type) taking their place; `places`: the call's arrays by input name,
        # with their addresses, which the passes' replay reads (`_PassesReplay.run`).
        self.host_shapes = None
        if program.backend == "cpu" and self.usable and not given and layout != SOA:
            self.host_shapes = {name: tuple(np.shape(results[name])) for name in program.outputs}
        self.host_alike = self.host_shapes is not None and all(
            signature_of is None and isinstance(v, Connectivity) or type(v) is np.ndarray and v.flags.c_contiguous
            for _, v, signature_of, _ in self.slots)
        self.kept_places = {self._name(k): _place(v) for k, v, signature_of, _ in self.slots if type(v) is np.ndarray}
        self.places = self.kept_places

    def _name(self, k) -> str:
        return self.inputs[k] if type(k) is int else k

    def host_outputs(self) -> dict:
        """New outputs of the call on the CPU without out= (by name), as a pass makes them."""
        return {name: page_aligned(shape, self.dtype) for name, shape in self.host_shapes.items()}

    def returned(self, made: Outputs | None, given: dict) -> Outputs:
        """What a call made again returns: the outputs the sets made (`made`), or the `out=`
        arrays' `Outputs` made once, or the outputs `given` (made on the CPU) as an `Outputs`."""
        if made is not None:
            return made
        if given is self.given and self.out_outputs is not None:
            return self.out_outputs
        return Outputs(self.outputs, [given[k] for k in self.outputs])

    def let_go(self) -> None:
        """Destroys the graphs, once the stream has run what it queued."""
        for graph in self.graphs.values():
            graph.work.destroy_after(self.handle)
        self.graphs.clear()

    def again(self, args: tuple, named: dict, out, stream, nodes, scatter: str) -> bool:
        """Whether the call is this call again."""
        if len(args) != len(self.args) or len(named) != len(self.named) or stream is not self.stream \
                or nodes != self.nodes or scatter != self.scatter or not same_out(out, self.out):
            return False
        if not same_arguments(args, named, self.args, self.named, self.numbers, self.dtype, self.bits):
            if self.host_alike:
                return self._host_alike(args, named)
            return self.alike and self._alike(args, named) and stream_handle(stream, self.model) == self.handle
        for a, signature_of, signature in self.held:
            if signature_of(a) != signature:
                return False
        self.addresses, self.places = (), self.kept_places
        return self.model is None or stream_handle(stream, self.model) == self.handle

    def _host_alike(self, args: tuple, named: dict) -> bool:
        """On the CPU, whether the arguments are the kept call's but for NumPy arrays alike the
        kept ones (`alike_host_address`): their places then in `places`, the numbers' bits in
        `bits`."""
        if not numbers_bits(args, named, self.numbers, self.dtype, self.bits):
            return False
        places = dict(self.kept_places)
        for k, kept, signature_of, signature in self.slots:
            a = args[k] if type(k) is int else named.get(k)
            if a is kept:  # (a Connectivity, or an array given again: its kept place)
                if signature_of is not None and signature_of(a) != signature:
                    return False
                continue
            ptr = None if signature_of is None else alike_host_address(a, kept)
            if ptr is None:
                return False
            places[self._name(k)] = (ptr, a.nbytes, a)
        self.places = places
        return True

    def _alike(self, args: tuple, named: dict) -> bool:
        """Whether arrays other than the kept ones (by position and name; numbers by value,
        `Connectivity` objects the same) are alike them (`alike_address`); their addresses then in
        `addresses`, the numbers' bits in `bits`. The passes' graphs are kept by those
        addresses, so arrays alike at addresses seen before replay a graph."""
        if not numbers_bits(args, named, self.numbers, self.dtype, self.bits):
            return False
        addresses = []
        for k, kept, signature_of, signature in self.slots:
            a = args[k] if type(k) is int else named.get(k)
            if signature_of is None:  # (a Connectivity)
                if a is not kept:
                    return False
                continue
            ptr = alike_address(a, kept, signature_of, signature)
            if ptr is None:
                return False
            addresses.append(ptr)
        self.addresses = tuple(addresses)
        return True


class _PassesGraph:
    """On the GPU, a staged call made again into outputs at the same addresses (`out=`, or
    outputs made by the library where it gives back those a loop let go of) as one CUDA graph
    of its passes' kernels, launched on the caller's stream: the host pays one launch, not a
    call a pass. Captured on a stream of irfuse's own at the second call made again pass by
    pass into those addresses,
    each pass's launches onto it (a call on a capturing stream: `CudaDevice.on_stream`); every
    pass's kernels read the uniform scalars given as numbers from the words the first pass's
    device keeps for the caller's stream (`CudaDevice.scalar`, `words_owner`), which every
    launch writes first where the number changed: a time step that changes at every call costs
    one memset (two in float64), however many passes read it, and never a capture."""

    def __init__(self, work, owner, names: list):
        self.work, self.owner, self.names = work, owner, names  # the numbers' words: owner's

    @classmethod
    def again(cls, program, fast: "_StagedFastCall", bound: dict, given: dict, key: tuple, scatter: str) -> None:
        """After a call made pass by pass on `fast`'s arguments into outputs `given` (at
        addresses `key`): their graph captured where this was the second such call (and the
        call is not being captured itself: a time loop's graph), the oldest of more than
        `GRAPHS_KEPT` let go."""
        if key in fast.graphs or stream_capturing(fast.handle):
            return
        if key not in fast.seen:
            fast.seen[key] = None
            while len(fast.seen) > GRAPHS_KEPT:
                fast.seen.popitem(last=False)
            return
        from irfuse.diagnostics import NotCapturable
        from irfuse.runtime.cuda_graph import CapturedWork

        numbers = set(fast.numbers.values())
        stages, programs = program._active(None, fast.layout, scatter)
        devices = [p.opened_device() for p in programs]
        names = sorted({name for stage in stages for name in stage.inputs if name in numbers})
        owner = devices[0]
        bits = dict(fast.bits)
        for name in names:  # (the owner's words made and written before the capture, in the stream's order)
            owner.scalar(name, bits[name], fast.handle, capturing=False)
        own = owner.loop_stream()  # (captured there, not run: launched on the caller's)
        try:
            for d in devices:
                d.scalar_words_of, d.words_owner = fast.handle, owner
            work = CapturedWork(lambda on: program._run_passes(bound, given, None, fast.layout, fast.m,
                                                               fast.between, on, False, scatter), own.handle)
        except NotCapturable:
            fast.graphable = False
            return
        finally:
            for d in devices:
                d.scalar_words_of = d.words_owner = None
        fast.graphs[key] = cls(work, owner, names)
        while len(fast.graphs) > GRAPHS_KEPT:
            fast.graphs.popitem(last=False)[1].work.destroy_after(fast.handle)

    def run(self, fast: "_StagedFastCall") -> bool:
        """Writes the call's numbers (`fast.bits`, as `again` found them) and launches
        the graph on the call's stream, unless that stream is being captured itself (then
        False: nothing run, the call takes its way pass by pass)."""
        handle = fast.handle
        if stream_capturing(handle):
            return False
        if self.names:
            bits, owner = dict(fast.bits), self.owner
            for name in self.names:
                owner.scalar(name, bits[name], handle, capturing=False)
        self.work.launch_on(handle)
        return True


class _PassesReplay:
    """On the CPU backend, a staged call made again (`_StagedFastCall`) as its passes' recorded
    runs replayed in order, each pass's places set from the addresses its fast path kept
    (`host_calls.HostFastCall`), those of the call's own arrays and outputs from this call's
    (the same arrays, or arrays alike them; outputs made by the call without out=), the
    numbers of uniform scalars written into each pass's 0-d arrays: no call of a pass, no
    check beyond the staged call's."""

    def __init__(self, passes: list, words: dict, dtype):
        self.passes, self.words, self.dtype = passes, words, dtype
        self.last: tuple = (None, None, None)  # (arrays, outputs, each pass's places) of the last run

    @classmethod
    def of(cls, program, calls: list, given: dict, bound: dict) -> "_PassesReplay | None":
        """The replay of the passes just called (`calls`: program, arguments, out= arrays) on
        the call's arguments `bound` into its outputs `given`, where each pass ran in place on
        exactly those arrays and wrote into `out=` arrays (the call's outputs and the arrays
        kept between passes); else None."""
        if not all(name in given for name in program.outputs):
            return None
        mine = {id(v): ("in", name) for name, v in bound.items() if type(v) is np.ndarray}
        if len(mine) < sum(type(v) is np.ndarray for v in bound.values()):
            return None  # (one array given for two inputs: arrays alike later may be two)
        mine.update({id(a): ("out", name) for name, a in given.items()})
        passes, words = [], {}
        for stage, arguments, out in calls:
            fast = next((f for f in stage._host_fast if _ran(f, stage, arguments, out)), None)
            if fast is None:
                return None
            for name in set(fast.scalars.values()):
                words.setdefault(name, []).append(fast.arrays[name])
            # (which of its places are the call's arrays and outputs: set from each call's)
            theirs = [(j, *mine[id(place[3])]) for j, place in enumerate(fast.places) if id(place[3]) in mine]
            passes.append((stage, fast, theirs))
        return cls(passes, words, program.dtype)

    def run(self, bits: list, places: dict, outputs: dict, kept: bool = False) -> None:
        """Replays the passes on the call's numbers (`bits`: (input, bytes in the element type),
        as `_StagedFastCall.again` found them), arrays (`places`: input -> (address, bytes,
        array)) and outputs; `kept`: both dictionaries the staged call's own (its arrays and
        out= arrays), whose places are then made once."""
        for name, value in bits:  # (written at every run: a pass's own call may write other numbers there)
            arrays = self.words.get(name)
            if arrays:
                number = np.frombuffer(value, self.dtype)[0]
                for a in arrays:
                    a[()] = number
        kept_places, kept_outputs, every = self.last
        if places is not kept_places or outputs is not kept_outputs:  # (else the same arrays as the last run)
            made = {"in": places, "out": {name: _place(a) for name, a in outputs.items()}}
            every = []
            for _, fast, theirs in self.passes:
                at = fast.places
                if theirs:
                    at = list(at)
                    for j, kind, name in theirs:
                        at[j] = (at[j][0], *made[kind][name])
                every.append(at)
            # (kept where both are the staged call's own, which nothing changes: calls again on
            # the same arrays into the same out= arrays)
            self.last = (places, outputs, every) if kept else (None, None, None)
        for (stage, fast, _), at in zip(self.passes, every):
            with stage.lock:  # (as a call of the pass holds it)
                replay_at(fast.bound.recorded, at)


def _place(a: np.ndarray) -> tuple:
    """A NumPy array's (address, bytes, array), as a replay's place reads it."""
    return a.__array_interface__["data"][0], a.nbytes, a


def _ran(fast, stage, arguments: dict, mine: dict) -> bool:
    """Whether a pass's kept fast call (`HostFastCall`) is its call on these arguments into
    these out= arrays (every output of the pass's)."""
    if fast.results is None or set(mine) != set(stage.outputs) or \
            any(fast.results[k] is not a for k, a in mine.items()):
        return False
    scalars = set(fast.scalars.values())
    return all(name in scalars or fast.arrays.get(name) is value or
               getattr(value, "conn", None) is fast.arrays.get(name) for name, value in arguments.items())


def _is_number(v) -> bool:
    return type(v) in (int, float) or isinstance(v, np.generic)


def _signature(v) -> tuple | None:
    """What a fast call checks of an argument beyond its identity: a NumPy array's shape, type
    and strides, a GPU array's (`gpu_calls.FAST_FAMILIES`); a `Connectivity` is immutable (());
    None for anything else (no fast path)."""
    if isinstance(v, Connectivity):
        return ()
    signature_of = _signature_of(v)
    return None if signature_of is None else signature_of(v)


def _numpy_signature(v: np.ndarray) -> tuple:
    return (v.shape, v.strides, v.dtype)


def _signature_of(v):
    """The function giving `_signature` of arguments like `v` (None where there is none)."""
    if type(v) is np.ndarray:
        return _numpy_signature
    family = type(v).__module__.split(".")[0]
    if family in FAST_FAMILIES and (family != "torch" or v.is_cuda):
        return FAST_FAMILIES[family][0]
    return None


def _uniforms_beside(program, arguments: dict, copies: OrderedDict) -> dict:
    """A pass over the nodes on GPU arrays with uniform arrays on the host (which a call over
    the mesh takes, and a program over one batch does not, beyond scalars): those copied to the GPU, into
    arrays of the nodal arrays' library, once per value (`copies`, the last UNIFORM_COPIES_KEPT
    kept): the copy is synchronous (it waits for the GPU), so a time loop that copied its
    time step at every call would wait for the GPU at every step. A kept copy is never
    written, so work still queued may read it."""
    from irfuse.api.arguments import check_uniform_array, host_array
    from irfuse.api.device_arrays import device_array, empty_like_family

    model = next((d for a in arguments.values() if (d := device_array(a)) is not None), None)
    if model is None:
        return arguments
    moved = dict(arguments)
    for name, value in arguments.items():
        if name in program.uniform and program.shapes[name] != () and device_array(value) is None:
            host = host_array(f"input '{name}'", value, program.dtype)
            check_uniform_array(f"input '{name}'", host, program.shapes[name], program.dtype)
            host = np.ascontiguousarray(host, dtype=program.dtype)
            key = (model.family, str(getattr(model.obj, "device", None)), host.dtype.str, host.shape, host.tobytes())
            kept = copies.get(key)
            if kept is None:
                made = empty_like_family(model, program.shapes[name], program.dtype)
                program.opened_device().write(made.ptr, host)
                kept = copies[key] = made.obj
                while len(copies) > UNIFORM_COPIES_KEPT:
                    copies.popitem(last=False)
            moved[name] = kept
    return moved


def _variant_of(rebuild, spec):
    """How a stage's program is compiled for another layout or strided views (a pass over the
    nodes called on structures of arrays): from its IR, as a pickled program is."""
    return lambda layout, strides: rebuild(spec, layout, tuple(sorted(strides.items())))
