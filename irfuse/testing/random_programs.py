"""Random valid KAS programs over the op catalogue, for planner benchmarks and differential tests.

`random_program(seed, calls)` writes a program of exactly `calls` statements
(loops optional) in which every statement's value reaches an output: chains,
diamonds (values read by several statements), wide fan-out, several outputs,
reassignment of a variable, and loops that carry values (1 to 3 iterations, some
with a loop nested in their body; statements after a loop read what it carried).
`loop_rate` is how often a statement starts a loop instead.

Two variants reach what that shape cannot:
- `dead=True` returns only some of the values nobody read, so whole chains and loops
  are dead, among them loops carrying values computed before them (what `kas-dce`
  once crashed on);
- `dense=True` makes every statement read recent values and reassign variables often,
  as long generated programs do: many calls, of which few stay live, in long
  dependent chains (what made the fusion search slow);
- `reassign_inputs=True` lets a statement assign an input whose value was already read, so
  that the input's new value may be returned under its name while a later kernel still reads
  the old one;
- `batch_wide=True` adds values that are the same for the whole batch: a uniform input,
  numeric literals as scalar operands, reductions (sum, max, min) outside loops whose
  results later statements read (so kernels after a reduction), and statements of
  uniform values only (run once); every one of them a statement of the count.
"""

from __future__ import annotations

import random

from irfuse.library.catalogue import Library, default_library

TYPES = ("matrix3x3", "vector3", "scalar", "matrix2x2", "vector2", "tensor3x3x3")


def _ops_by_signature(lib: Library) -> list[tuple[str, tuple[str, ...], str]]:
    out = []
    for op in lib:
        ins = tuple(t.spelling() for t in op.operand_types)
        res = op.result_type.spelling()
        if all(t in TYPES for t in ins) and res in TYPES:
            out.append((op.name, ins, res))
    return out


LITERALS = ("0.5", "2", "-1.25", "3e-1", ".75", "1.5E0")
REDUCTIONS = ("sum", "max", "min")


