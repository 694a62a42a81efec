"""Calibration of the pairwise rows at the real size, 25 cases per benchmark, and the agreement of every
pairwise interval with its p-value.

Null simulation: 10 benchmarks x 25 cases. Each case has a latent difficulty t ~ Beta(a_b, b_b); two runs
of equal skill are graded on the same cases, each case score drawn independently given t, the way rubric
scores look: eight points-rubric benchmarks with 1, 2, 3, 4, 5, 6, 8 and 10 positive items (one item: pure
0/1 scores) and a negative item that can pull the score down (clipped to [0, 1]), and two F1-like
benchmarks (near-continuous, rounded to 4 digits, 15% exact zeros). Many pairs sit side by side in one
matrix (own cases each), so a whole null family takes milliseconds. Seeds are fixed: deterministic.

Measured on this design (200,000 benchmark rows, 20,000 pairs), false positives at 5%:
the earlier bootstrap SE read on the normal rejected 6.2% of single-benchmark rows (5.8-6.4% per
benchmark), 5.2% of overall rows and 8.2% of Holm families of a pair's 11 rows; the stratified t rejects
5.0% (4.8-5.3% per benchmark), 4.9% and 3.9% (Holm is conservative here: the overall row is built from the
benchmark rows, so the family's tests are positively dependent).
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from toolkit.analysis.compare import compare_matrix
from toolkit.analysis.matrix import from_arrays
from toolkit.analysis.multiplicity import holm
from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.paired_t import paired_t
from toolkit.analysis.pairs import pairwise

N_BENCH, N_CASES = 10, 25
SIZES = {f"bench_{i}": N_CASES for i in range(N_BENCH)}
ALPHA_B = np.linspace(0.6, 3.0, N_BENCH)
BETA_B = np.linspace(2.0, 0.6, N_BENCH)
ITEMS = (1, 2, 3, 4, 5, 6, 8, 10)  # positive items of the points-rubric benchmarks 0-7


def _scores(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """One run's scores for difficulties t of shape (pairs, N_BENCH, N_CASES)."""
    out = np.empty_like(t)
    for b in range(N_BENCH):
        tb = t[:, b]
        if b < len(ITEMS):
            positive = rng.binomial(ITEMS[b], tb)
            negative = rng.binomial(1, 0.3 * (1 - tb))  # a harmful item, endorsed more by weak answers
            out[:, b] = np.clip((positive - negative) / ITEMS[b], 0.0, 1.0)
        else:
            f1 = rng.beta(6 * tb + 0.05, 6 * (1 - tb) + 0.05).round(4)
            f1[rng.random(f1.shape) < 0.15] = 0.0
            out[:, b] = f1
    return out


def _null_tables(blocks: int, pairs: int, seed: int) -> list[pl.DataFrame]:
    """Per block, the pairwise table (overall + per benchmark) of ``pairs`` null pairs."""
    first = np.arange(0, 2 * pairs, 2)
    tables = []
    for block in range(blocks):
        rng = np.random.default_rng(seed + block)
        t = rng.beta(ALPHA_B[None, :, None], BETA_B[None, :, None], size=(pairs, N_BENCH, N_CASES))
        both = np.stack([_scores(rng, t), _scores(rng, t)], axis=1).reshape(2 * pairs, N_BENCH * N_CASES)
        tables.append(pairwise(from_arrays(both, SIZES), first, first + 1, per_benchmark=True))
    return tables


@pytest.fixture(scope="module")
def null_tables() -> list[pl.DataFrame]:
    return _null_tables(blocks=60, pairs=200, seed=500_000)  # 12,000 null pairs, 132,000 rows


def _tolerance(rate: float, n: int, z: float = 3.5) -> float:
    return z * np.sqrt(rate * (1 - rate) / n)


def test_single_benchmark_rows_reject_5_percent_of_true_nulls_at_25_cases(null_tables) -> None:
    rows = pl.concat(null_tables).filter(pl.col("benchmark") != "overall")
    rejected = (rows["p_value"] < 0.05).to_numpy()
    assert rows["p_value"].null_count() == 0
    rate = rejected.mean()
    assert abs(rate - 0.05) <= _tolerance(0.05, rejected.size), f"single-benchmark rows: {rate:.4f}"
    per_benchmark = rows.group_by("benchmark").agg((pl.col("p_value") < 0.05).mean().alias("rate"), pl.len())
    for name, bench_rate, n in per_benchmark.iter_rows():
        assert abs(bench_rate - 0.05) <= _tolerance(0.05, n), f"{name}: {bench_rate:.4f} of {n}"


def test_overall_rows_reject_5_percent_of_true_nulls(null_tables) -> None:
    rows = pl.concat(null_tables).filter(pl.col("benchmark") == "overall")
    rate = (rows["p_value"] < 0.05).mean()
    assert abs(rate - 0.05) <= _tolerance(0.05, rows.height), f"overall rows: {rate:.4f}"


