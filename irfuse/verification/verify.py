"""Comparing a backend's outputs with the float64 NumPy reference, entry by entry.

The rule, for each entry of each element of an output:

    |got - ref64|  <=  K * honest_e  +  rtol * |ref64|  +  c * eps * scale_e  +  R * bound

- `ref64` is the reference evaluated in float64 on the same inputs;
- `honest_e` is, over the element's entries, the largest departure from `ref64` of the
  reference evaluated in the run's own precision (every op rounded to float32 in a
  float32 run): what any honest evaluation in that precision may lose on this element,
  large where the computation is ill-conditioned (an iteration that does not converge,
  cancellation); in a float64 run the reference evaluated entry by entry in float64 (another
  order of operations) where the program has loops, whose iterations compound rounding, and
  zero otherwise;
- `scale_e` is the largest magnitude among the element's entries of `ref64`, so rounding
  of the element's own size is allowed and nothing else: no norm over the batch lets one
  large element hide an error in another, or overflows;
- `eps` is the run precision's machine epsilon, `rtol` its tolerance (`element_types`),
  K = 16 and c = 64 cover the different rounding of the kernel's order of operations;
- `bound` is the entry's bound on rounding in the kernels' own arithmetic
  (`reference.rounding_bounds`: running error analysis over the per-entry trees, for
  programs without loops; zero where none holds), R = 2 for its second-order terms: an
  honest evaluation that happens to round luckily on an element that cancels cannot make
  the kernel's rounding there an error. It costs several float64 references, so it is
  found only for the elements that miss the rest of the allowance.

A uniform output (one value for the batch, a reduction's result) is one element. A sum's
honest departure includes its rounding in the kernels' order (`reference.sum_depth`), which
grows with the batch as summation error does.

Non-finite values are judged as what they are: NaN or an infinity is right where
`ref64` has the same; a finite `ref64` beyond the run precision's range is an
*overflow* (the run's type cannot hold it: reported, not a wrong kernel; the kernel's value
must be the infinity or the largest finite value of its sign, unless the honest evaluation in
the run's precision is not either, having overflowed and come back within the range on the
way: then it is not judged), and so is an entry whose honest evaluation in the run's
precision overflows on the way (it is not finite there): the kernel's value is not judged;
NaN or an infinity anywhere else is a mismatch, as is a finite value where `ref64` is not.
"""

from __future__ import annotations

from collections.abc import Collection

import numpy as np

from irfuse.artifact.arrays import element_type
from irfuse.artifact.records import record

HONEST_FACTOR = 16.0  # K
EPS_FACTOR = 64.0  # c
ROUNDING_FACTOR = 2.0  # R


@record
class OutputCheck:
    name: str
    rel_error: float  # the largest |got - ref64| over its element's scale
    max_abs_error: float
    first_bad: tuple[int, ...] | None
    got: float | None
    want: float | None
    ok: bool
    worst: float = 0.0  # the largest error over its allowance (ok: at most 1)
    overflow: int = 0  # entries whose float64 value the run's precision cannot hold
    allowed: float | None = None  # the allowance at first_bad
    special: int = 0  # entries whose float64 value is NaN or infinite (and the run's the same)
    unbounded: int = 0  # entries no rounding bound holds for (not judged)

    @property
    def status(self) -> str:
        if not self.ok:
            return "MISMATCH"
        return "overflow" if self.overflow else "ok"

    def describe(self) -> str:
        if self.ok:
            tail = (f"; {self.overflow} entries overflow the run's precision (their float64 values are "
                    "beyond its range)") if self.overflow else ""
            if self.unbounded:
                tail += (f"; {self.unbounded} entries not judged: the run's precision does not determine them "
                         "(a divisor within its rounding error of zero, as in the inverse of a matrix singular to "
                         "within rounding)")
            if self.special:
                tail += (f"; {self.special} entries are NaN or infinite, as in the float64 reference (a singular "
                         "matrix inverted, log of 0, ...)")
            return f"{self.name}: ok (largest error {self.worst:.2g} of its allowance){tail}"
        where = ""
        if self.first_bad is not None:
            where = f"; first wrong entry: element {self.first_bad[0]}"
            if len(self.first_bad) > 1:
                where += f" entry {list(self.first_bad[1:])}"
            where += f": got {self.got!r}, expected {self.want!r}"
            if self.allowed is not None:
                where += f" (allowed error {self.allowed:.3g})"
        return (f"{self.name}: MISMATCH (largest error {self.worst:.3g} times its allowance, "
                f"max abs error {self.max_abs_error:.2e}{where})")


def _per_element_max(a: np.ndarray) -> np.ndarray:
    """The largest value of each element (axis 0), broadcast back over its entries."""
    if a.ndim <= 1:
        return a
    m = a.reshape(a.shape[0], -1).max(axis=1)
    return np.broadcast_to(m.reshape((-1,) + (1,) * (a.ndim - 1)), a.shape)


