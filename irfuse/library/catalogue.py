"""The library of elementary ops: the built-in catalogue, user libraries, and the registry.

Every op is defined once in index notation (`ops.OpDef`). User ops are added with
`Library.define` from a module loaded through the `irfuse.library` entry point or
`--library FILE.py` (see `load_library_file`). Importing this module installs the
default library as the op registry the dialects verify calls against.
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib.util
import linecache
import os
from collections.abc import Callable, Iterable, Sequence

from irfuse.diagnostics import CompileError, Diagnostic
from irfuse.dialects.access_pattern import AccessPattern, APError
from irfuse.dialects.kas import KasType, MaskType, MatrixType, ScalarType, TensorType, VectorType
from irfuse.dialects.op_registry import install_op_registry
from irfuse.library.implementations import (
    HandImplementation,
    Implementation,
    generated_implementations,
    recommended_elements_per_block,
)
from irfuse.library.entry_points import installed_libraries
from irfuse.library.derivatives import jvp_definition, parse_jvp_name, parse_vjp_name, vjp_definition
from irfuse.library.families import FAMILIES, Family, parse_mangled
from irfuse.library.known_words import known_definition, parse_known_name
from irfuse.library.indexexpr import DefinitionError
from irfuse.library.ops import OpDef


class Library:
    """A registry of ops by name, and the hand-written implementations added to them.

    `checker` runs a hand-written implementation against its op's definition before it
    is accepted; it is handed in by the layer that can compile and run code (the
    library itself compiles nothing): see `set_implementation_checker`.
    """

    def __init__(self, checker: Callable[[Implementation, "Library"], None] | None = None) -> None:
        self.ops: dict[str, OpDef] = {}
        self.hand_implementations: dict[str, list[Implementation]] = {}
        self.checker = checker
        # What the library held when it was published (`mark_base`): what it adds since is what
        # the program cache keys entries by (the built-in catalogue is irfuse's own code).
        self.base_ops: dict[str, OpDef] = {}
        self.base_implementations: set[int] = set()

    def mark_base(self) -> None:
        """Takes what the library holds now as its base (`additions` are what comes after)."""
        self.base_ops = dict(self.ops)
        self.base_implementations = {id(i) for impls in self.hand_implementations.values() for i in impls}

    def additions(self) -> tuple[list[OpDef], list[Implementation]]:
        """The ops defined (or redefined) and hand-written implementations added since `mark_base`."""
        ops = [self.ops[n] for n in sorted(self.ops) if self.base_ops.get(n) is not self.ops[n]]
        impls = [i for n in sorted(self.hand_implementations) for i in self.hand_implementations[n]
                 if id(i) not in self.base_implementations]
        return ops, impls

    def define(self, name: str, operands: Iterable[tuple[str, KasType]], result: KasType,
               definition: str, doc: str = "") -> OpDef:
        if name in self.ops:
            raise DefinitionError(f"op '{name}' is already defined")
        names, types = zip(*operands) if operands else ((), ())
        op = OpDef(name, list(names), list(types), result, definition, doc)
        self.ops[name] = op
        return op

    def implement(self, op_name: str, name: str, bx: int, source: str, operand_aps, result_ap,
                  recommended_by: int | None = None, check: bool = True) -> HandImplementation:
        """Adds a hand-written implementation (KAS style) of an op.

        `source` defines ``FUNC(int tx, int ty, const real_t* in0, ..., real_t* out)``
        and addresses operand k as ``in_k[APINk + ...]`` and the result as
        ``out[APOUT + ...]``; irfuse substitutes the AP start (shared) or 0
        (registers).  APs are `AccessPattern`s or ``(start, block, stride, count[, noreg])``
        tuples.  With `check`, the implementation is run on the CPU against the
        reference first and refused (`DefinitionError`) if it disagrees.
        """
        op = self.ops.get(op_name)
        if op is None:
            raise DefinitionError(f"cannot implement unknown op '{op_name}'")
        if any(i.name == name for i in self.implementations(op)):
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
        impl = HandImplementation(op, name, bx, recommended_by or recommended_elements_per_block(bx),
                                  operand_aps, ap(result_ap), origin="hand-written", source=source)
        if check and self.checker is None:
            raise DefinitionError(f"implementation '{name}' of '{op_name}' cannot be checked: no "
                                  "implementation checker is installed (import irfuse.driver.library)")
        # Registered before the check: the checker compiles a kernel that names it.
        self.hand_implementations.setdefault(op_name, []).append(impl)
        if check:
            try:
                self.checker(impl, self)  # DefinitionError when it disagrees or does not compile
            except BaseException:
                self.hand_implementations[op_name].remove(impl)
                raise
        return impl

    def get(self, name: str) -> OpDef | None:
        """The op called `name`: one defined, or a family's op named by its operand types
        (`mmul_4x3_3x2`), made on first use."""
        op = self.ops.get(name)
        if op is None:
            derived = parse_jvp_name(name)
            if derived is not None:
                return self._derivative(name, *derived)
            reverse = parse_vjp_name(name)
            if reverse is not None:
                return self._reverse_derivative(name, *reverse)
            known = parse_known_name(name)
            if known is not None:
                return self._with_known_words(name, *known)
            parsed = parse_mangled(name)
            if parsed is not None:
                family, params, types = parsed
                try:
                    op = self._instance(family, types, params)
                except DefinitionError:
                    return None
                if op.name != name:
                    return None
        return op

    def resolve(self, name: str, types: Sequence[KasType], params: Sequence[str] = ()) -> OpDef | None:
        """The op a call of `name` on operands of `types` means: the op of that name, or the
        family's op for those types (`families`); None for neither. DefinitionError, saying
        what the family takes, for types it does not take."""
        op = self.ops.get(name) or (self.get(name) if generated_derivative(name) else None)
        if op is not None:
            return op
        family = FAMILIES.get(name)
        return self._instance(family, types, params) if family is not None else None

    def family(self, name: str) -> Family | None:
        return FAMILIES.get(name)

    def _instance(self, family: Family, types: Sequence[KasType], params: Sequence[str]) -> OpDef:
        name, instance = family.instantiate(types, params)
        op = self.ops.get(name)
        if op is None:
            op = self.define(name, list(zip(instance.operand_names, types)), instance.result, instance.definition,
                             f"{family.name}: {instance.doc}")
            self.base_ops[name] = op  # a family's op is irfuse's own, as the built-in catalogue
        return op

    def _derivative(self, name: str, op_name: str, mask: tuple[bool, ...]) -> OpDef | None:
        """The op `jvp_<mask>__<op>` (`derivatives`), defined on first use; None where `<op>` is
        unknown or gives a mask, the mask does not fit it, picks no operand or a mask operand,
        or a function has no derivative."""
        op = self.get(op_name)
        if (op is None or isinstance(op.result_type, MaskType) or len(mask) != len(op.operand_types)
                or not any(mask) or any(m and isinstance(t, MaskType) for m, t in zip(mask, op.operand_types))):
            return None
        try:
            read, extra, definition = jvp_definition(op.operand_names, [t.shape for t in op.operand_types],
                                                     op.result_type.shape, op.trees, mask)
            picked = [t for m, t in zip(mask, op.operand_types) if m]
            operands = [(op.operand_names[k], op.operand_types[k]) for k in read] + list(zip(extra, picked))
        except (DefinitionError, ValueError):
            return None
        return self._define_derived(name, op, operands, op.result_type, definition,
                                    f"forward derivative of {op_name}")

    def _define_derived(self, name: str, op: OpDef, operands, result: KasType, definition: str,
                        doc: str) -> OpDef | None:
        """Defines op `name` derived from `op` (None where its definition does not expand); one
        derived from irfuse's own op is irfuse's own too (not an addition to the base)."""
        try:
            derived = self.define(name, operands, result, definition, doc)
        except (DefinitionError, ValueError):
            return None
        if self.base_ops.get(op.name) is op:
            self.base_ops[name] = derived
        return derived

    def _reverse_derivative(self, name: str, op_name: str, operand: int) -> OpDef | None:
        """The op `vjp_<k>__<op>` (`derivatives`), defined on first use; None where `<op>` is
        unknown or gives a mask, operand k is not one of its operands or is a mask, or a
        function has no derivative."""
        op = self.get(op_name)
        if (op is None or isinstance(op.result_type, MaskType) or not 0 <= operand < len(op.operand_types)
                or isinstance(op.operand_types[operand], MaskType)):
            return None
        try:
            read, cotangent, definition = vjp_definition(op.operand_names, [t.shape for t in op.operand_types],
                                                         op.result_type.shape, op.trees, operand)
            operands = [(op.operand_names[k], op.operand_types[k]) for k in read] + [(cotangent, op.result_type)]
        except (DefinitionError, ValueError):
            return None
        return self._define_derived(name, op, operands, op.operand_types[operand], definition,
                                    f"reverse derivative of {op_name} for operand {operand}")

    def _with_known_words(self, name: str, op_name: str, known: tuple) -> OpDef | None:
        """The op `known_<words>__<op>` (`known_words`), defined on first use; None where
        `<op>` is unknown or gives a mask, has another number of operands, a mask operand's
        words are said known, or the op would read no operand or a word past one."""
        op = self.get(op_name)
        if (op is None or isinstance(op.result_type, MaskType) or len(known) != len(op.operand_types)
                or any(isinstance(t, MaskType) and w for t, w in zip(op.operand_types, known))):
            return None
        try:
            read, definition = known_definition(op.operand_names, [t.shape for t in op.operand_types],
                                                op.result_type.shape, op.trees, known)
        except (DefinitionError, ValueError):
            return None
        operands = [(op.operand_names[k], op.operand_types[k]) for k in read]
        return self._define_derived(name, op, operands, op.result_type, definition,
                                    f"{op_name} with some operand words known")

    def closest(self, name: str, n: int = 3) -> list[str]:
        names = [k for k in self.ops if not generated_name(k)] + list(FAMILIES)
        return difflib.get_close_matches(name, names, n=n, cutoff=0.6)

    def implementations(self, op: OpDef) -> list[Implementation]:
        return generated_implementations(op) + list(self.hand_implementations.get(op.name, []))

    def find_implementation(self, op_name: str, impl_name: str) -> Implementation:
        op = self.get(op_name)
        if op is None:
            raise KeyError(f"unknown op '{op_name}'")
        impls = self.implementations(op)
        for impl in impls:
            if impl.name == impl_name:
                return impl
        names = ", ".join(i.name for i in impls)
        raise KeyError(f"op '{op_name}' has no implementation '{impl_name}' (it has: {names})")

    def __iter__(self):
        return iter(self.ops.values())


def generated_derivative(name: str) -> bool:
    """Whether `name` names an op derived from another's definition: its derivative
    (`jvp_...__op`, `vjp_...__op`) or the op with some words known (`known_...__op`)."""
    return parse_jvp_name(name) is not None or parse_vjp_name(name) is not None or parse_known_name(name) is not None


@functools.lru_cache(maxsize=1 << 16)
def generated_name(name: str) -> bool:
    """Whether `name` names an op made on first use from its name alone: a family's op for
    some operand types, or an op's derivative. (Kept by name: a library's listings ask it of
    every op they hold, thousands in a process that made many programs' derivatives.)"""
    return parse_mangled(name) is not None or generated_derivative(name)