def random_program(seed: int, calls: int, loops: bool = True, library: Library | None = None,
                   dead: bool = False, dense: bool = False, loop_rate: float = 0.1,
                   batch_wide: bool = False, reassign_inputs: bool = False) -> str:
    rng = random.Random(seed)
    ops = _ops_by_signature(library or default_library())
    # Avoid ops that make values explode or vanish over long chains (division, reciprocal).
    ops = [o for o in ops if o[0] not in ("sdiv", "srcp")]
    counter = 0
    declared: dict[str, str] = {}

    def new_var(t: str) -> str:
        nonlocal counter
        counter += 1
        name = f"v{counter}"
        declared[name] = t
        return name

    inputs = [new_var(t) for t in rng.sample(TYPES, k=rng.randint(2, 4))]
    for t in TYPES:  # one input of every type keeps every op reachable
        if t not in declared.values():
            inputs.append(new_var(t))
    live: dict[str, list[str]] = {}
    for v in inputs:
        live.setdefault(declared[v], []).append(v)
    uniform: set[str] = set()  # variables holding one value for the whole batch
    ulive: dict[str, list[str]] = {}  # uniform values by type
    if batch_wide:
        u = new_var(rng.choice(TYPES[:3]))
        inputs.append(u)
        uniform.add(u)
        ulive.setdefault(declared[u], []).append(u)
    lines: list[str] = []
    made = 0
    unread: set[str] = set()

    def assigned_in(block: list[str]) -> set[str]:
        """Variables assigned in these lines."""
        return {line.split("=")[0].strip() for line in block if "=" in line}

    def uniform_statement() -> bool:
        """A reduction, or a call of uniform values only, into a new uniform variable."""
        nonlocal made
        if rng.random() < 0.6 or not ulive:
            types = [t for t in live if t in TYPES]
            t = rng.choice(types)
            fresh = [v for v in live[t] if v in unread]
            arg = rng.choice(fresh or live[t])
            target, call = new_var(t), f"{rng.choice(REDUCTIONS)}({arg})"
            unread.discard(arg)
        else:
            choices = [o for o in ops if all(t in ulive or t == "scalar" for t in o[1])]
            if not choices:
                return False
            name, ins, res = rng.choice(choices)
            args = [rng.choice(ulive[t]) if t in ulive and (t != "scalar" or rng.random() < 0.6)
                    else rng.choice(LITERALS) for t in ins]
            for a in args:
                unread.discard(a)
            target, call = new_var(res), f"{name}({', '.join(args)})"
        uniform.add(target)
        ulive.setdefault(declared[target], []).append(target)
        unread.add(target)
        lines.append(f"{target} = {call};")
        made += 1
        return True

    def statement(indent: str, target: str | None = None) -> list[str]:
        """One statement; `target`: the variable it must assign. Returns the variables it read."""
        nonlocal made
        choices = [o for o in ops if all(t in live for t in o[1])
                   and (target is None or o[2] == declared[target])]
        if not choices:
            return []
        name, ins, res = rng.choice(choices)
        # Prefer values nobody has read yet, so every statement feeds an output.
        args = []
        for t in ins:
            fresh = [v for v in live[t] if v in unread]
            if dense:
                args.append(rng.choice(live[t][-3:]))  # the most recent values of the type
            else:
                args.append(rng.choice(fresh) if fresh and rng.random() < 0.7 else rng.choice(live[t]))
        if batch_wide and len(args) > 1:
            # One operand (never all of them: the value stays per element) may be batch-wide.
            k = rng.randrange(len(args))
            if ins[k] == "scalar" and rng.random() < 0.3:
                args[k] = rng.choice(LITERALS)
            elif ins[k] in ulive and rng.random() < 0.4:
                args[k] = rng.choice(ulive[ins[k]])
        for a in args:
            unread.discard(a)
        if dense:  # reassign a recent variable of the type, read or not: its old value may die
            spent = [v for v in live.get(res, [])[-4:] if v not in inputs and v not in args]
        else:
            spent = [v for v in live.get(res, []) if v not in inputs and v not in unread and v not in args]
        if reassign_inputs and target is None and rng.random() < 0.3:
            # An input already read gets a new value (returned under the input's name when it
            # is an output): runs must not let a kernel's write reach a later reader of the
            # input (what chunked runs once did).
            read = [v for v in inputs if v not in uniform and declared[v] == res and v not in unread
                    and v not in args]
            if read:
                target = rng.choice(read)
        if target is not None:
            pass
        elif rng.random() < (0.5 if dense else 0.2) and spent:
            target = rng.choice(spent)  # reassignment of a variable whose value was already read
        else:
            target = new_var(res)
            live.setdefault(res, []).append(target)
        unread.add(target)
        lines.append(f"{indent}{target} = {name}({', '.join(args)});")
        made += 1
        return args

    def write_loop(indent: str, most: int, nested: bool) -> None:
        """A loop of 2 to `most` statements (a nested loop counting as its own)."""
        body = rng.randint(2, min(4, most))
        lines.append(f"{indent}loop {rng.choice((1, 2, 3))} {{")
        start = len(lines)
        read: list[str] = []
        left = body - 1
        while left > 0:
            if nested and left >= 2 and rng.random() < 0.3:
                before = made
                write_loop(indent + "  ", left, False)
                left -= made - before
            else:
                read += statement(indent + "  ")
                left -= 1
        # The body's last statement reassigns a value computed before the loop that the body
        # read: the loop carries it (when `dead`, often a loop whose results all die).
        before = [v for v in dict.fromkeys(read)
                  if v in declared and v not in inputs and v not in uniform and v not in assigned_in(lines[start:])]
        if not (before and (dead or dense or rng.random() < 0.5)
                and statement(indent + "  ", rng.choice(before))):
            statement(indent + "  ")
        lines.append(f"{indent}}}")

    while made < calls:
        if loops and calls - made >= 3 and rng.random() < loop_rate:
            write_loop("", calls - made, True)
        elif not (batch_wide and rng.random() < 0.25 and uniform_statement()):
            statement("")
    outputs = sorted(unread, key=lambda v: int(v[1:]))[:6] or [lines[-1].split()[0]]
    if dead or dense:
        # Only some values are returned: the rest, and what only they read, are dead.
        outputs = sorted(rng.sample(outputs, k=max(1, len(outputs) // 2)), key=lambda v: int(v[1:]))
    else:
        # Anything still unread becomes an output too, so no statement is dead.
        outputs = sorted(set(outputs) | unread, key=lambda v: int(v[1:]))
    decls = {}
    for v, t in declared.items():
        decls.setdefault(("uniform " if v in uniform else "") + t, []).append(v)
    head = [f"{t} {', '.join(vs)};" for t, vs in decls.items()]
    return "\n".join([f"// random program: seed {seed}, {calls} statements", *head,
                      f"input {', '.join(inputs)};", *lines, f"return {', '.join(outputs)};", ""])
