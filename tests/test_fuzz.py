"""Robustness, fast mode: fuzzed frontend and IR inputs never crash; random programs agree
with the reference through several plans on the CPU. `IRFUSE_FUZZ_LONG=1` runs more."""

import glob
import os
import random

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from xdsl.utils.exceptions import DiagnosticException, ParseError

from conftest import ROOT, check_top_plans_on_cpu
from irfuse.diagnostics import CompileError
from irfuse.frontend.irgen import compile_source
from irfuse.testing.mutations import MUTATIONS, mutate
from irfuse.testing.random_programs import random_program

LONG = os.environ.get("IRFUSE_FUZZ_LONG") == "1"
SOURCES = [open(p).read() for p in sorted(glob.glob(os.path.join(ROOT, "examples", "*.kas")))]


def check_frontend(src: str) -> None:
    try:
        compile_source(src, "fuzz.kas")
    except CompileError as e:
        for d in e.diagnostics:
            assert d.file == "fuzz.kas" and d.line >= 1 and d.col >= 1, d.render()
            assert d.message


@settings(max_examples=3000 if LONG else 300, deadline=2000, suppress_health_check=list(HealthCheck))
@given(st.integers(0, len(SOURCES) - 1), st.sampled_from(MUTATIONS), st.integers(0, 2**32), st.integers(1, 3))
def test_mutated_examples_compile_or_get_a_positioned_diagnostic(which, kind, seed, rounds):
    rng = random.Random(seed)
    src = SOURCES[which]
    for _ in range(rounds):
        src = mutate(src, rng, kind)
    check_frontend(src)


@settings(max_examples=2000 if LONG else 200, deadline=2000, suppress_health_check=list(HealthCheck))
@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=200))
def test_arbitrary_text_never_crashes_the_frontend(text):
    check_frontend(text)


@settings(max_examples=1000 if LONG else 100, deadline=3000, suppress_health_check=list(HealthCheck))
@given(st.integers(0, 2**32), st.integers(0, 5))
def test_mutated_ir_gets_parse_or_verifier_errors(seed, which):
    from irfuse.pipeline import module_text, parse_module

    rng = random.Random(seed)
    text = module_text(compile_source(SOURCES[which % len(SOURCES)], "x.kas").module)
    i, j = sorted(rng.randrange(len(text)) for _ in range(2))
    broken = text[:i] + rng.choice(["", "%", "!kas.matrix<3>", "}", "kas.call @nope(", "0x"]) + text[j:]
    try:
        parse_module(broken).verify()
    except (ParseError, DiagnosticException):
        pass


@pytest.mark.parametrize("seed", range(40 if LONG else 4))
def test_random_programs_agree_with_the_reference_through_several_plans(seed):
    src = random_program(seed, 6 + seed % 7)
    path = os.path.join(os.environ["IRFUSE_CACHE_DIR"], f"rand{seed}.kas")
    with open(path, "w") as f:
        f.write(src)
    assert check_top_plans_on_cpu(path, 3, "f64", 37, seed) >= 1, src
