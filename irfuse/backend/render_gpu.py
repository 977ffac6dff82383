"""The GPU renderer: a `KernelBody` as its `__global__` CUDA kernel (launch bounds, shared
memory declared statically while it fits the static limit, else taken at launch, the wait for
the previous grid before any global access, then the statement tree with barriers as
`__syncthreads()`)."""

from __future__ import annotations

from irfuse.backend.kernel_body import KernelBody, constant_arrays, node_text, table_arrays


def gpu_kernel(body: KernelBody) -> list[str]:
    """The kernel's lines: signature, declarations, statements."""
    regs = [f"  real_t {name}[{words}];" for name, words in body.regs]
    return [*table_arrays(body, "__constant__"), *_signature(body), *_prologue(body), *constant_arrays(body), *regs,
            *node_text(body.body), "}"]


def _signature(body: KernelBody) -> list[str]:
    params = [f"const {body.info.input_ctype(i)}* __restrict__ {name}" for i, name in enumerate(body.inputs)]
    params += [f"real_t* __restrict__ {name}" for name in body.outputs]
    if body.info.finish_parts:  # where its last block combines its reductions (combine_emit)
        params += [f"real_t* __restrict__ irf_fin{j}" for j in range(sum(1 for r in body.info.reduced if r))]
        params.append("unsigned int* __restrict__ irf_done")
    params += [f"{ctype} __restrict__ {name}" for ctype, name in body.info.group_params()]
    params.append("const long long n")
    layout = ", structure of arrays" if body.soa else ""
    per = f", elements_per_thread = {body.elements_per_thread}" if body.elements_per_thread != 1 else ""
    return [f"// fuse.kernel @{body.info.name}: block(bx = {body.bx}, by = {body.by}{per}), {body.words} shared words"
            + layout,
            f'extern "C" __global__ void __launch_bounds__({body.nthreads}, {body.min_blocks}) '
            f'{body.info.name}({", ".join(params)})',
            "{"]


def _prologue(body: KernelBody) -> list[str]:
    """Shared memory: the planned buffer and the arrays apart from it, declared statically
    while they fit the static limit together, else all in one buffer taken at launch
    (`KernelInfo.dynamic_shared`, decided when the body was built)."""
    lines = []
    if not body.info.dynamic_shared:
        if body.words:
            lines.append(f"  IRFUSE_SHARED_STATIC(real_t, smem, {body.words});")
        for name, words in body.block_arrays:
            lines.append(f"  __shared__ __align__(16) real_t {name}[{words}];")
    else:
        lines.append("  IRFUSE_SHARED_DYNAMIC(real_t, smem);")
        for (name, words), offset in zip(body.block_arrays, body.info.array_offsets(body.itemsize)):
            lines.append(f"  real_t* const {name} = smem + {offset};  // {words} words of the dynamic buffer")
    # Before any global access: what the previous kernel on the stream writes is visible.
    lines.append("  irf_after_previous_grid();")
    lines += [
        "  const int tx = threadIdx.x, ty = threadIdx.y;",
        f"  const int tid = ty * {body.bx} + tx;",
        f"  const long long first = (long long)blockIdx.x * {body.by};",
        f"  const int count = n - first < {body.by} ? (int)(n - first) : {body.by};",
        "  const bool active = ty < count;",
        "  (void)tid; (void)active;",
    ]
    if body.staged_sources:
        # The same for the whole block: its staged copies and their barrier are taken by all
        # of its threads or by none (a partial last block, an odd n, an unaligned array).
        aligned = " && ".join(f"((unsigned long long){g} & 15) == 0" for g in body.staged_sources)
        lines.append(f"  const bool irf_runs16 = count == {body.by} && n % {16 // body.itemsize} == 0 && {aligned};")
    return lines

