"""The library of elementary ops: name, signature and index-notation definition.

Every op is defined once in index notation (see `indexexpr`); its NumPy
reference, flop count and generated CUDA code all come from that one text.
User ops are added with `Library.define` from a module loaded through the
`irfuse.library` entry point or `--library FILE.py` (see `load_user_libraries`).
"""

from __future__ import annotations

import difflib
import importlib.util
from collections.abc import Iterable
from dataclasses import dataclass, field

import numpy as np

from irfuse.dialects.kas import KasType, MatrixType, ScalarType, TensorType, VectorType
from irfuse.library.indexexpr import (
    DefinitionError,
    Expander,
    Scalar,
    count_flops,
    eval_numpy,
    parse_definition,
)


@dataclass
class OpDef:
    """One elementary op."""

    name: str
    operand_names: list[str]
    operand_types: list[KasType]
    result_type: KasType
    definition: str
    doc: str = ""
    trees: list[Scalar] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        d = parse_definition(self.definition)
        if d.target in self.operand_names:
            raise DefinitionError(f"op '{self.name}': the result name '{d.target}' is also an operand")
        self.trees = Expander(d, self.operand_names,
                              [t.shape for t in self.operand_types], self.result_type.shape).expand()

    @property
    def flops(self) -> int:
        return count_flops(self.trees)

    def bytes(self, itemsize: int = 4) -> int:
        """Global-memory bytes per element when the op runs alone."""
        return itemsize * (sum(t.size for t in self.operand_types) + self.result_type.size)

    def signature(self) -> str:
        ins = ", ".join(t.spelling() for t in self.operand_types)
        return f"{self.name}({ins}) -> {self.result_type.spelling()}"

    def reference(self, *operands: np.ndarray) -> np.ndarray:
        """Batched evaluation: operands shaped (N, *shape); returns (N, *result shape)."""
        n = operands[0].shape[0] if operands else 0
        flat = [np.ascontiguousarray(a).reshape(n, -1) for a in operands]
        cols = [eval_numpy(t, flat) for t in self.trees]
        out = np.stack(cols, axis=1) if cols else np.zeros((n, 0))
        return out.reshape((n, *self.result_type.shape))


class Library:
    """A registry of ops by name."""

    def __init__(self) -> None:
        self.ops: dict[str, OpDef] = {}
        self.hand_implementations: dict[str, list] = {}

    def define(self, name: str, operands: Iterable[tuple[str, KasType]], result: KasType,
               definition: str, doc: str = "") -> OpDef:
        if name in self.ops:
            raise DefinitionError(f"op '{name}' is already defined")
        names, types = zip(*operands) if operands else ((), ())
        op = OpDef(name, list(names), list(types), result, definition, doc)
        self.ops[name] = op
        return op

    def implement(self, op_name: str, name: str, bx: int, source: str, operand_aps, result_ap,
                  recommended_by: int | None = None, check: bool = True):
        """Adds a hand-written implementation (KAS style) of an op.

        `source` defines ``FUNC(int tx, int ty, const real_t* in0, ..., real_t* out)``
        and addresses operand k as ``in_k[APINk + ...]`` and the result as
        ``out[APOUT + ...]``; irfuse substitutes the AP start (shared) or 0
        (registers).  APs are `AccessPattern`s or ``(start, block, stride, count[, noreg])``
        tuples.  With `check`, the implementation is run on the CPU against the
        reference first and refused (`DefinitionError`) if it disagrees.
        """
        from irfuse.analysis.access_patterns import AccessPattern
        from irfuse.library.implementations import HandImplementation, implementations

        op = self.ops.get(op_name)
        if op is None:
            raise DefinitionError(f"cannot implement unknown op '{op_name}'")
        if any(i.name == name for i in implementations(op, self)):
            raise DefinitionError(f"op '{op_name}' already has an implementation '{name}'")
        if not name.isidentifier():
            raise DefinitionError(f"implementation name '{name}' must be an identifier")

        def ap(x):
            return x if isinstance(x, AccessPattern) else AccessPattern(*x)
        operand_aps = [ap(a) for a in operand_aps]
        if len(operand_aps) != len(op.operand_types):
            raise DefinitionError(f"'{op_name}' has {len(op.operand_types)} operands; "
                                  f"implementation '{name}' gives {len(operand_aps)} access patterns")
        if bx < 1 or bx > 1024:
            raise DefinitionError(f"implementation '{name}': bx must be in 1..1024")
        from irfuse.library.implementations import _recommended_by

        impl = HandImplementation(op, name, bx, recommended_by or _recommended_by(bx), operand_aps,
                                  ap(result_ap), origin="hand-written", source=source)
        self.hand_implementations.setdefault(op_name, []).append(impl)
        if check:
            from irfuse.library.validate import check_implementation

            try:
                check_implementation(impl, self)
            except Exception:
                self.hand_implementations[op_name].remove(impl)
                raise
        return impl

    def get(self, name: str) -> OpDef | None:
        return self.ops.get(name)

    def closest(self, name: str, n: int = 3) -> list[str]:
        return difflib.get_close_matches(name, self.ops.keys(), n=n, cutoff=0.6)

    def __iter__(self):
        return iter(self.ops.values())


