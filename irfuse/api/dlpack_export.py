"""Memory irfuse allocates and hands to a DLPack consumer, without a copy.

JAX arrays are immutable and JAX offers no way to allocate an array that another library
writes, so the outputs of a call on JAX arrays are allocated here (`cuMemAlloc` in the
device's primary context, which JAX uses too), written by the kernels, and handed to
`jax.dlpack.from_dlpack`: the JAX array reads the same memory, and frees it through the
DLPack deleter when JAX is done with it. A consumer that names its stream in `__dlpack__`
is ordered after the stream the kernels ran on (an event, no host synchronization).

The exporter speaks the unversioned DLPack capsule (`dltensor`) that every consumer takes.
It is written for any memory with a `ptr` (a host buffer in the tests, where NumPy is the
consumer).
"""

from __future__ import annotations

import contextlib
import ctypes
import math

import numpy as np

from irfuse.api.dlpack import DL_KINDS, KDL_CUDA, DLDataType, DLDevice, DLTensor

_TYPE_CODES = {kind: code for code, kind in DL_KINDS.items()}


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", ctypes.c_void_p)]


# What every exported tensor keeps alive (its struct, its shape array, the memory), by the
# struct's address; the consumer's call of the deleter, or the capsule's destruction when
# nobody consumed it, lets go.
_LIVE: dict[int, tuple] = {}


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _deleter(address: int) -> None:
    _LIVE.pop(address, None)


# Function objects of our own (`pythonapi[...]` makes a new one; `pythonapi.Name` is shared,
# and other code sets its argument types to its own liking).
_capsule_new = ctypes.pythonapi["PyCapsule_New"]
_capsule_new.restype, _capsule_new.argtypes = ctypes.py_object, [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]
_capsule_is_valid = ctypes.pythonapi["PyCapsule_IsValid"]
_capsule_is_valid.restype, _capsule_is_valid.argtypes = ctypes.c_int, [ctypes.c_void_p, ctypes.c_char_p]
_capsule_pointer = ctypes.pythonapi["PyCapsule_GetPointer"]
_capsule_pointer.restype, _capsule_pointer.argtypes = ctypes.c_void_p, [ctypes.c_void_p, ctypes.c_char_p]


@ctypes.CFUNCTYPE(None, ctypes.c_void_p)
def _destroy_capsule(capsule: int) -> None:
    # A consumer renames the capsule it took ('used_dltensor') and calls the deleter itself.
    if _capsule_is_valid(capsule, b"dltensor"):
        _deleter(_capsule_pointer(capsule, b"dltensor"))


class DeviceMemory:
    """`nbytes` of memory on GPU `device`, freed when the last holder lets go."""

    def __init__(self, nbytes: int, device: int):
        from irfuse.runtime.cuda_graph import checked, cuda_driver

        cu = cuda_driver()
        self._cu, self._checked = cu, checked
        self._dev = checked(cu.cuDeviceGet(device), "cuDeviceGet")
        self._ctx = checked(cu.cuDevicePrimaryCtxRetain(self._dev), "cuDevicePrimaryCtxRetain")
        self.ptr = 0
        with self._current():
            self.ptr = int(checked(cu.cuMemAlloc(max(nbytes, 1)), "cuMemAlloc"))

    @contextlib.contextmanager
    def _current(self):
        """The primary context current around the block."""
        self._checked(self._cu.cuCtxPushCurrent(self._ctx), "cuCtxPushCurrent")
        try:
            yield
        finally:
            self._cu.cuCtxPopCurrent()

    def __del__(self) -> None:
        # Freed from whichever thread drops the last reference (a consumer's deleter may run
        # on its own thread): the primary context is made current around the free.
        if getattr(self, "_ctx", None) is None:
            return
        if self.ptr:
            with self._current():
                self._cu.cuMemFree(self.ptr)
        self._cu.cuDevicePrimaryCtxRelease(self._dev)
        self._ctx = None


class DLPackExport:
    """An array of `shape` and `dtype` in `memory` (anything with a `ptr`), offered through
    `__dlpack__`; `stream`, once set, is the CUDA stream its contents are written on."""

    def __init__(self, memory, shape: tuple[int, ...], dtype: np.dtype, device_type: int = KDL_CUDA,
                 device_id: int = 0):
        self.memory = memory
        self.ptr = int(memory.ptr)
        self.shape, self.dtype = tuple(shape), np.dtype(dtype)
        self.device_type, self.device_id = device_type, device_id
        self.stream: int | None = None
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device_type, self.device_id

    def __dlpack__(self, stream=None, max_version=None, dl_device=None, copy=None):
        if copy:
            raise BufferError("irfuse exports its outputs without copies")
        if dl_device is not None and tuple(dl_device) != self.__dlpack_device__():
            raise BufferError(f"the array is on DLPack device {self.__dlpack_device__()}, not {tuple(dl_device)}")
        if self.device_type == KDL_CUDA and self.stream is not None and stream != -1:
            self._order_after_writes(1 if stream is None else int(stream))
        m = _DLManagedTensor()
        shape = (ctypes.c_int64 * max(len(self.shape), 1))(*self.shape)
        t = m.dl_tensor
        t.data = self.ptr
        t.device = DLDevice(self.device_type, self.device_id)
        t.ndim = len(self.shape)
        t.dtype = DLDataType(_TYPE_CODES[self.dtype.kind], self.dtype.itemsize * 8, 1)
        t.shape = shape
        t.strides = None  # C-contiguous
        t.byte_offset = 0
        m.deleter = ctypes.cast(_deleter, ctypes.c_void_p).value
        address = ctypes.addressof(m)
        _LIVE[address] = (m, shape, self.memory)
        return _capsule_new(address, b"dltensor", ctypes.cast(_destroy_capsule, ctypes.c_void_p).value)

    def _order_after_writes(self, consumer: int) -> None:
        """The consumer's stream waits for the kernels' stream (DLPack: 1 is the legacy
        default stream, 2 the per-thread one; 0 is never passed)."""
        if consumer == self.stream or (consumer == 1 and self.stream == 0):
            return
        from irfuse.runtime.cuda_graph import checked, cuda_driver

        cu = cuda_driver()
        event = checked(cu.cuEventCreate(cu.CUevent_flags.CU_EVENT_DISABLE_TIMING), "cuEventCreate")
        try:
            checked(cu.cuEventRecord(event, cu.CUstream(self.stream)), "cuEventRecord")
            checked(cu.cuStreamWaitEvent(cu.CUstream(consumer), event, 0), "cuStreamWaitEvent")
        finally:
            cu.cuEventDestroy(event)


def exported_tensors() -> int:
    """How many exported tensors are still held (by a consumer, or by a capsule nobody took)."""
    return len(_LIVE)


def exported_output(shape: tuple[int, ...], dtype: np.dtype, device: int) -> DLPackExport:
    """New GPU memory for an output that a DLPack consumer will take over."""
    return DLPackExport(DeviceMemory(math.prod(shape) * np.dtype(dtype).itemsize, device), shape, dtype, KDL_CUDA,
                        device)


def handed_over(obj: object, stream: int) -> object:
    """The caller's array for an output object: an exported one becomes a JAX array reading
    the same memory, ordered after the kernels that wrote it on `stream`."""
    if not isinstance(obj, DLPackExport):
        return obj
    obj.stream = stream
    import jax.dlpack

    return jax.dlpack.from_dlpack(obj)
