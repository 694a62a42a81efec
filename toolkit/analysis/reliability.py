"""Inter-rater agreement coefficients for nominal ratings (here: matched / not matched per rubric item).

Ratings come as a (units x raters) float array with NaN where a rater did not
rate a unit, or as (units x categories) counts of how many raters chose each
category.

* percent agreement: per unit, the share of ordered rater pairs that agree
  (sum_c n_c (n_c - 1) / (m (m - 1)) with m raters of the unit), averaged over
  units with at least two ratings; for two raters the plain share of agreements;
* Cohen's kappa (two raters, units both rated): (p_o - p_e) / (1 - p_e) with p_e
  from each rater's own category shares;
* Fleiss' kappa (any number of raters, units rated by the same number m);
* Krippendorff's alpha, nominal: 1 - D_o / D_e from the coincidence matrix,
  using every unit with at least two ratings, so missing ratings are allowed.
"""

from __future__ import annotations

import math

import numpy as np


def category_counts(ratings: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(units x categories) counts of a (units x raters) rating array with NaN for missing, and the
    categories (sorted values) they count."""
    values = np.asarray(ratings, dtype=np.float64)
    categories = np.unique(values[~np.isnan(values)])
    counts = np.stack([(values == c).sum(axis=1) for c in categories], axis=1) if categories.size else \
        np.zeros((values.shape[0], 0))
    return counts.astype(np.float64), categories


def percent_agreement(counts: np.ndarray) -> float:
    """Mean over units with >= 2 ratings of the share of agreeing ordered rater pairs."""
    counts = np.asarray(counts, dtype=np.float64)
    m = counts.sum(axis=1)
    keep = m >= 2
    if not keep.any():
        return math.nan
    c, m = counts[keep], m[keep]
    return float(np.mean((c * (c - 1)).sum(axis=1) / (m * (m - 1))))


def cohen_kappa(first: np.ndarray, second: np.ndarray) -> float:
    """Cohen's kappa of two raters over the units both rated (NaN = not rated); NaN when p_e = 1."""
    a, b = np.asarray(first, dtype=np.float64), np.asarray(second, dtype=np.float64)
    both = ~np.isnan(a) & ~np.isnan(b)
    a, b = a[both], b[both]
    if a.size == 0:
        return math.nan
    categories = np.unique(np.concatenate([a, b]))
    observed = float(np.mean(a == b))
    expected = float(sum(np.mean(a == c) * np.mean(b == c) for c in categories))
    if expected >= 1.0:
        return math.nan  # both raters used one and the same category throughout: kappa is undefined
    return (observed - expected) / (1.0 - expected)


def fleiss_kappa(counts: np.ndarray) -> float:
    """Fleiss' kappa of (units x categories) counts; every unit must have the same number of ratings."""
    counts = np.asarray(counts, dtype=np.float64)
    if counts.shape[0] == 0:
        return math.nan
    m = counts.sum(axis=1)
    if not np.all(m == m[0]) or m[0] < 2:
        raise ValueError("fleiss_kappa needs the same number (>= 2) of ratings for every unit")
    n = m[0]
    per_unit = ((counts * (counts - 1)).sum(axis=1)) / (n * (n - 1))
    p_bar = per_unit.mean()
    shares = counts.sum(axis=0) / counts.sum()
    p_e = float((shares ** 2).sum())
    if p_e >= 1.0:
        return math.nan
    return float((p_bar - p_e) / (1.0 - p_e))


def krippendorff_alpha_nominal(counts: np.ndarray) -> float:
    """Krippendorff's alpha (nominal metric) of (units x categories) counts; units with < 2 ratings are
    not pairable and are ignored. NaN when there is no disagreement to expect (one category)."""
    counts = np.asarray(counts, dtype=np.float64)
    m = counts.sum(axis=1)
    pairable = m >= 2
    counts, m = counts[pairable], m[pairable]
    if counts.shape[0] == 0:
        return math.nan
    weight = 1.0 / (m - 1.0)
    # Coincidence matrix o_ck = sum_u n_uc (n_uk - [c == k]) / (m_u - 1).
    coincidence = (counts * weight[:, None]).T @ counts - np.diag((counts * weight[:, None]).sum(axis=0))
    n_c = coincidence.sum(axis=1)
    n = n_c.sum()
    observed = coincidence.sum() - np.trace(coincidence)
    expected = (n_c.sum() ** 2 - (n_c ** 2).sum()) / (n - 1.0)
    if expected <= 0:
        return math.nan
    return float(1.0 - observed / expected)
