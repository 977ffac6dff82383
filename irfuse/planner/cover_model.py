"""The cover search's CP-SAT model, written straight into OR-Tools' model proto.

Why not `ortools.sat.python.cp_model.CpModel`: that module imports pandas (for its Series
helpers, which the planner never uses), 0.15 s of the 0.24 s its import takes, paid by every
process that plans a program. The proto and the solver live in `cp_model_helper` (0.04 s).
The model made here is the very proto `CpModel` makes for the same calls (each linear
expression's terms merged by variable, in variable order, zero terms left out; `<=` as the
domain [INT64_MIN, bound]), so the solver's search and answers are the same; a test checks
the two protos equal on planned programs.
"""

from __future__ import annotations

from collections.abc import Iterable

INT64_MIN = -(1 << 63)


def _helper():
    from ortools.sat.python import cp_model_helper

    return cp_model_helper


class CoverModel:
    """0-1 variables, exactly-one and at-most constraints, a linear objective to minimize,
    and solves with a deterministic-time budget on one worker."""

    def __init__(self, variables: int):
        cmh = _helper()
        self.proto = cmh.CpModelProto()
        for i in range(variables):
            v = self.proto.variables.add()
            v.name = f"c{i}"
            v.domain.extend([0, 1])
        self.response = None

    def exactly_one(self, variables: Iterable[int]) -> None:
        self.proto.constraints.add().exactly_one.literals.extend(list(variables))

    def at_most(self, variables: Iterable[int], bound: int) -> None:
        """sum(x[i] for i in variables) <= bound."""
        terms = _terms((i, 1) for i in variables)
        linear = self.proto.constraints.add().linear
        linear.vars.extend(list(terms))
        linear.coeffs.extend(list(terms.values()))
        linear.domain.extend([INT64_MIN, int(bound)])

    def minimize(self, weighted: Iterable[tuple[int, int]]) -> None:
        """sum(weight * x[i] for i, weight in weighted), minimized."""
        terms = _terms(weighted)
        objective = self.proto.objective
        objective.vars.extend(list(terms))
        objective.scaling_factor = 1.0
        objective.coeffs.extend(list(terms.values()))

    def solve(self, max_deterministic_time: float):
        """The solver's status (`cp_model_helper.CpSolverStatus`) on one worker."""
        cmh = _helper()
        parameters = cmh.SatParameters()
        parameters.num_workers = 1
        parameters.max_deterministic_time = max_deterministic_time
        solver = cmh.SolveWrapper()
        solver.set_parameters(parameters)
        self.response = solver.solve(self.proto)
        return self.response.status

    @property
    def deterministic_time(self) -> float:
        return self.response.deterministic_time

    def value(self, i: int) -> int:
        return self.response.solution[i]


def _terms(weighted: Iterable[tuple[int, int]]) -> dict[int, int]:
    """Coefficients by variable, merged, in variable order, zeros left out (as OR-Tools
    flattens a linear expression)."""
    merged: dict[int, int] = {}
    for i, w in weighted:
        merged[i] = merged.get(i, 0) + int(w)
    return {i: merged[i] for i in sorted(merged) if merged[i]}


def statuses():
    """(OPTIMAL, FEASIBLE, UNKNOWN) of the solver's statuses."""
    status = _helper().CpSolverStatus
    return status.OPTIMAL, status.FEASIBLE, status.UNKNOWN
