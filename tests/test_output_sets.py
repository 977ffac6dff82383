"""The outputs a call made again without out= hands back (`irfuse.api.output_sets`): a set
of PyTorch tensors an earlier call made comes back only where nothing outside holds any of
them or their memory, unchanged, on the same stream, outside a capture. PyTorch's CPU
tensors stand in for CUDA ones: what is checked (reference counts, storage, metadata) is the
same on both."""

import numpy as np
import pytest

from irfuse.api.output_sets import REUSED_BYTES, SETS_KEPT, OutputSets

torch = pytest.importorskip("torch")


class _Model:  # (what OutputSets reads of a call's first array)
    family = "torch"

    def __init__(self):
        self.obj = torch.empty(1)


def _sets(**shapes):
    return OutputSets(_Model(), shapes or {"a": (4, 3), "b": (5,)}, np.float32)


def _at(made) -> int:
    return made[0].data_ptr()


def test_a_loop_that_lets_go_of_each_calls_outputs_gets_two_sets_in_turn():
    sets = _sets()
    y = sets.make(1)[0]
    seen = []
    for _ in range(8):
        y = sets.make(1)[0]
        seen.append(_at(y))
    assert len(set(seen)) == SETS_KEPT == 2 and seen[2:] == seen[:2] * 3
    assert [tuple(t.shape) for t in y] == [(4, 3), (5,)] and all(t.dtype == torch.float32 for t in y)


holders = {
    "the list": lambda made: made,
    "a tensor": lambda made: made[1],
    "a view": lambda made: made[0][1:],
    "a detached alias": lambda made: made[0].detach(),
    "a NumPy array on it": lambda made: made[0].numpy(),
    "a DLPack capsule": lambda made: torch.utils.dlpack.to_dlpack(made[1]),
    "its storage": lambda made: made[0].untyped_storage(),
    "a tensor set to its storage": lambda made: torch.empty(0).set_(made[1].untyped_storage()),
}


@pytest.mark.parametrize("holder", list(holders))
def test_a_set_is_not_handed_back_while_anything_holds_its_memory(holder):
    sets = _sets()
    made, addresses = sets.make(1)
    held = holders[holder](made)
    del made
    for _ in range(2 * SETS_KEPT):
        again, at = sets.make(1)
        assert at != addresses
    del held, again
    assert sets.make(1)[1] != addresses  # (dropped from the sets kept by now: made anew)


changes = {"t_": lambda t: t.t_(), "unsqueeze_": lambda t: t.unsqueeze_(0),
           "requires_grad_": lambda t: t.requires_grad_()}


@pytest.mark.parametrize("change", list(changes))
def test_a_tensor_changed_in_place_is_not_handed_back(change):
    sets = _sets()
    made, addresses = sets.make(1)
    changes[change](made[0])
    del made
    assert sets.make(1)[1] != addresses


def test_a_set_comes_back_only_on_its_stream_and_never_during_a_capture():
    sets = _sets()
    made, addresses = sets.make(1)
    del made
    assert sets.make(2)[1] != addresses
    other = sets.make(1, capturing=True)
    assert other[1] != addresses and len(sets.kept) == 2  # (nor kept: a capture's pool is its own)
    del other
    assert sets.make(1)[1] == addresses


def test_large_outputs_are_never_kept():
    sets = _sets(a=(REUSED_BYTES // 4 + 1,))
    made, addresses = sets.make(1)
    assert sets.kept is None
    del made
    assert sets.make(1)[0][0].shape == (REUSED_BYTES // 4 + 1,)


def test_a_set_handed_back_is_the_outputs_object_returned_before_and_never_one_still_held():
    """A set comes back as the very `Outputs` an earlier call returned (named as the program's
    outputs; no object made by a call again), and only once nothing holds that object: a
    caller keeping a call's outputs whole (a history of them) keeps them from coming back."""
    sets = _sets()
    first, at = sets.make(1)
    assert first._names == ("a", "b") and first.a is first[0] and tuple(first.b.shape) == (5,)
    first_id = id(first)  # (the object lives on in the sets kept)
    del first
    again, at_again = sets.make(1)
    assert id(again) == first_id and at_again == at and again.a.data_ptr() == at[0]
    history = [again, sets.make(1)[0]]
    del again
    held = {(o.a.data_ptr(), o.b.data_ptr()) for o in history}
    for _ in range(2 * SETS_KEPT):
        assert sets.make(1)[1] not in held
