"""Plain-data classes for what every process that loads a plan creates: `@record` gives a
class of annotated fields what `@dataclass` gives one (an `__init__` taking the fields in
order, defaults and `field(default_factory=...)` included; `__repr__`; `__eq__` and, when
frozen, `__hash__` over the fields; a frozen class's attributes refused after `__init__` with
`dataclasses.FrozenInstanceError`; `__match_args__`; a subclass adding fields after its base's;
the fields `dataclasses.fields`, `replace` and `asdict` read), its `__init__` written by one
`exec` for the class and its other methods closures over the fields' names.

Why not `dataclasses.dataclass`: on CPython 3.11 and 3.12 it runs one `exec` for each method
it writes, about 0.44 ms a frozen class of eight fields against 0.08 here (compiling text is
most of either); a plan's loading creates some twenty such classes in a fresh process, a cold
compile over a hundred (`benchmarks/NOTES.md`, a cached program's load). irfuse's plain-data
classes are records, but for those xDSL handles (passes, dialects), the diagnostics (below the
artifact) and those a record cannot be.
What `dataclasses.fields`, `replace` and `asdict` read is each field's `Field` in the class's
`__dataclass_fields__`, marked a field as the dataclass module marks it (`_FIELD`: a name of
that module's own, checked by `tests/test_records.py` on the Python that runs the tests).
Fields are plain: a default or a factory, no other option of `field` but `repr=False`, no
`__post_init__`, and the class writes none of the methods a record writes (each refused by name).
"""

from __future__ import annotations

import dataclasses
from dataclasses import MISSING, Field, FrozenInstanceError
from operator import attrgetter

_FIELDS = "__record_fields__"  # the class's fields in order, its bases' first


def record(cls=None, *, frozen: bool = False, eq: bool = True):
    """The decorator (see the module): `@record`, `@record(frozen=True)`, `@record(eq=False)`
    (compared and hashed by identity)."""
    if cls is None:
        return lambda c: _make(c, frozen, eq)
    return _make(cls, frozen, eq)


def _make(cls, frozen: bool, eq: bool):
    if any("__dataclass_fields__" in b.__dict__ and _FIELDS not in b.__dict__ for b in cls.__mro__[1:]):
        raise TypeError(f"{cls.__name__}: a record's bases are records, not dataclasses (whose fields it would "
                        "not take)")
    fields = dict(getattr(cls, _FIELDS, {}))  # name -> default (MISSING, a value, or a Field)
    for name, kind in cls.__dict__.get("__annotations__", {}).items():
        if str(kind).startswith(("ClassVar", "typing.ClassVar")):
            continue
        fields[name] = cls.__dict__.get(name, MISSING)
    names = list(fields)
    options = [d for d in fields.values() if isinstance(d, Field)]
    if "__post_init__" in dir(cls) or any(not d.init or not d.compare or d.hash is not None
                                          or d.kw_only not in (MISSING, False) for d in options) \
            or any(n in cls.__dict__ for n in ("__eq__", "__hash__", "__repr__", "__init__")):
        raise TypeError(f"{cls.__name__}: a record's fields are plain and its methods its own (no __post_init__, "
                        "no field options but defaults and repr=False, no methods of its own that it would write): "
                        "make it a dataclass")
    env = {"MISSING": MISSING, "FrozenInstanceError": FrozenInstanceError}
    params, body, defaulted = [], [], False
    for i, name in enumerate(names):
        default = fields[name]
        factory = isinstance(default, Field) and default.default_factory is not MISSING
        if isinstance(default, Field) and not factory:
            default = default.default
            if name in cls.__dict__:
                setattr(cls, name, default)  # (the class attribute holds the default, as a dataclass's)
        if factory:
            env[f"f{i}"] = fields[name].default_factory
            params.append(f"{name}=MISSING")
            body.append(f"  if {name} is MISSING: {name} = f{i}()")
            if name in cls.__dict__:
                delattr(cls, name)  # (no class attribute for a field made by a factory)
        elif default is not MISSING:
            env[f"d{i}"] = default
            params.append(f"{name}=d{i}")
        elif defaulted:
            raise TypeError(f"{cls.__name__}: field '{name}' without a default follows one with a default")
        else:
            params.append(name)
        defaulted |= factory or default is not MISSING
    setter = "object.__setattr__(self, {0!r}, {0})" if frozen else "self.{0} = {0}"
    body += ["  " + setter.format(name) for name in names]
    made: dict = {}
    # (only `__init__` is written as text: its parameters are the fields. Compiling text is most
    # of what making a record costs, so the other methods are closures over the fields' names.)
    exec("\n".join([f"def __init__(self, {', '.join(params)}):", *(body or ["  pass"])]),  # noqa: S102
         env, made)
    shown = tuple(n for n in names if not isinstance(fields[n], Field) or fields[n].repr)
    made.update(_methods(tuple(names), shown, eq, frozen))
    for name, method in made.items():
        method.__qualname__ = f"{cls.__qualname__}.{name}"
        setattr(cls, name, method)
    if eq and not frozen:
        cls.__hash__ = None  # (as a dataclass: equal by value, mutable, so not hashable)
    setattr(cls, _FIELDS, fields)
    cls.__match_args__ = tuple(names)
    cls.__dataclass_fields__ = _dataclass_fields(cls, fields)
    return cls


def _methods(names: tuple[str, ...], shown: tuple[str, ...], eq: bool, frozen: bool) -> dict:
    """`__repr__` (of the fields `shown`), and `__eq__`, `__hash__`, `__setattr__` and
    `__delattr__` where asked, over the fields `names` in order: what a dataclass writes, each
    as that one would behave."""
    values = attrgetter(*names) if len(names) > 1 else \
        (lambda self, get=attrgetter(names[0]): (get(self),)) if names else (lambda self: ())

    def __repr__(self):
        return self.__class__.__qualname__ + "(" + ", ".join(f"{n}={getattr(self, n)!r}" for n in shown) + ")"

    made = {"__repr__": __repr__}
    if eq:
        def __eq__(self, other):
            if other.__class__ is self.__class__:
                return values(self) == values(other)
            return NotImplemented

        made["__eq__"] = __eq__
        if frozen:
            def __hash__(self):
                return hash(values(self))

            made["__hash__"] = __hash__
    if frozen:
        def __setattr__(self, name, value):
            raise FrozenInstanceError(f"cannot assign to field {name!r}")

        def __delattr__(self, name):
            raise FrozenInstanceError(f"cannot delete field {name!r}")

        made.update(__setattr__=__setattr__, __delattr__=__delattr__)
    return made


def _dataclass_fields(cls, fields: dict) -> dict:
    """name -> `Field`, as `dataclasses.fields` and what uses it read them."""
    annotations = {}
    for klass in reversed(cls.__mro__):
        annotations.update(klass.__dict__.get("__annotations__", {}))
    out = {}
    for name, default in fields.items():
        f = default if isinstance(default, Field) else dataclasses.field(
            default=default) if default is not MISSING else dataclasses.field()
        f.name, f.type = name, annotations.get(name)
        f._field_type = dataclasses._FIELD  # noqa: SLF001 -- (what marks a field, see the module)
        out[name] = f
    return out
