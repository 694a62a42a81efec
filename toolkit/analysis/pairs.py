"""Paired differences between every two units (runs, or judge raters) on the cases they share.

For a pair (a, b) the per-benchmark difference is the mean of ``score_a - score_b``
over the cases both completed, and the overall difference is the macro mean of
those over the benchmarks where they share a case. Standard error, interval,
p-value and ``mdd80`` (the difference these case counts detect with 80% power)
come from one stratified paired t (``toolkit.analysis.paired_t``): the interval
excludes 0 exactly when p < 0.05; ``df`` is the t's degrees of freedom (m - 1 for
one benchmark of m common cases).

Win/tie/loss count the common cases where a scored higher, the same (within
1e-12) or lower. ``wilcoxon_p`` is a rank-based second opinion: on a benchmark row
the Wilcoxon signed-rank p of its case differences (``toolkit.analysis.wilcoxon``:
the p scipy gives for that row alone; zeros ranked then dropped, Pratt); on an
overall row van Elteren's stratified signed-rank test (``toolkit.analysis.van_elteren``:
ranks within each benchmark, weights 1/(n_b + 1)), which never pools cases across
benchmarks. It tests that every benchmark's differences are symmetric about 0, not the macro mean: with
unequal benchmark sizes it follows the case-weighted shift (tests/test_analysis_van_elteren.py: 17.9%
rejections at a macro difference of 0). It is NaN when every difference is zero.

Columns: run_a, run_b, benchmark ("overall" or a benchmark), n_cases (common),
mean_a, mean_b, delta (= mean over benchmarks of a - b), ci_low, ci_high, ci_note
(why a row has no interval), p_value, se, df, mdd80, wins, ties, losses (a's view),
wilcoxon_p, p_holm, p_bh and family. Holm and BH adjust within a family, never
over what happens to be displayed: the overall rows are one family ("overall"),
the per-benchmark rows another ("per benchmark"), so asking for per-benchmark
rows never changes an overall row's adjusted p.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.analysis.matrix import CaseMatrix, macro
from toolkit.analysis.multiplicity import adjust
from toolkit.analysis.paired import TIE
from toolkit.analysis.paired_t import paired_t
from toolkit.analysis.van_elteren import van_elteren_p
from toolkit.analysis.wilcoxon import wilcoxon_p

OVERALL = "overall"
OVERALL_FAMILY = "overall"
BENCHMARK_FAMILY = "per benchmark"
METHOD_NOTE = ("pairwise: delta -/+ t(0.975, df) SE and p = 2 P(T_df > |delta| / SE), one stratified paired t "
               "(df: m - 1 for one benchmark, Welch-Satterthwaite over benchmarks), so an interval excludes 0 "
               "exactly when p < 0.05; mdd80 = (t(0.975, df) + t(0.8, df)) SE is the difference detected with "
               "80% power; wilcoxon_p: Wilcoxon signed-rank (Pratt) on a benchmark row, van Elteren's stratified "
               "signed-rank test (within benchmarks, weights 1/(n_b + 1)) on an overall row: it tests that every "
               "benchmark's case differences are symmetric about 0, not the macro mean (with unequal benchmark "
               "sizes it follows the case-weighted shift); Holm and BH within "
               "each row's family (the family column: the overall rows, or the per-benchmark rows), so showing "
               "per-benchmark rows never changes an overall row's adjusted p")


def pairwise(matrix: CaseMatrix, first: np.ndarray, second: np.ndarray, per_benchmark: bool = False,
             overall: bool = True) -> pl.DataFrame:
    """One row per pair (overall; ``overall=False``: none), plus one per pair x benchmark when ``per_benchmark``.

    ``first``/``second`` index the units of each pair (delta = first - second). ``p_holm`` and ``p_bh``
    adjust within each family: the overall rows, and the per-benchmark rows.
    """
    S, M = matrix.scores, matrix.present
    both = M[first] * M[second]
    nb = len(matrix.slices)
    common = np.stack([both[:, s].sum(axis=1) for s in matrix.slices], axis=1) if nb else np.zeros((first.size, 0))
    has = common > 0

    def observed(values: np.ndarray) -> np.ndarray:
        sums = np.stack([values[:, s].sum(axis=1) for s in matrix.slices], axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums / common

    mean_a, mean_b = observed(S[first] * both), observed(S[second] * both)
    # Case differences on common cases (NaN elsewhere); the counts and Wilcoxon treat those within TIE as
    # exact ties (the t keeps them as they are, so delta is the plain mean and a tie changes nothing).
    differences = np.where(both > 0, S[first] - S[second], np.nan)
    frames = [adjust(_rows(matrix, first, second, OVERALL, both.sum(axis=1), macro(mean_a, has), macro(mean_b, has),
                           differences, matrix.slices)).with_columns(family=pl.lit(OVERALL_FAMILY))] if overall else []
    if per_benchmark:
        rows = [_rows(matrix, first, second, name, common[:, b], mean_a[:, b], mean_b[:, b], differences[:, s],
                      None).filter(pl.col("n_cases") > 0) for b, (name, s) in enumerate(zip(matrix.benchmarks,
                                                                                          matrix.slices))]
        frames.append(adjust(pl.concat(rows)).with_columns(family=pl.lit(BENCHMARK_FAMILY)))
    return pl.concat(frames)


def _rows(matrix: CaseMatrix, first: np.ndarray, second: np.ndarray, scope: str, n: np.ndarray, mean_a: np.ndarray,
          mean_b: np.ndarray, differences: np.ndarray, strata: tuple[slice, ...] | None) -> pl.DataFrame:
    """Rows of one scope; ``strata`` are the benchmark slices of ``differences`` (None: one benchmark)."""
    t = paired_t(differences, strata)
    differences = np.where(np.abs(differences) <= TIE, 0.0, differences)
    sign = np.sign(differences)
    units = np.array(matrix.units, dtype=object)
    return pl.DataFrame({
        "run_a": units[first].tolist(), "run_b": units[second].tolist(), "benchmark": [scope] * first.size,
        "n_cases": n.astype(np.int64), "mean_a": mean_a, "mean_b": mean_b, "delta": t.delta,
        # Differences of [0, 1] scores lie in [-1, 1]: the interval is clipped there (no coverage is lost).
        "ci_low": np.clip(t.ci_low, -1.0, 1.0), "ci_high": np.clip(t.ci_high, -1.0, 1.0),
        "ci_note": pl.Series(t.ci_note, dtype=pl.String),
        "p_value": t.p_value, "se": t.se, "df": t.df, "mdd80": t.mdd80,
        "wins": (sign > 0).sum(axis=1), "ties": (sign == 0).sum(axis=1), "losses": (sign < 0).sum(axis=1),
        # The overall row's rank test is stratified like the t (never pooling cases across benchmarks).
        "wilcoxon_p": van_elteren_p(differences, strata) if strata is not None else wilcoxon_p(differences),
    }, schema_overrides={"wins": pl.Int64, "ties": pl.Int64, "losses": pl.Int64}).with_columns(
        pl.col(pl.Float64).fill_nan(None))
