"""Calls of programs over a mesh on GPU arrays (PyTorch, CuPy, Numba, PyCUDA, JAX, DLPack):
nodal arrays `(M, *shape)`, per-element arrays `(E, *shape)` and connectivities `(E, K)` of
int32 or int64 node numbers, all on the program's GPU, read where they are; outputs made in the first
input's library (or `out=` GPU arrays) and written in place.

A connectivity on the GPU is checked there before anything reads through it, a refusal
naming the element and position as a call on NumPy arrays does; one of int64 node numbers is
narrowed into an int32 copy of irfuse's own for the call's kernels (E x K x 4 bytes of device
memory, freed when the call returns, and a pass over the connectivity): the runtime's
`irfuse.runtime.cuda_mesh` does both, and the rearranging below. Given as an
`irfuse.mesh.Connectivity` (checked when it was made), its node numbers and inverse are
uploaded once per device and kept, and nothing is checked again.

Nodal and per-element GPU arrays come in arrays of structures, or every one in structures of
arrays (`mesh_calls.mesh_layout`): the kernels read arrays of structures, so structures of
arrays are rearranged on the GPU into copies of irfuse's own (`irf_rows_of_columns`) and the
outputs back into the caller's arrays (`irf_columns_of_rows`): a pass over each, the same bits,
and such a call waits for the GPU (its copies are freed when it returns).

A connectivity given as a GPU array that an ordered scatter reads is copied to the host for
its inverse (`irfuse.mesh.inverse_connectivity`), at every call: pass a `Connectivity`, or
`scatter="atomic"`, which needs none.

A call whose connectivities are all `Connectivity` objects is ordered on the caller's stream
(`stream=`, else the current stream of the arrays' library, as for any call on GPU arrays) and
returns without waiting for the GPU. A connectivity given as a GPU array is checked (and for an
ordered scatter inverted on the host) before the run, which needs what the caller's streams
write into it done: such a call synchronizes the context before the run and after it. The run
recorded for a call's sizes is kept (`MeshInPlaceRun`, its places pointed at the next call's
arrays) where every connectivity is a `Connectivity` or the scatters are atomic; a GPU
connectivity's host inverse is made again at every call. A uniform scalar given on the host (a
number) is written in the order of the call's stream (`CudaDevice.scalar`: a memset, no wait);
other uniform values given on the host are uploaded once per value (`CudaDevice.constant`).
A call on a stream being captured into a CUDA graph (`torch.cuda.graph`, `irfuse.time_loop`)
needs every connectivity a `Connectivity`, arrays of structures and a first call made outside
the capture, or is refused (`NotCapturable`)."""

from __future__ import annotations

import numpy as np

from irfuse.api.arguments import (bind_outputs, check_array, check_uniform_array, host_uniform, numbers_bits,
                                  out_snapshot, same_arguments, same_objects, same_out)
from irfuse.api.mesh_calls import mesh_layout, mesh_sizes
from irfuse.api.verification import to_host
from irfuse.api.device_arrays import (DeviceArray, alike_address, check_device_array, device_array, device_of,
                                      empty_like_family, overlaps, stream_handle)
from irfuse.api.gpu_calls import FAST_FAMILIES
from irfuse.api.host_calls import refuse_overlapping_outputs
from irfuse.api.output_sets import OutputSets
from irfuse.api.outputs import Outputs
from irfuse.artifact.arrays import AOS, SOA
from irfuse.artifact.host_plan import Scatter
from irfuse.artifact.kernel_info import COLUMNS_OF_ROWS_KERNEL, ROWS_OF_COLUMNS_KERNEL
from irfuse.diagnostics import NotCapturable, UsageError
from irfuse.mesh.connectivity import Connectivity
from irfuse.mesh.scatter import inverse_connectivity
from irfuse.runtime.cuda_mesh import (check_connectivity_on_gpu, connectivity_on_host, free_scratch, rearranged,
                                      scratch_slot, slot_of)
from irfuse.runtime.cuda_graph import stream_capturing
from irfuse.runtime.device import Slot
from irfuse.runtime.mesh_runs import GRAPHS_KEPT, MeshInPlaceRun


def on_gpu(bound: dict) -> bool:
    """Whether a call's arguments (name -> value) put it on GPU arrays: any of them is one."""
    return any(device_array(v) is not None for v in bound.values())


