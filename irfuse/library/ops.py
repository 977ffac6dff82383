"""One elementary op: name, signature and index-notation definition.

Every op is defined once in index notation (see `indexexpr`); its flop count, generated CUDA
code and NumPy reference (`irfuse.verification.op_evaluation`) all come from that one text.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field


from irfuse.dialects.kas import KasType
from irfuse.library.indexexpr import (Definition, DefinitionError, Expander, Scalar, count_flops, count_slow_ops,
                                      moved_words, operands_read,
                                      parse_definition)


@dataclass
class OpDef:
    """One elementary op: its definition parsed (`parsed`) and expanded on its operands' shapes
    into one scalar tree per result entry (`trees`; `ranges`: each index's extent). Evaluating
    it on arrays is the verification's (`irfuse.verification.op_evaluation`)."""

    name: str
    operand_names: list[str]
    operand_types: list[KasType]
    result_type: KasType
    definition: str
    doc: str = ""
    trees: list[Scalar] = field(init=False, repr=False)
    parsed: Definition = field(init=False, repr=False)
    ranges: dict[str, int] = field(init=False, repr=False)

    def __post_init__(self) -> None:
        d = parse_definition(self.definition)
        if d.target in self.operand_names:
            raise DefinitionError(f"op '{self.name}': the result name '{d.target}' is also an operand")
        expander = Expander(d, self.operand_names, [t.shape for t in self.operand_types], self.result_type.shape)
        self.trees = expander.expand()
        self.parsed = d
        self.ranges = expander.ranges

    @functools.cached_property
    def flops(self) -> int:  # (asked for every configuration the search costs: counted once)
        return count_flops(self.trees)

    @functools.cached_property
    def operands_read(self) -> frozenset[int]:
        """The operands (by position) whose entries its definition reads."""
        return operands_read(self.trees)

    @functools.cached_property
    def moved_words(self) -> tuple[tuple[int, int], ...] | None:
        """(operand, word) for each entry of its result where it only moves words, else None."""
        return moved_words(self.trees)

    @functools.cached_property
    def slow_ops(self) -> int:
        """How many of `flops` are divisions, reciprocals, square roots or library functions."""
        return count_slow_ops(self.trees)

    def bytes(self, itemsize: int = 4) -> int:
        """Global-memory bytes per element when the op runs alone."""
        return itemsize * (sum(t.size for t in self.operand_types) + self.result_type.size)

    def signature(self) -> str:
        ins = ", ".join(t.spelling() for t in self.operand_types)
        return f"{self.name}({ins}) -> {self.result_type.spelling()}"

    def named_signature(self) -> str:
        """The signature with its operands' names (a Python program may give them by name)."""
        ins = ", ".join(f"{n}: {t.spelling()}" for n, t in zip(self.operand_names, self.operand_types))
        return f"{self.name}({ins}) -> {self.result_type.spelling()}"
