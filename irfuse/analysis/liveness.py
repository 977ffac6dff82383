"""Which SSA values of a `kas.program` contribute to its outputs.

A value is live if a `kas.return` operand depends on it.  Through a
`kas.loop`: a live result makes the matching yielded value live, and a live
block argument makes the matching iter_arg and the matching yielded value
(next iteration) live.  Solved as a fixpoint, so unused carried values die.
"""

from __future__ import annotations

from xdsl.ir import Operation, SSAValue

from irfuse.dialects.kas import LoopOp, ProgramOp, YieldOp


def live_values(program: ProgramOp) -> set[SSAValue]:
    live: set[SSAValue] = set()
    work: list[SSAValue] = list(program.return_op.values)

    def mark(v: SSAValue) -> None:
        if v not in live:
            work.append(v)

    while work:
        v = work.pop()
        if v in live:
            continue
        live.add(v)
        owner = v.owner
        if isinstance(owner, Operation):
            if isinstance(owner, LoopOp):
                k = v.index  # type: ignore[attr-defined]
                term = owner.body.block.last_op
                assert isinstance(term, YieldOp)
                mark(term.values[k])
            else:
                for o in owner.operands:
                    mark(o)
        else:  # block argument
            parent = owner.parent_op()
            if isinstance(parent, LoopOp):
                k = v.index  # type: ignore[attr-defined]
                mark(parent.iter_args[k])
                term = parent.body.block.last_op
                assert isinstance(term, YieldOp)
                mark(term.values[k])
    return live
