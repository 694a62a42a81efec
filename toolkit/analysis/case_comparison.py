"""The comparison of units (runs, or judge raters) from their case scores alone.

Means are exact (``CaseMatrix.benchmark_means``: the sums ``bedside summary`` makes).
A unit's interval, overall and per benchmark, is the stratified t of its own case
scores (``paired_t``, the estimator of the pairs applied to scores instead of
differences), clipped to the scores' range [0, 1] (a mean of scores cannot lie outside it, so clipping
never loses coverage); it covers new cases (a case score's answer and judge variance included). Ranks and
rank intervals come from resamples shared by every ranked unit (``toolkit.analysis.paired``). Only units
that pass ``ranking.ranking_gate`` are ranked, paired and put in tie groups; the
others get their own numbers and the reason in ``not_ranked``.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import polars as pl

from toolkit.analysis._blas import product
from toolkit.analysis.matrix import CaseMatrix, case_matrix
from toolkit.analysis.paired import ResampleSettings, ResampleStream, SharedResamples
from toolkit.analysis.paired_t import paired_t
from toolkit.analysis.pairs import OVERALL, OVERALL_FAMILY, pairwise
from toolkit.analysis.ranking import (MIN_CASES, competition_ranks, rank_intervals, ranking_gate, separability,
                                      tie_groups)

VERSUS_COLUMNS = ("run_id", "reference", "benchmark", "n_cases", "delta", "ci_low", "ci_high", "p_value", "p_holm",
                  "family", "ci_note")


@dataclass(frozen=True, eq=False)
class CaseComparison:
    """What the case scores alone give: per-unit means, pairs and ranks (units: runs or raters)."""

    units: pl.DataFrame  # ranked: unit, rank, tie_group, overall, ci_low, ci_high, ci_note, n_benchmarks, n_cases
    benchmarks: pl.DataFrame  # unit, benchmark, n, mean, ci_low, ci_high, ci_note (ranked units first)
    pairwise: pl.DataFrame  # ranked units only, oriented (see compare_matrix); a family column
    ranks: pl.DataFrame
    smallest_benchmark: int | None  # fewest cases a ranked unit, or a pair in common, has in a benchmark
    notes: list[str]
    not_ranked: pl.DataFrame  # unit, overall, ci_low, ci_high, ci_note, n_benchmarks, n_cases, reason
    versus: pl.DataFrame  # VERSUS_COLUMNS with unit's label in run_id
    separability: float | None
    separation: pl.DataFrame  # one row: separated, adjacent_pairs, share, note
    baseline: str | None
    note_sections: tuple[tuple[str, ...], ...] = ()  # per note, the sections it is about (compare's names)


@dataclass(frozen=True, eq=False)
class UnitResamples:
    benchmark: np.ndarray  # (benchmarks, units, samples) resampled benchmark means
    overall: np.ndarray  # (units, samples) resampled macro means


def resample_units(matrix: CaseMatrix, res: SharedResamples | ResampleStream, benchmarks: bool = True
                   ) -> UnitResamples:
    """Every unit's resampled benchmark means (one matrix product per benchmark) and macro means;
    ``benchmarks=False`` keeps the macro means only (``benchmark`` is then empty). Each benchmark's
    counts are used once, in order: a ``ResampleStream`` draws them as they are needed."""
    has = matrix.benchmark_counts() > 0
    overall = np.zeros((len(matrix.units), res.samples))
    bench = np.empty((len(matrix.benchmarks) if benchmarks else 0, len(matrix.units), res.samples))
    for b, part in enumerate(res.per_stratum()):
        means = part.stratum_ratio(matrix.scores, matrix.present, 0)
        if benchmarks:
            bench[b] = means
        # A benchmark the unit has no case in stays out of its macro (NaN only where it has cases).
        overall += means if has[:, b].all() else np.where(has[:, b, None], means, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        overall /= has.sum(axis=1)[:, None]
    return UnitResamples(bench, overall)


def rank_resamples(matrix: CaseMatrix, settings: ResampleSettings) -> np.ndarray:
    """(units, samples) resampled macro means for rank intervals, none left out: ``resample_units``' shared
    draws, except that a unit with part of a benchmark's cases takes as many draws of its own cases there
    (``ResampleStream.per_stratum_own``), so no resample lacks it. Without such a unit: ``resample_units``."""
    partial = [[u for u in range(len(matrix.units)) if 0 < matrix.present[u, s].sum() < s.stop - s.start]
               for s in matrix.slices]
    stream = ResampleStream.of(matrix.strata, settings, reuse=True)
    if not any(partial):
        return resample_units(matrix, stream, benchmarks=False).overall
    has = matrix.benchmark_counts() > 0
    overall = np.zeros((len(matrix.units), settings.samples))
    own = [[matrix.present[u, s] > 0 for u in units] for s, units in zip(matrix.slices, partial)]
    for b, (part, mine) in enumerate(stream.per_stratum_own(own)):
        means = part.stratum_ratio(matrix.scores, matrix.present, 0)
        s = matrix.slices[b]
        for u, mask, counts in zip(partial[b], own[b], mine):
            means[u] = product(matrix.scores[u:u + 1, s][:, mask], counts)[0] / counts.shape[0]
        overall += np.where(has[:, b, None], means, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        overall /= has.sum(axis=1)[:, None]
    return overall


def compare_cases(cases: pl.DataFrame, units: list[str], settings: ResampleSettings = ResampleSettings(),
                  per_benchmark: bool = False, unit: str = "run_id", baseline: str | None = None,
                  min_cases: int = MIN_CASES, benchmarks: int | None = None) -> CaseComparison:
    """The comparison of ``cases`` (one row per unit x case: benchmark, case_id, score[, position])."""
    return compare_matrix(case_matrix(cases, units, unit=unit), settings, per_benchmark, unit.removesuffix("_id"),
                          baseline, min_cases, benchmarks)


def compare_matrix(matrix: CaseMatrix, settings: ResampleSettings = ResampleSettings(), per_benchmark: bool = False,
                   label: str = "run", baseline: str | None = None, min_cases: int = MIN_CASES,
                   benchmarks: int | None = None) -> CaseComparison:
    """``compare_cases`` on an already aligned matrix (``label`` names a unit in the notes).

    Ranked units are ordered by observed overall mean (best first, ties by the order given). Without a
    baseline the overall pairwise rows are every pair as (better, worse), Holm/BH over those k(k-1)/2
    rows; with one, each other ranked unit against it (run_a = the other, run_b = baseline, delta = a - b),
    Holm/BH over those k-1 rows. ``per_benchmark`` adds the same pairs per benchmark, a family of their
    own. Tie groups always use the all-pairs family. A baseline that is not ranked is a ValueError.
    ``benchmarks``: how many benchmarks a ranked unit must cover (its dataset's; default: those of the
    matrix), so that whether a unit is ranked depends on that unit alone, never on the others compared.
    """
    units = list(matrix.units)
    counts = matrix.benchmark_counts()
    mask, reasons = ranking_gate(counts, min_cases, benchmarks)
    if baseline is not None:
        if baseline not in units:
            raise ValueError(f"baseline {baseline!r} is not one of the compared {label}s ({', '.join(units)})")
        if not mask[units.index(baseline)]:
            raise ValueError(f"baseline {baseline!r} is not a ranked {label} ({reasons[units.index(baseline)]})")
    own = _unit_numbers(matrix)
    ranked_rows = np.flatnonzero(mask)
    ranked = matrix.subset(ranked_rows) if ranked_rows.size else matrix
    names = [units[i] for i in ranked_rows]
    observed = own["overall"].to_numpy()[ranked_rows]
    order = np.argsort(-np.nan_to_num(observed, nan=-np.inf), kind="stable")
    ordered = [names[i] for i in order]
    index = np.arange(len(names)) if ranked_rows.size else np.zeros(0, dtype=np.int64)
    a, b = np.triu_indices(len(names), k=1)
    first, second = index[order[a]], index[order[b]]
    all_pairs = pairwise(ranked, first, second, per_benchmark and baseline is None)
    holm_all = {(x, y): p for x, y, p in all_pairs.filter(pl.col("family") == OVERALL_FAMILY).select(
        "run_a", "run_b", "p_holm").iter_rows()}
    reference = names.index(baseline) if baseline is not None else (int(order[0]) if names else 0)
    rest = np.array([i for i in order.tolist() if i != reference], dtype=np.int64)
    against = np.full(rest.size, reference, dtype=np.int64)
    shown = pairwise(ranked, rest, against, per_benchmark) if baseline is not None else all_pairs
    versus = pairwise(ranked, rest, against, True, overall=False).select(
        pl.col("run_a").alias("run_id"), pl.col("run_b").alias("reference"), *VERSUS_COLUMNS[2:9],
        pl.format("versus {}, per benchmark", "run_b").alias("family"), "ci_note")
    groups = tie_groups(ordered, holm_all)
    share, separation = separability(ordered, holm_all)
    board = own[ranked_rows.tolist()][order.tolist()].with_columns(
        rank=pl.Series(competition_ranks(observed)[order], dtype=pl.Int64),
        tie_group=pl.Series(groups, dtype=pl.Int64)).select("unit", "rank", "tie_group", pl.exclude(
            "unit", "rank", "tie_group"))
    not_ranked = own.with_columns(reason=pl.Series(reasons, dtype=pl.String)).filter(~pl.Series(mask))
    ranks = _ranks(ranked, names, observed, order, settings)
    tagged = _notes(label, names, not_ranked, shown, len(matrix.benchmarks), min_cases, separation)
    notes = [text for _, text in tagged]
    both = matrix.present[ranked_rows][first] * matrix.present[ranked_rows][second] if names else np.zeros((0, 0))
    common = [both[:, s].sum(axis=1) for s in matrix.slices] if both.size else []
    sizes = np.concatenate([counts[ranked_rows].ravel(), *common]) if names else np.zeros(0)
    return CaseComparison(
        board, _benchmark_frame(matrix, [ranked_rows[i] for i in order] + np.flatnonzero(~mask).tolist()), shown,
        ranks, int(sizes[sizes > 0].min()) if (sizes > 0).any() else None, notes, not_ranked, versus, share,
        separation, baseline, tuple(about for about, _ in tagged))


def _unit_numbers(matrix: CaseMatrix) -> pl.DataFrame:
    """Every unit's exact overall mean and its stratified t interval (the run's own scores), in unit order."""
    t = paired_t(matrix.values(), matrix.slices) if matrix.slices else None
    counts = matrix.benchmark_counts()
    k = len(matrix.units)
    return pl.DataFrame({
        "unit": list(matrix.units), "overall": matrix.overall(),
        "ci_low": _in_range(t.ci_low) if t else np.full(k, np.nan),
        "ci_high": _in_range(t.ci_high) if t else np.full(k, np.nan),
        "ci_note": pl.Series(t.ci_note if t else ["no case: no interval"] * k, dtype=pl.String),
        "n_benchmarks": (counts > 0).sum(axis=1).astype(np.int64), "n_cases": counts.sum(axis=1).astype(np.int64),
    }, schema_overrides={"unit": pl.String}).with_columns(pl.col(pl.Float64).fill_nan(None))


def _in_range(bound: np.ndarray) -> np.ndarray:
    """An interval bound of a mean of scores, clipped to the scores' range [0, 1] (NaN stays NaN)."""
    return np.clip(bound, 0.0, 1.0)


