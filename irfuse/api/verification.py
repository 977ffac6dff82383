"""A call's outputs checked against the float64 NumPy reference (`Program.check`,
`verify=True`): GPU arrays are copied to the host first (after the GPU is done). The
reference evaluates the program before lowering, which the compiler's side holds
(`Program.compiled`): checking needs the compiler, running does not."""

from __future__ import annotations

import numpy as np

from irfuse.api.device_arrays import DeviceArray, device_array
from irfuse.api.outputs import Outputs
from irfuse.artifact.arrays import arrays_to_aos


class Verification:
    """What `Program.check` found: one `OutputCheck` per output, on `elements` of `n`."""

    def __init__(self, checks: list, elements: int, n: int):
        self.checks, self.elements, self.n = checks, elements, n

    @property
    def ok(self) -> bool:
        return all(c.ok for c in self.checks)

    def __bool__(self) -> bool:
        return self.ok

    def __str__(self) -> str:
        if self.n == 0:
            return "verified on an empty batch: no element to check"
        where = ("every element" if self.elements == self.n
                 else f"a seeded sample of {self.elements} of {self.n} elements")
        return f"verified on {where}: " + "; ".join(c.describe() for c in self.checks)


def to_host(dev, a: DeviceArray) -> np.ndarray:
    """A GPU array's values in a new C-contiguous host array (a strided view: the span of
    memory it covers, copied whole, then read at its strides)."""
    if a.contiguous or not a.nbytes:
        host = np.empty(a.shape, dtype=a.dtype)
        if a.nbytes:
            dev.read_into(host, a.ptr)
        return host
    low = sum((d - 1) * s for d, s in zip(a.shape, a.strides) if s < 0)
    high = sum((d - 1) * s for d, s in zip(a.shape, a.strides) if s > 0) + a.dtype.itemsize
    span = np.empty(high - low, dtype=np.uint8)
    dev.read_into(span, a.ptr + low)
    view = np.lib.stride_tricks.as_strided(span[-low:].view(a.dtype) if low else span.view(a.dtype), a.shape,
                                           a.strides)
    return np.ascontiguousarray(view)


def verify_on_host(program, arrays, outputs: Outputs, n: int, sample: int | None = 100_000,
                   seed: int = 0) -> Verification:
    """Checks outputs (in the program's layout) against the reference, on `sample` elements
    (every element up to `sample`, a seeded sample beyond; None: all)."""
    from irfuse.verification.reference import run_references
    from irfuse.verification.verify import OutputCheck, check_outputs, subset, verified_elements

    if n == 0:  # (an empty batch has only per-element outputs: `Program._arrays`)
        return Verification([OutputCheck(name, 0.0, 0.0, None, None, None, True) for name in program.outputs], 0, 0)
    compiled = program.compiled
    index = np.arange(n) if sample is None else verified_elements(compiled.reference_program, n, "auto", seed, sample)

    def batch(arrays) -> dict:
        return subset(arrays_to_aos(dict(arrays), program.layout, program.uniform), index, program.uniform)
    refs = run_references(compiled.reference_program, batch(arrays), compiled.dtype, len(index), compiled.sum_by)
    return Verification(check_outputs(batch(outputs), refs, compiled.dtype), len(index), n)


def verify_on_device(program, arrays: dict[str, DeviceArray], outputs: Outputs, n: int,
                     sample: int | None = 100_000, seed: int = 0) -> Verification:
    """Copies the inputs and outputs to the host (after the GPU is done) and checks them."""
    dev = program.opened_device()
    dev.synchronize()
    host_in = {k: to_host(dev, a) if isinstance(a, DeviceArray) else a for k, a in arrays.items()}  # (scalars: host)
    host_out = Outputs(program.outputs, [to_host(dev, device_array(o)) for o in outputs])
    return verify_on_host(program, host_in, host_out, n, sample, seed)
