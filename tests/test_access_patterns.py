"""Access-pattern analysis, with answers computed by hand (the seeds' mmul33 patterns among them)."""

import pytest

from irfuse.analysis.access_patterns import (
    access_set,
    compatible,
    compatible_by_sets,
    read_shift,
    reads_within,
    start_set,
    thread_addresses,
)
from irfuse.dialects.access_pattern import AccessPattern, APError, fit_pattern
from irfuse.library.catalogue import default_library, find_implementation, implementations

# The seeds' mmul33 with BX=3: thread tx reads row tx of A, all of B, writes row tx of C.
IN0 = AccessPattern("ty*9+tx*3", 1, 1, 3)
IN1 = AccessPattern("ty*9", 1, 1, 9)
OUT = AccessPattern("ty*9+tx*3", 1, 1, 3)


def test_seed_mmul33_sets():
    assert start_set(IN0, 3, 2) == (0, 3, 6, 9, 12, 15)
    assert access_set(IN0) == {0, 1, 2}
    assert start_set(IN1, 3, 2) == (0, 0, 0, 9, 9, 9)
    assert access_set(IN1) == set(range(9))
    addr = thread_addresses(IN0, 3, 2)
    assert addr[(1, 0)] == {3, 4, 5} and addr[(2, 1)] == {15, 16, 17}
    assert thread_addresses(IN1, 3, 2)[(2, 1)] == set(range(9, 18))


def test_seed_mmul33_compatibility():
    # C (written by row) is compatible with A read by row: each thread keeps its own row.
    assert compatible(OUT, IN0, 3, 16) and compatible_by_sets(OUT, IN0, 3, 16)
    # ... but not with B read whole: other threads' rows are needed.
    assert not compatible(OUT, IN1, 3, 16) and not compatible_by_sets(OUT, IN1, 3, 16)
    # noreg forbids it even when the words agree.
    assert not compatible(OUT, AccessPattern("ty*9+tx*3", 1, 1, 3, noreg=True), 3, 16)


def test_a_reader_may_take_some_of_the_words_a_thread_holds():
    """`reads_within`: the words a reader takes are among those its thread holds, from the same
    start (a register array is indexed from it). trace_3x3 reads an element's diagonal."""
    whole, diagonal = AccessPattern("ty*9", 1, 1, 9), AccessPattern("ty*9", 1, 4, 3)
    assert reads_within(whole, diagonal, 1, 16) and reads_within(whole, whole, 1, 16)
    assert not reads_within(diagonal, whole, 1, 16)  # more words than are held
    assert not compatible(whole, diagonal, 1, 16)  # (not the same words: no exact agreement)
    # the same words of a row-mapped value, but read from another start: thread tx's row
    # starts at 3*tx, where one thread an element starts at 0
    assert not reads_within(OUT, AccessPattern("ty*9", 1, 1, 3), 3, 4)
    assert reads_within(OUT, AccessPattern("ty*9+tx*3", 1, 1, 2), 3, 4)
    assert not reads_within(whole, AccessPattern("ty*9", 1, 4, 3, noreg=True), 1, 16)


def test_a_reader_may_start_a_fixed_number_of_words_past_the_words_held():
    """`read_shift`: a reader whose pattern starts the same number of words after the held
    pattern's in every thread (`item_1_3x3`, words 3-5 of a matrix) reads within it, handed the
    thread's register array that many words on; a shift that differs between threads (a row
    mapping read by one thread an element), a negative one, or words past the held ones do not."""
    whole = AccessPattern("ty*9", 1, 1, 9)
    row1, row2 = AccessPattern("ty*9 + 3", 1, 1, 3), AccessPattern("ty*9 + 6", 1, 1, 3)
    assert read_shift(whole, row1, 1, 16) == 3 and reads_within(whole, row1, 1, 16)
    assert read_shift(whole, row2, 1, 16) == 6 and reads_within(whole, row2, 1, 16)
    assert read_shift(row1, whole, 1, 16) is None and not reads_within(row1, whole, 1, 16)  # (before the start)
    assert not reads_within(whole, AccessPattern("ty*9 + 7", 1, 1, 3), 1, 16)  # (words 7-9: 9 is not held)
    assert read_shift(AccessPattern("ty*9", 1, 1, 3), AccessPattern("ty*9+tx*3", 1, 1, 3), 3, 4) is None
    assert read_shift(OUT, AccessPattern("ty*9+tx*3 + 1", 1, 1, 2), 3, 4) == 1
    assert read_shift(whole, AccessPattern("ty*9 + 3", 1, 1, 3, noreg=True), 1, 16) is None


