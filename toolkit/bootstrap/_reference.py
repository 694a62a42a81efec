"""Bootstrap intervals of the reference runner, reproduced bit for bit and vectorised.

The reference summarises scores in pure Python with one ``random.Random(seed)``:
first, per benchmark in sorted name order, ``samples`` resample means
(``sum(values[rng.randrange(n)] for _ in range(n)) / n``) and their 2.5/97.5
percentiles; then, continuing the same generator, ``samples`` stratified
resamples whose statistic is ``statistics.fmean`` of the per-benchmark means.

Reproduced here without calling ``randrange`` millions of times:

* ``randrange(n)`` (n < 2**32) reads one 32-bit MT19937 output ``u`` per try and
  keeps its index ``u >> (32 - k)``, ``k = n.bit_length()``, retrying while that is
  ``>= n``: acceptance is a vectorised comparison. NumPy's MT19937, loaded with
  ``random.Random(seed).getstate()``, yields the same raw outputs.
* A seed's outputs are the same for every call: they are generated once, in pieces
  kept in a bounded cache with what is derived from them (per piece, the indices a
  size accepts). A benchmark's draws are then a slice of those.
* The stratified pass mixes sizes. An output whose index is below every size
  ("sure") or at or above all of them needs no decision; only those in between
  depend on the draw they serve, and one tight Python loop decides them.
* Sums are rebuilt column by column in the reference's left-to-right order with
  the summation of the interpreter whose numbers are to be matched (plain
  addition up to CPython 3.11, Neumaier-compensated from 3.12); ``fmean``'s
  ``fsum`` by error-free transformations checked exact, else ``math.fsum``.
* Resample indices depend only on the benchmark sizes (in sorted name order),
  ``samples`` and ``seed``, so they are cached: runs of one dataset share them.
"""

from __future__ import annotations

import math
import sys
from dataclasses import dataclass, field
from typing import Final, Literal, Mapping, Sequence

import numpy as np

from toolkit.bootstrap._draws import MT19937Stream, cached_indices, check_sizes
from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, CI_HIGH, CI_LOW, check_samples, check_seed

__all__ = ["BootstrapSettings", "DEFAULT_SUMMATION", "Intervals", "MT19937Stream", "Summation", "percentile_reference",
           "reference_indices", "reference_intervals", "resample_means"]

Summation = Literal["sequential", "compensated"]
SUMMATIONS: Final = ("sequential", "compensated")

# CPython 3.12 made float sum() Neumaier-compensated; default to whatever the running
# interpreter's sum() does so a reference run under it is matched out of the box.
DEFAULT_SUMMATION: Final[Summation] = "sequential" if sys.version_info < (3, 12) else "compensated"

@dataclass(frozen=True, kw_only=True)
class BootstrapSettings:
    """How to resample: count, generator seed, and which ``sum()`` to imitate."""

    samples: int = BOOTSTRAP_SAMPLES
    seed: int = BOOTSTRAP_SEED
    summation: Summation = DEFAULT_SUMMATION

    def __post_init__(self) -> None:
        object.__setattr__(self, "samples", check_samples(self.samples))  # numpy's integers stored as ints
        # an int: None would seed from the OS and break the index cache
        object.__setattr__(self, "seed", check_seed(self.seed))
        if self.summation not in SUMMATIONS:
            raise ValueError(f"summation must be one of {SUMMATIONS}, got {self.summation!r}")


@dataclass(frozen=True)
class Intervals:
    """Percentile bootstrap intervals (CI_LOW, CI_HIGH): per benchmark, and over benchmarks."""

    benchmarks: Mapping[str, tuple[float, float]] = field(default_factory=dict)
    overall: tuple[float, float] = (math.nan, math.nan)


def reference_indices(sizes: Sequence[int], settings: BootstrapSettings = BootstrapSettings()
                      ) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """The reference's resample indices for benchmarks of these sizes, in sorted name order.

    Returns (per-benchmark, overall): for each benchmark a read-only (samples, n)
    integer array; row s lists the value positions of resample s, in draw order.
    The first list serves the per-benchmark intervals, the second the stratified
    overall interval. ``settings.summation`` plays no part.
    """
    per_benchmark, overall = cached_indices(check_sizes(sizes), settings.samples, settings.seed)
    return list(per_benchmark), list(overall)


def resample_means(values: Sequence[float] | np.ndarray, indices: np.ndarray,
                   summation: Summation = DEFAULT_SUMMATION) -> np.ndarray:
    """``sum(values[i] for i in row) / n`` for every row of a (samples, n) index array, as CPython computes it."""
    vals = np.asarray(values, dtype=np.float64)
    idx = np.asarray(indices)
    if idx.ndim != 2 or idx.shape[1] == 0:
        raise ValueError(f"indices must be a (samples, n) array with n >= 1, got shape {idx.shape}")
    samples, n = idx.shape
    # Column j of every resample at once: a gather on the transposed indices gives rows. The
    # indices are made C-ordered machine ints first: take() on narrow or strided indices is
    # several times slower, and its result keeps their layout (strided rows add slowly).
    columns = np.take(vals, np.ascontiguousarray(idx.T, dtype=np.intp))
    # CPython starts at int 0; its first float is 0 + x (turns -0.0 into 0.0), then adds.
    total = np.zeros(samples)
    if summation == "sequential":
        for column in columns:  # one add per draw, in draw order (np.add.reduce may sum pairwise)
            total += column
    elif summation == "compensated":
        total = total + columns[0]
        comp = np.zeros(samples)
        for column in columns[1:]:
            # CPython 3.12 builtin sum(), float path: Neumaier's improved Kahan-Babuska.
            t = total + column
            comp += np.where(np.abs(total) >= np.abs(column), (total - t) + column, (column - t) + total)
            total = t
        # Compensation is added only when nonzero and finite (keeps inf sums and -0.0).
        fix = (comp != 0) & np.isfinite(comp)
        total = np.where(fix, total + comp, total)
    else:
        raise ValueError(f"summation must be one of {SUMMATIONS}, got {summation!r}")
    return total / n


