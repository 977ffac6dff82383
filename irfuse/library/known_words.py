"""Ops with some of their operands' words known: an op's entries with those words put in.

A per-element Jacobian follows each unit direction e_k of an input (`transforms.jacobian`):
the direction's words are the literals 0 and 1, and so are many words of the tangents made
from it (a 3x3 tangent along e_k of a 4x3 input is one row). In IEEE arithmetic `0 * x` is
not 0 where x is infinite or NaN and `x + 0` is not x where x is -0, so a C compiler keeps
every product with such a word and every sum with it: the Neo-Hookean tangent's diagonal
multiplied its directions' zeros through the whole stress. Here such a word is a structural
one, as `delta`'s are in the op library (`indexexpr.fold_bin`): the op
`known_<words>__<op>` is op `<op>` with some words of its operands known (0 or 1), its
entries `<op>`'s with those words put in and folded, its operands those of `<op>`'s whose
words it still reads, in order. Defined from its name alone (`Library.get`), it is an op as
any other: reference, flop count and implementations come from its definition text
(`indexexpr.entries_definition`).

`<words>`: one token for each operand of `<op>`, `_` between them: `n` where none of its
words is known, else `z<hex>o<hex>`: the words known 0 (bit w of the first hexadecimal
number: word w) and those known 1 (the second), each number in its shortest form.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from irfuse.library.derivatives import put_in, renumber
from irfuse.library.indexexpr import Scalar, entries_definition, operands_read

_TOKEN = r"(?:n|z[0-9a-f]+o[0-9a-f]+)"
KNOWN_NAME = re.compile(rf"known_({_TOKEN}(?:_{_TOKEN})*)__(\w+)")
KNOWN_VALUES = (0.0, 1.0)  # (the words a name can say are known)

Known = Mapping[int, float]  # an operand's known words: word -> its value (0 or 1)


def known_name(op_name: str, known: Sequence[Known]) -> str:
    """The name of op `op_name` with the words `known` (one map for each operand) put in."""
    def token(words: Known) -> str:
        if not words:
            return "n"
        zeros = sum(1 << w for w, v in words.items() if v == 0.0)
        ones = sum(1 << w for w, v in words.items() if v == 1.0)
        if zeros + ones != sum(1 << w for w in words):
            raise ValueError(f"a known word is 0 or 1, not {sorted(set(words.values()) - set(KNOWN_VALUES))}")
        return f"z{zeros:x}o{ones:x}"
    return f"known_{'_'.join(token(w) for w in known)}__{op_name}"


def parse_known_name(name: str) -> tuple[str, tuple[dict[int, float], ...]] | None:
    """(the op, each operand's known words) of a `known_...` name, or None where `name` is
    none, knows no word, or is not in its one spelling (`known_name`'s: every op one name)."""
    m = KNOWN_NAME.fullmatch(name)
    if m is None:
        return None
    tokens = m.group(1).split("_")
    if all(t == "n" for t in tokens):
        return None  # (no word known: the op itself, which has its own name)
    known = []
    for token in tokens:
        words: dict[int, float] = {}
        if token != "n":
            zeros, ones = (int(x, 16) for x in token[1:].split("o"))
            if zeros & ones or not zeros | ones:
                return None
            words = {w: 0.0 for w in range(zeros.bit_length()) if zeros >> w & 1}
            words.update({w: 1.0 for w in range(ones.bit_length()) if ones >> w & 1})
        known.append(dict(sorted(words.items())))
    if known_name(m.group(2), known) != name:
        return None
    return m.group(2), tuple(known)


def known_definition(names: Sequence[str], shapes: Sequence[tuple[int, ...]], result_shape: tuple[int, ...],
                     trees: Sequence[Scalar], known: Sequence[Known]) -> tuple[list[int], str]:
    """(the operands the op with words `known` put in still reads, its definition) for an op of
    operands `names` of `shapes` whose entries are `trees`; ValueError where it would read none
    (its entries are all literals: a literal value, not an op) or a word is past its operand."""
    if len(known) != len(names):
        raise ValueError(f"the op has {len(names)} operands, not {len(known)}")
    for k, words in enumerate(known):
        size = 1
        for n in shapes[k]:
            size *= n
        if any(not 0 <= w < size for w in words):
            raise ValueError(f"operand {k} has {size} words, not {max(words) + 1}")
    entries = put_in(trees, known)
    read = sorted(operands_read(entries))
    if not read:
        raise ValueError("every entry is a literal once the known words are put in")
    place = {k: j for j, k in enumerate(read)}
    moved = [renumber(t, place) for t in entries]
    return read, entries_definition(moved, tuple(result_shape), [names[k] for k in read],
                                    [tuple(shapes[k]) for k in read])

