"""The CPU renderer: a `KernelBody` as its CPU twin, a host function that runs a range of
blocks the way CPU implementations of OpenCL run work-groups. The body is cut at its barriers
into regions, each a loop over the block's threads (first to last, or last to first with
`reverse`), so a barrier's semantics are exact: every thread finishes a region before any
starts the next. Register values used in more than one region (or in a loop whose body holds
barriers) are kept per thread across them; the others stay local to the region's loop.
Shared memory is a scratch buffer poisoned with NaN before each block; staged loads read
directly (their shared arrays are GPU only)."""

from __future__ import annotations

import re

from irfuse.backend.kernel_body import (GpuOnly, KernelBody, LoopNode, constant_arrays, has_barrier, is_barrier,
                                        node_text, table_arrays)


def cpu_kernel(body: KernelBody) -> list[str]:
    """The kernel for the CPU: blocks `block_begin` to `block_end`, each region a loop over
    the block's threads, `reverse` running them last to first; it returns 0, or 1 where its
    scratch memory could not be allocated (and then runs no block)."""
    params = host_params(body)
    items = _cpu_items(body.body)
    regions = list(_regions(items))

    region_words = [(_words("\n".join(r)), in_loop) for r, in_loop in regions]

    def uses(name: str, in_loop_only: bool = False) -> int:
        return sum(name in words for words, in_loop in region_words if in_loop or not in_loop_only)
    # Kept per thread: used in two regions, or in a block-level loop's body (the next
    # iteration's region reads what this one's wrote).
    kept = [(name, words) for name, words in body.regs if uses(name) > 1 or uses(name, True)]
    smem_words = -(-max(body.words, 1) // 4) * 4  # the kept values start 16-byte aligned
    block_arrays = [(name, words) for name, words in body.block_arrays if name not in body.staged_arrays]
    arrays = sum(-(-words // 4) * 4 for _, words in block_arrays)
    scratch = smem_words + arrays + sum(body.nthreads * words for _, words in kept)
    nt = body.nthreads
    lines = [*table_arrays(body, "static const"),
             f"// fuse.kernel @{body.info.name} on the CPU: {len(regions)} regions of {nt} threads",
             f"static int {body.info.name}({', '.join(params)})",
             "{",
             f"  const irf::Scratch<real_t> irf_scratch({scratch});",
             "  real_t* const smem = irf_scratch.get();",
             "  if (smem == nullptr) return 1;  // no memory for the scratch: no block runs",
             *constant_arrays(body)]
    offset = smem_words
    for name, words in block_arrays:
        lines.append(f"  real_t* const {name} = smem + {offset};  // a shared array of its own")
        offset += -(-words // 4) * 4
    for name, words in kept:
        lines.append(f"  real_t* const irf_kept_{name} = smem + {offset};  // {words} words per thread")
        offset += nt * words
    lines += ["  for (long long irf_block = block_begin; irf_block < block_end; ++irf_block) {",
              f"    irf::poison(smem, {smem_words + arrays});",
              f"    const long long first = irf_block * {body.by};",
              f"    const int count = n - first < {body.by} ? (int)(n - first) : {body.by};"]
    lines += _cpu_body(body, items, "    ", kept)
    return lines + ["  }", "  return 0;", "}"]


_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    """The words of C text: a register value's name (a word itself) is used there exactly when
    it is one of them, as `\\bname\\b` would find it. Read once a region, not once a value
    and region: a kernel of a thousand values took seconds, a pattern compiled per value."""
    return set(_WORD.findall(text))


def host_params(body: KernelBody) -> list[str]:
    """A kernel's host function's parameters (the launcher calls every CPU rendering so):
    its global arrays, the batch length, its range of blocks, and the order of a block's
    threads (or elements)."""
    params = [f"const {body.info.input_ctype(i)}* __restrict__ {name}" for i, name in enumerate(body.inputs)]
    params += [f"real_t* __restrict__ {name}" for name in body.outputs]
    params += [f"{ctype} __restrict__ {name}" for ctype, name in body.info.group_params()]
    return params + ["const long long n", "const long long block_begin", "const long long block_end",
                     "const bool reverse"]


def _cpu_body(body: KernelBody, items: list, indent: str, kept: list[tuple[str, int]]) -> list[str]:
    """Each region a loop over the block's threads; block-level loops around theirs."""
    nt = body.nthreads
    lines: list[str] = []
    for item in items:
        if isinstance(item, tuple):
            loop, inner = item
            lines += [indent + loop.header.strip(), *_cpu_body(body, inner, indent + "  ", kept), indent + "}"]
            continue
        present = _words("\n".join(item))
        lines += [f"{indent}for (int irf_t = 0; irf_t < {nt}; ++irf_t) {{",
                  f"{indent}  const int tid = reverse ? {nt - 1} - irf_t : irf_t;",
                  f"{indent}  const int tx = tid % {body.bx}, ty = tid / {body.bx};",
                  f"{indent}  const bool active = ty < count;",
                  f"{indent}  (void)tx; (void)ty; (void)active;"]
        for name, words in body.regs:
            if name not in present:
                continue
            if (name, words) in kept:
                lines.append(f"{indent}  real_t* const {name} = irf_kept_{name} + tid * {words};")
            else:
                lines.append(f"{indent}  real_t {name}[{words}];")
        lines += [indent + line for line in item] + [f"{indent}}}"]
    return lines


def _cpu_items(nodes: list) -> list:
    """The body for the CPU: regions (lists of statements; a loop without barriers inside
    stays in its region) and block-level loops `(LoopNode, items)`."""
    items: list = []
    region: list[str] = []
    nodes = [c for n in nodes for c in (n.cpu if isinstance(n, GpuOnly) else [n])]
    for n in nodes:
        if is_barrier(n) or (isinstance(n, LoopNode) and has_barrier(n.children)):
            if region:
                items.append(region)
            region = []
            if isinstance(n, LoopNode):
                items.append((n, _cpu_items(n.children)))
        elif isinstance(n, LoopNode):
            region += node_text([n])
        else:
            region += n
    if region:
        items.append(region)
    return items


def _regions(items: list, in_loop: bool = False):
    """(region, inside a block-level loop) for every region of `_cpu_items`."""
    for item in items:
        if isinstance(item, tuple):
            yield from _regions(item[1], True)
        else:
            yield item, in_loop