def _mat(n: int) -> MatrixType:
    return MatrixType(n, n)


def define_catalogue(lib: Library) -> None:
    s = ScalarType()
    for n in range(2, 7):
        nn = f"{n}{n}"
        m, v = _mat(n), VectorType(n)
        lib.define(f"madd{nn}", [("A", m), ("B", m)], m, "C[i,j] = A[i,j] + B[i,j]", "A+B")
        lib.define(f"msub{nn}", [("A", m), ("B", m)], m, "C[i,j] = A[i,j] - B[i,j]", "A-B")
        lib.define(f"mneg{nn}", [("A", m)], m, "C[i,j] = -A[i,j]", "-A")
        lib.define(f"mmul{nn}", [("A", m), ("B", m)], m, "C[i,j] = sum(k) A[i,k]*B[k,j]",
                   "matrix product")
        lib.define(f"mtrans{nn}", [("A", m)], m, "C[i,j] = A[j,i]", "transpose")
        lib.define(f"mvmul{nn}", [("M", m), ("v", v)], v, "r[i] = sum(j) M[i,j]*v[j]",
                   "matrix times vector")
        lib.define(f"smmul{nn}", [("M", m), ("s", s)], m, "C[i,j] = M[i,j]*s", "matrix times scalar")
        lib.define(f"smimul{nn}", [("s", s)], m, "C[i,j] = s*delta(i,j)",
                   "scalar times identity (exact zeros off the diagonal, even for a NaN or infinite s)")
        lib.define(f"vadd{n}", [("v", v), ("w", v)], v, "r[i] = v[i] + w[i]", "v+w")
        lib.define(f"vsub{n}", [("v", v), ("w", v)], v, "r[i] = v[i] - w[i]", "v-w")
        lib.define(f"vneg{n}", [("v", v)], v, "r[i] = -v[i]", "-v")
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
_DEFAULT_CHECKER: Callable[[Implementation, Library], None] | None = None


