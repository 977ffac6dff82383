"""GPU arrays of other libraries, read and written in place.

Any object with `__cuda_array_interface__` is taken: CuPy arrays, PyTorch CUDA tensors,
Numba device arrays, PyCUDA GPUArrays; and any object whose `__dlpack__` describes CUDA
memory (JAX arrays, and the array libraries that speak DLPack): its DLPack capsule is read
for the pointer, shape, strides and type, and kept until the call is done (the producer is
asked to make the data ready on the legacy default stream, where the call runs unless
`stream=` says otherwise). Its pointer goes to the kernels as is: no copy; a strided view goes
to kernels compiled for its strides (`Program`). What the kernels cannot take
is refused, never copied behind the caller's back: strides that are not whole words, a pointer
that is not 16-byte aligned for array-of-structures kernels
(their 16-byte copies; structure-of-arrays kernels need one word), memory on another GPU. Outputs are allocated in the first input's library, on its device;
for JAX, which cannot allocate an array for others to write, irfuse allocates the memory and
hands it to JAX through DLPack once written (`dlpack_export`: no copy); for another library
irfuse cannot allocate in, such as one known only through DLPack, `out=` arrays are asked for.

The stream a call is ordered on: `stream=` (a handle, or a CuPy, PyTorch or PyCUDA stream
object), else the current stream of the first input's library (PyTorch's, CuPy's), else
the stream its interface names, else the legacy default stream.
"""

from __future__ import annotations

import ctypes
import math
import sys

import numpy as np

from irfuse.api.dlpack import DL_KINDS, KDL_CUDA, KDL_CUDA_MANAGED, DLTensor
from irfuse.api.dlpack_export import exported_output
from irfuse.artifact.records import record
from irfuse.diagnostics import UsageError, refuse_grad

ALIGNMENT = 16  # bytes: the kernels' 16-byte loads and stores


@record
class DeviceArray:
    obj: object
    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...] | None  # bytes; None: C-contiguous
    family: str  # the top-level module of its type: torch, cupy, numba, pycuda, ...
    stream: int | None  # what the interface says the data is ordered on
    device: int | None = None  # the GPU's ordinal when the library says it cheaply
    keep: object = None  # what must live while the pointer is used (a DLPack capsule)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * self.dtype.itemsize

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def contiguous(self) -> bool:
        if self.strides is None:
            return True
        expect, step = [], self.dtype.itemsize
        for d in reversed(self.shape):
            expect.append(step)
            step *= d
        return all(s == e or d == 1 for s, e, d in zip(self.strides, reversed(expect), self.shape))


_TORCH_TYPES: dict = {}  # torch dtype -> NumPy dtype, filled on first use


def _torch_array(value) -> DeviceArray | None:
    """A PyTorch tensor read through its own accessors: its `__cuda_array_interface__` costs
    tens of microseconds a call, more than the launch it feeds."""
    if not value.is_cuda:
        return None
    dtype = _TORCH_TYPES.get(value.dtype)
    if dtype is None:
        dtype = _TORCH_TYPES[value.dtype] = np.dtype(str(value.dtype).removeprefix("torch."))
    strides = None if value.is_contiguous() else tuple(s * dtype.itemsize for s in value.stride())
    return DeviceArray(value, value.data_ptr(), tuple(value.shape), dtype, strides, "torch", None,
                       value.device.index)




def _capsule_pointer(capsule: object) -> int:
    get = ctypes.pythonapi["PyCapsule_GetPointer"]  # a function object of its own (see dlpack_export)
    get.restype, get.argtypes = ctypes.c_void_p, [ctypes.py_object, ctypes.c_char_p]
    try:
        return int(get(capsule, b"dltensor") or 0)
    except ValueError:
        return 0  # not a DLPack capsule, or one consumed already


def array_from_dlpack_capsule(value: object, capsule: object) -> DeviceArray:
    """The array a DLPack capsule of `value` describes (the capsule kept with it)."""
    what = type(value).__qualname__
    ptr = _capsule_pointer(capsule)
    if not ptr:
        raise UsageError(f"a {what}'s __dlpack__ gave no DLPack tensor capsule")
    t = DLTensor.from_address(ptr)
    kind = DL_KINDS.get(t.dtype.code)
    if kind is None or t.dtype.lanes != 1 or t.dtype.bits % 8:
        raise UsageError(f"a {what} holds DLPack type code {t.dtype.code} ({t.dtype.bits} bits, {t.dtype.lanes} "
                         "lanes), not an integer or floating-point scalar type")
    dtype = np.dtype(f"{kind}{t.dtype.bits // 8}")
    shape = tuple(int(t.shape[k]) for k in range(t.ndim))
    strides = tuple(int(t.strides[k]) * dtype.itemsize for k in range(t.ndim)) if t.strides else None
    return DeviceArray(value, int(t.data or 0) + int(t.byte_offset), shape, dtype, strides,
                       type(value).__module__.split(".")[0], None, int(t.device.device_id), keep=capsule)