def check_output(name: str, got: np.ndarray, want: np.ndarray, dtype: str,
                 want_run: np.ndarray | None = None, bound: np.ndarray | None = None) -> OutputCheck:
    """`want` is the float64 reference; `want_run` the reference in the run's precision
    (None: no honest-error allowance, as in float64); `bound` the entries' rounding bounds
    (None: none)."""
    return _judged(name, got, want, dtype, want_run, bound)[0]


def _judged(name: str, got: np.ndarray, want: np.ndarray, dtype: str, want_run: np.ndarray | None,
            bound: np.ndarray | None) -> tuple[OutputCheck, np.ndarray | None]:
    """`check_output`, and which entries are wrong (None: the shapes differ)."""
    et = element_type(dtype)
    if got.shape != want.shape:
        return OutputCheck(name, float("inf"), float("inf"), None, None, None, False, float("inf")), None
    g = got.astype(np.float64)
    w = np.asarray(want, dtype=np.float64)
    finite_w = np.isfinite(w)
    limit = float(np.finfo(et.numpy).max)
    overflow = finite_w & (np.abs(w) > limit)
    in_range = finite_w & ~overflow
    with np.errstate(all="ignore"):
        aw = np.where(in_range, np.abs(w), 0.0)
        scale = _per_element_max(aw)
        honest = np.zeros_like(w)
        cannot = np.zeros(w.shape, dtype=bool)  # entries the run's precision cannot evaluate at all
        honest_fails = np.zeros(w.shape, dtype=bool)
        r = np.full(w.shape, np.nan)
        run_known = want_run is not None and want_run.shape == w.shape
        if run_known:
            r = np.asarray(want_run, dtype=np.float64)
            # An intermediate beyond the precision's range (a*b - c*d with both products over
            # it): the honest evaluation gives NaN or an infinity where ref64 is finite.
            honest_fails = finite_w & ~np.isfinite(r)
            cannot = in_range & honest_fails
            # An entry whose run-precision reference is not finite while ref64 is: that
            # precision cannot evaluate it honestly; the element's other entries still can.
            dev = np.where(in_range & np.isfinite(r), np.abs(r - w), 0.0)
            honest = _per_element_max(dev)
        allowed = HONEST_FACTOR * honest + et.tolerance * aw + EPS_FACTOR * float(np.finfo(et.numpy).eps) * scale
        unbounded = np.zeros(w.shape, dtype=bool)
        if bound is not None and np.shape(bound) == w.shape:
            allowed = allowed + ROUNDING_FACTOR * np.where(np.isfinite(bound), bound, 0.0)
            # No bound holds where a divisor (or a square root's or logarithm's argument) lies
            # within its own rounding error of zero: the run's precision does not determine
            # such an entry (an inverse of a matrix singular to within rounding), so any
            # value there is what an honest evaluation may give. Counted, not judged.
            unbounded = in_range & ~np.isfinite(bound) & ~cannot
            cannot = cannot | unbounded
        err = np.where(in_range & np.isfinite(g), np.abs(g - w), 0.0)
    # Special values: exactly where the reference has them (NaN for NaN, the same infinity).
    same_special = np.where(finite_w, True, (np.isnan(w) & np.isnan(g)) | (w == g))
    # An overflowing entry may be the infinity of its sign (what the run's type can say) or the
    # largest finite value of that sign; anything else there is wrong.
    with np.errstate(invalid="ignore"):
        g_saturated = np.isinf(g) | (np.abs(g) >= limit * (1 - 1e-6))
        r_saturated = np.isinf(r) | (np.abs(r) >= limit * (1 - 1e-6))
    overflow_ok = (np.sign(g) == np.sign(w)) & g_saturated
    # Where the honest evaluation itself is NaN (inf - inf on the way), so may the kernel be.
    overflow_ok |= honest_fails & np.isnan(g) & np.isnan(r)
    # Where it is a finite value within the range (an intermediate overflowed and was absorbed
    # on the way: a tanh of it, a division by it), the run's precision does not determine the
    # entry: any evaluation in another order may land elsewhere. Not judged (benchmarks/fuzz.py,
    # random program seed 180147: float64 4.6e38, float32's honest evaluation and the kernel
    # both -38918.3).
    overflow_ok |= overflow & np.isfinite(r) & ~r_saturated
    # Likewise where float64 itself ran past its range (an infinity), the run's precision
    # having met inf - inf on the way there.
    if run_known:
        same_special |= np.isinf(w) & np.isnan(g) & np.isnan(r)
    bad = ~same_special
    bad |= in_range & ~cannot & ~np.isfinite(g)
    bad |= in_range & ~cannot & (err > allowed)
    bad |= overflow & ~overflow_ok
    overflow = overflow | (cannot & ~unbounded & ~np.isfinite(g))  # reported with the overflows
    with np.errstate(all="ignore"):
        ratio = np.where(in_range & ~unbounded & np.isfinite(g), err / np.maximum(allowed, np.finfo(np.float64).tiny), 0.0)
        rel = np.where(in_range & np.isfinite(g), err / np.maximum(scale, np.finfo(np.float64).tiny), 0.0)
    worst = float(ratio.max()) if ratio.size else 0.0
    max_abs = float(err.max()) if err.size else 0.0
    first = gv = wv = al = None
    if bad.any():
        idx = np.unravel_index(int(np.argmax(bad)), bad.shape)
        first = tuple(int(i) for i in idx)
        gv, wv, al = float(g[idx]), float(w[idx]), float(allowed[idx])
        worst = max(worst, float("inf") if not np.isfinite(g[idx]) or not np.isfinite(w[idx]) else worst)
    special = int((~finite_w & same_special).sum())
    return OutputCheck(name, float(rel.max()) if rel.size else 0.0, max_abs, first, gv, wv, not bad.any(),
                       worst, int(overflow.sum()), al, special, int(unbounded.sum())), bad


