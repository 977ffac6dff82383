"""Lexer and parser of the KAS language, producing a positioned syntax tree.

    program     := { declaration } "input" names ";" { statement } "return" names ";" { derivative }
    derivative  := "derivative" ( "jvp" | "vjp" | ( "grad" | "jacobian" | "hessian" ) "of" IDENT ) "wrt" names
                   [ "prefix" IDENT ] ";"
    declaration := [ "uniform" | "nodal" ] TYPE declared { "," declared } ";"
    declared    := IDENT [ "[" INT "]" ]          (an array of INT values of TYPE)
    TYPE        := scalar | mask | vectorN | matrixNxM | tensorNxMxK[xL] | indexK   (case-insensitive)
    statement   := place "=" OPNAME "(" [ operands ] ")" ";"
                 | "loop" [ IDENT ] INT "{" { statement } "}"
                 | "if" "(" condition ")" "{" { statement } "}" [ "else" "{" { statement } "}" ]
    place       := IDENT [ "[" ( IDENT | INT ) "]" ]   (an array's entry at a loop's index, or a number)
    condition   := operand [ ( "<" | "<=" | ">" | ">=" | "==" | "!=" ) operand ]
    operands    := operand { "," operand }
    operand     := place | [ "-" ] NUMBER | STRING
    NUMBER      := digits [ "." [ digits ] ] [ EXPONENT ] | "." digits [ EXPONENT ]
    EXPONENT    := ( "e" | "E" ) [ "+" | "-" ] digits
    names       := IDENT { "," IDENT }

`uniform` declares variables that hold one value for the whole batch; a NUMBER is a
uniform scalar; `sum`, `max` and `min` of one per-element operand are reductions over the
batch (see `irfuse.frontend.irgen`). An array `T x[N]` is a value of N entries of type T (the
type with a first axis of N: `scalar e[8]` is a vector8); inside `loop q N { ... }` its entry
`x[q]` is read and assigned (the loop runs unrolled, `q` taking 0..N-1). A STRING is a
double-quoted text (`contract("ik,kj->ij", A, B)`). `if` runs both branches and keeps, for
each variable either assigns, the value of the branch its condition picks, element by
element (`select`).

Meshes: `nodal` declares variables that hold one value per node of a mesh (inputs that
`gather(X, conn)` reads, outputs that `scatter(fe, conn)` makes); `indexK` declares a
connectivity, an input giving each element's K node numbers.

Derivatives: `derivative jvp wrt F, mu;` after the return list makes the program its forward
derivative (`transforms.forward_mode`): it takes tangents `dF`, `dmu` after the inputs and
returns the outputs' tangents after them (`prefix p` names them `pF`, ...); `derivative vjp
wrt F;` its reverse derivative (`transforms.reverse_mode`: cotangents `bar_<output>` in,
`bar_F` out), `derivative grad of E wrt F;` the gradient of the uniform scalar output E
(`grad_F` out); several apply in order (`derivative grad of E wrt F; derivative jvp wrt F;`:
a Hessian-vector product).

Comments are ``// ...`` and ``/* ... */``.  Errors raise `CompileError`
with the file, line and column of the offending token.
"""

from __future__ import annotations

import math
import re
from dataclasses import field

from irfuse.artifact.records import record
from irfuse.diagnostics import CompileError, SourceFile
from irfuse.dialects.kas import MAX_DIM  # noqa: F401 -- (the frontends' limit, defined with the types)

KEYWORDS = {"input", "return", "loop", "uniform", "nodal", "if", "else"}
COMPARISONS = {"<": "lt", "<=": "le", ">": "gt", ">=": "ge", "==": "eq", "!=": "ne"}
MAX_VALUE_WORDS = 4096  # words of one value at most (every op's code is unrolled over them)
MAX_TRIP_COUNT = 1_000_000
MAX_LOOP_DEPTH = 32  # loops inside loops; deeper nests would exhaust the IR tools' recursion


@record(frozen=True)
class Pos:
    line: int
    col: int


@record(frozen=True)
class Token:
    kind: str  # "ident", "int", "number" (a decimal or an exponent), "punct", "string", "eof"
    text: str
    pos: Pos


@record
class Name:
    text: str
    pos: Pos


@record
class Number:
    """A numeric literal operand, as written (sign included)."""

    text: str
    value: float
    pos: Pos


