"""Mutations of valid KAS source for frontend fuzzing: each returns a (possibly) broken program."""

from __future__ import annotations

import random
import re

from xdsl.utils.exceptions import DiagnosticException, ParseError

from irfuse.diagnostics import CompileError, IrfuseError
from irfuse.dialects.context import parse_module
from irfuse.driver.front import frontend, kas_module
from irfuse.driver.sources import Source

MUTATIONS = ("delete_token", "swap_type", "wrong_arity", "unknown_op", "huge_number", "non_ascii",
             "truncate", "duplicate_line", "self_cycle", "empty", "toggle_uniform", "literal_operand",
             "reduce_operand", "bad_number")


def tokens(src: str) -> list[tuple[int, int]]:
    return [(m.start(), m.end()) for m in re.finditer(r"[A-Za-z_][A-Za-z_0-9]*|\d+|[=(),;{}]", src)]


def mutate(src: str, rng: random.Random, kind: str | None = None) -> str:
    kind = kind or rng.choice(MUTATIONS)
    toks = tokens(src)
    if kind == "delete_token" and toks:
        a, b = rng.choice(toks)
        return src[:a] + src[b:]
    if kind == "swap_type":
        types = ["scalar", "vector3", "matrix3x3", "matrix5x5", "tensor3x3x3", "vector2", "MATRIX2x2"]
        m = list(re.finditer(r"(?im)^\s*(scalar|vector\d+|matrix\d+x\d+|tensor[\dx]+)\b", src))
        if m:
            x = rng.choice(m)
            return src[:x.start(1)] + rng.choice(types) + src[x.end(1):]
    if kind == "wrong_arity":
        m = list(re.finditer(r"\(([A-Za-z_0-9, ]+)\)", src))
        if m:
            x = rng.choice(m)
            args = x.group(1).split(",")
            args = args[:-1] if len(args) > 1 and rng.random() < 0.5 else args + [args[0]]
            return src[:x.start(1)] + ",".join(args) + src[x.end(1):]
    if kind == "unknown_op":
        m = list(re.finditer(r"=\s*([A-Za-z_0-9]+)\(", src))
        if m:
            x = rng.choice(m)
            return src[:x.start(1)] + x.group(1)[:-1] + "q" + src[x.end(1):]
    if kind == "huge_number":
        return re.sub(r"\d+", lambda _: str(rng.choice([0, 10**30, 2**63, 999999999])), src, count=1)
    if kind == "non_ascii":
        i = rng.randrange(len(src) + 1)
        return src[:i] + rng.choice(["é", "λ", "\u200b", "\x00", "💥"]) + src[i:]
    if kind == "truncate":
        return src[: rng.randrange(len(src) + 1)]
    if kind == "duplicate_line" and src.splitlines():
        lines = src.splitlines()
        i = rng.randrange(len(lines))
        return "\n".join(lines[: i + 1] + [lines[i]] + lines[i + 1:])
    if kind == "self_cycle":
        m = list(re.finditer(r"(\w+)\s*=\s*(\w+)\((\w+)", src))
        if m:
            x = rng.choice(m)
            return src[:x.start(3)] + x.group(1) + src[x.end(3):]
    if kind == "empty":
        return rng.choice(["", " ", "\n\n", "// only a comment\n", "/* */"])
    if kind == "toggle_uniform":  # a declaration gains or loses `uniform`
        m = list(re.finditer(r"(?im)^\s*(uniform\s+)?(scalar|vector\d+|matrix\d+x\d+|tensor[\dx]+)\b", src))
        if m:
            x = rng.choice(m)
            if x.group(1):
                return src[:x.start(1)] + src[x.end(1):]
            return src[:x.start(2)] + "uniform " + src[x.start(2):]
    if kind == "literal_operand":  # an operand becomes a number (of a scalar or not)
        m = list(re.finditer(r"[(,]\s*([A-Za-z_][A-Za-z_0-9]*)\s*(?=[,)])", src))
        if m:
            x = rng.choice(m)
            return src[:x.start(1)] + rng.choice(["0.5", "-2", "1e-3", ".5", "7."]) + src[x.end(1):]
    if kind == "reduce_operand":  # a statement's op becomes a reduction, or a reduction an op
        m = list(re.finditer(r"=\s*([A-Za-z_0-9]+)\(", src))
        if m:
            x = rng.choice(m)
            return src[:x.start(1)] + rng.choice(["sum", "max", "min", "mmul33"]) + src[x.end(1):]
    if kind == "bad_number":  # a malformed or out-of-range number in operand position
        m = list(re.finditer(r"[(,]\s*([A-Za-z_0-9.]+)\s*(?=[,)])", src))
        if m:
            x = rng.choice(m)
            return src[:x.start(1)] + rng.choice(["1.2.3", "1e", "-", "1e999", "--1", "0x10", "1_0"]) + src[x.end(1):]
    return src


def check_frontend(src: str, filename: str = "fuzz.kas") -> bool:
    """The frontend's contract on any text: compiles (True) or raises `CompileError` whose every
    diagnostic names the file, a line and a column (False). Anything else raises."""
    try:
        frontend(Source(src, filename))  # (its derivative lines applied: their refusals are located too)
        return True
    except CompileError as e:
        for d in e.diagnostics:
            if not (d.file == filename and d.line >= 1 and d.col >= 1 and d.message):
                raise AssertionError(f"diagnostic without a position: {d.render()}") from e
        return False


IR_DAMAGE = ("", "%", "!kas.matrix<3>", "}", "kas.call @nope(", "0x", "uniform(", "uniform(0, 0) ", "once ",
             "reduce mean ", "kas.constant inf", "into uniform", "fuse.combine sum %",
             # types whose parameters their verifiers or parsers refuse (a fuzzer's finding: seed 126809)
             "!kas.matrix<0x3>", "!kas.tensor<4x0x4>", "!kas.scalar<3>", "!kas.mask<>", "!kas.vector<0>")


def mutate_ir(text: str, rng: random.Random) -> str:
    """Cuts a random span out of printed IR and puts a random fragment in its place."""
    i, j = sorted(rng.randrange(len(text)) for _ in range(2))
    return text[:i] + rng.choice(IR_DAMAGE) + text[j:]


def check_ir(text: str) -> bool:
    """Printed IR, possibly broken, parses and verifies (True) or gets a parse or verifier
    diagnostic (False); and the same text as an `.mlir` file's (`driver.front.kas_module`, what
    `irfuse.compile` reads from one) gives its kas program or a `CompileError` naming the file,
    at a line where the text parsed but an op was refused. Anything else raises."""
    try:
        parse_module(text).verify()
        valid = True
    except (ParseError, DiagnosticException, IrfuseError):  # (a verifier of irfuse's may raise its own)
        valid = False
    name = "fuzz.mlir"
    try:
        kas_module(text, name)
    except CompileError as e:
        for d in e.diagnostics:
            if d.file != name:
                raise AssertionError(f"an .mlir file's diagnostic names no file: {d.render()}") from e
            if valid is False and not d.line and not d.message.startswith(("the file is empty", "the IR holds")):
                raise AssertionError(f"an .mlir file's diagnostic without a line: {d.render()}") from e
    return valid
