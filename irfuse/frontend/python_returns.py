"""A Python program's `return`s inside if/else, moved to the function's end before tracing.

Element codes return early: a return mapping gives the trial stress where it is elastic
(`if f <= 0: return sig`) and the corrected one after. The tracer computes both sides of an
`if` and selects each variable assigned there element by element (`_Translator.branch`), so
such a body is the same program written with one `return` at its end: the statements after an
`if` whose side returns move into the side that does not (into both where neither always
returns), and every `return` becomes an assignment of its values to one variable a place,
returned once at the end (`returns_at_end`). A place every `return` fills with the same
variable returns that variable (the output keeps its name); another place a fresh variable
`out<k>`, the name an expression returned there takes. What Python never runs after a
`return` is left out, as Python leaves it.

Where neither side of an `if` always returns (a `return` in an `if` inside it), what follows is
computed on both sides and selected, which is the same element by element; a batch-wide sum or
a scatter there would sum each side's values apart, which the body does not say, so it is
refused (`crosses`).
"""

from __future__ import annotations

import ast
from collections.abc import Callable

Error = Callable[[ast.AST, str], Exception]


def _returns_within(statements: list[ast.stmt]) -> list[ast.Return]:
    """The `return`s in `statements` and in the statements they hold, in source order (not
    those of a function or class defined inside, which the tracer refuses as it is)."""
    found, stack = [], list(statements)
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Return):
            found.append(node)
        elif not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            stack += ast.iter_child_nodes(node)
    return sorted(found, key=lambda r: (r.lineno, r.col_offset))


def _always_returns(statements: list[ast.stmt]) -> bool:
    """Whether every path through `statements` ends in a `return`."""
    for s in statements:
        if isinstance(s, ast.Return):
            return True
        if isinstance(s, ast.If) and s.orelse and _always_returns(s.body) and _always_returns(s.orelse):
            return True
    return False


def _values(ret: ast.Return) -> list[ast.expr]:
    return list(ret.value.elts) if isinstance(ret.value, ast.Tuple) else [ret.value]


def _fresh(k: int, taken: set[str]) -> str:
    name, i = f"out{k}", 0
    while name in taken:
        i += 1
        name = f"out{k}_{i}"
    taken.add(name)
    return name


def returns_at_end(body: list[ast.stmt], error: Error, taken: set[str], line_offset: int = 0,
                   crosses: Callable[[ast.Call], bool] = lambda call: False) -> tuple[list[ast.stmt], set[str]]:
    """`body` (a function's, without its docstring) with its one `return` last, and the
    variables made for the returned places (see the module); `body` itself where its only
    `return` is its last statement or it has none (the caller says what a program ends with).
    `taken`: the function's names, which a made variable does not take; `line_offset`: the
    function's first line in its file less one (messages cite lines). `error(node, text)`
    makes the located error raised for a `return` in a loop, a bare `return`, returns of
    different counts, a path that ends without one, and a call `crosses` says combines
    elements (a batch-wide sum, a scatter) computed on both sides of an `if` (see the module)."""
    returns = _returns_within(body)
    if not returns or (len(returns) == 1 and body[-1] is returns[0]):
        return body, set()
    for s in body:
        for node in ast.walk(s):
            if isinstance(node, (ast.For, ast.While)) and _returns_within(node.body + node.orelse) and \
                    _returns_within(node.body + node.orelse)[0] in returns:
                inner = _returns_within(node.body + node.orelse)[0]
                raise error(inner, "a 'return' inside a loop cannot be traced (every trip of a loop runs): assign "
                                   "the value in the loop and return it after")
    for ret in returns:
        if ret.value is None:
            raise error(ret, "a 'return' gives the program's values (a bare 'return' gives none)")
    first = returns[0]
    line = first.lineno + line_offset
    count = len(_values(first))
    for ret in returns[1:]:
        if len(_values(ret)) != count:
            raise error(ret, f"this 'return' gives {len(_values(ret))} value{'s' * (len(_values(ret)) != 1)} "
                             f"where the one at line {line} gives {count}: every 'return' gives as many")
    # A place every return fills with one variable returns it; another, a variable of its own.
    names: list[str | None] = []
    for k in range(count):
        at_k = [_values(r)[k] for r in returns]
        same = all(isinstance(v, ast.Name) and v.id == at_k[0].id for v in at_k) if isinstance(at_k[0], ast.Name) \
            else False
        names.append(None if same else _fresh(k, taken))
    made = {n for n in names if n is not None}

    def assignments(ret: ast.Return) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for value, name in zip(_values(ret), names):
            if name is not None:
                target = ast.copy_location(ast.Name(id=name, ctx=ast.Store()), value)
                out.append(ast.copy_location(ast.Assign(targets=[target], value=value), value))
        return out

    def lowered(statements: list[ast.stmt], end: ast.AST) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for i, s in enumerate(statements):
            if isinstance(s, ast.Return):
                return out + assignments(s)  # (what follows never runs)
            if isinstance(s, ast.If) and _returns_within([s]):
                rest = statements[i + 1:]
                then = s.body if _always_returns(s.body) else s.body + rest
                orelse = s.orelse if _always_returns(s.orelse) else s.orelse + rest
                if then is not s.body and orelse is not s.orelse:  # (`rest` on both sides)
                    for node in (n for r in rest for n in ast.walk(r)):
                        if isinstance(node, ast.Call) and crosses(node):
                            raise error(node, f"this combines the batch's elements after the 'if' at line "
                                              f"{s.lineno + line_offset}, whose sides return on some paths only: "
                                              "it would be computed on each side apart; return on every path of "
                                              "that 'if', or compute it before")
                branch = ast.If(test=s.test, body=lowered(then, s) or [ast.copy_location(ast.Pass(), s)],
                                orelse=lowered(orelse, s))
                return out + [ast.copy_location(branch, s)]
            out.append(s)
        raise error(statements[-1] if statements else end,
                    f"the program ends here without a 'return', where the one at line {line} gives its "
                    "values: every path returns them")

    last = returns[-1]
    result = [ast.copy_location(ast.Name(id=name if name is not None else value.id, ctx=ast.Load()), value)
              for value, name in zip(_values(first), names)]
    value = result[0] if count == 1 else ast.copy_location(ast.Tuple(elts=result, ctx=ast.Load()), last)
    return lowered(body, body[-1]) + [ast.copy_location(ast.Return(value=value), last)], made