def call_on_mesh_gpu(program, bound: dict, out, nodes: int | None, scatter: str, stream=None,
                     layout: str | None = None) -> tuple[Outputs, int, int]:
    """Runs a program over a mesh on GPU arrays (see the module): its outputs, E and M
    (`layout`: the arrays' layout where the caller knows it: `mesh_layout`)."""
    if program.backend != "cuda":
        raise UsageError(f"{program.name} runs on the {program.backend} backend; GPU arrays need one compiled with "
                         "backend='cuda'")
    layout = mesh_layout(program, bound, layout)
    slots, inverses, elements, node_counts, checks, model = {}, {}, {}, {}, [], None
    scalars: dict[str, np.ndarray] = {}  # uniform scalars given on the host
    scratch = []  # buffers of irfuse's own (int32 copies, arrays of structures), freed once the run is done
    with program.lock:
        dev = program.opened_device()
        for name, value in bound.items():
            what = f"input '{name}'"
            if name in program.index_inputs:
                count = program.shapes[name][0]
                if isinstance(value, Connectivity):
                    conn, inverse = value.on_device(dev)
                    slots[name], inverses[name] = conn, inverse
                    elements[name] = value.shape[0]
                    node_counts[f"{name} (a Connectivity)"] = value.nodes
                    continue
                a = _gpu_argument(what, value, "a connectivity's node numbers")
                if a.dtype not in (np.int32, np.int64) or a.ndim != 2 or a.shape[1] != count or not a.contiguous:
                    raise UsageError(f"{what} is a GPU array of {a.dtype} shaped {a.shape}; a connectivity on the "
                                     f"GPU is a contiguous int32 or int64 array shaped (elements, {count})")
                check_device_array(what, a, 0, a.dtype.itemsize)
                slots[name] = _slot(a)
                elements[name] = a.shape[0]
                checks.append((name, a))
            elif name in program.uniform:
                a = device_array(value)
                if a is None:
                    host = host_uniform(what, value, program.shapes[name], program.dtype)
                    if host.ndim == 0:
                        scalars[name] = host  # (written in the order of the call's stream, below)
                    else:
                        slots[name] = _constant(dev, name, host, stream, model or first_gpu(bound))
                else:
                    check_uniform_array(what, a, program.shapes[name], program.dtype)
                    check_device_array(what, a, 0)
                    slots[name] = _slot(a)
            else:
                a = _gpu_argument(what, value, "a nodal array" if name in program.nodal else "a per-element array")
                length = check_array(what, a, program.shapes[name], program.dtype, None, layout)
                check_device_array(what, a, 0, 16 if a.contiguous else a.dtype.itemsize)
                if not a.contiguous:
                    raise UsageError(f"{what} is a strided view; a program over a mesh reads contiguous GPU arrays")
                (node_counts if name in program.nodal else elements)[name] = length
                slots[name] = _slot(a)
                model = model or a
        n, m = mesh_sizes(elements, node_counts, nodes)
        if layout == SOA:  # the kernels read arrays of structures: copies of irfuse's own
            for name in bound:
                if (name in elements or name in node_counts) and name not in program.index_inputs:
                    slots[name] = rearranged(dev, ROWS_OF_COLUMNS_KERNEL, slots[name], program.shapes[name], scratch)
        if model is None:
            raise UsageError("a call on GPU arrays needs a nodal or per-element GPU array to make its outputs in "
                             "the same library: pass one, or out= arrays")
        handle = stream_handle(stream, model)
        capturing = stream_capturing(handle)
        if capturing and (checks or scratch):
            raise NotCapturable(f"{program.name}: a call " + (
                "on a connectivity given as a GPU array checks it on the GPU and waits for it" if checks else
                "on structures of arrays rearranges them in copies of its own and waits for them") +
                ", which a stream being captured into a CUDA graph cannot do: pass an irfuse.mesh.Connectivity and "
                "arrays of structures")
        for name, host in scalars.items():
            slots[name] = slot_of(dev.scalar(name, host.tobytes(), handle), host.nbytes, None)
        if checks:
            dev.synchronize()  # what the caller's streams write into the connectivities
        for name, a in checks:
            copy = check_connectivity_on_gpu(dev, name, a.ptr, a.shape, a.dtype, m)
            if copy is not None:
                scratch.append(copy)
                slots[name] = slot_of(copy, a.shape[0] * a.shape[1] * 4, copy)
            if scatter == "ordered" and name in _scattered(program):
                host = connectivity_on_host(dev, int(copy) if copy is not None else a.ptr, a.shape)
                inverses[name] = inverse_connectivity(host, m)
        results = _outputs(program, out, model, n, m, bound, layout)
        targets = dict(results)
        if layout == SOA:
            for name in program.outputs:
                if name not in program.uniform:
                    targets[name] = scratch_slot(dev, results[name].nbytes, scratch)
        # (the Connectivity objects themselves, by identity: kept alive while the run is kept)
        prepared = tuple((name, v) for name, v in bound.items() if isinstance(v, Connectivity))
        if len(prepared) == len(program.index_inputs) or scatter == "atomic":
            # Every inverse is a Connectivity's, kept on the device (or none is read): the run
            # recorded for these sizes is kept and replayed on the next call's arrays.
            key = ("mesh-gpu", n, m, scatter, prepared)
            if capturing and key not in program._bound:
                raise NotCapturable(f"{program.name}: the first call on a mesh of these sizes prepares its run "
                                    "(buffers, node orders on the device), which a stream being captured into a "
                                    "CUDA graph cannot do: make one call outside the capture first")
            run = program.recorded(key, lambda: MeshInPlaceRun(program.artifact, dev, n, m, slots, inverses, scatter))
        else:
            run = MeshInPlaceRun(program.artifact, dev, n, m, slots, inverses, scatter)
        if checks or scratch:
            run.run(slots, targets)
            if layout == SOA:
                for name, target in targets.items():
                    if target is not results[name]:
                        rearranged(dev, COLUMNS_OF_ROWS_KERNEL, target, program.shapes[name], [], into=results[name])
            dev.synchronize()
            free_scratch(scratch)
        else:
            dev.on_stream(handle, lambda: run.run(slots, targets))
            # (kept only where every connectivity is a `Connectivity`, whose node numbers are its
            # own and checked once: a plain tensor's may change before the next call, which the
            # kept path would not check, and an atomic scatter would write past the nodes)
            if len(prepared) == len(program.index_inputs) and model.family in FAST_FAMILIES:
                program._last_mesh_run = (run, slots, targets, list(scalars), handle, model,
                                          None if out is not None else
                                          {name: tuple(results[name].shape) for name in program.outputs})
    return Outputs(program.outputs, [results[name].obj for name in program.outputs]), n, m


