"""CflStep's chain at N elements (float32, the default plan): a probe kept as the record of the
NOTES entry of 2026-12-01 (Batch-wide values and reductions: what bounds CflStep at 4 M), not a
maintained benchmark.

    python ..._cflstep_chain_probe.py headers DIR        # no GPU: DIR/emitted.cuh and DIR/variants.cuh
    python ..._cflstep_chain_probe.py early DIR          # then DIR/variants2.cuh (variants F and G)
    nvcc -arch=sm_90 -O3 -std=c++17 -I DIR -o h ..._cflstep_chain_probe.cu && ./h 4194304
    python ..._cflstep_chain_probe.py time N CUBIN       # irfuse's own timing; writes its cubin to CUBIN
    nvcc ... -o ch ..._cflstep_chain_probe_cubin.cu -lcuda && ./ch 4194304 CUBIN

`emitted.cuh` is the plan's CUDA C as irfuse emits it; `variants.cuh` holds two kernels made from
it by text: the update kernel loading x and v before it waits for the previous grid
(`k2_prefetch`), and the combine kernel computing dt = cfl / vmax on its last thread
(`combine_sdiv`, the once kernel's work). `variants2.cuh` holds the same kernels letting the next
kernel be scheduled before they wait for the previous grid (`griddepcontrol.launch_dependents`
first), the update kernel also in the form loading x and v before its wait."""
import os
import statistics
import sys

import numpy as np

from irfuse.driver.compile import PlanningOptions, compile_program

PROGRAM = os.path.join(os.path.dirname(__file__), "..", "..", "..", "examples", "cfl_step.kas")


def headers(directory: str, n: int = 4194304) -> None:
    plan, _ = compile_program(PROGRAM, None, "f32", compile_gpu=False, planning=PlanningOptions(n=n))
    src = plan.source
    k2 = src[src.index('extern "C" __global__ void __launch_bounds__(128, 15) cfl_step_k2_svmul3_vadd3'):]
    k2 = k2[:k2.index("\n}\n") + 3]
    k2p = k2.replace("cfl_step_k2_svmul3_vadd3", "k2_prefetch").replace("  irf_after_previous_grid();\n", "", 1)
    k2p = k2p.replace("  // irf_u0: the block's copy", "  irf_after_previous_grid();\n  // irf_u0: the block's copy")
    c0 = src.index("#if __CUDA_ARCH__ >= 900\n// fuse.combine max")
    comb = src[c0 + len("#if __CUDA_ARCH__ >= 900\n"):src.index("#else", c0)]
    comb = comb.replace("irf_combine_max_1(const real_t* __restrict__ parts, real_t* __restrict__ out, const long long n)",
                        "combine_sdiv(const real_t* __restrict__ parts, real_t* __restrict__ out, const long long n, "
                        "const real_t* __restrict__ cfl, real_t* __restrict__ dt)")
    comb = comb.replace("  if (t == 0) out[k] = acc[0];\n",
                        "  if (t == 0) { out[k] = acc[0]; irf_sdiv_elem_sss(0, 0, cfl, out + k, dt); }\n")
    body = comb.index("{", comb.index("combine_sdiv("))
    end = comb.rindex("\n}\n")
    comb = comb[:body + 1] + "\n#ifdef __CUDA_ARCH__" + comb[body + 1:end] + "\n#endif" + comb[end:]
    os.makedirs(directory, exist_ok=True)
    open(os.path.join(directory, "emitted.cuh"), "w").write(src)
    open(os.path.join(directory, "variants.cuh"), "w").write("#ifndef IRFUSE_HOST\n" + k2p + "\n" + comb + "#endif\n")


def early(directory: str) -> None:
    src = open(os.path.join(directory, "emitted.cuh")).read()
    variants = open(os.path.join(directory, "variants.cuh")).read()
    trigger_first = """
__device__ __forceinline__ void irf_trigger_then_wait()
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\\n" ::: "memory");
  asm volatile("griddepcontrol.wait;\\n" ::: "memory");
#endif
}
"""

    def kernel(marker: str) -> str:
        i = src.index(marker)
        return src[i:src.index("\n}\n", i) + 3]

    k1 = kernel('extern "C" __global__ void __launch_bounds__(1, 1) cfl_step_k1_sdiv')
    k2 = kernel('extern "C" __global__ void __launch_bounds__(128, 15) cfl_step_k2_svmul3_vadd3')
    k1e = k1.replace("cfl_step_k1_sdiv", "k1_early").replace("irf_after_previous_grid();", "irf_trigger_then_wait();")
    k2e = k2.replace("cfl_step_k2_svmul3_vadd3", "k2_early").replace("irf_after_previous_grid();", "irf_trigger_then_wait();")
    k2p = k2.replace("cfl_step_k2_svmul3_vadd3", "k2_early_prefetch").replace(
        "  irf_after_previous_grid();\n", '  asm volatile("griddepcontrol.launch_dependents;\\n" ::: "memory");\n', 1)
    k2p = k2p.replace("  // irf_u0: the block's copy",
                      '  asm volatile("griddepcontrol.wait;\\n" ::: "memory");\n  // irf_u0: the block\'s copy')
    comb = variants[variants.index('extern "C" __global__ void __cluster_dims__'):]
    comb = comb[:comb.rindex("#endif\n")]
    comb = comb.replace("combine_sdiv", "combine_sdiv_early").replace("irf_after_previous_grid();", "irf_trigger_then_wait();")
    with open(os.path.join(directory, "variants2.cuh"), "w") as f:
        f.write("#ifndef IRFUSE_HOST\n" + trigger_first + k1e + k2e + k2p + comb + "#endif\n")


def timed(n: int, cubin_path: str) -> None:
    from irfuse.runtime.cuda_device import CudaDevice
    from irfuse.runtime.executor import Executor
    from irfuse.verification.reference import random_inputs
    plan, _ = compile_program(PROGRAM, None, "f32", planning=PlanningOptions(n=n))
    open(cubin_path, "wb").write(plan.cubin.cubin)
    dev = CudaDevice(plan)
    rec = Executor(plan, dev).prepare(random_inputs(plan.reference_program, n, 1, np.float32), n)
    for _ in range(5):
        rec.replay()
    for r in range(3):
        one = statistics.median(rec.time_once() for _ in range(60))
        ten = statistics.median(rec.time_once(10) for _ in range(20))
        print(f"round {r} irfuse Executor: one {one * 1e6:.2f} us, ten {ten * 1e6:.2f} us")
    dev.close()


if __name__ == "__main__":
    if sys.argv[1] == "headers":
        headers(sys.argv[2])
    elif sys.argv[1] == "early":
        early(sys.argv[2])
    else:
        timed(int(sys.argv[2]), sys.argv[3])