def _mat(n: int) -> MatrixType:
    return MatrixType(n, n)


def _define_catalogue(lib: Library) -> None:
    s = ScalarType()
    for n in range(2, 7):
        nn = f"{n}{n}"
        m, v = _mat(n), VectorType(n)
        lib.define(f"madd{nn}", [("A", m), ("B", m)], m, "C[i,j] = A[i,j] + B[i,j]", "A+B")
        lib.define(f"msub{nn}", [("A", m), ("B", m)], m, "C[i,j] = A[i,j] - B[i,j]", "A-B")
        lib.define(f"mmul{nn}", [("A", m), ("B", m)], m, "C[i,j] = sum(k) A[i,k]*B[k,j]",
                   "matrix product")
        lib.define(f"mtrans{nn}", [("A", m)], m, "C[i,j] = A[j,i]", "transpose")
        lib.define(f"mvmul{nn}", [("M", m), ("v", v)], v, "r[i] = sum(j) M[i,j]*v[j]",
                   "matrix times vector")
        lib.define(f"smmul{nn}", [("M", m), ("s", s)], m, "C[i,j] = M[i,j]*s", "matrix times scalar")
        lib.define(f"smimul{nn}", [("s", s)], m, "C[i,j] = s*delta(i,j)", "scalar times identity")
        lib.define(f"vadd{n}", [("v", v), ("w", v)], v, "r[i] = v[i] + w[i]", "v+w")
        lib.define(f"vsub{n}", [("v", v), ("w", v)], v, "r[i] = v[i] - w[i]", "v-w")
        lib.define(f"svmul{n}", [("v", v), ("s", s)], v, "r[i] = v[i]*s", "vector times scalar")
        lib.define(f"vdot{n}", [("v", v), ("w", v)], s, "r = sum(i) v[i]*w[i]", "dot product")
        lib.define(f"vvmulabs{n}", [("v", v), ("w", v)], s, "r = abs(sum(i) v[i]*w[i])",
                   "absolute dot product")
        lib.define(f"venorm{n}", [("v", v)], s, "r = sqrt(sum(i) v[i]*v[i])", "Euclidean norm")
        lib.define(f"vouter{n}", [("v", v), ("w", v)], m, "C[i,j] = v[i]*w[j]", "outer product")
    t4, t3, m3, v3 = TensorType((3, 3, 3, 3)), TensorType((3, 3, 3)), _mat(3), VectorType(3)
    lib.define("ttmul411", [("T", t4), ("v", v3)], t3, "R[i,j,k] = sum(l) T[i,j,k,l]*v[l]",
               "contract the last index of a 4-tensor with a vector")
    lib.define("ttmul3212", [("T", t3), ("M", m3)], t3, "R[i,j,k] = sum(l) T[i,j,l]*M[l,k]",
               "contract the last index of a 3-tensor with a matrix")
    lib.define("ttmul311", [("T", t3), ("v", v3)], m3, "R[i,j] = sum(k) T[i,j,k]*v[k]",
               "contract the last index of a 3-tensor with a vector")
    lib.define("sadd", [("a", s), ("b", s)], s, "r = a + b", "a+b")
    lib.define("ssub", [("a", s), ("b", s)], s, "r = a - b", "a-b")
    lib.define("smul", [("a", s), ("b", s)], s, "r = a*b", "a*b")
    lib.define("sdiv", [("a", s), ("b", s)], s, "r = a/b", "a/b")
    lib.define("ssqrt", [("a", s)], s, "r = sqrt(a)", "square root")
    lib.define("sabs", [("a", s)], s, "r = abs(a)", "absolute value")
    lib.define("sneg", [("a", s)], s, "r = -a", "negation")
    lib.define("srcp", [("a", s)], s, "r = rcp(a)", "reciprocal")


_DEFAULT: Library | None = None


def default_library() -> Library:
    """The built-in catalogue plus every library found through `irfuse.library` entry points."""
    global _DEFAULT
    if _DEFAULT is None:
        # Published before the entry points run, so that their checks see this library.
        _DEFAULT = Library()
        _define_catalogue(_DEFAULT)
        from importlib.metadata import entry_points

        for ep in entry_points(group="irfuse.library"):
            ep.load()(_DEFAULT)
    return _DEFAULT


def load_library_file(path: str, lib: Library | None = None) -> Library:
    """Runs ``register(library)`` from a user's Python file against the library."""
    lib = lib or default_library()
    spec = importlib.util.spec_from_file_location(f"irfuse_user_library_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise DefinitionError(f"{path}: cannot load as a Python module")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    register = getattr(module, "register", None)
    if register is None:
        raise DefinitionError(f"{path}: a library file must define register(library)")
    register(lib)
    return lib
