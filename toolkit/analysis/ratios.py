"""Ratios of case sums per group (a match rate, a harm rate, an error share), with intervals from
cases resampled whole within their benchmark.

Input is one row per group x case with a numerator and a denominator (a mean over
cases has denominator 1 per case). A group's value is sum(num) / sum(den) over
its cases; its interval resamples cases (stratified by benchmark, shared by all
groups, ``toolkit.analysis.paired``) and recomputes the same ratio, so items of
one case and passes of one judge move together.

Where the resampling is degenerate (a group with one case, one case in some
benchmark, or a resampled ratio that never varies: every case has the same
value) there is no interval: ci_low and ci_high are null and ``ci_note`` says
why, never a point range labelled 95%.
"""

from __future__ import annotations

import warnings

import numpy as np
import polars as pl

from toolkit.analysis.paired import TIE, ResampleSettings, draw_resamples, percentile_interval


def case_ratios(frame: pl.DataFrame, keys: list[str], settings: ResampleSettings | None = None,
                denominator: bool = False) -> pl.DataFrame:
    """Per group of ``keys``: value = sum(num)/sum(den), n_cases (cases with den > 0), with ``denominator``
    the sum(den) itself, and with ``settings`` ci_low/ci_high and ci_note (why there is none).

    ``frame`` has the ``keys`` columns, ``benchmark``, ``case_id``, ``num`` and ``den`` (several rows of
    one group and case are summed). Groups keep their first-appearance order.
    """
    cells = frame.group_by(*keys, "benchmark", "case_id", maintain_order=True).agg(
        pl.col("num").cast(pl.Float64).sum(), pl.col("den").cast(pl.Float64).sum())
    # Matrix rows in one order whatever the input's: a row's resampled sums (matrix products) round by position.
    groups = cells.select(keys).unique().sort(keys, nulls_last=True).with_row_index("_g")
    universe = cells.select("benchmark", "case_id").unique().sort("benchmark", "case_id").with_row_index("_c")
    placed = cells.join(groups, on=keys, nulls_equal=True).join(universe, on=["benchmark", "case_id"])
    num = np.zeros((groups.height, universe.height))
    den = np.zeros_like(num)
    g, c = placed["_g"].to_numpy().astype(np.int64), placed["_c"].to_numpy().astype(np.int64)
    num[g, c] = placed["num"].fill_null(0.0).to_numpy()
    den[g, c] = placed["den"].fill_null(0.0).to_numpy()
    with np.errstate(invalid="ignore", divide="ignore"):
        value = num.sum(axis=1) / den.sum(axis=1)
    out = groups.drop("_g").with_columns(value=pl.Series(value), n_cases=pl.Series((den > 0).sum(axis=1)))
    if denominator:
        out = out.with_columns(denominator=pl.Series(den.sum(axis=1)))
    if settings is not None and universe.height:
        sizes = universe.group_by("benchmark", maintain_order=True).len()
        res = draw_resamples(list(sizes.iter_rows()), settings)
        boot = res.pooled_ratio(num, den)
        lo, hi = percentile_interval(boot)
        out = out.with_columns(_interval_columns(boot, lo, hi, den > 0, res.slices))
    first_seen = cells.select(keys).unique(maintain_order=True)
    return first_seen.join(out, on=keys, how="left", nulls_equal=True, maintain_order="left").with_columns(
        pl.col(pl.Float64).fill_nan(None))


def _interval_columns(boot: np.ndarray, lo: np.ndarray, hi: np.ndarray, has: np.ndarray,
                      slices: tuple[slice, ...]) -> list[pl.Series]:
    """ci_low, ci_high, ci_note: no interval where a group's resampling is degenerate (see the module doc)."""
    cases = has.sum(axis=1)
    single = np.stack([has[:, s].sum(axis=1) == 1 for s in slices], axis=1).sum(axis=1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN rows: no value to resample
        flat = ~(np.nanmax(boot, axis=1, initial=-np.inf) - np.nanmin(boot, axis=1, initial=np.inf) > TIE)
    notes: list[str | None] = []
    for n, one, still in zip(cases.tolist(), single.tolist(), flat.tolist()):
        if n <= 1:
            notes.append("no case: no interval" if n == 0 else "1 case: no interval")
        elif one:
            notes.append(f"1 case in {one} benchmark{'s' if one > 1 else ''}: no interval")
        else:
            notes.append("no variation between cases: no interval" if still else None)
    none = np.array([n is not None for n in notes], dtype=bool)
    return [pl.Series("ci_low", np.where(none, np.nan, lo)), pl.Series("ci_high", np.where(none, np.nan, hi)),
            pl.Series("ci_note", notes, dtype=pl.String)]
