"""Multiple-testing adjustments over the family of tests a table shows.

Both take an array of p-values and return adjusted p-values in the same order.
NaN p-values (tests that could not be run) are left NaN and not counted in the
family size.
"""

from __future__ import annotations

import numpy as np
import polars as pl


def _ranked(p_values: np.ndarray | list[float]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(p as floats, an all-NaN output, positions of the finite p-values in ascending order)."""
    p = np.asarray(p_values, dtype=np.float64)
    finite = np.flatnonzero(~np.isnan(p))
    return p, np.full(p.shape, np.nan), finite[np.argsort(p[finite], kind="stable")]


def holm(p_values: np.ndarray | list[float]) -> np.ndarray:
    """Holm's step-down adjustment (controls the family-wise error under any dependence).

    With the m finite p-values sorted ascending, p_(k) becomes max over j <= k of
    min(1, (m - j + 1) * p_(j)).
    """
    p, out, order = _ranked(p_values)
    m = order.size
    if m:
        out[order] = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    return out


def benjamini_hochberg(p_values: np.ndarray | list[float]) -> np.ndarray:
    """Benjamini-Hochberg step-up adjustment (controls the false discovery rate).

    With the m finite p-values sorted ascending, p_(k) becomes min over j >= k of
    min(1, m / j * p_(j)).
    """
    p, out, order = _ranked(p_values)
    m = order.size
    if m:
        scaled = np.minimum(1.0, m / np.arange(1, m + 1) * p[order])
        out[order] = np.minimum.accumulate(scaled[::-1])[::-1]
    return out


def adjust(frame: pl.DataFrame, column: str = "p_value") -> pl.DataFrame:
    """``frame`` with ``p_holm`` and ``p_bh`` over all its rows (the family shown); a test that could not
    be run (null or NaN p) gets null adjusted values, like the frames' other missing numbers."""
    p = frame[column].cast(pl.Float64).fill_null(np.nan).to_numpy()
    return frame.with_columns(p_holm=pl.Series(holm(p), dtype=pl.Float64).fill_nan(None),
                              p_bh=pl.Series(benjamini_hochberg(p), dtype=pl.Float64).fill_nan(None))