def test_strided_and_blocked_patterns():
    col = AccessPattern("ty*9 + tx", 1, 3, 3)  # column tx of a 3x3 matrix
    assert thread_addresses(col, 3, 1)[(1, 0)] == {1, 4, 7}
    blocks = AccessPattern("ty*16", 2, 4, 2)  # words 0,1,4,5
    assert access_set(blocks) == {0, 1, 4, 5}
    # Same words per thread written two ways are compatible.
    assert compatible(AccessPattern("ty*3", 1, 1, 3), AccessPattern("ty*3", 3, 0, 1), 1, 8)


def test_division_and_modulo_follow_c():
    ap = AccessPattern("ty*9 + (tx/3)*3 + tx%3", 1, 1, 1)
    assert [ap.start_of(tx, 0, 9, 1) for tx in range(9)] == list(range(9))
    assert AccessPattern("BX*ty + BY", 1, 1, 1).start_of(0, 2, 3, 5) == 11


@pytest.mark.parametrize("bad", ["ty*q", "ty**2", "import os", "ty[0]"])
def test_bad_start_expressions(bad):
    with pytest.raises(APError):
        AccessPattern(bad)


def test_fit_pattern():
    assert fit_pattern({0, 1, 2}) == (0, 1, 1, 3)
    assert fit_pattern({3, 6, 9}) == (3, 1, 3, 3)
    assert fit_pattern({0, 1, 4, 5, 8, 9}) == (0, 2, 4, 3)
    assert fit_pattern({0, 1, 3}) is None
    assert fit_pattern({5}) == (5, 1, 1, 1)


def test_derived_mmul33_row_is_the_seeds_pattern():
    impl = find_implementation("mmul33", "row")
    assert impl.bx == 3
    assert [compatible(a, b, 3, 8) for a, b in zip(impl.aps, (IN0, IN1, OUT))] == [True, True, True]


@pytest.mark.parametrize("op", list(default_library()), ids=lambda o: o.name)
def test_derived_patterns_cover_exactly_what_threads_touch(op):
    """Every AP of every generated implementation equals the words its threads really use
    (or, where an AP cannot state them, is the whole element)."""
    from irfuse.library.implementations import SLeaf, _nodes

    for impl in implementations(op):
        if impl.origin != "generated":
            continue
        bx = impl.bx
        for tx in range(bx):
            env = {"tx": tx}
            written = {_eval_affine(off, impl.var_exprs, env) for off, _ in impl.outputs}
            got = thread_addresses(impl.result_ap, bx, 1)[(tx, 0)]
            assert got == written, (impl.name, tx)
            for k, ap in enumerate(impl.operand_aps):
                leaves = [lf for _, tree in impl.outputs for lf in _nodes(tree, SLeaf)]
                read = {_eval_affine(lf.offset, impl.var_exprs, env) for lf in leaves if lf.operand == k}
                covered = thread_addresses(ap, bx, 1)[(tx, 0)]
                assert read <= covered, (impl.name, k, tx)
                assert read == covered or covered == set(range(op.operand_types[k].size))


def _eval_affine(aff, var_exprs, env):
    from irfuse.dialects.access_pattern import compile_start

    total = aff.const
    for v, c in aff.coeffs:
        total += c * compile_start(var_exprs[v])(env["tx"], 0, 1, 1)
    return total
