"""Shared-index bootstrap: one set of resample draws serves every run, pair and statistic.

Every statistic the analyses report is a ratio of case sums within strata
(benchmarks): a benchmark mean is the sum of case scores over the number of
cases, a harm rate is the sum of events over the sum of opportunities. A
resample is therefore fully described by how often it drew each case, a count
vector per stratum. With the counts of all resamples as a (samples x n_b)
matrix, the resampled sums of any number of runs or pairs are one matrix
product with the (n_b x k) case values, never a loop over resamples or pairs.

The counts come from an index tensor per stratum drawn with numpy's seeded
Generator (strata in the order given, each ``samples x n_b`` uniform indices),
so the same cases are drawn for both runs of a pair, for every pair and for the
rank distribution: differences are paired and one comparison's intervals are
mutually consistent.

P-value (``two_sided_p``): the bootstrap percentile test that matches the
percentile interval, ``p = min(1, 2 * min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (B + 1))``
over the B finite resampled differences ``d*``. The +1 terms count the observed
sample as one of the resamples (Davison & Hinkley 1997, sec. 4.4), so p is never
0 and the test is slightly conservative; p < 0.05 exactly when (up to that
correction) the 95% percentile interval excludes 0. Under the null and for the
sample sizes of a benchmark it is close to uniform (tests/test_analysis_validity.py).
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, CI_HIGH, CI_LOW

_DRAW_CHUNK = 1 << 22  # indices drawn at once: bounds the index tensor's memory (32 MB)


@dataclass(frozen=True)
class ResampleSettings:
    """How many resamples and the numpy Generator seed they come from."""

    samples: int = BOOTSTRAP_SAMPLES
    seed: int = BOOTSTRAP_SEED

    def __post_init__(self) -> None:
        if isinstance(self.samples, bool) or not isinstance(self.samples, int) or self.samples < 1:
            raise ValueError(f"samples must be an int >= 1, got {self.samples!r}")
        if isinstance(self.seed, bool) or not isinstance(self.seed, int) or self.seed < 0:
            raise ValueError(f"seed must be an int >= 0, got {self.seed!r}")


@dataclass(frozen=True, eq=False)
class SharedResamples:
    """Draw counts of every resample, per stratum; the case axis is the strata laid end to end."""

    names: tuple[str, ...]
    slices: tuple[slice, ...]
    counts: tuple[np.ndarray, ...]  # per stratum: (samples, n_b) float64 draw counts

    @property
    def samples(self) -> int:
        return self.counts[0].shape[0] if self.counts else 0

    @property
    def width(self) -> int:
        return self.slices[-1].stop if self.slices else 0

    def stratum_sums(self, values: np.ndarray, stratum: int) -> np.ndarray:
        """(samples, k): each resample's sum over the stratum's cases of every row of ``values`` (k, N)."""
        return self.counts[stratum] @ np.ascontiguousarray(values[:, self.slices[stratum]]).T

    def stratum_ratio(self, num: np.ndarray, den: np.ndarray, stratum: int) -> np.ndarray:
        """(samples, k): resampled sum(num) / sum(den) within one stratum (NaN where sum(den) is 0)."""
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.stratum_sums(num, stratum) / self.stratum_sums(den, stratum)

    def pooled_ratio(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """(samples, k): resampled sum(num) / sum(den) over all strata (cases resampled within their stratum)."""
        top = np.zeros((self.samples, num.shape[0]))
        bottom = np.zeros_like(top)
        for s in range(len(self.names)):
            top += self.stratum_sums(num, s)
            bottom += self.stratum_sums(den, s)
        with np.errstate(invalid="ignore", divide="ignore"):
            return top / bottom


def draw_resamples(strata: Sequence[tuple[str, int]], settings: ResampleSettings = ResampleSettings()
                   ) -> SharedResamples:
    """Resample counts for strata of the given sizes (in the given order), from one seeded Generator."""
    rng = np.random.default_rng(settings.seed)
    names, slices, counts = [], [], []
    start = 0
    for name, size in strata:
        if size < 1:
            raise ValueError(f"stratum {name!r} has no cases")
        names.append(name)
        slices.append(slice(start, start + size))
        counts.append(_counts(rng, settings.samples, size))
        start += size
    return SharedResamples(tuple(names), tuple(slices), tuple(counts))


def _counts(rng: np.random.Generator, samples: int, n: int) -> np.ndarray:
    """(samples, n) draw counts from a (samples, n) uniform index tensor, via one bincount per chunk."""
    out = np.empty((samples, n))
    rows = max(1, _DRAW_CHUNK // n)
    for first in range(0, samples, rows):
        last = min(samples, first + rows)
        index = rng.integers(0, n, size=(last - first, n))
        # Offset each resample's indices into its own block of n bins: one bincount counts them all.
        flat = (index + (np.arange(last - first) * n)[:, None]).ravel()
        out[first:last] = np.bincount(flat, minlength=(last - first) * n).reshape(last - first, n)
    return out


def percentile_interval(boot: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per column of (samples, k): the CI_LOW and CI_HIGH percentiles (linear), ignoring NaN resamples."""
    if boot.shape[0] == 0:
        nan = np.full(boot.shape[1:], np.nan)
        return nan, nan.copy()
    if np.isnan(boot).any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN columns stay NaN by design
            lo, hi = np.nanpercentile(boot, [100 * CI_LOW, 100 * CI_HIGH], axis=0)
    else:
        lo, hi = np.percentile(boot, [100 * CI_LOW, 100 * CI_HIGH], axis=0)
    return lo, hi


def two_sided_p(boot: np.ndarray) -> np.ndarray:
    """Bootstrap percentile p-value of 'difference = 0' per column of (samples, k); see the module doc."""
    finite = ~np.isnan(boot)
    n = finite.sum(axis=0)
    below = (finite & (boot <= 0)).sum(axis=0)
    above = (finite & (boot >= 0)).sum(axis=0)
    p = np.minimum(1.0, 2.0 * (np.minimum(below, above) + 1) / (n + 1))
    return np.where(n > 0, p, np.nan)

