"""Paired differences between every two units (runs, or judge raters) on the cases they share.

For a pair (a, b) the per-benchmark difference is the mean of ``score_a - score_b``
over the cases both completed, and the overall difference is the macro mean of
those over the benchmarks where they share a case. Intervals and p-values come
from the shared resamples (``toolkit.analysis.paired``):

* a pair whose two runs completed exactly the same cases of a benchmark takes its
  resampled difference from the runs' (units x samples) resampled means by
  broadcasting (``means[a] - means[b]`` for all such pairs at once), which is the
  same number;
* a pair whose case sets differ is resampled on its common cases with the same
  draw counts restricted to them (a ratio of sums), one matrix product for all
  such pairs at once.

Win/tie/loss count the common cases where a scored higher, the same (within
1e-12) or lower. The Wilcoxon signed-rank p (``toolkit.analysis.wilcoxon``: normal
approximation with tie correction above 50 cases, scipy's exact or permutation
test below) is a second opinion on the pooled case differences; zeros are ranked
and then dropped (Pratt), which keeps the many exact ties of rubric scores from
inflating the statistic; it is NaN when every difference is zero.

P-values (``toolkit.analysis.paired.two_sided_p``) are studentised with an
m/(m-1) small-sample correction per benchmark, NaN below 2 common cases, and an
exact sign test when the case differences never vary within a benchmark.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from toolkit.analysis.matrix import CaseMatrix, macro
from toolkit.analysis.multiplicity import adjust
from toolkit.analysis.paired import TIE, SharedResamples, percentile_interval, two_sided_p
from toolkit.analysis.wilcoxon import wilcoxon_p
OVERALL = "overall"


def pairwise(matrix: CaseMatrix, res: SharedResamples, run_bench: np.ndarray, run_overall: np.ndarray,
             first: np.ndarray, second: np.ndarray, per_benchmark: bool = False) -> pl.DataFrame:
    """One row per pair (overall), plus one per pair x benchmark when ``per_benchmark``.

    ``run_bench`` (benchmarks, units, samples) and ``run_overall`` (units, samples) are the units'
    resampled means from the same ``res``; ``first``/``second`` index the units of each pair.
    ``p_holm`` and ``p_bh`` adjust over every row returned (the family shown).
    """
    S, M = matrix.scores, matrix.present
    in_first, in_second = M[first], M[second]
    both = in_first * in_second
    diff = (S[first] - S[second]) * both
    nb = len(matrix.slices)
    common = np.stack([both[:, s].sum(axis=1) for s in matrix.slices], axis=1) if nb else np.zeros((first.size, 0))
    has = common > 0
    # A pair is aligned in a benchmark when both runs completed exactly the same cases there.
    aligned = np.stack([(in_first[:, s] == in_second[:, s]).all(axis=1) for s in matrix.slices], axis=1) \
        if nb else np.ones((first.size, 0), bool)

    def observed(values: np.ndarray) -> np.ndarray:
        sums = np.stack([values[:, s].sum(axis=1) for s in matrix.slices], axis=1)
        with np.errstate(invalid="ignore", divide="ignore"):
            return sums / common

    mean_a, mean_b, delta = observed(S[first] * both), observed(S[second] * both), observed(diff)

    def boot_benchmark(b: int, pairs: np.ndarray) -> np.ndarray:
        out = np.empty((pairs.size, res.samples))
        same = aligned[pairs, b]
        out[same] = run_bench[b][first[pairs[same]]] - run_bench[b][second[pairs[same]]]
        if (~same).any():
            other = pairs[~same]
            out[~same] = res.stratum_ratio(diff[other], both[other], b)
        return out

    everything = np.arange(first.size)
    clean = aligned.all(axis=1)
    overall_boot = np.empty((first.size, res.samples))
    overall_boot[clean] = run_overall[first[clean]] - run_overall[second[clean]]
    dirty = everything[~clean]
    if dirty.size:
        total = np.zeros((dirty.size, res.samples))
        for b in range(nb):
            total += np.where(has[dirty, b][:, None], boot_benchmark(b, dirty), 0.0)
        with np.errstate(invalid="ignore", divide="ignore"):
            overall_boot[dirty] = total / has[dirty].sum(axis=1)[:, None]

    raw = S[first] - S[second]
    # Case differences on common cases (NaN elsewhere), ties within TIE made exactly 0.
    differences = np.where(both > 0, np.where(np.abs(raw) <= TIE, 0.0, raw), np.nan)
    frames = [_rows(matrix, first, second, OVERALL, both.sum(axis=1), macro(mean_a, has), macro(mean_b, has),
                    macro(delta, has), overall_boot, differences, matrix.slices)]
    if per_benchmark:
        for b, (name, s) in enumerate(zip(matrix.benchmarks, matrix.slices)):
            frames.append(_rows(matrix, first, second, name, common[:, b], mean_a[:, b], mean_b[:, b], delta[:, b],
                                boot_benchmark(b, everything), differences[:, s], None).filter(pl.col("n_cases") > 0))
    return adjust(pl.concat(frames))


def _rows(matrix: CaseMatrix, first: np.ndarray, second: np.ndarray, scope: str, n: np.ndarray, mean_a: np.ndarray,
          mean_b: np.ndarray, delta: np.ndarray, boot: np.ndarray, differences: np.ndarray,
          strata: tuple[slice, ...] | None) -> pl.DataFrame:
    """Rows of one scope; ``strata`` are the benchmark slices of ``differences`` (None: one benchmark)."""
    sign = np.sign(differences)
    lo, hi = percentile_interval(boot)
    units = np.array(matrix.units, dtype=object)
    return pl.DataFrame({
        "run_a": units[first].tolist(), "run_b": units[second].tolist(), "benchmark": [scope] * first.size,
        "n_cases": n.astype(np.int64), "mean_a": mean_a, "mean_b": mean_b, "delta": delta,
        "ci_low": lo, "ci_high": hi, "p_value": two_sided_p(boot, delta, differences, strata),
        "wins": (sign > 0).sum(axis=1), "ties": (sign == 0).sum(axis=1), "losses": (sign < 0).sum(axis=1),
        "wilcoxon_p": wilcoxon_p(differences),
    }, schema_overrides={"wins": pl.Int64, "ties": pl.Int64, "losses": pl.Int64}).with_columns(
        pl.col(pl.Float64).fill_nan(None))