def _ranks(ranked: CaseMatrix, names: list[str], observed: np.ndarray, order: np.ndarray,
           settings: ResampleSettings) -> pl.DataFrame:
    """Rank intervals of the ranked units (leaderboard order) over resamples of their own cases only: every
    ranked unit has cases in every benchmark, so every resample is used (``rank_resamples``)."""
    if not names:
        return rank_intervals([], np.zeros(0), np.zeros((0, settings.samples)))
    return rank_intervals(ranked.units, observed, rank_resamples(ranked, settings))[order.tolist()]


def _notes(label: str, names: list[str], not_ranked: pl.DataFrame, shown: pl.DataFrame, benchmarks: int,
           min_cases: int, separation: pl.DataFrame) -> list[tuple[tuple[str, ...], str]]:
    """(the sections a note is about, the note): a command showing some sections prints their notes only."""
    notes = []
    if not_ranked.height:
        listed = ", ".join(not_ranked["unit"].head(5).to_list()) + (", ..." if not_ranked.height > 5 else "")
        notes.append((("leaderboard", "not_ranked"),
                      f"{not_ranked.height} {label}(s) not ranked ({listed}; see not_ranked): a {label} is ranked "
                      f"only with at least {min_cases} cases in each of the {benchmarks} benchmarks; pairs, ranks "
                      f"and tie groups are among ranked {label}s only"))
    if len(names) == 1:
        notes.append((("pairwise",), f"a single ranked {label} ({names[0]}): there is no pair to compare"))
    lonely = shown.filter((pl.col("benchmark") == OVERALL) & (pl.col("n_cases") == 0))
    if lonely.height:
        listed = ", ".join(f"{a} vs {b}" for a, b in lonely.select("run_a", "run_b").head(5).iter_rows())
        notes.append((("pairwise",), f"{lonely.height} pair(s) of {label}s share no completed case ({listed}"
                     f"{', ...' if lonely.height > 5 else ''}): their pairwise rows have no estimate"))
    if len(names) > 1:
        notes.append((("leaderboard", "separability"), f"separability: {separation['note'][0]}; tie_group: a {label} "
                      "joins the group above unless it is separated from the group's first"))
    return notes


