"""Shared-index bootstrap: one set of resample draws serves every run, pair and statistic.

Every statistic the analyses report is a ratio of case sums within strata
(benchmarks): a benchmark mean is the sum of case scores over the number of
cases, a harm rate is the sum of events over the sum of opportunities. A
resample is therefore fully described by how often it drew each case, a count
vector per stratum. With the counts of all resamples as an (n_b x samples)
matrix, the resampled sums of any number of runs or pairs are one matrix
product of the (k x n_b) case values with it, never a loop over resamples or
pairs. Results are laid out (k x samples), one contiguous row per run or pair.

The counts come from an index tensor per stratum drawn with numpy's seeded
Generator (strata in the order given, each ``samples x n_b`` uniform indices),
so the same cases are drawn for both runs of a pair, for every pair and for the
rank distribution: differences are paired and one comparison's intervals are
mutually consistent.

P-value (``two_sided_p``): the difference studentised by its bootstrap standard
error, ``p = 2 * Phi(-|d| / sd(d*))`` with ``d`` the observed difference and
``sd(d*)`` the standard deviation of its finite resampled values. Chosen over the
percentile count ``2 * min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (B + 1)`` because
that one cannot go below 2 / (B + 1): with 10,000 resamples its smallest value,
2e-4, times the 435 tests of 30 runs is 0.087, so Holm could never reject
anything however different two runs are. The studentised p is continuous, agrees
with the percentile interval wherever the resampled differences are close to
normal (they are means of hundreds of cases), and is uniform under the null
(KS-tested in tests/test_analysis_validity.py for the overall difference and for
one benchmark of near-continuous scores; on one benchmark of coarse scores, 50
cases of a 4-point rubric, the mean difference lives on a grid, so p is discrete
there but still does not reject more often than it should). A difference whose
resamples do not vary at all gets p = 1 when it is 0 and p = 0 otherwise.
"""

from __future__ import annotations

import math
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
    counts: tuple[np.ndarray, ...]  # per stratum: (n_b, samples) float64 draw counts, one column per resample

    @property
    def samples(self) -> int:
        return self.counts[0].shape[1] if self.counts else 0

    @property
    def width(self) -> int:
        return self.slices[-1].stop if self.slices else 0

    def stratum_sums(self, values: np.ndarray, stratum: int) -> np.ndarray:
        """(k, samples): each resample's sum over the stratum's cases of every row of ``values`` (k, N)."""
        return np.ascontiguousarray(values[:, self.slices[stratum]]) @ self.counts[stratum]

    def stratum_ratio(self, num: np.ndarray, den: np.ndarray, stratum: int) -> np.ndarray:
        """(k, samples): resampled sum(num) / sum(den) within one stratum (NaN where sum(den) is 0)."""
        part = den[:, self.slices[stratum]]
        if part.size and (part == 1).all():
            # Every resample draws exactly n_b cases: a full denominator needs no product.
            bottom: np.ndarray | float = float(part.shape[1])
        else:
            bottom = self.stratum_sums(den, stratum)
        with np.errstate(invalid="ignore", divide="ignore"):
            return self.stratum_sums(num, stratum) / bottom

    def pooled_ratio(self, num: np.ndarray, den: np.ndarray) -> np.ndarray:
        """(k, samples): resampled sum(num) / sum(den) over all strata (cases resampled within their stratum)."""
        top = np.zeros((num.shape[0], self.samples))
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
        counts.append(np.ascontiguousarray(_counts(rng, settings.samples, size).T))
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
    """Per row of (k, samples): the CI_LOW and CI_HIGH percentiles (linear), ignoring NaN resamples."""
    if boot.shape[-1] == 0:
        nan = np.full(boot.shape[:-1], np.nan)
        return nan, nan.copy()
    if np.isnan(boot).any():
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows stay NaN by design
            lo, hi = np.nanpercentile(boot, [100 * CI_LOW, 100 * CI_HIGH], axis=-1)
    else:
        lo, hi = np.percentile(boot, [100 * CI_LOW, 100 * CI_HIGH], axis=-1)
    return lo, hi


def two_sided_p(boot: np.ndarray, observed: np.ndarray) -> np.ndarray:
    """P-value of 'difference = 0' per row of (k, samples) given the observed differences (k,); see the
    module doc. NaN resamples are ignored; a row without two finite resamples gets NaN."""
    finite = ~np.isnan(boot)
    n = finite.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with < 2 finite resamples: NaN by design
        se = np.nanstd(boot, axis=-1, ddof=1)
        z = np.abs(np.asarray(observed, dtype=np.float64)) / se
    p = _erfc(z / math.sqrt(2.0))  # = 2 * Phi(-|z|)
    flat = se == 0
    p = np.where(flat, np.where(np.asarray(observed) == 0, 1.0, 0.0), p)
    return np.where((n >= 2) & ~np.isnan(np.asarray(observed, dtype=np.float64)), p, np.nan)


_erfc = np.vectorize(math.erfc, otypes=[np.float64])
