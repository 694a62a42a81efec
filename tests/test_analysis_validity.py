"""Statistical validity of the analysis engine on simulated data with a known truth, and the agreement
and multiplicity formulas against hand-computed textbook values.

Simulation: 10 benchmarks x 50 cases; each case has a latent difficulty t ~ Beta(a_b, b_b) and a run's
case score is Binomial(4, t)/4 (a four-point rubric), so a benchmark's true mean is a_b / (a_b + b_b).
Run B scores Binomial(4, 0.9 t)/4 on the same cases, so the true paired difference is 0.1 * E[t].
Seeds are fixed, so every test is deterministic; repetition counts are chosen so that binomial noise
leaves a wide margin. tests/test_analysis_calibration.py checks the pairwise rows at 25 cases per benchmark.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from toolkit.analysis.compare import compare_matrix, resample_units
from toolkit.analysis.matrix import from_arrays
from toolkit.analysis.multiplicity import benjamini_hochberg, holm
from toolkit.analysis.paired import ResampleSettings, percentile_interval
from toolkit.analysis.pairs import pairwise
from toolkit.analysis.reliability import (category_counts, cohen_kappa, fleiss_kappa, krippendorff_alpha_nominal,
                                          percent_agreement)

N_BENCH, N_CASES = 10, 50
SIZES = {f"bench_{i}": N_CASES for i in range(N_BENCH)}
ALPHA_B = np.linspace(0.8, 3.0, N_BENCH)
BETA_B = np.linspace(2.0, 0.7, N_BENCH)
TRUE_MEANS = ALPHA_B / (ALPHA_B + BETA_B)


def _difficulties(rng: np.random.Generator) -> np.ndarray:
    return rng.beta(ALPHA_B[:, None], BETA_B[:, None], size=(N_BENCH, N_CASES))


def _rubric_scores(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    return (rng.binomial(4, t) / 4).ravel()


# -- intervals --------------------------------------------------------------------------------------

def test_stratified_and_paired_intervals_cover_the_truth_95_percent() -> None:
    """2,000 repetitions, 100 side by side per matrix (own cases each; one set of resample draws per
    matrix): the bootstrap intervals of a run's overall and benchmark mean, and the paired t interval of
    the overall difference."""
    blocks, per_block, samples = 20, 100, 500
    truth_overall = TRUE_MEANS.mean()
    truth_delta = (0.1 * TRUE_MEANS).mean()
    hits_overall = hits_delta = hits_bench = 0
    first = np.arange(0, 2 * per_block, 2)
    bench = np.arange(per_block) % N_BENCH  # the benchmark whose interval each repetition checks
    for block in range(blocks):
        rng = np.random.default_rng(10_000 + block)
        t = rng.beta(ALPHA_B[None, :, None], BETA_B[None, :, None], size=(per_block, N_BENCH, N_CASES))
        runs = np.stack([rng.binomial(4, t), rng.binomial(4, 0.9 * t)], axis=1) / 4
        matrix = from_arrays(runs.reshape(2 * per_block, -1), SIZES)
        boot = resample_units(matrix, matrix.resamples(ResampleSettings(samples, block)))
        lo, hi = percentile_interval(boot.overall[first])
        hits_overall += ((lo <= truth_overall) & (truth_overall <= hi)).sum()
        lo, hi = percentile_interval(boot.benchmark[bench, first])
        hits_bench += ((lo <= TRUE_MEANS[bench]) & (TRUE_MEANS[bench] <= hi)).sum()
        table = pairwise(matrix, first, first + 1)
        hits_delta += ((table["ci_low"] <= truth_delta) & (table["ci_high"] >= truth_delta)).sum()
    reps = blocks * per_block
    for name, hits in (("overall", hits_overall), ("paired delta", hits_delta), ("one benchmark", hits_bench)):
        assert 0.93 <= hits / reps <= 0.97, f"{name}: coverage {hits / reps:.3f}"


def test_intervals_are_not_trivially_wide() -> None:
    """Guards the coverage test: an interval that always covered would be useless."""
    rng = np.random.default_rng(3)
    t = _difficulties(rng)
    matrix = from_arrays(np.stack([_rubric_scores(rng, t)]), SIZES)
    boot = resample_units(matrix, matrix.resamples(ResampleSettings(2000, 1)))
    lo, hi = percentile_interval(boot.overall)
    # The stratified standard error of a macro mean of 10 x 50 such scores is about 0.012.
    assert 0.03 < hi[0] - lo[0] < 0.07


# -- p-values under the null -------------------------------------------------------------------------

def _null_p_values(reps: int, seed: int, sizes: dict[str, int], scores) -> np.ndarray:
    """Paired p-values of two runs of equal skill on shared cases; ``scores(rng, t)`` draws one run. The
    repetitions sit side by side in one matrix (two rows each, own cases each): one pairwise call."""
    rng = np.random.default_rng(seed)
    t = rng.beta(ALPHA_B[None, :len(sizes), None], BETA_B[None, :len(sizes), None], size=(reps, len(sizes), N_CASES))
    runs = np.stack([scores(rng, t).reshape(reps, -1), scores(rng, t).reshape(reps, -1)], axis=1)
    first = np.arange(0, 2 * reps, 2)
    return pairwise(from_arrays(runs.reshape(2 * reps, -1), sizes), first, first + 1)["p_value"].to_numpy()


def _f1_like(rng: np.random.Generator, t: np.ndarray) -> np.ndarray:
    """Near-continuous case scores (like weighted F1) with mean t."""
    return rng.beta(8 * t + 0.05, 8 * (1 - t) + 0.05).ravel()


@pytest.mark.timeout(120)
def test_paired_p_values_are_uniform_under_the_null() -> None:
    one_benchmark = {"bench_0": N_CASES}
    for name, p in (("overall, 4-point rubric", _null_p_values(1000, 20_000, SIZES, _rubric_scores)),
                    ("one benchmark, F1-like", _null_p_values(1000, 40_000, one_benchmark, _f1_like))):
        ks = stats.kstest(p, "uniform")
        assert ks.pvalue > 0.01, f"{name}: KS p = {ks.pvalue:.4f}"
        assert abs(np.mean(p < 0.05) - 0.05) < 0.025, f"{name}: type I error {np.mean(p < 0.05):.3f}"


def test_p_values_stay_valid_on_coarse_scores_of_one_benchmark() -> None:
    """50 cases of a 4-point rubric: the mean difference lives on a grid (steps of 0.005, about a tenth
    of its standard error), so p-values are discrete, not uniform; they must still not reject too often."""
    p = _null_p_values(600, 50_000, {"bench_0": N_CASES}, _rubric_scores)
    assert np.mean(p < 0.05) <= 0.05 + 2.5 * np.sqrt(0.05 * 0.95 / 600)
    assert np.mean(p < 0.05) > 0.02  # not degenerate either


def test_p_value_detects_a_real_difference() -> None:
    rng = np.random.default_rng(5)
    t = _difficulties(rng)
    matrix = from_arrays(np.stack([_rubric_scores(rng, t), _rubric_scores(rng, 0.8 * t)]), SIZES)
    row = compare_matrix(matrix, ResampleSettings(2000, 0)).pairwise.row(0, named=True)
    assert row["p_value"] < 0.001 and row["ci_low"] > 0 and row["wilcoxon_p"] < 0.001


@pytest.mark.timeout(120)
def test_holm_keeps_the_family_wise_error_at_5_percent() -> None:
    reps, samples, runs = 600, 100, 6  # 15 pairs, all null (the resamples only serve the leaderboard here)
    any_raw = any_holm = any_bh = 0
    smallest = 1.0
    for rep in range(reps):
        rng = np.random.default_rng(30_000 + rep)
        t = _difficulties(rng)
        matrix = from_arrays(np.stack([_rubric_scores(rng, t) for _ in range(runs)]), SIZES)
        table = compare_matrix(matrix, ResampleSettings(samples, rep)).pairwise
        assert table.height == 15
        any_raw += (table["p_value"] < 0.05).any()
        any_holm += (table["p_holm"] < 0.05).any()
        any_bh += (table["p_bh"] < 0.05).any()
        smallest = min(smallest, table["p_value"].min())
    tolerance = 3 * np.sqrt(0.05 * 0.95 / reps)  # Monte-Carlo noise of a 5% rate over the repetitions
    assert any_holm / reps <= 0.05 + tolerance, f"Holm FWER {any_holm / reps:.3f}"
    assert any_bh / reps <= 0.05 + tolerance, f"BH FWER under the complete null {any_bh / reps:.3f}"
    assert any_raw / reps > 0.15, "without correction the family-wise error should clearly exceed 5%"
    assert smallest < 0.05 / 15 / 10, "p-values must resolve far below the Holm threshold (or Holm never rejects)"


# -- multiplicity by hand ------------------------------------------------------------------------------

def test_holm_by_hand() -> None:
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005*4=0.02, 0.01*3=0.03, 0.03*2=0.06, 0.04*1=0.04 -> running max 0.02, 0.03, 0.06, 0.06
    assert np.allclose(holm(p), [0.03, 0.06, 0.06, 0.02])
    assert np.allclose(holm([0.5, 0.6]), [1.0, 1.0])
    out = holm([0.01, np.nan, 0.02])
    assert np.isnan(out[1]) and np.allclose(out[[0, 2]], [0.02, 0.02])


def test_benjamini_hochberg_by_hand_and_against_scipy() -> None:
    p = np.array([0.01, 0.04, 0.03, 0.005])
    # sorted: 0.005*4/1=0.02, 0.01*4/2=0.02, 0.03*4/3=0.04, 0.04*4/4=0.04 -> running min from the top
    assert np.allclose(benjamini_hochberg(p), [0.02, 0.04, 0.04, 0.02])
    rng = np.random.default_rng(0)
    for size in (1, 7, 100):
        q = rng.random(size) ** 3
        assert np.allclose(benjamini_hochberg(q), stats.false_discovery_control(q, method="bh"))
    out = benjamini_hochberg([0.01, np.nan, 0.02])
    assert np.isnan(out[1]) and np.allclose(out[[0, 2]], [0.02, 0.02])


# -- agreement coefficients by hand ---------------------------------------------------------------------

def test_cohen_kappa_textbook() -> None:
    # 50 units: both yes 20, first yes/second no 5, first no/second yes 10, both no 15:
    # p_o = 0.7, p_e = 0.5 * 0.6 + 0.5 * 0.4 = 0.5, kappa = 0.4.
    a = np.array([1] * 25 + [0] * 25, dtype=float)
    b = np.array([1] * 20 + [0] * 5 + [1] * 10 + [0] * 15, dtype=float)
    assert cohen_kappa(a, b) == pytest.approx(0.4)
    # Missing ratings are dropped pairwise; perfect agreement gives 1; one shared category is undefined.
    assert cohen_kappa(np.r_[a, np.nan], np.r_[b, 1.0]) == pytest.approx(0.4)
    assert cohen_kappa(a, a) == pytest.approx(1.0)
    assert np.isnan(cohen_kappa(np.ones(5), np.ones(5)))


def test_krippendorff_alpha_textbook_with_missing_values() -> None:
    # Krippendorff (2011), "Computing Krippendorff's alpha-reliability": 4 observers, 12 units,
    # values 1-5 with missing data; nominal alpha = 0.743.
    nan = np.nan
    observers = np.array([
        [1, 2, 3, 3, 2, 1, 4, 1, 2, nan, nan, nan],
        [1, 2, 3, 3, 2, 2, 4, 1, 2, 5, nan, 3],
        [nan, 3, 3, 3, 2, 3, 4, 2, 2, 5, 1, nan],
        [1, 2, 3, 3, 2, 4, 4, 1, 2, 5, 1, nan],
    ])
    counts, categories = category_counts(observers.T)
    assert categories.tolist() == [1, 2, 3, 4, 5]
    assert krippendorff_alpha_nominal(counts) == pytest.approx(0.743, abs=5e-4)


def test_krippendorff_alpha_binary_by_hand() -> None:
    # Two raters, 4 units: (1,1), (0,0), (1,0), (0,0). Coincidences: o11 = 2, o00 = 4, o01 = o10 = 1;
    # n1 = 3, n0 = 5, n = 8; alpha = 1 - (n - 1) * (o01 + o10) / (2 * n0 * n1) = 1 - 7 * 2 / 30 = 8/15.
    ratings = np.array([[1, 1], [0, 0], [1, 0], [0, 0]], dtype=float)
    counts, _ = category_counts(ratings)
    assert krippendorff_alpha_nominal(counts) == pytest.approx(8 / 15)
    assert percent_agreement(counts) == pytest.approx(0.75)
    # Units rated once are not pairable and change nothing.
    with_single = np.vstack([ratings, [[1, np.nan]]])
    assert krippendorff_alpha_nominal(category_counts(with_single)[0]) == pytest.approx(8 / 15)


def test_fleiss_kappa_textbook() -> None:
    # Fleiss (1971) style example (10 subjects, 14 raters, 5 categories) as tabulated on Wikipedia:
    # P-bar = 0.378, P-e = 0.213, kappa = 0.210.
    table = np.array([
        [0, 0, 0, 0, 14], [0, 2, 6, 4, 2], [0, 0, 3, 5, 6], [0, 3, 9, 2, 0], [2, 2, 8, 1, 1],
        [7, 7, 0, 0, 0], [3, 2, 6, 3, 0], [2, 5, 3, 2, 2], [6, 5, 2, 1, 0], [0, 2, 2, 3, 7],
    ])
    assert fleiss_kappa(table) == pytest.approx(0.210, abs=5e-4)
    assert percent_agreement(table) == pytest.approx(0.378, abs=5e-4)
    with pytest.raises(ValueError):
        fleiss_kappa(np.array([[1, 1], [2, 1]]))


def test_p_value_false_positive_rate_at_10_cases_per_benchmark() -> None:
    """10 benchmarks x 10 cases: the bootstrap SE read on the normal rejected about 6.5-7% of true nulls of
    the overall difference at 5%; the stratified t rejects 5.0% here, checked against [3.5%, 6%] (Monte-Carlo
    SE 0.25%). 8,000 null pairs, 100 side by side per matrix (own cases each), so the check takes a second."""
    blocks, pairs, cases = 80, 100, 10
    sizes = {f"bench_{i}": cases for i in range(N_BENCH)}
    first = np.arange(0, 2 * pairs, 2)
    p_values = []
    for block in range(blocks):
        rng = np.random.default_rng(70_000 + block)
        t = rng.beta(ALPHA_B[None, :, None], BETA_B[None, :, None], size=(pairs, N_BENCH, cases))
        both = (rng.binomial(4, np.repeat(t, 2, axis=0)) / 4).reshape(2 * pairs, N_BENCH * cases)
        p_values.append(pairwise(from_arrays(both, sizes), first, first + 1)["p_value"].to_numpy())
    rate = np.mean(np.concatenate(p_values) < 0.05)
    assert 0.035 < rate <= 0.06, f"false-positive rate at 10 cases per benchmark: {rate:.4f}"
