"""What a call over a mesh on GPU arrays does on the GPU besides the program's kernels:
connectivities checked there (and int64 node numbers narrowed into an int32 copy), arrays
rearranged between structures of arrays and arrays of structures, and the places a recorded
run reads and writes (`Slot`s over the caller's arrays or buffers of irfuse's own).

A connectivity is checked by a kernel (`irf_check_index`, `irf_check_index64`) that finds the
first entry outside `[0, M)`; the call waits for it and reads that one word back, and the
refusal names the element and position as a call on NumPy arrays does. Buffers of irfuse's
own (int32 copies, rearranged arrays) are listed in a `scratch` list the caller frees once
the run is done.
"""

from __future__ import annotations

import numpy as np

from irfuse.artifact.kernel_info import CHECK_INDEX64_KERNEL, CHECK_INDEX_KERNEL
from irfuse.diagnostics import UsageError
from irfuse.runtime.device import Slot

NO_BAD_ENTRY = 2**63 - 1  # what the check kernel's flag holds when every entry is a node


def slot_of(ptr: int, nbytes: int, keep) -> Slot:
    """A place the recorded run reads or writes: `nbytes` at `ptr`, `keep` held while it does."""
    s = Slot()
    s.ptr, s.nbytes, s.array = int(ptr), nbytes, keep
    return s


def scratch_slot(dev, nbytes: int, scratch: list) -> Slot:
    """A buffer of irfuse's own of `nbytes`, listed in `scratch` for the caller to free."""
    buf = dev.mem_alloc(max(nbytes, 1))
    scratch.append(buf)
    return slot_of(buf, nbytes, buf)


def free_scratch(scratch: list) -> None:
    for buf in scratch:
        buf.free()
    scratch.clear()


def rearranged(dev, kernel: str, source, value_shape: tuple, scratch: list, into=None):
    """`source` (a Slot or GPU array: a structure of arrays, or with COLUMNS_OF_ROWS_KERNEL an
    array of structures) rearranged by `kernel` into `into`, else into a new buffer of
    irfuse's own (kept in `scratch` for the caller to free, and returned as a Slot)."""
    nbytes = source.nbytes
    if into is None:
        into = scratch_slot(dev, nbytes, scratch)
    words = dev.constant(np.array([max(int(np.prod(value_shape)), 1)]), integers=True)
    dev.launcher(kernel, [source.ptr, words, into.ptr], nbytes // np.dtype(dev.dtype).itemsize)()
    return into


def check_connectivity_on_gpu(dev, name: str, ptr: int, shape: tuple[int, int], dtype, nodes: int):
    """Refuses a GPU connectivity (`ptr`: (E, K) node numbers of `dtype`, int32 or int64) with
    an entry outside [0, nodes), naming the first one: one kernel over its entries, then a
    wait for it and a one-word read. Returns None for int32 node numbers, and for int64 ones
    their int32 copy (a device allocation the caller frees)."""
    flag = dev.upload_integers(np.array([NO_BAD_ENTRY], np.int64))
    count = dev.upload_integers(np.array([nodes], np.int64))
    entries = shape[0] * shape[1]
    copy = None
    if np.dtype(dtype) == np.int64:
        copy = dev.mem_alloc(max(4 * entries, 4))
        dev.launcher(CHECK_INDEX64_KERNEL, [ptr, count, flag, copy], entries)()
    else:
        dev.launcher(CHECK_INDEX_KERNEL, [ptr, count, flag], entries)()
    dev.synchronize()
    first = np.empty(1, np.int64)
    dev.drv.memcpy_dtoh(first, flag)
    if int(first[0]) != NO_BAD_ENTRY:
        if copy is not None:
            copy.free()
        slot = int(first[0])
        word = np.empty(1, dtype)
        dev.drv.memcpy_dtoh(word, ptr + np.dtype(dtype).itemsize * slot)
        k = shape[1]
        raise UsageError(f"input '{name}': element {slot // k}, position {slot % k} names node {int(word[0])}, "
                         f"outside [0, {nodes})")
    return copy


def connectivity_on_host(dev, ptr: int, shape: tuple[int, int]) -> np.ndarray:
    """A GPU connectivity's int32 node numbers copied to the host (for its scatter order)."""
    host = np.empty(shape, np.int32)
    dev.drv.memcpy_dtoh(host, int(ptr))
    return host