def _benchmark_frame(matrix: CaseMatrix, rows: list[int]) -> pl.DataFrame:
    """unit x benchmark rows (units in ``rows`` order, benchmarks a unit has no case in left out): exact means,
    each with the one-sample t interval of its cases."""
    counts, means, values = matrix.benchmark_counts()[rows], matrix.benchmark_means()[rows], matrix.values()[rows]
    parts = [paired_t(values[:, s]) for s in matrix.slices]
    nb = len(matrix.slices)
    names = np.array(matrix.units, dtype=object)[rows]
    notes = [parts[b].ci_note[u] for u in range(len(rows)) for b in range(nb)]
    return pl.DataFrame({
        "unit": np.repeat(names, nb).tolist(), "benchmark": list(matrix.benchmarks) * len(rows),
        "n": counts.reshape(-1).astype(np.int64), "mean": means.reshape(-1),
        "ci_low": _in_range(np.stack([p.ci_low for p in parts], axis=1).reshape(-1)) if nb else np.zeros(0),
        "ci_high": _in_range(np.stack([p.ci_high for p in parts], axis=1).reshape(-1)) if nb else np.zeros(0),
        "ci_note": pl.Series(notes, dtype=pl.String),
    }, schema_overrides={"unit": pl.String, "benchmark": pl.String}).filter(pl.col("n") > 0).with_columns(
        pl.col(pl.Float64).fill_nan(None))
