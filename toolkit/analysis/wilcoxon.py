"""Two-sided Wilcoxon signed-rank p-values of paired case differences, zeros handled as Pratt proposed.

Each row's p is the one ``scipy.stats.wilcoxon(row, zero_method="pratt")`` gives
for that row alone (its common cases only). Handing scipy all rows in one 2-D
call is not that: scipy then decides between its exact, permutation and normal
methods, and counts zeros and ties, over the whole batch, so one pair's p would
depend on the other pairs. scipy's choice for one row of n common cases
(``method="auto"``): above 50 cases, or with zeros or tied |differences| above
13 cases, the normal approximation; without zeros and ties the exact
distribution; with them at 13 cases or fewer an exact permutation test.

The normal approximation is computed here with numpy for all its rows at once
(zeros are ranked with the other absolute differences and then left out of the
rank sums; mean and variance adjusted for them (Cureton), variance corrected for
ties among the non-zero differences, no continuity correction: scipy's formula,
checked in tests/test_analysis_compare.py). The other rows go to scipy one at a
time. Importing scipy.stats takes ~0.6 s, a quarter of a cold ``bedside
compare`` of full runs, so it is imported only when such a row exists; rubric
scores are full of ties, so with more than 13 common cases it rarely is.
"""

from __future__ import annotations

import math
import warnings

import numpy as np

ASYMPTOTIC_ABOVE = 50  # scipy's "auto" uses the normal approximation above this many cases
PERMUTATION_UP_TO = 13  # ... and, with zeros or ties, above this many (a permutation test at or below it)


def wilcoxon_p(differences: np.ndarray) -> np.ndarray:
    """Two-sided p per row of (k, N) case differences (NaN = not a common case); NaN when all are zero."""
    differences = np.asarray(differences, dtype=np.float64)
    out = np.full(differences.shape[0], np.nan)
    if differences.size == 0:
        return out
    informative = np.nan_to_num(np.abs(differences), nan=0.0).max(axis=1) > 0
    count = (~np.isnan(differences)).sum(axis=1)
    _, ties = average_ranks(np.abs(differences))
    tied = (ties > 0) | ((differences == 0).sum(axis=1) > 0)  # scipy's has_ties or n_zero > 0, for this row
    normal = informative & ((count > ASYMPTOTIC_ABOVE) | (tied & (count > PERMUTATION_UP_TO)))
    if normal.any():
        out[normal] = normal_approximation_p(differences[normal])
    one_by_one = np.flatnonzero(informative & ~normal)
    if one_by_one.size:
        from scipy import stats  # imported here: see the module doc

        for i in one_by_one.tolist():
            row = differences[i][~np.isnan(differences[i])]
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")  # scipy's small-sample warnings: the p is still its p
                out[i] = float(stats.wilcoxon(row, zero_method="pratt").pvalue)
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
