"""The op-registry interface the dialects verify against.

`kas.call` and `fuse.call` name library ops and implementations; checking that a
call's operand and result types match its op's signature needs the op library, which
sits above the dialects. The dialects own this small interface and the library
implements and installs it (`irfuse.library.catalogue` does so on import), so
verifying IR never imports, compiles or runs anything above the IR.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from xdsl.ir import Attribute
from xdsl.utils.exceptions import VerifyException


class OpSignature(Protocol):
    """What the verifiers need of a library op."""

    name: str
    operand_types: Sequence[Attribute]
    result_type: Attribute

    def signature(self) -> str: ...


class ImplementationSignature(Protocol):
    """What the verifiers need of one implementation of an op."""

    op: OpSignature
    name: str
    bx: int  # threads per element it runs with


class OpRegistry(Protocol):
    def lookup_op(self, name: str) -> OpSignature | None: ...

    def closest_ops(self, name: str) -> list[str]: ...

    def lookup_implementation(self, op_name: str, impl_name: str) -> ImplementationSignature:
        """The implementation, or KeyError whose first argument says what is missing."""
        ...


_INSTALLED: OpRegistry | None = None


def install_op_registry(registry: OpRegistry) -> None:
    global _INSTALLED
    _INSTALLED = registry


def op_registry() -> OpRegistry:
    if _INSTALLED is None:
        raise VerifyException("no op library is installed to verify calls against (import irfuse.library.catalogue)")
    return _INSTALLED