class MeshGpuFastCall:
    """A call over a mesh on PyTorch tensors or CuPy arrays whose run is kept (every
    connectivity a `Connectivity`), made again with the very same arguments (by position or
    name; `out=` the same arrays, in a new list or dict too; tensors unchanged in address,
    shape, type and contiguity) and any numbers for its uniform scalars: the kept run is
    replayed on the caller's stream with none of the binding and checks (what they found
    still holds). Without `out=` the outputs are made with the library's `empty` (or a set the
    caller let go of is handed back: `OutputSets`). A uniform
    array given on the host is not taken (its values may have changed in place)."""

    def __init__(self, program, args: tuple, named: dict, out, stream, nodes, scatter: str, kept: tuple):
        run, slots, targets, scalars, handle, model, shapes = kept
        self.run, self.slots, self.targets, self.handle, self.model = run, slots, dict(targets), handle, model
        self.args, self.named, self.stream, self.nodes, self.scatter = args, dict(named), stream, nodes, scatter
        self.out = out_snapshot(out)
        self.dtype, self.names, self.device = program.dtype, program.outputs, program.opened_device()
        given = {**dict(zip(program.inputs, args)), **named}
        self.scalars = {k if k < len(args) else name: name for k, name in enumerate(program.inputs)
                        if name in scalars}
        signature = FAST_FAMILIES[model.family][0]
        held = [v for k, name in enumerate(program.inputs) if name not in scalars
                for v in [given[name]] if not isinstance(v, Connectivity)]
        self.usable = len(given) == len(program.inputs) and all(
            device_array(v) is not None and device_array(v).family == model.family for v in held)
        if out is not None:
            held += [v for _, v in self.out[1]] if self.out[0] is dict else \
                list(self.out[1]) if self.out[0] is not None else [out]
        self.signature = signature
        self.held = [(v, signature(v)) for v in held] if self.usable else []
        self.made = None if shapes is None else OutputSets(model, shapes, self.dtype)
        self.out_outputs = _out_objects(self) if out is not None else None  # (the out= arrays: the same each call)
        self.kept_graphs: dict[tuple, object] = {}  # (`places_key`, outputs' addresses) -> the run's graph
        self.current_stream = FAST_FAMILIES[model.family][1](model.device)
        self.bits: list = []
        # Without out=, contiguous arrays alike the kept ones take their place (`_alike`): a loop that
        # makes a new `u` at every step (`u = u + dt * v`) replays the run on it, its graph
        # kept by the addresses (`MeshInPlaceRun.graph`). `places`: the run's places this call.
        self.places = self.slots
        self.arrays = [(k if k < len(args) else name, name, given[name], signature(given[name]))
                       for k, name in enumerate(program.inputs) if name not in scalars
                       and isinstance(slots.get(name), Slot) and device_array(given[name]) is not None
                       ] if self.usable else []  # (usable: every array of the model's library)
        self.others = [(k if k < len(args) else name, given[name]) for k, name in enumerate(program.inputs)
                       if name not in scalars and not any(name == a[1] for a in self.arrays)]
        self.alike = self.made is not None and self.usable and all(
            sig[-1] is True and device_of(kept) is not None for _, _, kept, sig in self.arrays)
        # The addresses of the arrays a call again may give alike (`_alike`), this call's: with the
        # outputs', the key of the graphs kept by the call (`kept_graphs`).
        self.kept_key = self.places_key = tuple(sig[0] for _, _, _, sig in self.arrays)

    def matches(self, args: tuple, named: dict, out, stream, nodes, scatter: str) -> bool:
        if stream is not self.stream or nodes != self.nodes or scatter != self.scatter or \
                not same_out(out, self.out):
            return False
        if not same_arguments(args, named, self.args, self.named, self.scalars, self.dtype, self.bits):
            return self.alike and len(args) == len(self.args) and len(named) == len(self.named) and \
                self._alike(args, named)
        signature = self.signature
        for a, sig in self.held:
            if signature(a) != sig:
                return False
        self.places, self.places_key = self.slots, self.kept_key
        return True

    def _alike(self, args: tuple, named: dict) -> bool:
        """Whether the arguments are the kept call's but for GPU arrays alike the kept ones
        (`alike_address`; connectivities the same): their places then in `places`, the
        numbers' bits in `bits`."""
        if not numbers_bits(args, named, self.scalars, self.dtype, self.bits):
            return False
        if not same_objects(args, named, self.others):  # (connectivities)
            return False
        places, signature, key = None, self.signature, []
        for k, name, kept, sig in self.arrays:
            a = args[k] if type(k) is int else named.get(k)
            ptr = alike_address(a, kept, signature, sig)
            if ptr is None:
                return False
            key.append(ptr)
            if ptr == sig[0]:  # (the kept array, or one at its address: its place)
                continue
            if places is None:
                places = dict(self.slots)
            places[name] = slot_of(ptr, self.slots[name].nbytes, a)
        self.places = places if places is not None else self.slots
        self.places_key = tuple(key)
        return True

    def launch(self) -> Outputs | None:
        handle = stream_handle(self.stream, None) if self.stream is not None else \
            self.current_stream() if self.current_stream is not None else None
        if handle is None or (self.scalars and handle != self.handle):
            return None  # (another stream's scalar words)
        capturing = stream_capturing(handle)
        for name, value in self.bits:
            ptr = self.device.scalar(name, value, handle, capturing)
            if self.slots[name].ptr != ptr:
                self.slots[name].ptr = ptr
                self.kept_graphs.clear()  # (their kernels read the word where it was)
        made, addresses = self.made.make(handle, capturing) if self.made is not None else (None, ())
        run, slots = self.run, self.places
        key = (self.places_key, addresses)  # (the arrays' addresses given alike, the outputs')
        if not capturing:
            # The graph found before for these addresses, its key of every slot's address not
            # built again (this runs at every step of a time loop).
            graph = self.kept_graphs.get(key)
            if graph is not None and graph.alive:
                graph.launch_on(handle)
                return made if made is not None else self.out_outputs
        targets = self.targets if made is None else {**self.targets, **self.made.places(addresses)}
        graph = None if capturing else run.graph(slots, targets)  # (one launch)
        if graph is not None:
            if len(self.kept_graphs) >= 2 * GRAPHS_KEPT:  # (the run keeps fewer: the rest let go of)
                self.kept_graphs.clear()
            self.kept_graphs[key] = graph
            graph.launch_on(handle)
        else:
            self.device.on_stream(handle, lambda: run.run(slots, targets))
        return made if made is not None else self.out_outputs