def _from_ordered(ordered: np.ndarray, p: float) -> float:
    """The reference's interpolation ``o[lo]*(1-f) + o[hi]*f`` on values in order at lo and hi."""
    pos = (ordered.size - 1) * p
    lo, hi = math.floor(pos), math.ceil(pos)
    if lo == hi:
        return float(ordered[lo])
    f = pos - lo
    return float(ordered[lo]) * (1 - f) + float(ordered[hi]) * f


def percentile_reference(values: Sequence[float] | np.ndarray, p: float) -> float:
    """The reference's percentile: linear interpolation written as ``o[lo]*(1-f) + o[hi]*f``.

    Not numpy's formula, whose rounding differs in the last bit. ``values`` need not
    be sorted; NaN is not supported (Python's ``sorted`` has no defined order for it).
    """
    # Stable, like sorted(): equal values (0.0 and -0.0) keep their input order.
    ordered = np.sort(np.asarray(values, dtype=np.float64).ravel(), kind="stable")
    return math.nan if ordered.size == 0 else _from_ordered(ordered, p)


def _interval(values: np.ndarray) -> tuple[float, float]:
    """(CI_LOW, CI_HIGH) percentiles; only the order statistics they read are put in place."""
    values = np.asarray(values, dtype=np.float64).ravel()
    if values.size == 0:
        return math.nan, math.nan
    spots = [(values.size - 1) * p for p in (CI_LOW, CI_HIGH)]
    kth = sorted({f(s) for s in spots for f in (math.floor, math.ceil)})
    ordered = np.partition(values, kth)
    if np.any(ordered[kth] == 0):  # 0.0 and -0.0 tie: only a stable sort says which comes first
        return percentile_reference(values, CI_LOW), percentile_reference(values, CI_HIGH)
    return _from_ordered(ordered, CI_LOW), _from_ordered(ordered, CI_HIGH)


def _fmeans(rows: np.ndarray) -> np.ndarray:
    """``statistics.fmean`` of every row: ``math.fsum(row) / len(row)``.

    fsum is the correctly rounded exact sum. Error-free TwoSum splits the exact sum
    into high + sum(errors); when the errors add up exactly (checked, again by
    TwoSum) the exact sum is high + low and one rounded addition gives fsum's result.
    Rows where that check fails or something is not finite go to math.fsum itself.
    """
    count = rows.shape[1]
    columns = rows.T
    high, low = columns[0], np.zeros(rows.shape[0])  # low is +0.0: a zero total is +0.0, as fsum's
    exact = np.ones(rows.shape[0], dtype=bool)
    with np.errstate(all="ignore"):  # inf and nan make inexact rows, redone below
        for x in columns[1:]:
            s = high + x
            back = s - high
            error = (high - (s - back)) + (x - back)
            high = s
            s = low + error
            back = s - low
            exact &= ((low - (s - back)) + (error - back)) == 0
            low = s
        total = high + low
    for i in np.flatnonzero(~exact | ~np.isfinite(total)).tolist():
        total[i] = math.fsum(rows[i].tolist())
    return total / count


def reference_intervals(values_by_benchmark: Mapping[str, Sequence[float] | np.ndarray],
                        settings: BootstrapSettings = BootstrapSettings()) -> Intervals:
    """The reference runner's bootstrap intervals, bit for bit.

    Benchmarks are taken in sorted name order. The order of the values within a
    benchmark is the caller's: the reference resamples positions, so completion
    order and dataset order give different intervals. Values are converted to
    float64 (the reference's scores are floats). Raises ValueError for an empty
    benchmark (the reference divides by zero); no benchmarks give NaN overall.
    """
    names = sorted(values_by_benchmark)
    arrays = [np.asarray(values_by_benchmark[name], dtype=np.float64) for name in names]
    for name, array in zip(names, arrays):
        if array.ndim != 1:
            raise ValueError(f"benchmark {name!r}: values must be one-dimensional, got shape {array.shape}")
    sizes = [array.size for array in arrays]
    if not names:
        return Intervals({}, (math.nan, math.nan))
    per_benchmark, overall = reference_indices(sizes, settings)
    benchmarks = {
        name: _interval(resample_means(array, idx, settings.summation))
        for name, array, idx in zip(names, arrays, per_benchmark)
    }
    means = np.stack([resample_means(array, idx, settings.summation) for array, idx in zip(arrays, overall)], axis=1)
    return Intervals(benchmarks, _interval(_fmeans(means)))
