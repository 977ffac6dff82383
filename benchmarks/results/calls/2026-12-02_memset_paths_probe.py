"""What one 32-bit memset on the caller's stream costs the host, by the ways Python can issue
it (a changing uniform scalar's word, `CudaDevice.scalar`): us a call, best of five timeit runs."""
import ctypes, timeit
import numpy as np, torch
import irfuse
from irfuse.runtime.cuda_graph import cuda_driver

def micro(fn, number=20000):
    for _ in range(200): fn()
    torch.cuda.synchronize()
    r = min(timeit.repeat(fn, number=number, repeat=5)) / number * 1e6
    torch.cuda.synchronize()
    return r

nh = irfuse.compile("examples/neo_hookean.kas", backend="cuda")
F = torch.eye(3, device="cuda").repeat(1024, 1, 1).contiguous()
nh(F, 0.8, 1.5)
dev = nh.opened_device()
cu = cuda_driver()
buf = torch.zeros(4, device="cuda", dtype=torch.int32)
ptr = buf.data_ptr()
stream = cu.CUstream(0)
dptr = cu.CUdeviceptr(ptr)
vals = [b"\x00\x00\x80?", b"\x00\x00\x00@"]
k = [0]
def scalar():
    k[0] ^= 1
    dev.scalar("mu", vals[k[0]], 0, False)
print("device.scalar (changing value)", micro(scalar))
print("cuda-bindings cuMemsetD32Async, int address", micro(lambda: cu.cuMemsetD32Async(ptr, 7, 1, stream)))
print("cuda-bindings cuMemsetD32Async, CUdeviceptr", micro(lambda: cu.cuMemsetD32Async(dptr, 7, 1, stream)))
lib = ctypes.CDLL("libcuda.so.1")
f = lib.cuMemsetD32Async
f.argtypes = [ctypes.c_uint64, ctypes.c_uint32, ctypes.c_size_t, ctypes.c_void_p]
f.restype = ctypes.c_int
print("ctypes cuMemsetD32Async", micro(lambda: f(ptr, 7, 1, None)))
import pycuda.driver as drv
print("pycuda memset_d32_async", micro(lambda: drv.memset_d32_async(ptr, 7, 1)))
print("torch fill_ of one word", micro(lambda: buf[:1].fill_(7)))
err = cu.cuMemsetD32Async(ptr, 7, 1, stream)
print("enum compare", micro(lambda: err[0] != cu.CUresult.CUDA_SUCCESS))
print("int.from_bytes", micro(lambda: int.from_bytes(vals[0], "little")))
