"""The op library's ops by name, for programs written as Python functions.

    from irfuse.ops import mmul33          # or irfuse.ops.mmul33(A, B) in the body

Every op of the library (`irfuse ops` lists them, user ops included once their library is
loaded) and every generic op (`mmul`, `det`, `exp`, ..., resolved by the operands' types) is
an attribute here: an `OpRef` that an `@irfuse.program` function calls. Outside such a
function an op does nothing but say so.
"""

import irfuse.driver.library  # noqa: F401 -- installs the check of hand-written implementations in the library
from irfuse.frontend.python import OpRef
from irfuse.library.catalogue import default_library


def __getattr__(name: str) -> OpRef:
    lib = default_library()
    if name.startswith("__") or (lib.get(name) is None and lib.family(name) is None):
        raise AttributeError(f"irfuse.ops has no op '{name}' ('irfuse ops' lists the library)")
    return OpRef(name)


def __dir__() -> list[str]:
    from irfuse.library.catalogue import generated_name
    from irfuse.library.families import FAMILIES

    return sorted({op.name for op in default_library() if not generated_name(op.name)} | set(FAMILIES))