def set_implementation_checker(checker: Callable[[Implementation, Library], None]) -> None:
    """The check every hand-written implementation of the default library passes (the driver
    installs one that compiles and runs it on the CPU)."""
    global _DEFAULT_CHECKER
    _DEFAULT_CHECKER = checker
    if _DEFAULT is not None:
        _DEFAULT.checker = checker


def default_library() -> Library:
    """The built-in catalogue plus every library found through `irfuse.library` entry points."""
    global _DEFAULT
    if _DEFAULT is None:
        # Published before the entry points run, so that their checks see this library.
        _DEFAULT = Library(_DEFAULT_CHECKER)
        define_catalogue(_DEFAULT)

        for ep in installed_libraries():
            with _refusals_named(f"entry point irfuse.library:{ep.name} ({ep.value})"):
                ep.load()(_DEFAULT)
        # The base: the built-in catalogue (irfuse's own code) and the installed entry points'
        # libraries (named, with their versions, in the program cache's keys).
        _DEFAULT.mark_base()
    return _DEFAULT


def load_library_file(path: str, lib: Library | None = None) -> Library:
    """Runs ``register(library)`` from a user's Python file against the library; anything the
    file gets wrong is a `CompileError` naming the file (and its line where Python knows it)."""
    lib = lib or default_library()
    if not os.path.isfile(path):
        raise CompileError(Diagnostic("cannot load the op library: no such file", path))
    spec = importlib.util.spec_from_file_location(f"irfuse_user_library_{abs(hash(path))}", path)
    if spec is None or spec.loader is None:
        raise CompileError(Diagnostic("cannot load as a Python module", path))
    module = importlib.util.module_from_spec(spec)
    with _refusals_named(path):
        spec.loader.exec_module(module)
        register = getattr(module, "register", None)
        if register is None:
            raise DefinitionError("a library file must define register(library)")
        register(lib)
    return lib


