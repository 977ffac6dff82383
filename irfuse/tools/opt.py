"""`irfuse-opt`: xDSL's optimizer driver with the KAS frontend and irfuse's passes.

Extends `xDSLOptMain`: `.kas` files go through the KAS frontend, `.mlir`
through xDSL's parser, each op located at its line (`dialects.context.LocatingParser`);
`--pass-pipeline` takes MLIR's `builtin.module(a,b{opt=1})` syntax as well as `-p a,b`; `--print-ir-*`
print the IR around passes; `--list-passes` prints the pass registry.
"""

from __future__ import annotations

import argparse
import dataclasses
import io
import re
import sys
from typing import IO

from xdsl.dialects.builtin import ModuleOp
from xdsl.passes import ModulePass, PassPipeline, get_pass_option_infos
from xdsl.printer import Printer
from xdsl.utils.exceptions import ArgSpecParseError, DiagnosticException, ParseError
from xdsl.xdsl_opt_main import xDSLOptMain

import irfuse.universe  # noqa: F401 -- the dialects, passes and target, the op library and its checker
from irfuse._version import __version__
from irfuse.artifact.user_files import check_readable
from irfuse.diagnostics import CompileError, IrfuseError, located, print_diagnostics
from irfuse.dialects.context import LocatingParser
from irfuse.dialects.element_types import ELEMENT_TYPES, element_type, set_module_element_type
from irfuse.dialects.layouts import LAYOUTS, set_module_layout
from irfuse.dialects.located import location_of
from irfuse.driver.front import frontend
from irfuse.driver.sources import Source
from irfuse.library.catalogue import load_library_file
from irfuse.passes.registry import NAMED_PIPELINES, PASSES, expand_named_pipelines, strip_module_anchor


