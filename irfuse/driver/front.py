"""A program's `kas` module as the compiler starts from it.

`frontend` gives the source's module: the frontend's (KAS or Python), or the module given
(a module object, or the IR of an `.mlir` file: `kas_module`, its errors at their lines),
with the source's `derivative` lines applied in order, each as the pass that computes it
(`kas-jvp`, `kas-vjp`), its refusals at the line. `derivative` gives the module of a
derivative of a source (`irfuse.jvp`, `vjp`, `grad`).
"""

from __future__ import annotations

from xdsl.context import Context
from xdsl.dialects.builtin import ModuleOp

from irfuse.artifact.records import record
from irfuse.diagnostics import CompileError, Diagnostic, UsageError, located
from irfuse.dialects import kas
from irfuse.dialects.context import module_text, parse_module
from irfuse.dialects.kas import IndexType, MaskType, is_uniform, program_of
from irfuse.driver import library  # noqa: F401 -- installs the implementation check
from irfuse.driver.sources import LOWERED_ADVICE, Source, first_lowered_op, read_source
from irfuse.frontend.irgen import FrontendResult, compile_source
from irfuse.frontend.python import compile_function, wrt_names
from irfuse.frontend.syntax import DEFAULT_PREFIX
from irfuse.passes.kas_jacobian import KasJacobian
from irfuse.passes.kas_jvp import KasJvp
from irfuse.passes.kas_vjp import KasVjp
from irfuse.transforms.dead_code import drop_outputs


def frontend(source: Source) -> FrontendResult:
    """The source's module with its `derivative` lines applied (a fresh module each call; a
    function's first call takes the frontend result its key was read from)."""
    if source.given_module:
        return FrontendResult(kas_module(source.text, source.name))
    if source.function is not None:
        result, source.front = (source.front, None) if source.front is not None else (
            compile_function(source.function), None)  # (the passes consume the IR: used once)
        return with_derivatives(result)  # type: ignore[arg-type]
    return with_derivatives(compile_source(source.text, source.name))


def kas_module(text: str, name: str) -> ModuleOp:
    """The kas program of IR text (an `.mlir` file's, or a module's printed), each op at its
    line (`LocatingParser`): a parse error, an op its verifier refuses, IR without a
    `kas.program` or lowered already, each a `CompileError` naming the file, line and column."""
    from xdsl.utils.exceptions import ParseError, VerifyException

    from irfuse.dialects.located import location_of

    if not text.strip():
        raise CompileError(Diagnostic("the file is empty: a program to compile is a builtin.module holding one "
                                      "kas.program", name))
    try:
        module = parse_module(text, name)
    except ParseError as e:
        where = e.span.get_location()
        raise CompileError(_at(e.msg, name, text, where.line, where.col)) from None
    except VerifyException as e:  # (a type or attribute refused as it was parsed: located by the parser)
        where = location_of(e)
        raise CompileError(Diagnostic(str(e), name) if where is None else _at(
            str(e), name, text, where.line.data, where.column.data)) from None  # type: ignore[attr-defined]
    try:
        module.verify()
    except (ValueError, VerifyException) as e:
        raise CompileError(located(str(e), location_of(e)) if location_of(e) is not None
                           else Diagnostic(str(e), name)) from None
    programs = [op for op in module.walk() if isinstance(op, kas.ProgramOp)]
    if len(programs) != 1:
        raise CompileError(Diagnostic(f"the IR holds {len(programs)} kas.program ops; a program to compile "
                                      "is a builtin.module holding one", name))
    lowered = first_lowered_op(module)
    if lowered is not None:
        raise CompileError(located(f"the IR is lowered already (it holds {lowered.name}); {LOWERED_ADVICE}",
                                   lowered.location))
    return module


def _at(message: str, name: str, text: str, line: int, col: int) -> Diagnostic:
    """A diagnostic at `line`, `col` of IR text `name`, with that line of the text."""
    lines = text.splitlines()
    return Diagnostic(message, name, line, col, source_line=lines[line - 1] if 0 < line <= len(lines) else None)


def with_derivatives(result: FrontendResult) -> FrontendResult:
    """The frontend's module with its `derivative` lines applied in order, each the pass that
    computes it on the program the lines before it gave; a line naming no input or output of
    that program, or refused by the pass, is an error at the line."""
    module = result.module
    for d in result.derivatives:
        program = program_of(module)
        errors = []
        for n in d.wrt:
            if n.text not in program.inputs:
                errors.append(result.source.diag(n.pos.line, n.pos.col,  # type: ignore[union-attr]
                                                 f"'{n.text}' is not an input of the program to differentiate",
                                                 notes=[f"its inputs: {', '.join(program.inputs)}"]))
        if d.of is not None and d.of.text not in program.outputs:
            errors.append(result.source.diag(d.of.pos.line, d.of.pos.col,  # type: ignore[union-attr]
                                             f"'{d.of.text}' is not an output of the program to differentiate",
                                             notes=[f"its outputs: {', '.join(program.outputs)}"]))
        if errors:
            raise CompileError(errors)
        mode, wrt = d.mode.text, tuple(n.text for n in d.wrt)
        prefix = d.prefix.text if d.prefix else DEFAULT_PREFIX[mode]
        try:
            for line in derivative_passes(mode, wrt, d.of.text if d.of else None, prefix,
                                          d.loops.text if d.loops else "auto", f"derivative {mode}"):
                line.apply(Context(), module)
        except UsageError as e:
            raise CompileError([result.source.diag(d.pos.line, d.pos.col, x.message, notes=x.notes)  # type: ignore
                                for x in e.diagnostics]) from None
    return FrontendResult(module, result.warnings)


