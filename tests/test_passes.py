"""The in-kernel passes on every example: the race checker catches every barrier removed from
the default pipeline's output, and the passes never add shared memory or barriers."""

import os

import pytest

from conftest import EXAMPLES
from irfuse.analysis.hazards import find_races
from irfuse.kernel.bridge import model_from_kernel
from irfuse.diagnostics import CompileError
from irfuse.dialects import fuse
from irfuse.frontend.irgen import compile_file
from irfuse.passes.fuse_verify_races import FuseVerifyRaces
from irfuse.dialects.context import make_context
from irfuse.driver.compile import lower


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_race_checker_catches_every_deleted_barrier(path):
    module = lower(compile_file(path).module)
    barriers = [op for op in module.walk() if isinstance(op, fuse.BarrierOp)]
    assert barriers
    for k in range(len(barriers)):
        clone = module.clone()
        victim = [op for op in clone.walk() if isinstance(op, fuse.BarrierOp)][k]
        kernel = victim.parent_op().sym_name.data
        victim.detach()
        victim.erase()
        with pytest.raises(CompileError, match=f"race in fuse.kernel @{kernel}"):
            FuseVerifyRaces().apply(make_context(), clone)
    FuseVerifyRaces().apply(make_context(), module)  # the pipeline's own output is race-free


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_passes_only_remove_shared_memory_and_barriers(path):
    base = lower(compile_file(path).module, "kas-dce,fuse-partition")
    opt = lower(compile_file(path).module)
    for kb, ko in zip([k for k in base.ops if isinstance(k, fuse.KernelOp)],
                      [k for k in opt.ops if isinstance(k, fuse.KernelOp)]):
        mb, _ = model_from_kernel(kb)
        mo, _ = model_from_kernel(ko)
        assert mo.shared_words() <= mb.shared_words()
        assert mo.barrier_count() <= mb.barrier_count()
        assert not find_races(mo)


@pytest.mark.parametrize("path", EXAMPLES, ids=os.path.basename)
def test_every_pass_leaves_race_free_ir(path):
    from irfuse.passes.registry import DEFAULT_PIPELINE

    stages = DEFAULT_PIPELINE.split(",")
    for k in range(2, len(stages)):
        module = lower(compile_file(path).module, ",".join(stages[:k]))
        FuseVerifyRaces().apply(make_context(), module)


def test_the_hazard_tracker_finds_exactly_the_conflicting_pairs():
    """Accesses are tracked as their distinct words and each word's one thread (or MULTI, or
    ANY for a block-wide copy): checked against the definition on random accesses. A pair
    conflicts when one of the two writes and the threads differ or either is ANY."""
    import numpy as np

    from irfuse.analysis.hazards import HazardTracker
    from irfuse.analysis.shared_accesses import ANY, MULTI, Access, word_owners

    rng = np.random.default_rng(7)
    for _ in range(300):
        words = rng.integers(0, 12, rng.integers(0, 20))
        threads = rng.integers(ANY, 4, words.size)
        uniq, owners = word_owners(words, threads)
        touched: dict[int, set[int]] = {}
        for w, t in zip(words.tolist(), threads.tolist()):
            touched.setdefault(w, set()).add(t)
        assert uniq.tolist() == sorted(touched)
        assert owners.tolist() == [next(iter(touched[w])) if len(touched[w]) == 1 else MULTI for w in sorted(touched)]
    for _ in range(100):
        tracker, seen = HazardTracker(12), []
        for _ in range(6):
            words = rng.integers(0, 12, rng.integers(1, 8))
            acc = Access(words, rng.integers(ANY, 3, words.size), bool(rng.integers(0, 2)))
            want = any(w == w2 and (acc.write or write2) and (t != t2 or t < 0 or t2 < 0)
                       for w, t in zip(acc.words.tolist(), acc.threads.tolist()) for w2, t2, write2 in seen)
            assert (tracker.conflict([acc]) is not None) == want
            tracker.record([acc], 0)
            seen += [(w, t, acc.write) for w, t in zip(acc.words.tolist(), acc.threads.tolist())]
