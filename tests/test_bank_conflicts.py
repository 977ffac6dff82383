"""Bank-conflict analysis and padding, against counts worked out by hand."""

import dataclasses

import numpy as np
import pytest

from irfuse.analysis.bank_conflicts import best_pitch, copy_wavefronts, kernel_wavefronts, wavefronts
from irfuse.kernel.model import KernelModel, MOp, MValue
from irfuse.analysis.hazards import find_races
from irfuse.dialects.access_pattern import AccessPattern
from irfuse.library.catalogue import find_implementation
from irfuse.transforms.allocation import allocate_shared
from irfuse.transforms.barriers import place_barriers

T = np.arange(32)


@pytest.mark.parametrize("stride, itemsize, expected", [
    (1, 4, 1),   # consecutive words: 32 banks
    (4, 4, 4),   # 8 banks, 4 distinct words each
    (5, 4, 1),   # odd stride: 32 banks
    (16, 4, 16),  # 2 banks
    (0, 4, 1),   # one word for all: a broadcast
    (2, 8, 4),   # doubles: two phases of 16 threads, 8 of 16 double banks, 2 words each
    (3, 8, 2),   # doubles, odd stride: two conflict-free phases
])
def test_one_instruction_of_a_warp(stride, itemsize, expected):
    assert wavefronts((T * stride)[:, None], T, itemsize) == expected


def test_instructions_and_warps_add_up():
    tids = np.arange(64)
    words = np.stack([tids * 4, tids * 4 + 1], axis=1)  # 2 instructions, 2 warps, 4-way each
    assert wavefronts(words, tids, 4) == 2 * 2 * 4


def test_copies():
    # 32 matrices of 4 words, 128 threads: one 128-word chunk, 4 conflict-free wavefronts.
    assert copy_wavefronts(4, 0, 32, 128, 4) == 4
    # Padded to 5: each warp's 32 words span 40 addresses, so 7 banks are hit twice.
    assert copy_wavefronts(4, 5, 32, 128, 4) == 8


def _model(impl_name: str, bx: int, by: int = 32, itemsize: int = 4) -> KernelModel:
    impl = find_implementation("mmul22", impl_name)
    values = {0: MValue(0, 4, "a", is_input=True), 1: MValue(1, 4, "c", stored=True)}
    ops = [MOp("load", value=0), MOp("call", impl=impl, args=[0, 0], result=1), MOp("store", value=1)]
    return KernelModel(bx, by, values, ops, itemsize)


def test_elem_mapping_of_2x2_matrices_is_padded_to_an_odd_pitch():
    m = _model("elem", 1)
    assert best_pitch(m, 0) == 5 and best_pitch(m, 1) == 5
    padded = allocate_shared(m)
    plain = allocate_shared(m, pad=False)
    assert [v.pitch for v in padded.values.values()] == [5, 5]
    assert kernel_wavefronts(padded) < kernel_wavefronts(plain)
    assert padded.shared_words() == 2 * 32 * 5 and plain.shared_words() == 2 * 32 * 4
    assert not find_races(place_barriers(padded))


def test_entry_mapping_reads_consecutive_words_and_stays_packed():
    m = _model("entry", 4)
    assert best_pitch(m, 0) == 0 and best_pitch(m, 1) == 0


def test_an_access_outside_its_element_is_never_padded():
    m = _model("elem", 1)
    impl = m.ops[1].impl
    # Reads the next element's words: moving each element's base would break it.
    crossing = dataclasses.replace(impl, operand_aps=[AccessPattern("ty*4 + 4", 1, 1, 4), impl.operand_aps[1]])
    m.ops[1].impl = crossing
    assert best_pitch(m, 0) == 0
    assert best_pitch(m, 1) == 5  # the result is still written inside its element