def check_outputs(got: dict[str, np.ndarray], want, dtype: str, uniform: Collection[str] = ()) -> list[OutputCheck]:
    """Every output checked against `want`: `References` (float64 and the run's precision),
    or a plain dict of float64 results (then no honest-error allowance). `uniform`: the
    outputs that hold one value for the batch (`References` know theirs)."""
    ref64 = getattr(want, "float64", want)
    run = getattr(want, "run_precision", None) or {}
    rounding = getattr(want, "rounding", None)
    uniform = set(uniform) | set(getattr(want, "uniform", ()))

    def one(a):  # a uniform value is the one element of its batch
        return None if a is None else np.asarray(a)[None]

    def judged(name: str, bounds: dict) -> tuple[OutputCheck, np.ndarray | None]:
        if name in uniform:
            return _judged(name, one(got[name]), one(ref64[name]), dtype, one(run.get(name)), one(bounds.get(name)))
        return _judged(name, got[name], ref64[name], dtype, run.get(name), bounds.get(name))

    results = {name: judged(name, {}) for name in ref64}
    wrong = [name for name, (check, bad) in results.items() if not check.ok and bad is not None]
    if wrong and rounding is not None:
        # The rounding bounds, for the elements some entry of which misses the rest of its
        # allowance (every element where a uniform output does), then those outputs again.
        rows = [np.flatnonzero(results[k][1].reshape(len(results[k][1]), -1).any(axis=1))
                for k in wrong if k not in uniform]
        everything = any(k in uniform for k in wrong)
        elements = None if everything else np.unique(np.concatenate(rows))
        some = rounding(elements)
        if some is not None:
            for name in wrong:
                bound = some[name]
                if name not in uniform and elements is not None:
                    bound = np.zeros(np.shape(ref64[name]))
                    bound[elements] = some[name]
                results[name] = judged(name, {name: bound})
    return [results[name][0] for name in ref64]


SAMPLE_ELEMENTS = 100_000  # elements checked by default: enough to see any systematic error


def sample_elements(n: int, how: str = "auto", seed: int = 0, size: int = SAMPLE_ELEMENTS) -> np.ndarray | None:
    """Which elements of a batch to check: every one (`all`, or `auto` up to `size`), a seeded
    sample of `size` in increasing order (`sample`, or `auto` beyond), or none (`none`: None).
    Elements are independent, so a sample checks the kernels on all the shapes of data the
    batch holds at a fraction of the reference's cost (the float64 reference of BigFusion's
    4,194,304 elements takes about a minute)."""
    if how == "none":
        return None
    if how == "all" or (how == "auto" and n <= size):
        return np.arange(n)
    rng = np.random.default_rng(seed)
    return np.sort(rng.choice(n, size=min(size, n), replace=False))


def verified_elements(program, n: int, how: str = "auto", seed: int = 0,
                      size: int = SAMPLE_ELEMENTS) -> np.ndarray | None:
    """`sample_elements` for a program's run: every element when the program reduces over the
    batch (the reduction's reference needs all of them) and is checked at all."""
    from irfuse.verification.reference import has_reductions

    return sample_elements(n, "all" if has_reductions(program) and how != "none" else how, seed, size)


def subset(arrays: dict[str, np.ndarray], index: np.ndarray, whole: Collection[str] = ()) -> dict[str, np.ndarray]:
    """The elements `index` of every array of a batch (all of them when it is every element);
    the arrays named in `whole` (uniform values, no batch axis) as they are."""
    batch = [v for k, v in arrays.items() if k not in whole]
    if not batch or (len(index) and len(index) == len(batch[0])):
        return arrays
    return {k: v if k in whole else np.ascontiguousarray(v[index]) for k, v in arrays.items()}