@contextlib.contextmanager
def _refusals_named(origin: str):
    """Op-library refusals (and the file's own errors) as diagnostics naming where they came from."""
    try:
        yield
    except (DefinitionError, APError) as e:
        line, col = _user_line(e, origin)
        raise CompileError(Diagnostic(f"op library refused: {e}", origin, line, col,
                                      source_line=linecache.getline(origin, line) or None if line else None)) from None
    except SyntaxError as e:
        raise CompileError(Diagnostic(f"invalid Python: {e.msg}", origin, e.lineno or 0, e.offset or 0)) from None
    except Exception as e:  # noqa: BLE001 -- the user's code may raise anything: named, not a traceback
        raise CompileError(Diagnostic(f"the op library raised {type(e).__name__}: {e}", origin,
                                      *_user_line(e, origin))) from None


def _user_line(e: BaseException, origin: str) -> tuple[int, int]:
    """The line of `origin` (a file) that the refusal is about: the line of hand-written code
    it names (`user_line`, found in the file's text), else the line where the exception
    passed, innermost first, else none."""
    wanted = getattr(e, "user_line", None)
    if wanted and wanted.strip():
        try:
            with open(origin) as f:
                for number, line in enumerate(f, 1):
                    if line.rstrip("\n").strip() == wanted.strip():
                        return number, len(line) - len(line.lstrip()) + 1
        except OSError:
            pass
    tb = e.__traceback__
    line = 0
    while tb is not None:
        if os.path.abspath(tb.tb_frame.f_code.co_filename) == os.path.abspath(origin):
            line = tb.tb_lineno
        tb = tb.tb_next
    return (line, 1) if line else (0, 0)


def implementations(op: OpDef, library: Library | None = None) -> list[Implementation]:
    return (library or default_library()).implementations(op)


def find_implementation(op_name: str, impl_name: str, library: Library | None = None) -> Implementation:
    """The implementation, or KeyError naming what exists."""
    return (library or default_library()).find_implementation(op_name, impl_name)


class _DefaultLibraryRegistry:
    """The default library as the op registry the dialects verify calls against."""

    def lookup_op(self, name: str) -> OpDef | None:
        return default_library().get(name)

    def closest_ops(self, name: str) -> list[str]:
        return default_library().closest(name)

    def lookup_implementation(self, op_name: str, impl_name: str) -> Implementation:
        return default_library().find_implementation(op_name, impl_name)


install_op_registry(_DefaultLibraryRegistry())