def _out_objects(fast: "MeshGpuFastCall") -> Outputs:
    kind, kept = fast.out
    if kind is dict:
        return Outputs(fast.names, [dict(kept)[name] for name in fast.names])
    return Outputs(fast.names, list(kept) if kind is not None else [kept])


def first_gpu(bound: dict) -> DeviceArray | None:
    """The first GPU array among a call's arguments."""
    return next((a for a in map(device_array, bound.values()) if a is not None), None)


def _constant(dev, name: str, host: np.ndarray, stream, model: DeviceArray | None):
    """A uniform array given on the host, on the device: uploaded once per value
    (`CudaDevice.constant`), which a call being captured cannot do for a new value."""
    if model is not None and not dev.has_constant(host) and stream_capturing(stream_handle(stream, model)):
        raise NotCapturable(f"uniform input '{name}' is given on the host with a value not seen before, which is "
                            "copied to the GPU and waited for: a stream being captured into a CUDA graph cannot "
                            "do that; pass it as a GPU array, or make one call with it outside the capture first")
    return dev.constant(host)


def host_copy(dev, value) -> np.ndarray:
    """A call's argument or result in host memory: a GPU array copied (`to_host`), a
    `Connectivity`'s node numbers, anything else as NumPy takes it."""
    if isinstance(value, Connectivity):
        return value.conn
    a = device_array(value)
    return np.asarray(value) if a is None else to_host(dev, a)