def test_holm_over_a_pairs_11_rows_keeps_the_family_wise_error_at_5_percent(null_tables) -> None:
    families = []
    for table in null_tables:
        # Row order: every pair's overall row, then benchmark by benchmark (same pair order).
        p = table["p_value"].to_numpy().reshape(N_BENCH + 1, -1)
        families += [np.nanmin(holm(p[:, j])) < 0.05 for j in range(p.shape[1])]
    rate = np.mean(families)
    assert rate <= 0.05 + _tolerance(0.05, len(families)), f"Holm family-wise error: {rate:.4f}"
    assert rate > 0.03, f"Holm family-wise error {rate:.4f}: suspiciously conservative"
    raw = np.mean([(t["p_value"].to_numpy().reshape(N_BENCH + 1, -1) < 0.05).any(axis=0).mean()
                   for t in null_tables])
    assert raw > 0.3, "without the correction, 11 tests at 5% reject far more often"


def test_intervals_cover_the_true_difference_at_25_cases() -> None:
    """Run B scores Binomial(4, 0.9 t) / 4 on the cases where A scores Binomial(4, t) / 4: the true paired
    difference in benchmark b is 0.1 E[t_b], overall the mean of those."""
    blocks, pairs = 15, 200
    truth = 0.1 * ALPHA_B / (ALPHA_B + BETA_B)
    first = np.arange(0, 2 * pairs, 2)
    hits_bench = hits_overall = 0
    for block in range(blocks):
        rng = np.random.default_rng(600_000 + block)
        t = rng.beta(ALPHA_B[None, :, None], BETA_B[None, :, None], size=(pairs, N_BENCH, N_CASES))
        both = np.stack([rng.binomial(4, t), rng.binomial(4, 0.9 * t)], axis=1) / 4
        table = pairwise(from_arrays(both.reshape(2 * pairs, -1), SIZES), first, first + 1, per_benchmark=True)
        low = table["ci_low"].to_numpy().reshape(N_BENCH + 1, pairs)
        high = table["ci_high"].to_numpy().reshape(N_BENCH + 1, pairs)
        target = np.r_[truth.mean(), truth][:, None]
        covered = (low <= target) & (target <= high)
        hits_overall += covered[0].sum()
        hits_bench += covered[1:].sum()
    n = blocks * pairs
    assert abs(hits_overall / n - 0.95) <= _tolerance(0.05, n), f"overall coverage {hits_overall / n:.4f}"
    assert abs(hits_bench / (n * N_BENCH) - 0.95) <= _tolerance(0.05, n * N_BENCH), \
        f"single-benchmark coverage {hits_bench / (n * N_BENCH):.4f}"


# -- an interval and its p-value agree ---------------------------------------------------------------

def _agree(table: pl.DataFrame) -> tuple[int, int]:
    """(rows checked, rows where 'the interval excludes 0' differs from 'p < 0.05')."""
    rows = table.filter(pl.col("p_value").is_not_null())
    excludes = (rows["ci_low"] > 0) | (rows["ci_high"] < 0)
    return rows.height, int((excludes != (rows["p_value"] < 0.05)).sum())


def test_interval_excludes_zero_exactly_when_p_is_below_5_percent(null_tables) -> None:
    checked, wrong = _agree(pl.concat(null_tables[:10]))
    assert checked == 10 * 200 * 11 and wrong == 0
    # Real differences, p-values on both sides of 0.05, missing cases, tiny and degenerate benchmarks.
    rng = np.random.default_rng(9)
    sizes = {"tiny": 2, "three": 3, "six": 6, "mid": 25, "big": 60}
    scores = rng.integers(0, 5, (30, sum(sizes.values()))) / 4
    scores[:15] = np.clip(scores[:15] + rng.normal(0.05, 0.1, scores[:15].shape), 0, 1).round(2)
    scores[21] *= 0.9  # scores stay in [0, 1]
    scores[20] = scores[21] + 0.1  # a constant difference: the sign-test branch
    scores[22, :5] = scores[23, :5]  # identical in the first two benchmarks
    present = (rng.random(scores.shape) > 0.1).astype(float)
    table = compare_matrix(from_arrays(scores, sizes, present=present), ResampleSettings(100, 1),
                           per_benchmark=True, min_cases=1).pairwise  # units with a 1-case benchmark paired too
    checked, wrong = _agree(table)
    assert checked > 2000 and wrong == 0
    p = table["p_value"]
    assert (p < 0.05).sum() > 100 and (p > 0.05).sum() > 100  # both sides well represented
    assert ((p > 0.04) & (p < 0.06)).sum() > 10  # and rows near the boundary
    # Near the boundary by construction: differences whose t sits right at the critical value.
    d = rng.normal(0, 1, (5000, 25))
    d = d - d.mean(axis=1, keepdims=True) + rng.uniform(0.35, 0.5, (5000, 1)) * d.std(axis=1, ddof=1, keepdims=True)
    t = paired_t(d)
    assert np.array_equal((t.ci_low > 0) | (t.ci_high < 0), t.p_value < 0.05)
    assert ((t.p_value > 0.045) & (t.p_value < 0.055)).sum() > 200
