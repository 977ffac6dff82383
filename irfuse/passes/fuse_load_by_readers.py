"""fuse-load-by-readers: In each kernel marked `loads_by_readers` (by the driver, where ptxas's
figures show the kernel's shared memory bounding its blocks), loads the values several threads
of an element read by those threads, into registers, right before their reader
(`irfuse.transforms.reader_loads`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass

from irfuse.diagnostics import UsageError
from irfuse.passes.kernel_pass import rewrite_kernels
from irfuse.transforms.reader_loads import load_by_readers


@dataclass(frozen=True)
class FuseLoadByReaders(ModulePass):
    """In kernels marked `loads_by_readers`, loads the values several threads of an element
    read by those threads, before their reader, with a barrier after every op."""

    name = "fuse-load-by-readers"
    every: str | bool = False
    OPTION_DOCS: ClassVar[dict[str, str]] = {
        "every": "treat every kernel as marked (true, false): the loads by readers without ptxas's figures, as the "
                 "CPU backend's tests of such kernels run them",
    }

    def apply(self, ctx: Context, op: ModuleOp) -> None:
        every = {"true": True, "false": False, True: True, False: False}.get(self.every)
        if every is None:
            raise UsageError(f"fuse-load-by-readers: every must be true or false, got '{self.every}'")
        rewrite_kernels(op, lambda m: load_by_readers(m, every))
