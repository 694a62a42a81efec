"""Leaderboard, paired comparisons and rank intervals of several runs.

Means are exact (a benchmark mean is the mean of its completed case scores; the
overall is the macro mean over the benchmarks a run has). Run intervals (the
leaderboard and benchmark tables) are 95% percentile intervals of stratified
bootstrap resamples (cases resampled within each benchmark) drawn once with
numpy's seeded Generator and shared by every run and rank, so rank intervals
are consistent with them. They are not the reference runner's bit-exact
intervals (``bedside summary`` gives those); the two differ only by Monte-Carlo
noise. Pairwise rows use a stratified paired t instead (``toolkit.analysis.pairs``):
its interval and p-value agree and it holds at 25 cases per benchmark.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from toolkit.analysis.matrix import CaseMatrix, case_matrix
from toolkit.analysis.paired import ResampleSettings, SharedResamples, percentile_interval, small_sample_note
from toolkit.protocol import CI_HIGH, CI_LOW
from toolkit.analysis.pairs import OVERALL, pairwise
from toolkit.analysis.runs import comparable_runs, run_facts
from toolkit.selection import JudgeSelection, RunData, per_case, read_runs
from toolkit.store import Store


@dataclass(frozen=True)
class CompareOptions:
    resamples: ResampleSettings = field(default_factory=ResampleSettings)
    per_benchmark: bool = False  # pairwise rows per benchmark too (they join the multiplicity family)
    allow_mixed: bool = False  # compare runs graded on different datasets or by different judges
    selection: JudgeSelection = field(default_factory=JudgeSelection)


@dataclass(frozen=True, eq=False)
class CaseComparison:
    """What the case scores alone give: per-unit means, pairs and ranks (units: runs or raters)."""

    units: pl.DataFrame  # unit, rank, overall, ci_low, ci_high, n_benchmarks, n_cases
    benchmarks: pl.DataFrame  # unit, benchmark, n, mean, ci_low, ci_high
    pairwise: pl.DataFrame
    ranks: pl.DataFrame
    smallest_benchmark: int | None  # fewest cases a unit, or a pair in common, has in a benchmark it has
    notes: list[str]  # a single unit, pairs without a common case


@dataclass(frozen=True, eq=False)
class Comparison:
    leaderboard: pl.DataFrame
    benchmarks: pl.DataFrame
    pairwise: pl.DataFrame
    ranks: pl.DataFrame
    excluded: pl.DataFrame
    notes: list[str]

    def sections(self) -> dict[str, pl.DataFrame]:
        return {"leaderboard": self.leaderboard, "benchmarks": self.benchmarks, "pairwise": self.pairwise,
                "ranks": self.ranks, "excluded": self.excluded}


@dataclass(frozen=True, eq=False)
class UnitResamples:
    benchmark: np.ndarray  # (benchmarks, units, samples) resampled benchmark means
    overall: np.ndarray  # (units, samples) resampled macro means


def resample_units(matrix: CaseMatrix, res: SharedResamples) -> UnitResamples:
    """Every unit's resampled benchmark means (one matrix product per benchmark) and macro means."""
    has = matrix.benchmark_counts() > 0
    overall = np.zeros((len(matrix.units), res.samples))
    bench = np.empty((len(matrix.benchmarks), len(matrix.units), res.samples))
    for b in range(len(matrix.benchmarks)):
        bench[b] = res.stratum_ratio(matrix.scores, matrix.present, b)
        # A benchmark the unit has no case in stays out of its macro (NaN only where it has cases).
        overall += np.where(has[:, b, None], bench[b], 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        return UnitResamples(bench, overall / has.sum(axis=1)[:, None])


def compare(store: Store, run_ids: list[str], options: CompareOptions = CompareOptions()) -> Comparison:
    """Leaderboard, per-benchmark means, pairwise differences and rank intervals of stored runs."""
    return compare_data(read_runs(store, run_ids, texts=False), options)


def compare_data(data: RunData, options: CompareOptions = CompareOptions()) -> Comparison:
    cases = per_case(data, options.selection)
    facts = run_facts(data, options.selection, cases)
    chosen = comparable_runs(facts, options.allow_mixed)
    if not chosen.run_ids:
        why = "; ".join(f"{r}: {w}" for r, w in chosen.excluded.select("run_id", "reason").iter_rows())
        raise ValueError(f"compare: no run left to compare ({why})")
    result = compare_cases(cases.filter(pl.col("run_id").is_in(chosen.run_ids)), chosen.run_ids,
                           options.resamples, options.per_benchmark)
    leaderboard = result.units.rename({"unit": "run_id"}).join(
        facts.drop("completed"), on="run_id", maintain_order="left").select(
        "rank", "run_id", "answer_model", "overall", "ci_low", "ci_high", "n_benchmarks",
        pl.col("n_cases").alias("completed"), "failed", "not_attempted", "benchmarks_missing", "judge_model",
        "passes", "dataset_sha256", "source")
    notes = list(chosen.mixed) + result.notes
    if chosen.excluded.height:
        notes.append(f"{chosen.excluded.height} run(s) left out; see the excluded table (or use --allow-mixed)")
    if leaderboard["n_benchmarks"].n_unique() > 1:
        notes.append("runs cover different benchmarks: their overall means are macro means over different sets "
                     "(see benchmarks_missing), so their ranks are not like for like")
    union = cases.filter(pl.col("run_id").is_in(chosen.run_ids)).select("benchmark", "case_id").unique().height
    short = leaderboard.filter(pl.col("completed") < union).height
    if short:
        notes.append(f"completed case sets differ between runs ({short} of {leaderboard.height} lack some of the "
                     f"{union} cases any run completed): each pair is compared on the cases both completed "
                     "(pairwise n_cases); leaderboard means and ranks use each run's own cases")
    notes += small_sample_note(result.smallest_benchmark)
    return Comparison(leaderboard, result.benchmarks.rename({"unit": "run_id"}), result.pairwise,
                      result.ranks.rename({"unit": "run_id"}), chosen.excluded, notes)


def compare_cases(cases: pl.DataFrame, units: list[str], settings: ResampleSettings = ResampleSettings(),
                  per_benchmark: bool = False, unit: str = "run_id") -> CaseComparison:
    """The comparison of ``cases`` (one row per unit x case: benchmark, case_id, score[, position]).

    Units are ordered by observed overall mean (best first, ties by the order given) and every pair
    is (better, worse), so deltas read as how far ahead the first is.
    """
    return compare_matrix(case_matrix(cases, units, unit=unit), settings, per_benchmark, unit.removesuffix("_id"))


def compare_matrix(matrix: CaseMatrix, settings: ResampleSettings = ResampleSettings(),
                   per_benchmark: bool = False, label: str = "run") -> CaseComparison:
    """``compare_cases`` on an already aligned matrix (``label`` names a unit in the notes)."""
    units = list(matrix.units)
    res = matrix.resamples(settings)
    boot = resample_units(matrix, res)
    observed = matrix.overall()
    order = np.argsort(-np.nan_to_num(observed, nan=-np.inf), kind="stable")
    a, b = np.triu_indices(len(units), k=1)
    first, second = order[a], order[b]
    lo, hi = percentile_interval(boot.overall)
    counts = matrix.benchmark_counts()
    unit_frame = pl.DataFrame({
        "unit": list(matrix.units), "overall": observed, "ci_low": lo, "ci_high": hi,
        "n_benchmarks": (counts > 0).sum(axis=1).astype(np.int64), "n_cases": counts.sum(axis=1).astype(np.int64),
    }).with_columns(rank=pl.Series(_competition_ranks(observed)).cast(pl.Int64))
    unit_frame = unit_frame[order.tolist()].select("unit", "rank", pl.exclude("unit", "rank"))
    pairs = pairwise(matrix, first, second, per_benchmark)
    both = matrix.present[first] * matrix.present[second]
    common = np.stack([both[:, s].sum(axis=1) for s in matrix.slices], axis=1) if matrix.slices else both[:, :0]
    sizes = np.concatenate([counts.ravel(), common.ravel()])  # cases per benchmark of each unit and pair
    notes = []
    short = [units[i] for i in np.flatnonzero(np.isnan(boot.overall).any(axis=1))]
    if short:
        used = int((~np.isnan(boot.overall).any(axis=0)).sum())
        shown = ", ".join(short[:5]) + (", ..." if len(short) > 5 else "")
        notes.append(f"rank intervals rest on {used:,} of {boot.overall.shape[1]:,} resamples (the resamples column): "
                     f"a resample that drew none of a {label}'s cases in some benchmark is left out, which happens "
                     f"for {label}s with few cases there ({shown})")
    if len(units) == 1:
        notes.append(f"a single {label} ({units[0]}): there is no pair to compare")
    lonely = pairs.filter((pl.col("benchmark") == OVERALL) & (pl.col("n_cases") == 0))
    if lonely.height:
        shown = ", ".join(f"{a} vs {b}" for a, b in lonely.select("run_a", "run_b").head(5).iter_rows())
        notes.append(f"{lonely.height} pair(s) of {label}s share no completed case ({shown}"
                     f"{', ...' if lonely.height > 5 else ''}): their pairwise rows have no estimate")
    return CaseComparison(unit_frame, _benchmark_frame(matrix, boot, order), pairs,
                          rank_intervals(matrix.units, observed, boot.overall)[order.tolist()],
                          int(sizes[sizes > 0].min()) if (sizes > 0).any() else None, notes)


def _benchmark_frame(matrix: CaseMatrix, boot: UnitResamples, order: np.ndarray) -> pl.DataFrame:
    """unit x benchmark rows (units in ``order``, benchmarks a unit has no case in left out)."""
    counts, means = matrix.benchmark_counts()[order], matrix.benchmark_means()[order]
    nb = boot.benchmark.shape[0]
    # One percentile call over the (benchmarks, units, samples) resamples as they lie (no copy of them),
    # then the (benchmarks, units) results made unit-major like the rows.
    lo, hi = (bound[:, order].T.reshape(-1) for bound in percentile_interval(boot.benchmark))
    units = np.array(matrix.units, dtype=object)[order]
    return pl.DataFrame({
        "unit": np.repeat(units, nb).tolist(), "benchmark": list(matrix.benchmarks) * len(units),
        "n": counts.reshape(-1).astype(np.int64), "mean": means.reshape(-1), "ci_low": lo, "ci_high": hi,
    }, schema_overrides={"unit": pl.String, "benchmark": pl.String}).filter(pl.col("n") > 0).with_columns(
        pl.col(pl.Float64).fill_nan(None))


def _competition_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks along the last axis, 1 = highest; ties share the best rank ("1224"); NaN ranks last (tied)."""
    keys = -np.nan_to_num(np.asarray(values, dtype=np.float64), nan=-np.inf)
    order = np.argsort(keys, axis=-1, kind="stable")
    ordered = np.take_along_axis(keys, order, axis=-1)
    position = np.broadcast_to(np.arange(keys.shape[-1]), keys.shape)
    starts = np.ones(keys.shape, dtype=bool)
    starts[..., 1:] = ordered[..., 1:] != ordered[..., :-1]
    # Each value's rank is 1 + the position where its run of equal values starts.
    placed = np.maximum.accumulate(np.where(starts, position, 0), axis=-1) + 1
    ranks = np.empty(keys.shape, dtype=np.int64)
    np.put_along_axis(ranks, order, placed, axis=-1)
    return ranks


def rank_intervals(units: tuple[str, ...] | list[str], observed: np.ndarray, boot: np.ndarray) -> pl.DataFrame:
    """Each unit's rank over the resamples: median, 2.5-97.5% interval and share of resamples ranked first.

    ``boot`` is (units, samples) of resampled overall means from shared resamples, so a resample
    ranks every unit on the same cases. Resamples where some unit has no value (it drew none of a
    unit's few cases in a benchmark) are left out rather than ranking that unit last; ``resamples``
    says how many were used.
    """
    usable = boot[:, ~np.isnan(boot).any(axis=0)].T  # (samples, units)
    ranks = _competition_ranks(usable).T
    if usable.shape[0]:
        lo, hi = np.percentile(ranks, [100 * CI_LOW, 100 * CI_HIGH], axis=1, method="inverted_cdf")
        median, first = np.median(ranks, axis=1), (ranks == 1).mean(axis=1)
    else:
        lo = hi = median = first = np.full(len(units), np.nan)
    return pl.DataFrame({
        "unit": list(units), "rank": _competition_ranks(observed).astype(np.int64),
        "rank_median": median, "rank_low": lo, "rank_high": hi, "share_first": first,
        "resamples": np.full(len(units), usable.shape[0], dtype=np.int64),
    })
