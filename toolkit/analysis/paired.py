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
error, ``p = 2 * Phi(-|d| / se)`` with ``d`` the observed difference and ``se``
the standard deviation of its finite resampled values, inflated for small
strata (below). Chosen over the percentile count
``2 * min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (B + 1)`` because that one cannot go
below 2 / (B + 1): with 10,000 resamples its smallest value, 2e-4, times the 435
tests of 30 runs is 0.087, so Holm could never reject anything however
different two runs are. The studentised p is continuous, agrees with the
percentile interval wherever the resampled differences are close to normal, and
is uniform under the null (KS-tested in tests/test_analysis_validity.py for the
overall difference and for one benchmark of near-continuous scores; on one
benchmark of coarse scores, 50 cases of a 4-point rubric, the mean difference
lives on a grid, so p is discrete there but still does not reject more often
than it should).

Small strata: the bootstrap variance of a stratum mean of m cases is the plug-in
variance (divisor m) over m, smaller than the unbiased estimate by (m - 1) / m;
at 10 cases per benchmark that alone lifts the false-positive rate of a 5% test
of the overall difference to about 7% (5% with the correction, checked in
tests/test_analysis_validity.py). So each stratum's share of the variance is
inflated by m / (m - 1) (m: the row's common cases in that stratum). The shares
come from the case differences analytically: the bootstrap SE is multiplied by
``sqrt(sum_b v_b m_b / (m_b - 1) / sum_b v_b)`` with ``v_b`` the plug-in
variance of the stratum's mean difference (strata weigh equally in a macro mean,
so the weights cancel). For one stratum that is exactly ``sqrt(m / (m - 1))``; a
stratum with a single common case adds no variance either way. A single
benchmark's row of 10 cases still rejects ~8% of true nulls at 5% (down from
~10%): its z-score is compared with the normal, not Student's t with 9 degrees
of freedom. The percentile intervals are not corrected; they still under-cover
below ~20 cases per benchmark, which the commands say in a note
(``small_sample_note``).

Degenerate rows: fewer than 2 common cases (or fewer than 2 finite resamples)
give p = NaN: nothing can be said. When the case differences do not vary within
any stratum the resamples cannot vary either (SE = 0, the z-score is infinite):
p = 1 when the difference is 0, else an exact sign test on the case differences
(ties dropped), ``min(1, 2 * P(Bin(n, 1/2) <= min(wins, losses)))``, which is
``2 ** (1 - n)`` when all n differ in one direction: bounded away from 0 for
few cases, so Holm and BH do not turn one shared case into a certainty.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass
from typing import Sequence

import numpy as np

from toolkit.protocol import BOOTSTRAP_SAMPLES, BOOTSTRAP_SEED, CI_HIGH, CI_LOW

_DRAW_CHUNK = 1 << 22  # indices drawn at once: bounds the index tensor's memory (32 MB)
TIE = 1e-12  # case differences (scores in [0, 1]) this close to 0 are ties
SMALL_STRATUM = 20  # fewer cases per benchmark than this: the small-sample note is printed


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


def two_sided_p(boot: np.ndarray, observed: np.ndarray, differences: np.ndarray,
                strata: Sequence[slice] | None = None) -> np.ndarray:
    """P-value of 'difference = 0' per row of (k, samples) resampled differences, see the module doc.

    ``observed`` (k,) are the observed differences, the (macro) means over ``strata`` (column slices,
    default: one stratum of every column) of the stratum means of ``differences`` (k, N), the case
    differences with NaN where a case is not common. NaN resamples are ignored.
    """
    observed = np.asarray(observed, dtype=np.float64)
    differences = np.asarray(differences, dtype=np.float64)
    strata = list(strata) if strata is not None else [slice(0, differences.shape[1])]
    finite = ~np.isnan(boot)
    with np.errstate(invalid="ignore", divide="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # rows with < 2 finite resamples: NaN by design
        se = np.nanstd(boot, axis=-1, ddof=1) * np.sqrt(small_sample_factor(differences, strata))
        z = np.abs(observed) / se
    p = _erfc(z / math.sqrt(2.0))  # = 2 * Phi(-|z|)
    flat = (se == 0) | _flat_within_strata(differences, strata)
    p = np.where(flat & (np.abs(observed) <= TIE), 1.0, p)
    moved = flat & (np.abs(observed) > TIE)
    if moved.any():
        p[moved] = sign_test_p((differences[moved] > TIE).sum(axis=1), (differences[moved] < -TIE).sum(axis=1))
    usable = (finite.sum(axis=-1) >= 2) & ((~np.isnan(differences)).sum(axis=1) >= 2)
    return np.where(usable & ~np.isnan(observed), p, np.nan)


def small_sample_factor(differences: np.ndarray, strata: Sequence[slice]) -> np.ndarray:
    """(k,): sum_b v_b m_b / (m_b - 1) / sum_b v_b per row (1 where nothing varies), see the module doc."""
    inflated = np.zeros(differences.shape[0])
    plain = np.zeros_like(inflated)
    for s in strata:
        part = differences[:, s]
        m = (~np.isnan(part)).sum(axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = np.nansum(part, axis=1) / m
            squares = np.nansum((part - mean[:, None]) ** 2, axis=1)
            plain += np.where(m >= 1, squares / m ** 2, 0.0)
            inflated += np.where(m >= 2, squares / (m * (m - 1.0)), 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(plain > 0, inflated / plain, 1.0)


def _flat_within_strata(differences: np.ndarray, strata: Sequence[slice]) -> np.ndarray:
    """(k,): True where no stratum's case differences vary (beyond TIE), so no resample can differ."""
    flat = np.ones(differences.shape[0], dtype=bool)
    for s in strata:
        part = differences[:, s]
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN strata: nothing varies there
            spread = np.nanmax(part, axis=1) - np.nanmin(part, axis=1) if part.shape[1] else np.zeros(len(flat))
        flat &= ~(spread > TIE)
    return flat


def sign_test_p(wins: np.ndarray, losses: np.ndarray) -> np.ndarray:
    """Exact two-sided sign test per row: min(1, 2 * P(Bin(n, 1/2) <= min(wins, losses))), n = wins + losses
    (1 when n = 0)."""
    out = np.ones(len(wins))
    for i, (w, l) in enumerate(zip(np.asarray(wins).tolist(), np.asarray(losses).tolist())):
        n, k = int(w) + int(l), min(int(w), int(l))
        if n:
            # Exact integer arithmetic: the tail of a large n would underflow as a float product.
            out[i] = min(1.0, 2 * sum(math.comb(n, j) for j in range(k + 1)) / 2 ** n)
    return out


def small_sample_note(smallest: int | None) -> list[str]:
    """The note the commands print when some benchmark has fewer than SMALL_STRATUM (common) cases."""
    if smallest is None or smallest >= SMALL_STRATUM:
        return []
    return [f"intervals and p-values are optimistic below ~{SMALL_STRATUM} cases per benchmark (smallest here: "
            f"{smallest}): percentile intervals under-cover there; p-values carry an m/(m-1) variance correction"]


_erfc = np.vectorize(math.erfc, otypes=[np.float64])