@record
class Text:
    """A string operand (a contraction's index expression)."""

    text: str
    pos: Pos


@record
class Index:
    """Entry `index` (a loop's index variable, or a number) of the array `name`."""

    name: Name
    index: "Name | Number"

    @property
    def pos(self) -> Pos:
        return self.name.pos

    @property
    def text(self) -> str:
        return self.name.text


@record
class Declaration:
    type_text: str
    shape: tuple[int, ...]
    names: list[Name]
    pos: Pos
    uniform: bool = False
    lengths: dict[str, int] = field(default_factory=dict)  # arrays: name -> entries
    nodal: bool = False


COPY = "="  # the op name of a copy statement `x = y;`


@record
class Call:
    target: Name | Index
    op: Name
    args: list[Name | Number | Index | Text]
    pos: Pos


@record
class Loop:
    count: int
    body: list["Statement"]
    pos: Pos
    index: Name | None = None  # `loop q N`: the index variable its body reads arrays at


@record
class CallExpr:
    """An op's call inside a condition (`gt(f, 0)`, `not(and(m, n))`): its operands names,
    numbers, entries or calls again."""

    op: Name
    args: list["Name | Number | Index | CallExpr"]
    pos: Pos

    @property
    def text(self) -> str:
        return f"{self.op.text}({', '.join(a.text for a in self.args)})"


@record
class Condition:
    """`a`, a mask (a mask variable, or a call giving one: `gt(f, 0)`, `not(m)`); or `a OP
    b`, a comparison (`OP` one of `COMPARISONS`) of values or calls."""

    lhs: Name | Number | Index | CallExpr
    op: str | None = None
    rhs: Name | Number | Index | CallExpr | None = None
    pos: Pos = field(default_factory=lambda: Pos(1, 1))


@record
class If:
    condition: Condition
    then: list["Statement"]
    orelse: list["Statement"]
    pos: Pos


Statement = Call | Loop | If


DERIVATIVE_MODES = {"jvp": "forward mode: the outputs' tangents along the inputs named",
                    "vjp": "reverse mode: the cotangents of the inputs named, for cotangents of the outputs",
                    "grad": "the gradient of one uniform scalar output (`grad of E wrt ...`)",
                    "jacobian": "the per-element Jacobian of one output (`jacobian of y wrt x`)",
                    "hessian": "the per-element Hessian of one uniform scalar output (`hessian of E wrt x`)"}
DEFAULT_PREFIX = {"jvp": "d", "vjp": "bar_", "grad": "grad_", "jacobian": "d", "hessian": "d"}
MODES_WITH_OF = ("grad", "jacobian", "hessian")


@record
class Derivative:
    """`derivative MODE [of E] wrt NAMES [prefix P] [loops L];`: the program replaced by its
    derivative (`loops`: how reverse mode differentiates loops, `auto`, `unroll` or `tape`)."""

    mode: Name
    wrt: list[Name]
    prefix: Name | None
    pos: Pos
    of: Name | None = None  # grad: the output differentiated
    loops: Name | None = None

    def kas_line(self) -> str:
        """The line as KAS writes it (a Python function's `@irfuse.derivative` decorator spelled
        so for its program's key)."""
        parts = ["derivative", self.mode.text]
        if self.of is not None:
            parts += ["of", self.of.text]
        parts += ["wrt", ", ".join(n.text for n in self.wrt)]
        if self.prefix is not None:
            parts += ["prefix", self.prefix.text]
        if self.loops is not None:
            parts += ["loops", self.loops.text]
        return " ".join(parts) + ";"


@record
class Program:
    declarations: list[Declaration]
    inputs: list[Name]
    statements: list[Statement]
    outputs: list[Name]
    input_pos: Pos = field(default_factory=lambda: Pos(1, 1))
    derivatives: list[Derivative] = field(default_factory=list)