def _dlpack_array(value: object) -> DeviceArray | None:
    """`value` through DLPack when it describes CUDA memory, else None."""
    try:
        device_type, _ = value.__dlpack_device__()  # type: ignore[attr-defined]
    except Exception:
        return None
    if int(device_type) not in (KDL_CUDA, KDL_CUDA_MANAGED):
        return None
    try:
        capsule = value.__dlpack__(stream=1)  # type: ignore[attr-defined]  # ready on the legacy default stream
    except Exception as e:
        raise UsageError(f"a {type(value).__qualname__}'s __dlpack__ failed: {e}") from None
    return array_from_dlpack_capsule(value, capsule)


def device_array(value: object) -> DeviceArray | None:
    """`value` as a GPU array, or None when it is neither a CUDA array interface nor DLPack
    of CUDA memory (a `DeviceArray` is itself)."""
    if type(value) is np.ndarray:  # (the host's arrays, asked about on every call: first)
        return None
    if isinstance(value, DeviceArray):
        return value
    if type(value).__module__ == "torch" and type(value).__name__ in ("Tensor", "Parameter"):
        return _torch_array(value)
    try:
        cai = value.__cuda_array_interface__  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):  # a CPU torch tensor raises when asked
        return _dlpack_array(value) if hasattr(value, "__dlpack__") and not isinstance(value, np.ndarray) else None
    try:
        strides = cai.get("strides")
        return DeviceArray(value, int(cai["data"][0]), tuple(int(d) for d in cai["shape"]), np.dtype(cai["typestr"]),
                           tuple(int(s) for s in strides) if strides is not None else None,
                           type(value).__module__.split(".")[0], cai.get("stream"))
    except (KeyError, TypeError, ValueError) as e:
        raise UsageError(f"a {type(value).__qualname__} has a malformed __cuda_array_interface__ ({e})") from None


def device_of(v) -> int | None:
    """The GPU a PyTorch CUDA tensor or a CuPy array is on (None for anything else)."""
    family = type(v).__module__.split(".")[0]
    if family == "torch":
        return v.get_device() if v.is_cuda else None
    return v.device.id if family == "cupy" else None


ALIKE_ALIGNMENT = 256  # bytes: an array alike a kept one starts at an address of the same residue


def alike_address(a, kept, signature_of, signature: tuple) -> int | None:
    """The address of GPU array `a` where it is alike `kept` (a contiguous array of a call
    made again, whose `signature_of` was `signature`: address, shape, type, contiguity): the
    same library, shape, type, contiguity and device, at an address of the same
    `ALIKE_ALIGNMENT` residue; else None. What every fast call on the GPU takes in a kept
    array's place (`FastCall`, `MeshGpuFastCall`, a staged program's call)."""
    if type(a) is not type(kept):
        return None
    now = signature_of(a)
    if now[1:] != signature[1:] or (now[0] - signature[0]) % ALIKE_ALIGNMENT or \
            a is not kept and device_of(a) != device_of(kept):
        return None
    return now[0]


def first_array(arrays: dict):
    """The array a call's place and output library follow: its first GPU array, else its
    first argument (None: no arguments)."""
    for a in arrays.values():
        if isinstance(a, DeviceArray):
            return a
    return next(iter(arrays.values()), None)


def moved_batch_axis(a: DeviceArray, layout: str) -> DeviceArray:
    """A view of `a` (a batch in the other layout than `layout`) shaped as a batch in
    `layout`: the same memory, the batch axis moved (its strides say where words lie)."""
    strides = a.strides
    if strides is None:
        strides, step = [], a.dtype.itemsize
        for d in reversed(a.shape):
            strides.append(step)
            step *= d
        strides = tuple(reversed(strides))
    order = [a.ndim - 1, *range(a.ndim - 1)] if layout == "aos" else [*range(1, a.ndim), 0]
    return DeviceArray(a.obj, a.ptr, tuple(a.shape[k] for k in order), a.dtype, tuple(strides[k] for k in order),
                       a.family, a.stream, a.device, keep=a.keep)