def derivative_passes(mode: str, wrt: tuple[str, ...], of: str | None, prefix: str | None, loops: str,
                      who: str) -> list:
    """The passes that make a derivative: `mode` "jvp", "vjp" (with `of`: the gradient of it),
    "grad", "jacobian" (of output `of`), or "hessian" (of uniform scalar `of` by one input x:
    its gradient `grad_x`, then the Jacobian of that, named `<prefix>2<of>_<prefix><x>2`);
    `prefix` None: the mode's own (`DEFAULT_PREFIX`)."""
    if prefix == "":  # (not the default in disguise: a name of its own, which "" is not)
        raise UsageError(f"{who}: the derivatives' prefix is empty, so each would have its value's name; give one "
                         f"(the default: '{DEFAULT_PREFIX['grad' if mode == 'vjp' and of else mode]}')")
    if mode == "jvp":
        return [KasJvp(wrt=wrt, prefix=prefix or "d", who=who)]
    if mode == "jacobian":
        return [KasJacobian(of=of or "", wrt=wrt, prefix=prefix or DEFAULT_PREFIX[mode], who=who)]
    if mode == "hessian":
        prefix = prefix or DEFAULT_PREFIX[mode]
        if len(wrt) != 1:
            raise UsageError(f"{who}: a Hessian is by one input, not {len(wrt)} ({', '.join(wrt)})")
        x = wrt[0]
        return [KasVjp(wrt=wrt, of=of or "", prefix="grad_", loops=loops, who=who),
                KasJacobian(of=f"grad_{x}", wrt=wrt, prefix=prefix, names=(f"{prefix}2{of}_{prefix}{x}2",), who=who)]
    return [KasVjp(wrt=wrt, of=of or "", prefix=prefix or "", loops=loops, who=who)]


def element_jacobian(source, of: str, wrt: str, who: str, constants: tuple = ()) -> tuple[ModuleOp, dict, str, str]:
    """(a module of the per-element Jacobian of a mesh program's part between its gathers and
    the scatter that makes output `of` (`transforms.element_blocks`), by the gathered rows of
    nodal input `wrt`; the gathered inputs: name -> (nodal input, connectivity input); the
    scatter's connectivity input; the blocks' output name). `constants`: the uniform inputs the
    program was compiled with fixed (`options.constant_numbers`), fixed in the Jacobian too
    (`_fixed`), so that it is compiled without them."""
    from irfuse.library.catalogue import default_library
    from irfuse.transforms.element_blocks import element_jacobian_program

    jac, gathered, conn, out = element_jacobian_program(_program(source, who), of, wrt, default_library(), who)
    return ModuleOp([_fixed(jac, constants)]), gathered, conn, out


def element_rows(source, of: str, wrt: str, who: str, constants: tuple = ()) -> tuple | None:
    """(the vector-Jacobian product of a mesh program's element part, its cotangent input,
    its output: `transforms.element_blocks.element_rows_program`), from which the GPU's
    owner-computes assembly computes a node's block rows; None where it cannot be made
    (the per-element Jacobian then serves there too). `constants`: as for `element_jacobian`."""
    from irfuse.library.catalogue import default_library
    from irfuse.transforms.element_blocks import element_rows_program

    made = element_rows_program(_program(source, who), of, wrt, default_library(), who)
    if made is not None:
        _fixed(made[0], constants)
    return made


def element_diagonal(source, of: str, wrt: str, who: str, constants: tuple = ()) -> tuple[ModuleOp, str]:
    """(a module of the program over the mesh of a mesh program's tangent diagonal d of / d
    wrt where no element names a node twice (`transforms.element_blocks.element_diagonal_program`:
    its gathers, each element block's diagonal, its scatter); its output's name).
    `constants`: as for `element_jacobian`."""
    from irfuse.library.catalogue import default_library
    from irfuse.transforms.element_blocks import element_diagonal_program

    program, out = element_diagonal_program(_program(source, who), of, wrt, default_library(), who)
    return ModuleOp([_fixed(program, constants)]), out


