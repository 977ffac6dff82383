"""Ad hoc: host microseconds of the driver calls a programmatic-dependent-launch path would make
from Python: cuGraphLaunch, cuLaunchKernelEx (cuda-bindings, and libcuda through ctypes with the
cuda-bindings config's address), cuStreamQuery, cuStreamIsCapturing."""
import ctypes, time
import numpy as np
from cuda.bindings import driver as cu
from irfuse.backend.nvrtc import compile_cubin
from irfuse.runtime.cuda_device import import_pycuda
from irfuse.runtime.cuda_graph import CudaGraph, checked

drv = import_pycuda()
ctx = drv.Device(0).retain_primary_context(); ctx.push()
SRC = r'''extern "C" __global__ void k(float* p, long long n) {
  asm volatile("griddepcontrol.wait;" ::: "memory");
  if (threadIdx.x == 0 && n < 0) p[0] = 1.0f; }'''
cc = drv.Device(0).compute_capability()
cub = compile_cubin(SRC, f"sm_{cc[0]}{cc[1]}").cubin
mod = checked(cu.cuModuleLoadData(cub), "load")
fn = checked(cu.cuModuleGetFunction(mod, b"k"), "get")
buf = drv.mem_alloc(64)
vals = [ctypes.c_void_p(int(buf)), ctypes.c_longlong(1)]
arr = (ctypes.c_void_p * 2)(*[ctypes.addressof(v) for v in vals])
stream = drv.Stream()
hs = cu.CUstream(stream.handle)
cfg = cu.CUlaunchConfig()
cfg.gridDimX = cfg.gridDimY = cfg.gridDimZ = 1
cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = 32, 1, 1
cfg.sharedMemBytes = 0
cfg.hStream = hs
a = cu.CUlaunchAttribute()
a.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
a.value.programmaticStreamSerializationAllowed = 1
cfg.attrs = [a]; cfg.numAttrs = 1
lib = ctypes.CDLL("libcuda.so.1")
lib.cuLaunchKernelEx.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
lib.cuStreamQuery.argtypes = [ctypes.c_void_p]
fptr = int(fn)
cptr = cfg.getPtr()
aptr = ctypes.addressof(arr)

def bindings_launch():
    cu.cuLaunchKernelEx(cfg, fn, aptr, 0)

def ctypes_launch(f=lib.cuLaunchKernelEx):
    f(cptr, fptr, aptr, None)

def record(s):
    c2 = cu.CUlaunchConfig(); c2.gridDimX = c2.gridDimY = c2.gridDimZ = 1; c2.blockDimX, c2.blockDimY, c2.blockDimZ = 32, 1, 1
    c2.hStream = cu.CUstream(s.handle)
    cu.cuLaunchKernelEx(c2, fn, aptr, 0)
g = CudaGraph(drv, record)
sh = stream.handle
calls = {"cuGraphLaunch (bindings)": lambda: g.launch_on(sh),
         "cuLaunchKernelEx (bindings)": bindings_launch,
         "cuLaunchKernelEx (ctypes)": ctypes_launch,
         "cuStreamQuery (bindings)": lambda: cu.cuStreamQuery(hs),
         "cuStreamQuery (ctypes)": lambda q=lib.cuStreamQuery: q(sh),
         "cuStreamIsCapturing (bindings)": lambda: cu.cuStreamIsCapturing(hs),
         "perf_counter": time.perf_counter}
for rnd in range(3):
    for name, c in calls.items():
        drv.Context.synchronize()
        ts = []
        for _ in range(20):
            t0 = time.perf_counter()
            for _ in range(500):
                c()
            ts.append((time.perf_counter() - t0) / 500 * 1e6)
            drv.Context.synchronize()
        print(rnd, name, "%.2f us" % np.median(ts), flush=True)
print("ctypes launch result code", lib.cuLaunchKernelEx(cptr, fptr, aptr, None))
drv.Context.synchronize()
