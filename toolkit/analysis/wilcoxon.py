"""Two-sided Wilcoxon signed-rank p-values of paired case differences, zeros handled as Pratt proposed.

Zeros are ranked with the other absolute differences and then left out of the rank sums;
the normal approximation's mean and variance are adjusted for them (Cureton) and the
variance is corrected for ties among the non-zero differences; no continuity correction.

Rows with more than ``ASYMPTOTIC_ABOVE`` common cases use that normal approximation, computed
here with numpy; scipy.stats.wilcoxon uses the same approximation there (checked in
tests/test_analysis_compare.py). Rows with fewer go to scipy, which picks the exact
distribution (no ties or zeros) or a permutation one. Importing scipy.stats takes ~0.7 s, a
quarter of a cold ``bedside compare`` of full runs, so it is imported only when such a row exists.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

ASYMPTOTIC_ABOVE = 50  # scipy's "auto" switches to the normal approximation above this many cases


def wilcoxon_p(differences: np.ndarray) -> np.ndarray:
    """Two-sided p per row of (k, N) case differences (NaN = not a common case); NaN when all are zero."""
    differences = np.asarray(differences, dtype=np.float64)
    out = np.full(differences.shape[0], np.nan)
    if differences.size == 0:
        return out
    informative = np.nan_to_num(np.abs(differences), nan=0.0).max(axis=1) > 0
    large = informative & ((~np.isnan(differences)).sum(axis=1) > ASYMPTOTIC_ABOVE)
    small = informative & ~large
    if large.any():
        out[large] = normal_approximation_p(differences[large])
    if small.any():
        from scipy import stats  # imported here: see the module doc

        rows = differences[small]
        with warnings.catch_warnings(), np.errstate(invalid="ignore", divide="ignore"):
            warnings.simplefilter("ignore")  # small-sample and all-NaN slice warnings: those rows are NaN
            result = stats.wilcoxon(rows, axis=1, zero_method="pratt",
                                    nan_policy="omit" if np.isnan(rows).any() else "propagate")
        out[small] = np.asarray(result.pvalue, dtype=np.float64)
    return out


def normal_approximation_p(differences: np.ndarray) -> np.ndarray:
    """Two-sided p of the signed-rank statistic's normal approximation per row (see the module doc)."""
    ranks, ties = average_ranks(np.abs(differences))
    count = (~np.isnan(differences)).sum(axis=1).astype(np.float64)
    zeros = (differences == 0).sum(axis=1).astype(np.float64)
    r_plus = np.where(differences > 0, ranks, 0.0).sum(axis=1)
    mean = (count * (count + 1) - zeros * (zeros + 1)) / 4
    variance = (count * (count + 1) * (2 * count + 1) - zeros * (zeros + 1) * (2 * zeros + 1) - ties / 2) / 24
    with np.errstate(invalid="ignore", divide="ignore"):
        z = np.abs(r_plus - mean) / np.sqrt(variance)
    return np.array([math.erfc(v / math.sqrt(2.0)) if v == v else math.nan for v in z.tolist()])


def average_ranks(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row of (k, N): 1-based average ranks of the finite values (NaN stays NaN) and the row's tie
    correction sum(t**3 - t) over groups of equal non-zero values."""
    k, n = values.shape
    order = np.argsort(values, axis=1, kind="stable")  # NaN sorts last
    ordered = np.take_along_axis(values, order, axis=1)
    starts = np.ones((k, n), dtype=bool)
    starts[:, 1:] = ordered[:, 1:] != ordered[:, :-1]  # NaN != NaN: every NaN is a group of its own
    flat_starts = starts.ravel()
    group = np.cumsum(flat_starts) - 1
    size = np.bincount(group).astype(np.float64)
    first = np.flatnonzero(flat_starts) % n  # each group's first position within its row
    placed = (first + (size + 1) / 2)[group].reshape(k, n)
    ranks = np.empty_like(placed)
    np.put_along_axis(ranks, order, np.where(np.isnan(ordered), np.nan, placed), axis=1)
    value = ordered.ravel()[flat_starts]
    counted = np.isfinite(value) & (value != 0)  # Pratt: the zeros' tie group is not corrected for
    row = np.flatnonzero(flat_starts) // n
    ties = np.bincount(row[counted], weights=(size ** 3 - size)[counted], minlength=k)
    return ranks, ties
