"""The DLPack structures (dlpack.h) irfuse reads and writes: the head of a tensor capsule."""

from __future__ import annotations

import ctypes


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    """The head of a `DLManagedTensor` (dlpack.h, the unversioned capsule `dltensor`)."""

    _fields_ = [("data", ctypes.c_void_p), ("device", DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


KDL_CPU, KDL_CUDA, KDL_CUDA_MANAGED = 1, 2, 13  # DLDeviceType values: host memory, CUDA memory
DL_KINDS = {0: "i", 1: "u", 2: "f"}  # DLDataTypeCode: int, uint, float