def check_device_array(what: str, a: DeviceArray, device_ordinal: int, alignment: int = ALIGNMENT) -> None:
    """What the kernels need of a GPU array beyond its shape and type: `alignment` is what
    its address must be a multiple of (16 bytes for array-of-structures kernels)."""
    refuse_grad(what, a.obj)
    if not a.contiguous:
        if any(s % a.dtype.itemsize for s in a.strides or ()):
            raise UsageError(f"{what} has strides of {a.strides} bytes, not whole {a.dtype.itemsize}-byte words: "
                             "pass an array whose strides are")
        alignment = a.dtype.itemsize  # a strided view is read and written word by word
    if a.ptr % alignment and a.nbytes:
        raise UsageError(f"{what} starts at an address that is not {alignment}-byte aligned (0x{a.ptr:x}, a view "
                         f"that skips part of a batch?); the kernels' {alignment}-byte accesses need it: pass an "
                         "array of its own")
    if a.nbytes:
        ordinal = a.device if a.device is not None else _device_ordinal(a.ptr)
        if ordinal != device_ordinal:
            raise UsageError(f"{what} is on GPU {ordinal}; this program runs on GPU {device_ordinal}")


def _device_ordinal(ptr: int) -> int:
    from irfuse.runtime.cuda_graph import checked, cuda_driver

    cu = cuda_driver()
    value = checked(cu.cuPointerGetAttribute(cu.CUpointer_attribute.CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, ptr),
                    "cuPointerGetAttribute")
    return int(value)


def overlaps(a: DeviceArray, b: DeviceArray) -> bool:
    return a.ptr < b.ptr + b.nbytes and b.ptr < a.ptr + a.nbytes and a.nbytes > 0 and b.nbytes > 0


def empty_like_family(model: DeviceArray, shape: tuple[int, ...], dtype: np.dtype) -> DeviceArray:
    """A new GPU array in `model`'s library, on its device."""
    family = model.family
    if family == "torch":
        import torch

        obj = torch.empty(shape, dtype=getattr(torch, dtype.name), device=model.obj.device)  # type: ignore[attr-defined]
    elif family == "cupy":
        import cupy

        with cupy.cuda.Device(model.obj.device.id):  # type: ignore[attr-defined]
            obj = cupy.empty(shape, dtype=dtype)
    elif family == "numba":
        from numba import cuda

        obj = cuda.device_array(shape, dtype=dtype)
    elif family == "pycuda":
        import pycuda.gpuarray as gpuarray

        obj = gpuarray.empty(shape, dtype=dtype)
    elif family in ("jax", "jaxlib"):
        # JAX cannot allocate an array for others to write: irfuse allocates it and hands it
        # to JAX through DLPack once written (`dlpack_export.handed_over`).
        device = model.device if model.device is not None else 0
        export = exported_output(shape, dtype, device)
        return DeviceArray(export, export.ptr, tuple(shape), np.dtype(dtype), None, family, None, device, keep=export)
    else:
        raise UsageError(f"irfuse cannot allocate outputs in the library of a {type(model.obj).__qualname__}: "
                         "pass out= arrays")
    made = device_array(obj)
    assert made is not None
    return made


def stream_handle(stream: object, model: DeviceArray) -> int:
    """The CUDA stream handle a call is ordered on (see the module's docstring)."""
    if stream is not None:
        if isinstance(stream, int):
            return stream
        for attr in ("cuda_stream", "ptr", "handle"):  # PyTorch, CuPy, PyCUDA
            if hasattr(stream, attr):
                return int(getattr(stream, attr))
        raise UsageError(f"stream= takes a stream handle or a PyTorch, CuPy or PyCUDA stream, not a "
                         f"{type(stream).__qualname__}")
    if model.family == "torch" and "torch" in sys.modules:
        import torch

        raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)  # what torch.cuda.current_stream reads
        if raw is not None:
            return int(raw(model.device))
        return int(torch.cuda.current_stream(model.obj.device).cuda_stream)  # type: ignore[attr-defined]
    if model.family == "cupy" and "cupy" in sys.modules:
        import cupy

        return int(cupy.cuda.get_current_stream().ptr)
    if isinstance(model.stream, int) and model.stream > 2:
        return model.stream
    return 0  # the legacy default stream (the interface's 1 and 2 name the default streams)
