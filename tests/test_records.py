"""`irfuse.artifact.records.record` against `dataclasses.dataclass`: the same constructor,
defaults, factories, representation, comparison, hashing, immutability, inheritance, pattern
matching, pickling and copying, on classes written both ways."""

import copy
import dataclasses
import pickle
from dataclasses import field

import pytest

from irfuse.artifact.host_plan import HostPlan, Launch, NodeLaunch, Scatter, Value
from irfuse.artifact.records import record


def _pair(frozen: bool):
    """The same three classes (a base, a subclass adding a defaulted field, one with a
    factory) made by `record` and by `dataclass`."""
    made = []
    for decorate in (record(frozen=frozen), dataclasses.dataclass(frozen=frozen)):
        class Base:
            name: str
            args: tuple
            count: int = 0

        Base = decorate(Base)

        class Sub(Base):
            """A subclass: its fields after its base's."""
            extra: tuple = ()

        Sub = decorate(Sub)

        class Listed:
            first: int
            items: list = field(default_factory=list)
            label: str = field(default="x")
            note: str = field(default="n", repr=False)  # (compared, not shown)

        Listed = decorate(Listed)
        made.append((Base, Sub, Listed))
    return made


@pytest.mark.parametrize("frozen", [True, False])
def test_a_record_behaves_as_the_dataclass_of_the_same_fields(frozen):
    (base, sub, listed), (d_base, d_sub, d_listed) = _pair(frozen)
    for mine, theirs, args in ((base, d_base, ("k", (1, 2))), (base, d_base, ("k", (1,), 3)),
                               (sub, d_sub, ("k", (), 1, (5,))), (sub, d_sub, ("k", ()))):
        a, b = mine(*args), theirs(*args)
        assert repr(a).split("(", 1)[1] == repr(b).split("(", 1)[1]
        assert a == mine(*args) and not (a != mine(*args))
        assert a != mine(args[0] + "x", *args[1:])
        assert mine.__match_args__ == theirs.__match_args__
        if frozen:
            assert hash(a) == hash(mine(*args))
            with pytest.raises(dataclasses.FrozenInstanceError):
                a.name = "other"
            with pytest.raises(dataclasses.FrozenInstanceError):
                del a.name
        else:
            assert mine.__hash__ is None and theirs.__hash__ is None
            a.name = "other"
            assert a.name == "other"
        assert copy.deepcopy(a) == a and copy.copy(a) == a
    # a subclass's value is never equal to its base's with the same fields
    assert sub("k", ()) != base("k", ())
    x, y = listed(1), listed(1)
    x.items.append(2)
    assert y.items == [] and x.label == "x" and listed(1, [3], "y").items == [3]
    assert repr(listed(1)).split("(", 1)[1] == repr(d_listed(1)).split("(", 1)[1]
    assert "note" not in repr(listed(1)) and listed(1, note="m") != listed(1)
    with pytest.raises(TypeError):
        base()  # (a field without its value)
    with pytest.raises(TypeError):
        base("k", (), 1, 2)


def test_a_field_without_a_default_after_one_with_a_default_is_refused():
    class Bad:
        a: int = 0
        b: int

    with pytest.raises(TypeError, match="follows one with a default"):
        record(Bad)


def test_the_host_plans_steps_match_by_their_fields_and_plans_compare_by_identity():
    step = NodeLaunch("k", (0,), (1,), (0,))
    match step:
        case NodeLaunch(kernel, args, results, sums):
            assert (kernel, args, results, sums) == ("k", (0,), (1,), (0,))
        case _:
            raise AssertionError("no match")
    assert isinstance(step, Launch) and step != Launch("k", (0,), (1,))
    assert Scatter("s", 0, 1, 2).atomic == ("", "") and Value((3,), "element").words == 3
    plan = HostPlan((Value((3,), "element"),), (("x", 0),), (), (step,), ())
    assert plan != HostPlan(plan.values, plan.inputs, plan.outputs, plan.steps, plan.passes)
    assert plan == plan and hash(plan) == object.__hash__(plan)
    again = pickle.loads(pickle.dumps(plan))  # (a plan travels to Dask's workers so)
    assert again.steps == plan.steps and again.values == plan.values and again.name == plan.name
    with pytest.raises(dataclasses.FrozenInstanceError):
        again.name = "x"


def test_the_dataclass_functions_read_a_records_fields():
    """`dataclasses.fields`, `replace`, `asdict` and `is_dataclass` on records (what the
    planner's profiles, the compile options and the kernels' launch interface are)."""
    from irfuse.artifact.kernel_info import KernelInfo
    from irfuse.driver.options import CompileOptions
    from irfuse.planner.profiles import H200

    (base, sub, listed), (d_base, d_sub, d_listed) = _pair(True)
    a = sub("k", (1,), 2, (3,))
    assert [f.name for f in dataclasses.fields(a)] == [f.name for f in dataclasses.fields(d_sub("k", ()))]
    assert dataclasses.replace(a, count=5) == sub("k", (1,), 5, (3,))
    assert dataclasses.asdict(listed(1, [sub("k", ())])) == dataclasses.asdict(d_listed(1, [d_sub("k", ())]))
    assert dataclasses.is_dataclass(a) and dataclasses.is_dataclass(sub)
    with pytest.raises(TypeError):
        dataclasses.replace(a, other=1)
    faster = dataclasses.replace(H200, bandwidth=1.0)
    assert faster.bandwidth == 1.0 and faster.sms == H200.sms and faster != H200
    assert dataclasses.asdict(CompileOptions())["dtype"] == "f32"
    info = KernelInfo("k", 1, 128, 0, ["x"], ["y"], [3], [3])
    assert dataclasses.replace(info, min_blocks=2).min_blocks == 2 and info.calls == [] and info.min_blocks == 1


def test_a_record_refuses_what_its_init_does_not_do():
    class Later:
        a: int

        def __post_init__(self):
            pass

    class Computed:
        a: int
        b: int = field(init=False, default=0)

    class Own:
        a: int

        def __eq__(self, other):
            return True

    for cls in (Later, Computed, Own):
        with pytest.raises(TypeError, match="make it a dataclass"):
            record(cls)


def test_a_record_refuses_a_dataclass_base_whose_fields_it_would_not_take():
    @dataclasses.dataclass
    class Base:
        a: int

    class Sub(Base):
        b: int = 0

    with pytest.raises(TypeError, match="bases are records"):
        record(Sub)
