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

`random_element_program` writes element codes (generic ops on any shapes, masks, branches,
indexed loops) and `random_mesh_program` programs over meshes (gathers through one or two
connectivities, element code, scatters into nodal outputs).
"""

from __future__ import annotations

import functools
import math
import random

from irfuse.library.catalogue import Library, default_library

TYPES = ("matrix3x3", "vector3", "scalar", "matrix2x2", "vector2", "tensor3x3x3")


def _ops_by_signature(lib: Library) -> list[tuple[str, tuple[str, ...], str]]:
    """The suffixed ops on TYPES (not the generic ops' instances nor derivatives: which of those
    the process holds depends on what it compiled before, and a seed must give one program)."""
    from irfuse.library.catalogue import generated_name

    out = []
    for op in lib:
        if generated_name(op.name):
            continue
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


# --- element codes: generic ops on shapes of any size, masks, branches, indexed loops -----

ELEMENT_TYPES = ("scalar", "vector2", "vector3", "matrix2x2", "matrix3x3", "matrix2x3", "matrix3x2")
# Families whose value jumps or leaves the reals near some operand (a pole, a branch cut, a
# sign change): applied only to the program's inputs (values drawn away from the jump, as
# random inputs are), never to computed values that may sit on it within rounding.
GUARDED = ("log", "sqrt", "rsqrt", "pow", "ediv", "inv", "sign")
STEP_FAMILIES = ("floor", "floordiv", "mod")  # (whole steps: drawn on a stream of their own)
THRESHOLDS = ("0.25", "-0.5", "0.125", "-0.0625")  # what comparisons compare with (never a tie)


def _shape(t: str) -> tuple[int, ...]:
    from irfuse.frontend.syntax import parse_type_name

    return tuple(parse_type_name(t))


def _words(t: str) -> int:
    return math.prod(_shape(t))


def _shape_first(name: str, result: str, args: list[str]) -> list[str]:
    """A call's operands as written: `reshape` takes its result's shape first, as a string."""
    return ['"' + "x".join(map(str, _shape(result))) + '"', *args] if name == "reshape" else args


@functools.cache
def _family_signatures(types: tuple[str, ...]) -> tuple[tuple[str, tuple[str, ...], str], ...]:
    """(family, operand types, result type) of every generic op on these types, masks aside.
    Asked by every random element and mesh program and the same for each (the families are
    registered once, when `irfuse.library.families` is imported): found once a process, as
    instantiating each family on every tuple of types took 50-110 ms a program."""
    from itertools import product

    from irfuse.dialects.kas import kas_type_of_shape
    from irfuse.frontend.syntax import parse_type_name
    from irfuse.library.families import FAMILIES, HISTORY, PARAMETER_FIRST
    from irfuse.library.indexexpr import DefinitionError

    kas = {t: kas_type_of_shape(parse_type_name(t)) for t in types}
    out = []
    for name, fam in FAMILIES.items():
        # (families with a parameter in the name, and masks' logic, are written otherwise; a
        # loop's history is reverse mode's, reached through taped derivatives)
        if fam.arity is None or name in ("select", "and", "or", "xor", "not", "reshape") \
                or name in PARAMETER_FIRST + HISTORY:
            continue
        for ins in product(types, repeat=fam.arity):
            try:
                _, inst = fam.instantiate([kas[t] for t in ins])
            except DefinitionError:
                continue
            res = inst.result.spelling()
            if res in types or res == "mask":
                out.append((name, ins, res))
    return tuple(out)


def _stacks(types: tuple[str, ...]) -> list[tuple[str, tuple[str, ...], str]]:
    """`stack(v0, ..., vN-1)` of two or three values of one of `types` whose array is one too
    (N from its operands: written in a program, it takes no parameter)."""
    from irfuse.dialects.kas import kas_type_of_shape
    from irfuse.frontend.syntax import parse_type_name

    out = []
    for t in types:
        for n in (2, 3):
            res = kas_type_of_shape((n, *parse_type_name(t))).spelling()
            if res in types:
                out.append(("stack", (t,) * n, res))
    return out


def random_element_program(seed: int, calls: int, batch_wide: bool = True) -> str:
    """A random program of about `calls` statements in what element codes use: the generic ops
    (`irfuse.library.families`) on vectors and matrices square and not, suffixed ops beside
    them, comparisons into masks and their logic, `select`, `if`/`else` (on a comparison, a
    mask or an op's call giving one; variables assigned in one side or both), copies, and indexed loops `loop q K` that
    read per-element arrays and uniform tables at q and write per-element arrays (returned, or
    summed by `contract`); with `batch_wide`, uniform inputs and numbers as operands."""
    rng = random.Random(seed)
    lib = default_library()
    ops = [(name, ins, res) for name, ins, res in _family_signatures(ELEMENT_TYPES)]
    ops += [o for o in _ops_by_signature(lib) if all(t in ELEMENT_TYPES for t in (*o[1], o[2]))
            and o[0] not in ("sdiv", "srcp")]
    compare = [o for o in ops if o[2] == "mask"]
    ops = [o for o in ops if o[2] != "mask"]
    ops += [("reshape", (a,), b) for a in ELEMENT_TYPES for b in ELEMENT_TYPES  # (its shape: a string, first)
            if a != b and _words(a) == _words(b)]
    ops += _stacks(ELEMENT_TYPES)
    # (the ops of whole steps, floor, floordiv and mod: their own draws, a program without one
    # the program it was)
    stepped = [o for o in ops if o[0] in STEP_FAMILIES]
    ops = [o for o in ops if o[0] not in STEP_FAMILIES]
    steps = random.Random(seed * 1_000_003 + 17)
    declared: dict[str, str] = {}
    arrays: dict[str, tuple[str, int]] = {}  # name -> (entry type, entries)
    uniform: set[str] = set()
    inputs: list[str] = []
    live: dict[str, list[str]] = {}
    masks: list[str] = []
    unread: set[str] = set()
    lines: list[str] = []
    counter = 0
    made = 0
    # (the entries of copied entries' own draws: a program without one is the program it was)
    entries = random.Random(seed * 1_000_003 + 11)
    # (masks differing, `xor`, and a value between two thresholds, `and(lt(a, x), lt(x, b))`:
    # their own draws, a program without one the program it was)
    logic = random.Random(seed * 1_000_003 + 13)

    def new_var(t: str, prefix: str = "v") -> str:
        nonlocal counter
        counter += 1
        name = f"{prefix}{counter}"
        declared[name] = t
        return name

    def add_input(t: str, is_uniform: bool = False) -> str:
        v = new_var(t)
        inputs.append(v)
        if is_uniform:
            uniform.add(v)
        else:
            live.setdefault(t, []).append(v)
        return v

    for t in rng.sample(ELEMENT_TYPES, k=3) + ["scalar", "matrix3x3"]:
        add_input(t)
    uniforms: dict[str, list[str]] = {}
    if batch_wide:
        for t in rng.sample(ELEMENT_TYPES, k=2):
            uniforms.setdefault(t, []).append(add_input(t, True))

    def operand(t: str, family: str, index: str | None = None, may_be_uniform: bool = False) -> str:
        """A value of type t for an op's operand: guarded families read inputs only."""
        if family in GUARDED:
            pool = [v for v in inputs if declared[v] == t and v not in uniform and v not in arrays]
            if pool:
                return rng.choice(pool)
        if batch_wide and may_be_uniform and rng.random() < 0.25:
            if t == "scalar" and rng.random() < 0.5:
                return rng.choice(LITERALS)
            if uniforms.get(t):
                return rng.choice(uniforms[t])
        if index is not None and rng.random() < 0.35:
            entries = [a for a, (et, k) in arrays.items() if et == t and a in reads and k == trips[-1]]
            if entries:
                return f"{rng.choice(entries)}[{index}]"
        pool = live.get(t, [])
        fresh = [v for v in pool if v in unread]
        return rng.choice(fresh) if fresh and rng.random() < 0.7 else rng.choice(pool)

    def pick_op(target_type: str | None = None) -> tuple[str, tuple[str, ...], str] | None:
        if steps.random() < 0.012:
            choices = [o for o in stepped if all(live.get(t) for t in o[1])
                       and (target_type is None or o[2] == target_type)]
            if choices:
                return steps.choice(choices)
        choices = [o for o in ops if all(live.get(t) for t in o[1]) and (target_type is None or o[2] == target_type)]
        return rng.choice(choices) if choices else None

    def call(indent: str, target: str | None = None, index: str | None = None) -> str | None:
        """One op statement into `target` (a new variable when None); its target's name."""
        nonlocal made
        op = pick_op(declared[target] if target is not None else None)
        if op is None:
            return None
        name, ins, res = op
        args: list[str] = []
        for t in ins:
            args.append(operand(t, name, index, len(ins) > 1))
        if all(a.split("[")[0] in uniform or a in LITERALS for a in args):
            args[0] = rng.choice(live[ins[0]])  # (the value stays per element)
        for a in args:
            unread.discard(a.split("[")[0])
        if target is None:
            target = new_var(res)
            live.setdefault(res, []).append(target)
        unread.add(target)
        lines.append(f"{indent}{target} = {name}({', '.join(_shape_first(name, res, args))});")
        made += 1
        return target

    def mask(indent: str) -> str:
        """A comparison of a value with a threshold, or the logic of masks made before."""
        nonlocal made
        m = new_var("mask", "m")
        if len(masks) >= 2 and logic.random() < 0.3:  # (the logic of masks, drawn apart)
            how = logic.choice(("and", "or", "xor", "not"))
            args = logic.sample(masks, 2) if how != "not" else [logic.choice(masks)]
            lines.append(f"{indent}{m} = {how}({', '.join(args)});")
        elif len(masks) >= 2 and rng.random() < 0.4:
            how = rng.choice(("and", "or", "not"))
            if how == "or" and logic.random() < 0.4:
                how = "xor"
            args = rng.sample(masks, 2) if how != "not" else [rng.choice(masks)]
            lines.append(f"{indent}{m} = {how}({', '.join(args)});")
        else:
            name, _, _ = rng.choice([o for o in compare if o[1] == ("scalar", "scalar")])
            lines.append(f"{indent}{m} = {name}({operand('scalar', name)}, {rng.choice(THRESHOLDS)});")
        masks.append(m)
        made += 1
        return m

    def branch() -> None:
        """if/else: some variables assigned on both sides, some on one (kept from before on the
        other), some new ones only inside (temporaries of a side)."""
        nonlocal made
        kind = rng.random()
        if masks and kind < 0.4:
            cond = rng.choice(masks)
        elif kind < 0.65:  # an op's call giving the mask: a comparison, or logic of masks and comparisons
            test = f"{rng.choice(('gt', 'lt', 'ge', 'le'))}({operand('scalar', 'gt')}, {rng.choice(THRESHOLDS)})"
            if logic.random() < 0.3:  # (between two thresholds: Python's `lo < x <= hi`)
                x = test[test.index("(") + 1:test.rindex(",")]
                lo, hi = sorted(logic.sample(THRESHOLDS, 2), key=float)
                test = f"and({logic.choice(('lt', 'le'))}({lo}, {x}), {logic.choice(('lt', 'le'))}({x}, {hi}))"
            cond = rng.choice([test, f"not({test})"] + ([f"not({rng.choice(masks)})",
                                                          f"and({rng.choice(masks)}, {test})"] if masks else []))
        else:
            cond = f"{operand('scalar', 'gt')} {rng.choice(('<', '<=', '>', '>=', '!='))} {rng.choice(THRESHOLDS)}"
        before = [v for t, vs in live.items() for v in vs if v not in inputs]
        if not before:
            call("")
            return
        lines.append(f"if ({cond}) {{")
        targets = rng.sample(before, k=min(len(before), rng.randint(1, 2)))
        for v in targets:
            if rng.random() < 0.3:  # a temporary of this side, then the variable from it
                temp = call("  ")
                if temp is not None:
                    live[declared[temp]].remove(temp)
                    unread.discard(temp)
            call("  ", v)
        if rng.random() < 0.6:
            lines.append("} else {")
            for v in rng.sample(targets, k=rng.randint(1, len(targets))) if targets else []:
                call("  ", v)
        lines.append("}")
        for v in targets:
            unread.add(v)

    reads: set[str] = set()
    trips: list[int] = [0]  # the entries of the arrays the loop being written reads

    def indexed_loop() -> None:
        """`loop q K`: arrays read at q (a per-element input, a uniform table), an array written
        at q, a value carried across iterations; the written array returned or summed."""
        nonlocal made
        k = rng.choice((2, 3, 4))
        t = rng.choice(ELEMENT_TYPES)
        arr = new_var(t, "a")
        arrays[arr] = (t, k)
        inputs.append(arr)
        reads.add(arr)
        if batch_wide and rng.random() < 0.6:
            table = new_var(rng.choice(ELEMENT_TYPES), "u")
            arrays[table] = (declared[table], k)
            uniform.add(table)
            inputs.append(table)
            reads.add(table)
        rt = rng.choice([x for x in ELEMENT_TYPES if live.get(x)])
        out = new_var(rt, "o")
        arrays[out] = (rt, k)
        lines.append(f"loop q {k} {{")
        trips.append(k)
        acc = [v for v in live.get("scalar", []) if v not in inputs]
        for _ in range(rng.randint(1, 3)):
            call("  ", index="q")
        lines.append(f"  {out}[q] = {pick_entry(rt)};")
        made += 1
        if acc and rng.random() < 0.5:
            call("  ", rng.choice(acc), index="q")  # a value carried from one iteration to the next
        trips.pop()
        lines.append("}")
        if rt == "scalar" and rng.random() < 0.5:
            s = new_var("scalar")
            lines.append(f"{s} = contract(\"q->\", {out});")
            live["scalar"].append(s)
            unread.add(s)
            made += 1
        else:
            unread.add(out)
        if rng.random() < 0.4:  # an entry read outside the loop: a copy at a number
            c = new_var(rt)
            lines.append(f"{c} = {out}[{rng.randrange(k)}];")
            live.setdefault(rt, []).append(c)
            unread.add(c)
            made += 1
            if _row_type(rt) is not None and entries.random() < 0.8:  # and an entry of it, returned (`A[i, j]` in Python)
                e = f"u{counter}"  # (no number of the counter's: the names after it stay)
                declared[e] = _row_type(rt)
                lines.append(f"{e} = {c}[{entries.randrange(int(rt[6:].split('x')[0]))}];")
                unread.add(e)

    def pick_entry(t: str) -> str:
        """The op call written to an array's entry: the latest value of its type, or a copy."""
        op = pick_op(t)
        if op is None or rng.random() < 0.2:
            return rng.choice(live[t])
        name, ins, _ = op
        args = [operand(x, name, "q", len(ins) > 1) for x in ins]
        if all(a.split("[")[0] in uniform or a in LITERALS for a in args):
            args[0] = rng.choice(live[ins[0]])  # (the value stays per element)
        for a in args:
            unread.discard(a.split("[")[0])
        return f"{name}({', '.join(_shape_first(name, t, args))})"

    while made < calls:
        r = rng.random()
        if r < 0.12:
            mask("")
        elif r < 0.22 and masks:
            name = rng.choice(ELEMENT_TYPES)
            if live.get(name):
                target = new_var(name)
                lines.append(f"{target} = select({rng.choice(masks)}, {operand(name, 'select', None, True)}, "
                             f"{operand(name, 'select')});")
                live[name].append(target)
                unread.add(target)
                made += 1
        elif r < 0.32:
            branch()
            made += 1
        elif r < 0.42:
            indexed_loop()
        elif r < 0.47:
            t = rng.choice([t for t in live if live[t]])
            c = new_var(t)
            src_v = operand(t, "copy")
            unread.discard(src_v)
            lines.append(f"{c} = {src_v};")
            live[t].append(c)
            unread.add(c)
            made += 1
        else:
            call("")
    outputs = sorted(unread, key=lambda v: (int(v.lstrip("vamou")), v))  # (u12 beside v12: by name)
    if not outputs:  # (every statement made a mask, which is not returned: the first input is)
        outputs = [next(v for v in inputs if v not in uniform and v not in arrays)]
    decls: dict[str, list[str]] = {}
    for v, t in declared.items():
        entry = f"{v}[{arrays[v][1]}]" if v in arrays else v
        decls.setdefault(("uniform " if v in uniform else "") + t, []).append(entry)
    head = [f"{t} {', '.join(vs)};" for t, vs in decls.items()]
    return "\n".join([f"// random element program: seed {seed}, about {calls} statements", *head,
                      f"input {', '.join(inputs)};", *lines, f"return {', '.join(outputs)};", ""])


# --- meshes: gathers through connectivities, element code, scatters -----------------------

# What element code on gathered values may not apply: families with poles or branch cuts
# (random inputs keep away from them, computed values may not) and ones that blow values up
# along a chain.
# (and the whole steps, drawn only by the element programs, on a stream of their own)
_MESH_AVOIDED = (*GUARDED, "exp", "ediv", "sdiv", "srcp", *STEP_FAMILIES)


WIDE_KS = (65, 125, 216, 256)  # nodes an element past 64: orders 4 and 5 of hexahedra, a full scatter group
# Past a group's 256 slots (an element a group of its own, its slots numbered in two bytes): order 6
# of hexahedra and one past a group, taken by every sixth seed in place of its K (a seed's program
# otherwise as it was: no draw of the generator's is added).
PAST_GROUP_KS = {65: 343, 125: 343, 216: 257, 256: 257}


def _row_type(t: str) -> str | None:
    """The type of an entry of an array of type `t` (`vector3` -> `scalar`, `matrix4x3` ->
    `vector3`), None for a scalar."""
    if t.startswith("vector"):
        return "scalar"
    if t.startswith("matrix"):
        return f"vector{t.split('x')[-1]}"
    return None


def random_mesh_program(seed: int, calls: int, for_tangents: bool = False, wide: bool = False) -> str:
    """A random program over a mesh of about `calls` element statements: one or two
    connectivities (`indexK`, K from 2 to 4; two of the same K at times), one to three nodal
    inputs (scalars or vectors of 2 or 3) each gathered through one connectivity or both
    (sometimes again inside a loop or a branch), generic ops on the gathered values, a
    per-element input and a uniform one, then at least one scatter per connectivity of a
    value of its K rows into a nodal output (values nothing read returned per element; a
    value scattered through both connectivities where they have the same K). About half the
    programs hold nodal statements (run per node): one before the gathers, whose value is
    gathered instead of a nodal input's, and one after the scatters, of a scatter's sums or
    of one entry of them (and a nodal input or the uniform input; linear or not), returned as
    well (the sums it reads at times not: then it runs in the kernel adding them), and at
    times gathered again (a second pass over the elements). Reductions (`sum`, `max`, `min`)
    of a nodal input and of a scatter's sums (or of one entry of them) are returned at times.
    `wide`: one connectivity of 65 to 256 nodes an element (`WIDE_KS`: elements of high order)
    instead, every sixth seed 257 or 343 (`PAST_GROUP_KS`)."""
    rng = random.Random(seed)
    ks = [rng.choice(WIDE_KS)] if wide else rng.sample((2, 3, 4), k=rng.choice((1, 1, 2)))
    if wide and seed % 6 == 5:
        ks = [PAST_GROUP_KS[ks[0]]]
    if len(ks) == 2 and rng.random() < 0.5:  # two connectivities of the same K
        ks[1] = ks[0]
    conns = [(f"c{i + 1}", k) for i, k in enumerate(ks)]
    nodal = [(f"x{i + 1}", rng.choice((0, 2, 3))) for i in range(rng.randint(1, 3))]
    widths = sorted({d for _, d in nodal if d} | {3})
    types = {"scalar"} | {f"vector{d}" for d in widths} | {f"matrix{d}x{d}" for d in widths}
    for _, k in conns:
        types |= {f"vector{k}"} | {f"matrix{k}x{d}" for d in widths}
    ops = [o for o in _family_signatures(tuple(sorted(types))) if o[2] != "mask" and o[0] not in _MESH_AVOIDED]
    declared: dict[str, str] = {}
    live: dict[str, list[str]] = {}
    unread: set[str] = set()
    lines: list[str] = []
    counter = 0

    def new_var(t: str, prefix: str = "v") -> str:
        nonlocal counter
        counter += 1
        declared[f"{prefix}{counter}"] = t
        return f"{prefix}{counter}"

    def made(v: str) -> None:
        live.setdefault(declared[v], []).append(v)
        unread.add(v)

    element_input = new_var(rng.choice(("scalar", "matrix3x3")), "e")
    uniform_input = new_var("scalar", "u")
    made(element_input)
    per_node = rng.random() < 0.5 and not for_tangents  # nodal statements before the gathers and after the scatters
    read = {x: x for x, _ in nodal}  # what the gathers of each nodal input read
    if per_node:
        x, d = rng.choice(nodal)
        y = new_var(f"vector{d}" if d else "scalar", "r")
        lines.append(f"{y} = " + rng.choice((f"scale({x}, {uniform_input})", f"add({x}, {x})",
                                             f"scale({x}, {rng.choice(LITERALS)})")) + ";")
        read[x] = y
    gathered = []
    for x, d in nodal:
        for c, k in [rng.choice(conns)] if for_tangents else rng.sample(conns, k=rng.randint(1, len(conns))):
            g = new_var(f"matrix{k}x{d}" if d else f"vector{k}", "g")
            lines.append(f"{g} = gather({read[x]}, {c});")
            made(g)
            gathered.append((g, c, read[x]))
    # Gathers inside a loop and a branch (each runs once, before them), into values the loop
    # carries and the branch selects.
    if rng.random() < 0.5 and not for_tangents:
        g, c, x = rng.choice(gathered)
        inner = new_var(declared[g], "g")
        lines += [f"loop {rng.randint(1, 3)} {{", f"  {inner} = gather({x}, {c});", f"  {g} = add({g}, {inner});", "}"]
    if rng.random() < 0.5 and declared[element_input] == "scalar" and not for_tangents:
        g, c, x = rng.choice(gathered)
        other = new_var(declared[g], "g")
        lines += [f"if ({element_input} > 0.25) {{", f"  {g} = neg({g});", "} else {", f"  {other} = gather({x}, {c});",
                  f"  {g} = sub({g}, {other});", "}"]
    reads = random.Random(seed * 1_000_003 + 7)  # (the entry reads' own draws)
    for _ in range(calls):
        # An entry of an array read by index (`a[K]`, op `item_K`): a row of a gathered matrix,
        # words that start past the value's first (the owner-computes tangent read the first
        # row for every K before 2026-12-06).
        # (in the programs drawn for tangents, whose streams this does not move elsewhere)
        arrays = [v for t, vs in sorted(live.items()) if _row_type(t) in types for v in vs] if for_tangents else []
        if arrays and reads.random() < 0.2:
            a = reads.choice(arrays)
            row = new_var(_row_type(declared[a]))
            lines.append(f"{row} = {a}[{reads.randrange(int(declared[a][6:].split('x')[0]))}];")
            unread.discard(a)
            made(row)
        choices = [o for o in ops if all(live.get(t) for t in o[1])]
        name, ins, res = rng.choice(choices)
        args = []
        for t in ins:
            if t == "scalar" and rng.random() < 0.3:
                args.append(rng.choice((uniform_input, *LITERALS)))
                continue
            fresh = [v for v in live[t] if v in unread]
            args.append(rng.choice(fresh) if fresh and rng.random() < 0.7 else rng.choice(live[t]))
        if all(a == uniform_input or a in LITERALS for a in args):
            args[0] = rng.choice(live.get(ins[0], [element_input]))
        target = new_var(res)
        lines.append(f"{target} = {name}({', '.join(args)});")
        unread.difference_update(args)
        made(target)
    outputs = []
    for c, k in conns:
        rows = [v for t, vs in live.items() if t == f"vector{k}" or t.startswith(f"matrix{k}x") for v in vs]
        rows = sorted(rows, key=lambda v: (v not in unread, -int(v[1:])))[:3]  # unread and recent first
        if not rows:
            continue
        for value in rows[:rng.randint(1, 2)]:
            t = declared[value]
            out = new_var(f"vector{t.split('x')[-1]}" if t.startswith("matrix") else "scalar", "r")
            lines.append(f"{out} = scatter({value}, {c});")
            unread.discard(value)
            outputs.append(out)
    if len(conns) == 2 and conns[0][1] == conns[1][1] and rng.random() < 0.8:
        # One value scattered through both connectivities (each sums its own groups).
        k = conns[0][1]
        rows = [v for t, vs in live.items() if t == f"vector{k}" or t.startswith(f"matrix{k}x") for v in vs]
        if rows:
            value = rng.choice(rows)
            t = declared[value]
            for c, _ in conns:
                out = new_var(f"vector{t.split('x')[-1]}" if t.startswith("matrix") else "scalar", "r")
                lines.append(f"{out} = scatter({value}, {c});")
                outputs.append(out)
            unread.discard(value)
    if not outputs:  # (no value of a connectivity's rows: scatter a gathered one)
        g, c, _ = gathered[0]
        t = declared[g]
        out = new_var(f"vector{t.split('x')[-1]}" if t.startswith("matrix") else "scalar", "r")
        lines.append(f"{out} = scatter({g}, {c});")
        outputs.append(out)
    if per_node:  # a nodal statement on a scatter's sums
        r = rng.choice(outputs)
        t = declared[r]
        same = [x for x, d in nodal if (f"vector{d}" if d else "scalar") == t]
        whole = rng.choice([f"scale({r}, {uniform_input})", f"neg({r})", f"emul({r}, {r})", f"tanh({r})",
                            *(f"sub({r}, {x})" for x in same)])
        if t.startswith("vector") and reads.random() < 0.3:
            # One entry of the sums (`r[K]`, a nodal scalar): the kernel adding them keeps the
            # words its reader takes (a copy of one word, or an op of it).
            k = reads.randrange(int(t[6:]))
            z = new_var("scalar", "r")
            lines.append(f"{z} = " + reads.choice([f"{r}[{k}]", f"scale({r}[{k}], {uniform_input})",
                                                    f"tanh({r}[{k}])"]) + ";")
        else:
            z = new_var(t, "r")
            lines.append(f"{z} = {whole};")
        outputs.append(z)
        if rng.random() < 0.5:  # the sums read only there: the statement runs in the kernel adding them
            outputs.remove(r)
        if rng.random() < 0.3:  # gathered again: a second pass over the elements
            c, k = rng.choice(conns)
            t = declared[z]
            g = new_var(f"matrix{k}x{t[6:]}" if t.startswith("vector") else f"vector{k}", "g")
            w = new_var(declared[g])
            lines += [f"{g} = gather({z}, {c});", f"{w} = scale({g}, {uniform_input});"]
            outputs.append(w)
    for _ in range(0 if for_tangents else rng.choice((0, 0, 1, 2))):  # reductions over the nodes: of a
        # nodal input, of a sum
        kind = rng.choice(("sum", "max", "min"))
        x = rng.choice([x for x, _ in nodal] + [o for o in outputs if o.startswith("r")])
        t = declared.get(x) or next(f"vector{d}" if d else "scalar" for y, d in nodal if y == x)
        if t.startswith("vector") and reads.random() < 0.3:  # of one entry (`sum(x[K])`)
            x, t = f"{x}[{reads.randrange(int(t[6:]))}]", "scalar"
        s = new_var(t, "s")
        lines.append(f"{s} = {kind}({x});")
        outputs.append(s)
    # What nothing read is returned per element, so that no statement is dead.
    outputs += sorted((v for v in unread if v.startswith("v")), key=lambda v: int(v[1:]))
    decls: dict[str, list[str]] = {}
    for v, t in declared.items():
        kind = "uniform " if v == uniform_input or v.startswith("s") else "nodal " if v.startswith("r") else ""
        decls.setdefault(kind + t, []).append(v)
    for x, d in nodal:
        decls.setdefault(f"nodal {'vector%d' % d if d else 'scalar'}", []).append(x)
    for c, k in conns:
        decls.setdefault(f"index{k}", []).append(c)
    head = [f"{t} {', '.join(vs)};" for t, vs in decls.items()]
    inputs = [x for x, _ in nodal] + [c for c, _ in conns] + [element_input, uniform_input]
    return "\n".join([f"// random mesh program: seed {seed}, {calls} element statements", *head,
                      f"input {', '.join(inputs)};", *lines, f"return {', '.join(outputs)};", ""])
