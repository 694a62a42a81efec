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
checked in tests/test_analysis_compare.py). Permutation rows (13 cases or fewer
with zeros or ties) are enumerated here too, exactly, by counting (``sign_flip_p``:
scipy's enumeration of 2^13 sign patterns is slow per row). Rows without zeros and ties
take scipy's exact branch: the null distribution of the rank sum over ranks 1..n, counted once
per n (``_exact_counts``). Every probability there is a count over 2**n with n <= 50, exact in
a double, so the p equals scipy's bit for bit, and compare needs no scipy.stats (a heavy import).
"""

from __future__ import annotations

import math
from functools import lru_cache

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
    ranks, ties = average_ranks(np.abs(differences))
    tied = (ties > 0) | ((differences == 0).sum(axis=1) > 0)  # scipy's has_ties or n_zero > 0, for this row
    normal = informative & ((count > ASYMPTOTIC_ABOVE) | (tied & (count > PERMUTATION_UP_TO)))
    if normal.any():
        out[normal] = normal_approximation_p(differences[normal], (ranks[normal], ties[normal]))
    for i in np.flatnonzero(informative & ~normal & tied).tolist():
        out[i] = sign_flip_p(differences[i][~np.isnan(differences[i])])
    exact = informative & ~normal & ~tied
    if exact.any():
        positive = np.where(differences[exact] > 0, ranks[exact], 0.0).sum(axis=1)
        for i, n, w in zip(np.flatnonzero(exact).tolist(), count[exact].tolist(), np.rint(positive).tolist()):
            below = _exact_counts(n)  # below[w]: sign patterns whose rank sum is <= w
            tail = min(below[int(w)], below[-1] - (below[int(w) - 1] if w >= 1 else 0.0))
            out[i] = min(1.0, 2 * tail / 2.0 ** n)
    return out


def sign_flip_p(row: np.ndarray) -> float:
    """Exact two-sided p of the Pratt signed-rank sum over all 2**n sign flips of ``row`` (finite values).

    scipy's permutation branch enumerates the flips; here the same distribution comes from counting subset
    sums of the doubled (integer) ranks, so it costs microseconds, not seconds, at 13 cases. Zeros never
    add to the sum; each doubles every count. p = min(1, 2 min(#{W <= w}, #{W >= w}) / 2**n), as scipy.
    """
    ranks, _ = average_ranks(np.abs(row)[None, :])
    doubled = np.rint(2 * ranks[0]).astype(np.int64)
    observed = int(doubled[row > 0].sum())
    counts = np.zeros(int(doubled[row != 0].sum()) + 1)
    counts[0] = 1.0
    for r in doubled[row != 0].tolist():
        counts[r:] = counts[r:] + counts[:counts.size - r]
    counts *= 2.0 ** int((row == 0).sum())
    tail = min(counts[:observed + 1].sum(), counts[observed:].sum())
    return min(1.0, 2 * tail / 2.0 ** row.size)


def normal_approximation_p(differences: np.ndarray, ranked: tuple[np.ndarray, np.ndarray] | None = None
                           ) -> np.ndarray:
    """Two-sided p of the signed-rank statistic's normal approximation per row (see the module doc);
    ``ranked``: ``average_ranks(abs(differences))`` when already computed."""
    ranks, ties = ranked if ranked is not None else average_ranks(np.abs(differences))
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


@lru_cache(maxsize=None)
def _exact_counts(n: int) -> np.ndarray:
    """Cumulative counts of the 2**n sign patterns of ranks 1..n by their positive rank sum (0..n(n+1)/2):
    integers below 2**53 for n <= 50, so exact in float64."""
    counts = np.zeros(n * (n + 1) // 2 + 1)
    counts[0] = 1.0
    for r in range(1, n + 1):
        counts[r:] = counts[r:] + counts[:counts.size - r]
    cumulative = np.cumsum(counts)
    cumulative.setflags(write=False)
    return cumulative
