"""Shared-memory allocation: offsets (and element pitches against bank conflicts) for a
kernel's shared values; values whose lifetimes do not overlap may share words."""

from __future__ import annotations

from irfuse.analysis.bank_conflicts import all_touches, best_pitch
from irfuse.kernel.model import KernelModel
from irfuse.analysis.shared_lifetimes import lifetimes

ALIGN_WORDS = 4  # 16-byte alignment of every shared value (vector copies)


def allocate_shared(model: KernelModel, align: int = ALIGN_WORDS, pad: bool = True, *,
                    copy: bool = True) -> KernelModel:
    """Offsets for the shared values: values whose lifetimes overlap never share words;
    largest first, each at the lowest aligned offset that fits. With `pad`, a value whose
    accesses conflict on banks first gets the element pitch that removes the conflicts."""
    out = model.copy() if copy else model
    ops = out.without_barriers()
    first, last = lifetimes(out, ops)
    placed: list[tuple[int, int, int, int]] = []  # offset, words, first, last
    shared = [vid for vid, v in out.values.items() if v.shared and vid in first]
    for vid in shared:
        out.values[vid].pitch = 0
    touches = all_touches(out) if pad else {}  # (pitches change no access pattern)
    for vid in shared:
        out.values[vid].pitch = best_pitch(out, vid, touches.get(vid, [])) if pad else 0
    shared.sort(key=lambda vid: (-out.values[vid].span, first[vid], vid))
    for vid in shared:
        words = out.values[vid].span * out.by
        busy = sorted((o, o + w) for o, w, f, l in placed if not (l < first[vid] or last[vid] < f))
        off = 0
        for lo, hi in busy:
            if off + words <= lo:
                break
            off = max(off, -(-hi // align) * align)
        out.values[vid].offset = off
        placed.append((off, words, first[vid], last[vid]))
    return out
