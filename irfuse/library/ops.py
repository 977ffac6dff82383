"""One elementary op: name, signature and index-notation definition.

Every op is defined once in index notation (see `indexexpr`); its NumPy
reference, flop count and generated CUDA code all come from that one text.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field

import numpy as np

from irfuse.dialects.kas import KasType
from irfuse.library.indexexpr import (BatchEvaluator, DefinitionError, Expander, Scalar, count_flops, count_slow_ops,
                                      eval_numpy, eval_numpy_bounded,
                                      parse_definition)


@dataclass
class OpDef:
    """One elementary op."""

    name: str
    operand_names: list[str]
    operand_types: list[KasType]
    result_type: KasType
    definition: str
    doc: str = ""
    trees: list[Scalar] = field(init=False, repr=False)
    evaluator: BatchEvaluator = field(init=False, repr=False)

    def __post_init__(self) -> None:
        d = parse_definition(self.definition)
        if d.target in self.operand_names:
            raise DefinitionError(f"op '{self.name}': the result name '{d.target}' is also an operand")
        expander = Expander(d, self.operand_names, [t.shape for t in self.operand_types], self.result_type.shape)
        self.trees = expander.expand()
        self.evaluator = BatchEvaluator(d, self.operand_names, expander.ranges, self.result_type.shape)

    @functools.cached_property
    def flops(self) -> int:  # (asked for every configuration the search costs: counted once)
        return count_flops(self.trees)

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

    def reference(self, *operands: np.ndarray) -> np.ndarray:
        """Batched evaluation of the definition (vectorized: `indexexpr.BatchEvaluator`):
        operands shaped (N, *shape); returns (N, *result shape)."""
        return self.evaluator([np.asarray(a) for a in operands])

    def reference_by_entries(self, *operands: np.ndarray) -> np.ndarray:
        """The same from the per-entry scalar trees, one NumPy operation per tree node: the
        generated code's arithmetic, in its order (tests compare the two)."""
        n = operands[0].shape[0] if operands else 0
        flat = [np.ascontiguousarray(a).reshape(n, -1) for a in operands]
        cols = [eval_numpy(t, flat) for t in self.trees]
        out = np.stack(cols, axis=1) if cols else np.zeros((n, 0))
        return out.reshape((n, *self.result_type.shape))

    def bounded_by_entries(self, operands: list[np.ndarray], errors: list[np.ndarray],
                           u: float) -> tuple[np.ndarray, np.ndarray]:
        """The per-entry trees in float64 on operands known to within `errors`, and a bound on
        the error of the generated code's evaluation with unit roundoff `u`
        (`indexexpr.eval_numpy_bounded`); both shaped (N, *result shape)."""
        n = operands[0].shape[0] if operands else 0
        flat = [np.ascontiguousarray(a, dtype=np.float64).reshape(n, -1) for a in operands]
        flat_err = [np.ascontiguousarray(e, dtype=np.float64).reshape(n, -1) for e in errors]
        pairs = [eval_numpy_bounded(t, flat, flat_err, u) for t in self.trees]
        shape = (n, *self.result_type.shape)
        if not pairs:
            return np.zeros(shape), np.zeros(shape)
        return (np.stack([v for v, _ in pairs], axis=1).reshape(shape),
                np.stack([e for _, e in pairs], axis=1).reshape(shape))