class IrfuseOptMain(xDSLOptMain):
    version_format = f"irfuse-opt {__version__} (irfuse's passes and dialects on xDSL {{xdsl_version}})"

    def __init__(self, args=None):
        super().__init__(description="irfuse-opt: irfuse's KAS frontend, dialects and passes on xDSL's "
                                     "optimizer driver (irfuse-opt --list-passes lists irfuse's passes)",
                         args=args)
    def register_all_arguments(self, arg_parser: argparse.ArgumentParser) -> None:
        super().register_all_arguments(arg_parser)
        # xDSL's help for -p lists its hundred-odd upstream passes after irfuse's: say irfuse's,
        # and where the others are.
        for action in arg_parser._actions:
            if "-p" in action.option_strings:
                action.help = (f"comma-separated passes: irfuse's are {', '.join(p.name for p in PASSES)} "
                               "(--list-passes describes them and their options); xDSL's own passes are "
                               "accepted too (--list-passes --upstream names them)")
        arg_parser.add_argument(
            "--pass-pipeline", default=None,
            help="pass pipeline in MLIR syntax, e.g. 'builtin.module(kas-dce,fuse-each)'")
        arg_parser.add_argument("--print-ir-after-all", action="store_true",
                                help="print the IR after every pass")
        arg_parser.add_argument("--print-ir-before", action="append", default=[], metavar="PASS",
                                help="print the IR before the named pass (repeatable)")
        arg_parser.add_argument("--print-ir-after", action="append", default=[], metavar="PASS",
                                help="print the IR after the named pass (repeatable)")
        arg_parser.add_argument("--list-passes", action="store_true",
                                help="list every irfuse pass with its description and options")
        arg_parser.add_argument("--upstream", action="store_true",
                                help="with --list-passes: list xDSL's own passes instead")
        arg_parser.add_argument("--library", action="append", default=[], metavar="FILE.py",
                                help="load user-defined ops from a Python file (repeatable)")
        arg_parser.add_argument("--dtype", choices=list(ELEMENT_TYPES), default=None,
                                help="element type of a KAS input (the module attribute kas.element_type; "
                                     "default f32)")
        arg_parser.add_argument("--layout", choices=list(LAYOUTS), default=None,
                                help="layout of a KAS input's global arrays (the module attribute kas.layout: "
                                     "aos, (N, *shape), the default; soa, (*shape, N))")

    def register_all_frontends(self) -> None:
        super().register_all_frontends()

        def parse_kas(io: IO[bytes]) -> ModuleOp:
            name = self.get_input_name()
            try:
                text = io.read().decode("utf-8")
            except UnicodeDecodeError as e:
                raise CompileError(f"{name}: file is not valid UTF-8 ({e.reason} at byte {e.start})")
            # Blank lines keep line numbers of a --split-input-file chunk right.
            result = frontend(Source("\n" * getattr(self, "_chunk_offset", 0) + text, name))
            print_diagnostics(result.warnings)
            if self.args.dtype:
                set_module_element_type(result.module, element_type(self.args.dtype))
            if self.args.layout:
                set_module_layout(result.module, self.args.layout)
            return result.module

        self.available_frontends["kas"] = parse_kas

        def parse_mlir(io: IO[bytes]) -> ModuleOp:
            # (each op located at its line, so that a verifier's or a pass's error names it)
            data = io.read()
            text = data.decode("utf-8") if isinstance(data, bytes) else data
            return LocatingParser(self.ctx, text, self.get_input_name(), getattr(self, "_chunk_offset", 0)
                                  ).parse_module(not self.args.no_implicit_module)

        self.available_frontends["mlir"] = parse_mlir

    def get_input_stream(self) -> tuple[IO[bytes], str]:
        """As xDSL's, and `-` (or no file) is standard input, whose language is told from its
        text when `-f` does not say: KAS starts with a declaration or `input`, IR does not."""
        if self.args.input_file not in (None, "-"):
            # (a device such as /dev/zero would be read to its end: the file is checked here
            # with the limits of every file a user names, `artifact.user_files`)
            check_readable(self.args.input_file)
            return super().get_input_stream()
        self.args.input_file = None
        data = sys.stdin.buffer.read()
        return io.BytesIO(data), "kas" if looks_like_kas(data) else "mlir"

    def get_input_name(self) -> str:
        return self.args.input_file or "<stdin>"

    def run(self) -> None:
        """As xDSL's driver, except that with `--split-input-file` a chunk that fails is reported
        and the next chunks still run, as mlir-opt does; the exit status says one failed."""
        if not self.args.split_input_file or self.args.verify_diagnostics or self.args.parsing_diagnostics:
            return super().run()
        chunks, file_extension = self.prepare_input()
        output_stream = self.prepare_output()
        failed = 0
        try:
            for i, (chunk, offset) in enumerate(chunks):
                try:
                    if i > 0:
                        output_stream.write("// -----\n")
                    module = self.parse_chunk(chunk, file_extension, offset)
                    if module is not None:
                        self.apply_passes(module)
                        output_stream.write(self.output_resulting_program(module))
                    output_stream.flush()
                except ParseError as e:
                    e.span = dataclasses.replace(e.span, line_offset=offset)
                    failed += 1
                    report(e, self.get_input_name())
                except (IrfuseError, DiagnosticException, ValueError, OSError) as e:
                    failed += 1
                    report(e, self.get_input_name())
                finally:
                    chunk.close()
        finally:
            if output_stream is not sys.stdout:
                output_stream.close()
        if failed:
            raise ChunksFailed(failed)

    def apply_passes(self, prog: ModuleOp) -> None:
        """xDSL's, with `--verify-diagnostics` an irfuse error handed to xDSL's driver as its
        own kind (`IrfuseError` is not an xDSL exception: `irfuse.diagnostics`), which prints
        it and goes on to the next chunk."""
        try:
            super().apply_passes(prog)
        except IrfuseError as e:
            if self.args.verify_diagnostics:
                raise DiagnosticException(str(e)) from e
            raise

    def parse_chunk(self, chunk: IO[bytes], file_extension: str, start_offset: int = 0) -> ModuleOp | None:
        self._chunk_offset = start_offset
        try:
            return super().parse_chunk(chunk, file_extension, start_offset)
        except CompileError as e:
            if self.args.verify_diagnostics or self.args.parsing_diagnostics:
                print_diagnostics(e.diagnostics, sys.stdout)
                return None
            raise

    def setup_pipeline(self) -> None:
        for path in self.args.library:
            load_library_file(path)
        if self.args.pass_pipeline is not None:
            if self.args.passes:
                raise CompileError("use either -p/--passes or --pass-pipeline, not both")
            self.args.passes = strip_module_anchor(self.args.pass_pipeline)
        if self.args.passes:
            self.args.passes = expand_named_pipelines(self.args.passes)
        super().setup_pipeline()
        outer = self.pipeline.callback
        before = set(self.args.print_ir_before)
        after = set(self.args.print_ir_after)
        every = self.args.print_ir_after_all
        known = {p.name for p in self.pipeline.passes}
        for name in before | after:
            if name not in known:
                raise CompileError(f"--print-ir-before/after names '{name}', which is not in the pipeline")

        def dump(title: str, module: ModuleOp) -> None:
            # On stderr, as mlir-opt does: the result on stdout stays the pipeline's output.
            print(f"// -----// IR Dump {title} //----- //", file=sys.stderr)
            Printer(stream=sys.stderr).print_op(module)
            print("\n", file=sys.stderr)

        def callback(prev: ModulePass | None, module: ModuleOp, nxt: ModulePass | None) -> None:
            if outer is not None:
                outer(prev, module, nxt)
            if prev is not None and (every or prev.name in after):
                dump(f"After {prev.name}", module)
            if nxt is not None and nxt.name in before:
                dump(f"Before {nxt.name}", module)

        self.pipeline = PassPipeline(self.pipeline.passes, callback)