def _gpu_argument(what: str, value, kind: str) -> DeviceArray:
    a = device_array(value)
    if a is None:
        raise UsageError(f"{what} is a {type(value).__qualname__}; with GPU arrays, {kind} is a GPU array too "
                         "(uniform inputs may stay on the host)")
    return a


def _slot(a: DeviceArray) -> Slot:
    """A place the recorded run reads or writes: the caller's array."""
    return slot_of(a.ptr, a.nbytes, a.keep)


def _scattered(program) -> set[str]:
    """The connectivities a scatter of the program adds through."""
    host = program.artifact.host
    names = {v: name for name, v in host.inputs}
    return {names[step.index] for step in host.steps if isinstance(step, Scatter)}


def _outputs(program, out, model: DeviceArray, n: int, m: int, bound: dict, layout: str = AOS
             ) -> dict[str, DeviceArray]:
    """The GPU arrays the outputs go to, in `layout`: `out=` ones, checked, else new ones in
    `model`'s library."""
    results: dict[str, DeviceArray] = {}
    given = bind_outputs(program.outputs, out) if out is not None else {}
    inputs = [a for a in (device_array(v) for v in bound.values() if not isinstance(v, Connectivity)) if a is not None]
    for name in program.outputs:
        count = m if name in program.nodal else n
        value = tuple(program.shapes[name])
        if name not in given:
            shape = value if name in program.uniform else (*value, count) if layout == SOA else (count, *value)
            results[name] = empty_like_family(model, shape, program.dtype)
            continue
        what = f"out= array for '{name}'"
        a = device_array(given[name])
        if a is None:
            raise UsageError(f"{what} is a {type(given[name]).__qualname__}; with GPU arrays out= takes GPU arrays")
        if name in program.uniform:
            check_uniform_array(what, a, value, program.dtype)
        else:
            check_array(what, a, value, program.dtype, count, layout)
        check_device_array(what, a, 0)
        if not a.contiguous:
            raise UsageError(f"{what} is a strided view; a program over a mesh writes contiguous GPU arrays")
        if any(overlaps(a, i) for i in inputs):
            raise UsageError(f"{what} overlaps an input's memory: the kernels read inputs while others write "
                             "outputs, so an output may not share an input's memory")
        results[name] = a
    refuse_overlapping_outputs({name: results[name] for name in program.outputs if name in given})
    return results