def _fixed(program, constants: tuple):
    """`program`, an element program derived from a program's source, with `constants` (the
    uniform inputs that program was compiled with fixed) fixed in it as `irfuse.compile` fixes
    them (`transforms.constant_inputs`): those of them it takes (its element part may not read
    them all). The owner-computes kernel is built from these programs, not compiled from the
    source, so it reads the numbers the program's kernels read and takes the arrays its calls
    pass."""
    from irfuse.transforms.constant_inputs import fix_inputs

    fix_inputs(program, [c for c in constants if c[0] in program.inputs])
    return program


def _program(source, who: str):
    """The `kas.program` of `source` (a path or KAS text), through the frontend."""
    return program_of(frontend(read_source(source, None, who)).module)


def search_budget(budget: int) -> str:
    """The default pipeline with the fusion search stopped after `budget` analysed
    configurations: for generated programs whose plan is found among the first (a whole
    phase is analysed first), such as a tangent's assembly; the search's note that it
    stopped is not printed (the caller of the API did not write the program)."""
    from irfuse.passes.registry import DEFAULT_PIPELINE

    return DEFAULT_PIPELINE.replace("fuse-partition", f"fuse-partition{{budget={int(budget)} notes=false}}", 1)


def element_assembly(source, of: str, wrt: str, who: str, constants: tuple = ()) -> tuple[ModuleOp, dict, str]:
    """(a module of `element_jacobian`'s program whose blocks are added by a scatter through
    an index input `pairs` into the nodal output `values`, a sparse matrix's values
    (`transforms.element_blocks.assembly_program`); the gathered inputs; the connectivity).
    `constants`: as for `element_jacobian`."""
    from irfuse.library.catalogue import default_library
    from irfuse.transforms.element_blocks import assembly_program

    module, gathered, conn, out = element_jacobian(source, of, wrt, who, constants)
    return ModuleOp([assembly_program(program_of(module), out, default_library(), who)]), gathered, conn


def derivative(source, mode: str, wrt, filename: str | None, who: str, of: str | None = None,
               prefix: str | None = None, loops: str = "auto", with_outputs: bool = True) -> ModuleOp:
    """A fresh module of what `irfuse.compile` takes, its program replaced by its derivative
    (`derivative_passes`), without the original program's outputs unless `with_outputs`."""
    names = wrt_names(wrt)
    if names is None or not all(isinstance(n, str) for n in names):
        raise UsageError(f"{who}: wrt takes an input's name or a list of names, not {wrt!r}")
    if not isinstance(with_outputs, bool):
        raise UsageError(f"{who}: with_outputs is True or False, not {with_outputs!r}")
    if prefix is not None and not isinstance(prefix, str):
        raise UsageError(f"{who}: prefix takes a string (the derivatives' names begin with it), not {prefix!r}")
    module = frontend(read_source(source, filename, who)).module
    outputs = tuple(program_of(module).outputs)
    if mode == "hessian" and len(names) == 1 and names[0] in program_of(module).uniform:
        raise UsageError(f"{who}: '{names[0]}' is uniform (one value for the whole batch); a per-element Hessian "
                         "is by a per-element input")
    for line in derivative_passes(mode, names, of, prefix, loops, who):
        line.apply(Context(), module)
    if not with_outputs:
        drop_outputs(program_of(module), outputs)
        module.verify()
    return module


@record(frozen=True)
class ProgramInterface:
    """What a program takes and gives, as plain data: its module's text, names, value shapes,
    and which inputs and outputs are nodal, connectivities, uniform or masks."""

    text: str
    name: str
    inputs: tuple[str, ...]
    outputs: tuple[str, ...]
    shapes: dict
    nodal: frozenset[str]
    index: frozenset[str]
    uniform: frozenset[str]
    masks: frozenset[str]


def interface_of(module: ModuleOp) -> ProgramInterface:
    """The `ProgramInterface` of a module's program."""
    program = program_of(module)
    args, values = program.body.block.args, program.return_op.values
    inputs, outputs = tuple(program.inputs), tuple(program.outputs)
    shapes = {name: tuple(a.type.shape) for name, a in zip(inputs, args)}
    shapes.update({name: tuple(v.type.shape) for name, v in zip(outputs, values)})
    nodal = frozenset(program.nodal)
    uniform_args = [a for n, a in zip(inputs, args) if n in program.uniform]
    uniform = frozenset(program.uniform) | frozenset(
        n for n, v in zip(outputs, values) if n not in nodal and is_uniform(v, uniform_args))
    masks = frozenset(n for n, a in zip(inputs, args) if isinstance(a.type, MaskType)) | frozenset(
        n for n, v in zip(outputs, values) if isinstance(v.type, MaskType))
    return ProgramInterface(module_text(module), program.sym_name.data, inputs, outputs, shapes, nodal,
                            frozenset(n for n, a in zip(inputs, args) if isinstance(a.type, IndexType)), uniform, masks)


def module_of(source, filename: str | None = None) -> ModuleOp:
    """The module of what `irfuse.compile` takes, its `derivative` lines applied (a fresh one)."""
    return frontend(read_source(source, filename)).module
