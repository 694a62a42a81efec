"""Case scores of several runs as one aligned (runs x cases) matrix, benchmarks laid end to end.

The column axis is the union of the cases any run completed, grouped by
benchmark (sorted names, as the reference processes them) and in dataset order
inside a benchmark. A run that did not complete a case has ``present = 0``
there, so every statistic is computed on the cases a run (or a pair of runs)
actually has.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import polars as pl

from toolkit.analysis.paired import ResampleSettings, SharedResamples, draw_resamples


@dataclass(frozen=True, eq=False)
class CaseMatrix:
    """``scores`` and ``present`` are (units x cases) float arrays; scores are 0 where absent."""

    units: tuple[str, ...]  # run ids (or judge raters), one per row
    benchmarks: tuple[str, ...]
    slices: tuple[slice, ...]  # each benchmark's columns
    case_ids: tuple[str, ...]
    scores: np.ndarray
    present: np.ndarray

    @property
    def strata(self) -> list[tuple[str, int]]:
        return [(b, s.stop - s.start) for b, s in zip(self.benchmarks, self.slices)]

    def resamples(self, settings: ResampleSettings) -> SharedResamples:
        """Shared resample counts over this matrix's cases, stratified by benchmark."""
        return draw_resamples(self.strata, settings)

    def benchmark_counts(self) -> np.ndarray:
        """(units, benchmarks): completed cases per benchmark."""
        if not self.slices:
            return np.zeros((len(self.units), 0))
        return np.stack([self.present[:, s].sum(axis=1) for s in self.slices], axis=1)

    def benchmark_means(self) -> np.ndarray:
        """(units, benchmarks): mean score over the unit's cases of each benchmark (NaN without cases).

        Sums are exact (``math.fsum``, as ``bedside summary`` sums), so the same cases give the same
        mean to the last bit whatever their order."""
        sums = np.array([[math.fsum(row) for row in self.scores[:, s]] for s in self.slices]).T.reshape(
            len(self.units), len(self.slices))
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums / self.benchmark_counts()

    def overall(self) -> np.ndarray:
        """(units,): macro mean over the benchmarks the unit has cases in, summed exactly like ``summary``."""
        means, has = self.benchmark_means(), self.benchmark_counts() > 0
        with np.errstate(invalid="ignore", divide="ignore"):
            return np.array([math.fsum(m[h]) for m, h in zip(means, has)]).reshape(len(self.units)) / has.sum(axis=1)

    def values(self) -> np.ndarray:
        """(units, cases) scores with NaN where the unit has no case (the form ``paired_t`` takes)."""
        return np.where(self.present > 0, self.scores, np.nan)

    def subset(self, rows: Sequence[int]) -> CaseMatrix:
        """The matrix of these units only, without the cases (and benchmarks) none of them completed."""
        rows = list(rows)
        present = self.present[rows]
        keep = present.any(axis=0)
        names, slices, stop = [], [], 0
        for name, s in zip(self.benchmarks, self.slices):
            n = int(keep[s].sum())
            if n:
                names.append(name)
                slices.append(slice(stop, stop + n))
                stop += n
        return CaseMatrix(tuple(self.units[i] for i in rows), tuple(names), tuple(slices),
                          tuple(c for c, k in zip(self.case_ids, keep.tolist()) if k),
                          self.scores[rows][:, keep], present[:, keep])


def macro(per_benchmark: np.ndarray, has: np.ndarray) -> np.ndarray:
    """Mean over the last axis (benchmarks) of the benchmarks a unit has cases in.

    ``per_benchmark`` is (..., units, benchmarks), ``has`` is (units, benchmarks) boolean. A NaN in a
    benchmark the unit has (a resample that drew none of its few cases there) makes that resample
    NaN, so it drops out of intervals instead of biasing them.
    """
    values = np.where(has, per_benchmark, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return values.sum(axis=-1) / has.sum(axis=-1)


def from_arrays(scores: np.ndarray, sizes: dict[str, int], units: Sequence[str] | None = None,
                present: np.ndarray | None = None) -> CaseMatrix:
    """A matrix from (units x cases) scores whose columns are benchmarks of ``sizes`` laid end to end."""
    scores = np.asarray(scores, dtype=np.float64)
    present = np.ones_like(scores) if present is None else np.asarray(present, dtype=np.float64)
    stops = np.cumsum(list(sizes.values())).tolist()
    slices = tuple(slice(stop - n, stop) for stop, n in zip(stops, sizes.values()))
    names = tuple(units) if units is not None else tuple(f"u{i}" for i in range(scores.shape[0]))
    return CaseMatrix(names, tuple(sizes), slices, tuple(str(i) for i in range(scores.shape[1])),
                      scores * present, present)


def case_matrix(cases: pl.DataFrame, units: Sequence[str] | None = None, unit: str = "run_id",
                value: str = "score") -> CaseMatrix:
    """The matrix of ``cases`` (columns ``unit``, benchmark, case_id, ``value`` and optionally position).

    ``units`` fixes the row order (default: first appearance); a unit without any case gets an
    all-absent row. Duplicate (unit, case) rows are an error.
    """
    frame = cases.select(pl.col(unit).alias("_unit"), "benchmark", "case_id",
                         pl.col(value).cast(pl.Float64).alias("_v"),
                         *(["position"] if "position" in cases.columns else []))
    dup = frame.filter(pl.struct("_unit", "benchmark", "case_id").is_duplicated())
    if dup.height:
        row = dup.row(0, named=True)
        raise ValueError(f"case scores: {unit} {row['_unit']!r} has case {row['case_id']} twice")
    order = list(units) if units is not None else frame["_unit"].unique(maintain_order=True).to_list()
    position = pl.col("position").min() if "position" in frame.columns else pl.lit(0)
    universe = (frame.group_by("benchmark", "case_id").agg(position.alias("_pos"))
                .sort("benchmark", "_pos", "case_id").with_row_index("_col"))
    unit_index = pl.DataFrame({"_unit": order, "_row": list(range(len(order)))},
                              schema={"_unit": frame.schema["_unit"], "_row": pl.Int64})
    placed = frame.join(universe, on=["benchmark", "case_id"]).join(unit_index, on="_unit")
    scores = np.zeros((len(order), universe.height))
    present = np.zeros_like(scores)
    rows, cols = placed["_row"].to_numpy(), placed["_col"].to_numpy().astype(np.int64)
    scores[rows, cols] = placed["_v"].fill_null(np.nan).to_numpy()
    present[rows, cols] = 1.0
    if np.isnan(scores).any():
        raise ValueError(f"case scores: a {value} is missing (null) for a completed case")
    sizes = universe.group_by("benchmark", maintain_order=True).len()
    names = sizes["benchmark"].to_list()
    stops = np.cumsum(sizes["len"].to_numpy()).tolist()
    slices = [slice(stop - size, stop) for stop, size in zip(stops, sizes["len"].to_list())]
    return CaseMatrix(tuple(order), tuple(names), tuple(slices), tuple(universe["case_id"].to_list()),
                      scores, present)
