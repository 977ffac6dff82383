"""`Outputs`: a call's outputs, a tuple that also answers to the outputs' names."""

from __future__ import annotations

import numpy as np


class Outputs(tuple):
    """A call's outputs in the program's `return` order: `out[0]`, `out["F"]` or `out.F`."""

    def __new__(cls, names: tuple[str, ...], values: list[np.ndarray]):
        self = super().__new__(cls, values)
        object.__setattr__(self, "_names", names)
        return self

    def __setattr__(self, name: str, value) -> None:
        # (an attribute set on it would shadow an output's name: `out.P = x` then read back x
        # from `out.P` and the output from `out["P"]`)
        raise AttributeError(f"a call's Outputs are read-only: '{name}' cannot be set (write into the arrays, or "
                             "pass out= arrays)")

    def __contains__(self, item) -> bool:
        # (`"P" in out` asks for an output's name, as of a mapping: the tuple's own test compared
        # the string with every array, a NumPy error; an array is in it where it is one of them)
        if isinstance(item, str):
            return item in self._names
        return any(item is value for value in self)

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, str):
            try:
                return tuple.__getitem__(self, self._names.index(key))
            except ValueError:
                raise KeyError(f"no output '{key}' (the outputs: {', '.join(self._names)})") from None
        return tuple.__getitem__(self, key)

    def __getattr__(self, name: str):
        if name.startswith("_"):
            raise AttributeError(name)
        try:
            return self[name]
        except KeyError as e:
            raise AttributeError(str(e)) from None

    def __reduce__(self):
        # (tuple's own pickling would call __new__ without the names: a Dask task's result
        # moving between workers could not be unpickled)
        return (Outputs, (self._names, list(self)))

    def keys(self) -> tuple[str, ...]:
        return self._names

    def items(self):
        return zip(self._names, self)

    def as_dict(self) -> dict[str, np.ndarray]:
        return dict(zip(self._names, self))

    def __repr__(self) -> str:
        # (an array's type and shape; a value of another kind, such as irfuse.dask's Parted
        # blocks kept on workers, as it shows itself)
        return "Outputs(" + ", ".join(f"{k}=<{v.dtype} {v.shape}>" if hasattr(v, "dtype") and hasattr(v, "shape")
                                      else f"{k}={v!r}" for k, v in self.items()) + ")"
