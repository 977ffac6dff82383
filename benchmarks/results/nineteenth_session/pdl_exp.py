"""Ad hoc: SyncTest (AoS and SoA, default plans) called 10 times back to back as the API does (one
CUDA graph a call) against plain launches and programmatic dependent launches (PDL:
cuLaunchKernelEx with programmatic stream serialization; the kernel starts with
griddepcontrol.wait, so it may be scheduled during the previous kernel's tail but reads nothing
before that kernel has finished). Fractions of the 1 GiB copy; host microseconds a launch."""
import ctypes, json, os, time
import numpy as np
import pycuda.driver as drv
from cuda.bindings import driver as cu
from irfuse.driver.compile import compile_program
from irfuse.runtime.cuda_device import CudaDevice, _EventTimer, measure_copy_bandwidth
from irfuse.runtime.cuda_graph import checked
from irfuse.runtime.executor import Executor
from irfuse.runtime.reference import effective_bytes

WAIT = '  asm volatile("griddepcontrol.wait;" ::: "memory");\n'
TRIGGER = '  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");\n'


def with_prologue(src, name, text):
    i = src.index(name + "(")
    j = src.index("{\n", i) + 2
    return src[:j] + text + src[j:]


out = {"rows": []}
n = 4194304
for layout in ("aos", "soa"):
    plan, _ = compile_program("examples/synctest.kas", None, "f32", layout=layout)
    k0 = plan.kernels[0]
    base = plan.source
    rng = np.random.default_rng(1)
    inputs = {"A": rng.random((n, 3, 3), dtype=np.float32) if layout == "aos" else rng.random((3, 3, n), dtype=np.float32)}
    nbytes = effective_bytes(plan.reference_program, n, 4)
    variants = {"graph (API)": (base, None), "plain": (base, False), "pdl wait": (with_prologue(base, k0.name, WAIT), True),
                "pdl wait+trigger": (with_prologue(base, k0.name, WAIT + TRIGGER), True),
                "pdl trigger+wait": (with_prologue(base, k0.name, TRIGGER + WAIT), True),
                "graph of a pdl launch": (with_prologue(base, k0.name, TRIGGER + WAIT), "graph"),
                "graph of a launch, kernel waits": (with_prologue(base, k0.name, TRIGGER + WAIT), "graph-nopdl")}
    want = None
    for rnd in range(3):
        for vname, (src, pdl) in variants.items():
            plan.source, plan.cubin = src, None
            dev = CudaDevice(plan)
            out.setdefault("gpu", dev.gpu_name)
            if "copy_Bps" not in out:
                out["copy_Bps"] = measure_copy_bandwidth(dev.drv)
            rec = Executor(plan, dev).prepare(inputs, n)
            rec.replay()
            got = rec.outputs()["F"].tobytes()
            want = want or got
            if pdl is None:
                call = rec.replay
            else:
                mod = checked(cu.cuModuleLoadData(plan.cubin.cubin), "load")
                fn = checked(cu.cuModuleGetFunction(mod, k0.name.encode()), "get")
                ptrs = [int(b) for b in dev.allocations[:2]]
                # input then output as the kernel takes them: the recorded launch's buffers
                bufs = [ctypes.c_void_p(p) for p in ptrs] + [ctypes.c_longlong(n)]
                arr = (ctypes.c_void_p * 3)(*[ctypes.addressof(b) for b in bufs])
                cfg = cu.CUlaunchConfig()
                cfg.gridDimX, cfg.gridDimY, cfg.gridDimZ = k0.blocks(n), 1, 1
                cfg.blockDimX, cfg.blockDimY, cfg.blockDimZ = k0.block_dims
                cfg.sharedMemBytes = dev.shared[k0.name]
                cfg.hStream = cu.CUstream(0)
                if pdl in (True, "graph"):
                    a = cu.CUlaunchAttribute()
                    a.id = cu.CUlaunchAttributeID.CU_LAUNCH_ATTRIBUTE_PROGRAMMATIC_STREAM_SERIALIZATION
                    a.value.programmaticStreamSerializationAllowed = 1
                    cfg.attrs = [a]
                    cfg.numAttrs = 1
                addr = ctypes.addressof(arr)
                launch = cu.cuLaunchKernelEx

                def call(cfg=cfg, fn=fn, addr=addr):
                    (err,) = launch(cfg, fn, addr, 0)
                    assert err == cu.CUresult.CUDA_SUCCESS, err
                if isinstance(pdl, str):
                    from irfuse.runtime.cuda_graph import CudaGraph

                    def record(stream, cfg=cfg, fn=fn, addr=addr):
                        cfg.hStream = cu.CUstream(stream.handle)
                        (err,) = launch(cfg, fn, addr, 0)
                        assert err == cu.CUresult.CUDA_SUCCESS, err
                    g = CudaGraph(dev.drv, record)
                    dev.graphs.append(g)
                    call = g
                # check it writes the same: poison the output, run, compare
                drv.memset_d8(ptrs[1], 0xFF, nbytes // 2)
                call()
                drv.Context.synchronize()
                got2 = rec.outputs()["F"].tobytes()
                assert got2 == want, vname
            for _ in range(5):
                call()
            drv.Context.synchronize()

            def timed(k):
                with _EventTimer(dev.drv) as t:
                    for _ in range(k):
                        call()
                return t.seconds / k
            one = float(np.median([timed(1) for _ in range(100)]))
            ten = float(np.median([timed(10) for _ in range(30)]))
            drv.Context.synchronize()
            t0 = time.perf_counter()
            for _ in range(200):
                call()
            host = (time.perf_counter() - t0) / 200
            drv.Context.synchronize()
            r = {"layout": layout, "variant": vname, "round": rnd, "same_bits": got == want,
                 "one_of_copy": nbytes / one / out["copy_Bps"], "b2b_of_copy": nbytes / ten / out["copy_Bps"], "host_us": host * 1e6}
            out["rows"].append(r)
            print(layout, vname, rnd, "one %.4f b2b %.4f host %.2f us" % (r["one_of_copy"], r["b2b_of_copy"], r["host_us"]), flush=True)
            if pdl is not None:
                cu.cuModuleUnload(mod)
            dev.close()
json.dump(out, open(os.path.join(os.environ.get("OUT", "."), "pdl_exp.json"), "w"), indent=1)