def list_passes(stream=None, upstream: bool = False) -> None:
    stream = stream or sys.stdout
    if upstream:
        from xdsl.universe import Universe

        ours = {info.name for info in PASSES}
        names = sorted(set(Universe.get_multiverse().all_passes) - ours)
        print(f"xDSL's own passes ({len(names)}), accepted by -p after irfuse's:", file=stream)
        for name in names:
            print(f"  {name}", file=stream)
        return
    for name, passes in NAMED_PIPELINES.items():
        print(f"{name}: the pipeline {passes}", file=stream)
    for info in PASSES:
        print(f"{info.name}: {info.summary}", file=stream)
        cls = info.cls
        if dataclasses.is_dataclass(cls):
            for opt in get_pass_option_infos(cls):
                default = f" (default {opt.default_value})" if opt.default_value is not None else ""
                doc = _option_doc(cls, opt.name)
                print(f"    {opt.name.replace('_', '-')}: {opt.expected_type.strip(chr(39))}{default}"
                      + (f" -- {doc}" if doc else ""), file=stream)


def _option_doc(cls: type, field_name: str) -> str:
    docs = getattr(cls, "OPTION_DOCS", {})
    return docs.get(field_name, "")


_KAS_START = re.compile(rb"(?:\s|//[^\n]*\n|/\*.*?\*/)*(?:scalar|vector\w*|matrix\w*|tensor\w*|input)\b",
                        re.IGNORECASE | re.DOTALL)


def looks_like_kas(data: bytes) -> bool:
    """Whether text is KAS source: after comments, a declaration or `input` comes first."""
    return _KAS_START.match(data) is not None


class ChunksFailed(Exception):
    """Some chunks of a --split-input-file run failed (each was reported as it failed)."""


def report(e: BaseException, input_name: str) -> None:
    """One error of irfuse-opt, on stderr, naming the input where the error does not."""
    if isinstance(e, IrfuseError):
        for d in e.diagnostics:
            d.file = d.file or input_name  # a pass's error is about the input it ran on
        print_diagnostics(e.diagnostics)
    elif isinstance(e, ParseError):
        print(str(e), file=sys.stderr)
    elif isinstance(e, DiagnosticException):
        where = location_of(e)
        if where is None:
            print(f"{input_name}: error: {e}", file=sys.stderr)
        else:  # the failing op's source location, with its line
            print_diagnostics([located(str(e), where)])
    else:
        print(f"irfuse-opt: error: {e}", file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if "--list-passes" in argv:
        try:
            list_passes(upstream="--upstream" in argv)
        except BrokenPipeError:  # `| head`: the reader has what it wanted
            sys.stderr.close()
        return 0
    try:
        opt = IrfuseOptMain(args=argv)
        opt.run()
    except ChunksFailed:
        return 1
    except ArgSpecParseError as e:  # not an Exception: xDSL derives it from BaseException
        report(e, _input_name(argv))
        return 1
    except (IrfuseError, DiagnosticException, ParseError, ValueError, OSError) as e:
        report(e, _input_name(argv))
        return 1
    return 0


def _input_name(argv: list[str]) -> str:
    files = [a for a in argv if not a.startswith("-") and (a.endswith(".kas") or a.endswith(".mlir"))]
    return files[0] if files else "<stdin>"


if __name__ == "__main__":
    sys.exit(main())