_DIGITS = "0123456789"  # ASCII only: str.isdigit() also takes '¹' and other digits no number here has
_NUMBER_RE = re.compile(r"(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
_TYPE_RE = re.compile(
    r"(?i)(scalar|mask)|vector(\d+)|matrix(\d+)x(\d+)|tensor(\d+)x(\d+)x(\d+)(?:x(\d+))?|index(\d+)")
TYPE_HELP = "scalar, mask, vectorN, matrixNxM, tensorNxMxK[xL] or indexK"


def parse_type_name(text: str) -> tuple[int, ...] | None:
    """The value shape a type keyword spells, or None if it is not a type."""
    m = _TYPE_RE.fullmatch(text)
    if m is None:
        return None
    if m.group(1):
        return ()
    return tuple(int(g) for g in m.groups()[1:] if g is not None)


def is_mask_type(text: str) -> bool:
    return text.lower() == "mask"


def is_index_type(text: str) -> bool:
    """Whether a type keyword names a connectivity (`indexK`)."""
    return text.lower().startswith("index")


class Lexer:
    def __init__(self, src: SourceFile):
        self.src = src

    def tokens(self) -> list[Token]:
        text, out = self.src.text, []
        # (a byte order mark, which editors on Windows write at a UTF-8 file's start, is no
        # character of the program: skipped, the first line's columns counted after it)
        i, line, col = (1 if text.startswith("\ufeff") else 0), 1, 1
        n = len(text)

        def advance(k: int) -> None:
            nonlocal i, line, col
            for ch in text[i:i + k]:
                if ch == "\n":
                    line, col = line + 1, 1
                else:
                    col += 1
            i += k

        while i < n:
            ch = text[i]
            if ch in " \t\r\n\f\v":
                advance(1)
            elif text.startswith("//", i):
                j = text.find("\n", i)
                advance((n if j < 0 else j) - i)
            elif text.startswith("/*", i):
                j = text.find("*/", i + 2)
                if j < 0:
                    raise CompileError(self.src.diag(line, col, "unterminated comment: '/*' has no '*/'"))
                advance(j + 2 - i)
            elif ch.isascii() and (ch.isalpha() or ch == "_"):
                m = re.compile(r"[A-Za-z_][A-Za-z_0-9]*").match(text, i)
                assert m
                out.append(Token("ident", m.group(0), Pos(line, col)))
                advance(len(m.group(0)))
            elif ch in _DIGITS or (ch == "." and text[i + 1:i + 2] in _DIGITS and i + 1 < n):
                m = _NUMBER_RE.match(text, i)
                assert m
                tail = text[m.end():m.end() + 1]
                if tail and tail.isascii() and (tail.isalnum() or tail in "._"):
                    raise CompileError(self.src.diag(
                        line, col + m.end() - i, f"unexpected character {tail!r} in the number '{m.group(0)}'",
                        notes=["numbers are written like 2, 0.5, .5, 1e-3 or 2.5E+2"]))
                kind = "int" if m.group(0).isdigit() else "number"
                out.append(Token(kind, m.group(0), Pos(line, col)))
                advance(len(m.group(0)))
            elif text.startswith(("<=", ">=", "==", "!="), i):
                out.append(Token("punct", text[i:i + 2], Pos(line, col)))
                advance(2)
            elif ch in "=(),;{}-[]<>":
                out.append(Token("punct", ch, Pos(line, col)))
                advance(1)
            elif ch == '"':
                j = text.find('"', i + 1)
                if j < 0 or "\n" in text[i:j]:
                    raise CompileError(self.src.diag(line, col, "unterminated string: '\"' has no closing '\"' "
                                                                "on its line"))
                out.append(Token("string", text[i + 1:j], Pos(line, col)))
                advance(j + 1 - i)
            else:
                raise CompileError(self.src.diag(
                    line, col, f"unexpected character {ch!r}",
                    notes=["identifiers are ASCII letters, digits and '_'"]))
        out.append(Token("eof", "", Pos(line, col)))
        return out


class Parser:
    def __init__(self, src: SourceFile):
        self.src = src
        self.toks = Lexer(src).tokens()
        self.i = 0
        self.depth = 0  # loops open around the current statement

    # -- helpers
    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def error(self, tok: Token, message: str, notes: list[str] | None = None) -> CompileError:
        return CompileError(self.src.diag(tok.pos.line, tok.pos.col, message, notes=notes))

    @staticmethod
    def describe(tok: Token) -> str:
        return "end of file" if tok.kind == "eof" else f"'{tok.text}'"

    def expect_punct(self, p: str, context: str) -> Token:
        tok = self.peek()
        if tok.kind != "punct" or tok.text != p:
            raise self.error(tok, f"expected '{p}' {context}, found {self.describe(tok)}")
        self.i += 1
        return tok

    def expect_ident(self, what: str) -> Name:
        tok = self.peek()
        if tok.kind != "ident" or tok.text in KEYWORDS:
            raise self.error(tok, f"expected {what}, found {self.describe(tok)}")
        self.i += 1
        return Name(tok.text, tok.pos)

    def names(self, what: str) -> list[Name]:
        out = [self.expect_ident(what)]
        while self.peek().text == "," and self.peek().kind == "punct":
            self.i += 1
            out.append(self.expect_ident(what))
        return out

    # -- grammar
    def program(self) -> Program:
        decls = []
        while not (self.peek().kind == "ident" and self.peek().text == "input"):
            decls.append(self.declaration())
        input_tok = self.peek()
        self.i += 1
        inputs = self.names("an input variable name")
        self.expect_punct(";", "after the input list")
        stmts = self.statements(top_level=True)
        ret = self.peek()
        if not (ret.kind == "ident" and ret.text == "return"):
            raise self.error(ret, f"expected a statement or 'return', found {self.describe(ret)}")
        self.i += 1
        outputs = self.names("an output variable name")
        self.expect_punct(";", "after the return list")
        derivatives = []
        while self.peek().kind == "ident" and self.peek().text == "derivative":
            derivatives.append(self.derivative())
        if self.peek().kind != "eof":
            what = "'derivative' or end of file" if derivatives else "end of file or 'derivative'"
            raise self.error(self.peek(), f"expected {what} after 'return', found {self.describe(self.peek())}")
        return Program(decls, inputs, stmts, outputs, input_tok.pos, derivatives)

    def derivative(self) -> Derivative:
        start = self.peek()
        self.i += 1
        mode = self.expect_ident("a derivative's mode (jvp)")
        if mode.text not in DERIVATIVE_MODES:
            raise CompileError(self.src.diag(mode.pos.line, mode.pos.col, f"unknown derivative mode '{mode.text}'",
                                             notes=[f"{k}: {v}" for k, v in DERIVATIVE_MODES.items()]))
        of = None
        if mode.text in MODES_WITH_OF:
            tok = self.peek()
            if not (tok.kind == "ident" and tok.text == "of"):
                raise self.error(tok, f"expected 'of' and an output after 'derivative {mode.text}', found "
                                      f"{self.describe(tok)}")
            self.i += 1
            of = self.expect_ident(f"the output whose {mode.text} is taken")
        tok = self.peek()
        if not (tok.kind == "ident" and tok.text == "wrt"):
            raise self.error(tok, f"expected 'wrt' and the inputs after 'derivative {mode.text}', "
                                  f"found {self.describe(tok)}")
        self.i += 1
        wrt = self.names("an input to differentiate along")
        prefix = None
        if self.peek().kind == "ident" and self.peek().text == "prefix":
            self.i += 1
            prefix = self.expect_ident("the tangents' name prefix")
        loops = None
        if self.peek().kind == "ident" and self.peek().text == "loops":
            self.i += 1
            loops = self.expect_ident("how loops are differentiated (auto, unroll, tape)")
        self.expect_punct(";", "after a derivative")
        return Derivative(mode, wrt, prefix, start.pos, of, loops)

    def declaration(self) -> Declaration:
        qualifier = self.peek().text if self.peek().kind == "ident" and self.peek().text in ("uniform", "nodal") else ""
        if qualifier:
            self.i += 1
        tok = self.peek()
        if qualifier and tok.kind == "ident" and tok.text in ("input", "uniform", "nodal"):
            raise self.error(tok, f"expected a type after '{qualifier}', found '{tok.text}'",
                             notes=[f"'{qualifier}' qualifies a declaration: '{qualifier} "
                                    f"{'matrix3x3 C' if qualifier == 'uniform' else 'vector3 X'};'"])
        if tok.kind == "eof":
            raise self.error(tok, "expected a declaration or 'input', found end of file",
                             notes=["a program is: declarations, 'input a, b;', statements, 'return x;'"])
        if tok.kind != "ident":
            raise self.error(tok, f"expected a type ({TYPE_HELP}) or 'input', found {self.describe(tok)}")
        shape = parse_type_name(tok.text)
        if shape is None:
            nxt = self.peek(1)
            if nxt.kind == "punct" and nxt.text == "=":
                raise self.error(tok, "statements must come after the 'input' list",
                                 notes=["declare the variables, then write 'input ...;', then the statements"])
            raise self.error(tok, f"unknown type '{tok.text}'", notes=[f"types are {TYPE_HELP}"])
        for d in shape:
            if not 1 <= d <= MAX_DIM:
                raise self.error(tok, f"dimension {d} of type '{tok.text}' is out of range 1..{MAX_DIM}")
        if math.prod(shape) > MAX_VALUE_WORDS:
            raise self.error(tok, f"type '{tok.text}' holds {math.prod(shape):,} words a value; at most "
                                  f"{MAX_VALUE_WORDS:,} (a matrix64x64): a value is one element's, held on chip")
        self.i += 1
        names, lengths = [self.expect_ident("a variable name")], {}
        while True:
            if self.peek().kind == "punct" and self.peek().text == "[":
                self.i += 1
                count = self.peek()
                if count.kind != "int" or not 1 <= int(count.text) <= MAX_DIM:
                    raise self.error(count, f"expected the array's length (1..{MAX_DIM}) after '[', found "
                                            f"{self.describe(count)}")
                self.i += 1
                self.expect_punct("]", "after the array's length")
                lengths[names[-1].text] = int(count.text)
            if not (self.peek().kind == "punct" and self.peek().text == ","):
                break
            self.i += 1
            names.append(self.expect_ident("a variable name"))
        self.expect_punct(";", "after the declaration")
        return Declaration(tok.text, shape, names, tok.pos, qualifier == "uniform", lengths, qualifier == "nodal")

    def statements(self, top_level: bool) -> list[Statement]:
        out: list[Statement] = []
        while True:
            tok = self.peek()
            if tok.kind == "ident" and tok.text == "loop":
                out.append(self.loop())
            elif tok.kind == "ident" and tok.text == "if":
                out.append(self.if_statement())
            elif tok.kind == "ident" and tok.text not in KEYWORDS:
                out.append(self.call())
            else:
                return out

    def loop(self) -> Loop:
        tok = self.peek()
        self.depth += 1
        try:
            if self.depth > MAX_LOOP_DEPTH:
                raise self.error(tok, f"loops are nested {self.depth} deep here; at most {MAX_LOOP_DEPTH} are allowed")
            return self._loop(tok)
        finally:
            self.depth -= 1

    def _loop(self, tok) -> Loop:
        self.i += 1
        index = None
        if self.peek().kind == "ident" and self.peek().text not in KEYWORDS:
            index = self.expect_ident("the loop's index")
        count_tok = self.peek()
        if count_tok.kind != "int":
            raise self.error(count_tok, f"expected the trip count after 'loop', found {self.describe(count_tok)}")
        count = int(count_tok.text)
        if not 1 <= count <= MAX_TRIP_COUNT:
            raise self.error(count_tok, f"loop trip count {count_tok.text} is out of range 1..{MAX_TRIP_COUNT}")
        self.i += 1
        self.expect_punct("{", "to open the loop body")
        body = self.statements(top_level=False)
        close = self.peek()
        if not (close.kind == "punct" and close.text == "}"):
            raise self.error(close, f"expected a statement or '}}' to close the loop, found {self.describe(close)}")
        self.i += 1
        return Loop(count, body, tok.pos, index)

    def block(self, what: str) -> list[Statement]:
        self.expect_punct("{", f"to open the {what}")
        body = self.statements(top_level=False)
        close = self.peek()
        if not (close.kind == "punct" and close.text == "}"):
            raise self.error(close, f"expected a statement or '}}' to close the {what}, found {self.describe(close)}")
        self.i += 1
        return body

    def if_statement(self) -> If:
        tok = self.peek()
        self.i += 1
        self.expect_punct("(", "after 'if'")
        cond_tok = self.peek()
        lhs = self.condition_operand()
        op = rhs = None
        if self.peek().kind == "punct" and self.peek().text in COMPARISONS:
            op = self.peek().text
            self.i += 1
            rhs = self.condition_operand()
        if isinstance(lhs, Text) or isinstance(rhs, Text):
            raise self.error(cond_tok, "a condition compares values (or names a mask), not strings")
        self.expect_punct(")", "to close the condition")
        self.depth += 1
        try:
            if self.depth > MAX_LOOP_DEPTH:
                raise self.error(tok, f"statements are nested {self.depth} deep here; at most {MAX_LOOP_DEPTH} are "
                                      "allowed")
            then = self.block("'if' branch")
            orelse: list[Statement] = []
            if self.peek().kind == "ident" and self.peek().text == "else":
                self.i += 1
                orelse = self.block("'else' branch")
        finally:
            self.depth -= 1
        return If(Condition(lhs, op, rhs, cond_tok.pos), then, orelse, tok.pos)  # type: ignore[arg-type]

    def condition_operand(self, depth: int = 0) -> Name | Number | Index | Text | CallExpr:
        """An operand of a condition: an operand, or an op's call (`gt(f, 0)`) whose operands
        are operands or calls again."""
        tok, after = self.peek(), self.peek(1)
        if not (tok.kind == "ident" and tok.text not in KEYWORDS and after.kind == "punct" and after.text == "("):
            return self.operand()
        if depth >= MAX_LOOP_DEPTH:
            raise self.error(tok, f"calls are nested {depth + 1} deep in this condition; at most {MAX_LOOP_DEPTH}")
        op = self.expect_ident("an op name")
        self.i += 1
        args: list = []
        if not (self.peek().kind == "punct" and self.peek().text == ")"):
            while True:
                args.append(self.condition_operand(depth + 1))
                if not (self.peek().kind == "punct" and self.peek().text == ","):
                    break
                self.i += 1
        self.expect_punct(")", f"to close the call of '{op.text}'")
        if any(isinstance(a, Text) for a in args):
            raise self.error(tok, "a condition compares values (or names a mask), not strings")
        return CallExpr(op, args, tok.pos)

    def place(self, what: str) -> Name | Index:
        """A variable, or an array's entry at a loop's index or a constant (`x[q]`, `x[0]`)."""
        name = self.expect_ident(what)
        if self.peek().kind == "punct" and self.peek().text == "[":
            self.i += 1
            tok = self.peek()
            if tok.kind == "int":
                self.i += 1
                index: Name | Number = Number(tok.text, float(tok.text), tok.pos)
            else:
                index = self.expect_ident("a loop's index or an entry's number inside '[ ]'")
            self.expect_punct("]", f"after '{name.text}[{index.text}'")
            return Index(name, index)
        return name

    def call(self) -> Call:
        target = self.place("a variable name")
        eq = self.expect_punct("=", f"after '{target.text}'")
        after = self.peek(1)
        if self.peek().kind == "ident" and not (after.kind == "punct" and after.text == "("):
            # `x = y;` or `x[q] = y;`: a copy (its op is named COPY), which makes no call.
            source = self.place("a variable name")
            self.expect_punct(";", "after the statement")
            return Call(target, Name(COPY, eq.pos), [source], target.pos)
        op = self.expect_ident("an op name")
        self.expect_punct("(", f"after '{op.text}'")
        args: list[Name | Number | Index | Text] = []
        if not (self.peek().kind == "punct" and self.peek().text == ")"):
            args.append(self.operand())
            while self.peek().kind == "punct" and self.peek().text == ",":
                self.i += 1
                args.append(self.operand())
        self.expect_punct(")", "to close the operand list")
        self.expect_punct(";", "after the statement")
        return Call(target, op, args, target.pos)


    def operand(self) -> Name | Number | Index | Text:
        tok = self.peek()
        if tok.kind == "string":
            self.i += 1
            return Text(tok.text, tok.pos)
        sign = ""
        if tok.kind == "punct" and tok.text == "-":
            sign = "-"
            self.i += 1
            if self.peek().kind not in ("int", "number"):
                raise self.error(self.peek(), f"expected a number after '-', found {self.describe(self.peek())}")
        num = self.peek()
        if num.kind in ("int", "number"):
            self.i += 1
            value = float(sign + num.text)
            if value in (float("inf"), float("-inf")):
                raise self.error(tok, f"the number {sign}{num.text} is too large (beyond float64)")
            return Number(sign + num.text, value, tok.pos)
        return self.place("an operand name or a number")


def parse_program(src: SourceFile) -> Program:
    return Parser(src).program()
