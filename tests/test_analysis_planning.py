"""Planning (toolkit.analysis.planning) against statsmodels' paired-t power, against its own definitions in
paired_t, and by simulation: at the planned number of cases the real stratified paired t finds the
difference about as often as planned."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest
from statsmodels.stats.power import TTestPower

from toolkit.analysis.paired_t import paired_t
from toolkit.analysis.planning import (cases_needed, detectable, pair_variance, plan_power, power,
                                       sd_of_differences, standard_error, with_repeats, within_for_pair)


@pytest.mark.parametrize(("sd", "n", "delta"), [(0.3, 10, 0.2), (0.25, 25, 0.1), (0.4, 3, 0.5), (0.2, 200, 0.03)])
def test_one_benchmark_power_is_the_paired_t_tests_power_in_statsmodels(sd: float, n: int, delta: float) -> None:
    expected = TTestPower().power(effect_size=delta / sd, nobs=n, alpha=0.05, alternative="two-sided")
    assert power([sd], n, delta) == pytest.approx(expected, abs=1e-9)
    assert power([sd], n, -delta) == pytest.approx(expected, abs=1e-9)  # two-sided


@pytest.mark.parametrize(("sd", "delta", "target"), [(0.3, 0.1, 0.8), (0.25, 0.05, 0.9), (0.5, 0.4, 0.8)])
def test_cases_needed_is_the_ceiling_of_statsmodels_solve_power(sd: float, delta: float, target: float) -> None:
    solved = TTestPower().solve_power(effect_size=delta / sd, power=target, alpha=0.05, alternative="two-sided")
    n = cases_needed([sd], delta, target)
    assert n == math.ceil(solved)
    assert power([sd], n, delta) >= target > power([sd], n - 1, delta)


def test_detectable_inverts_power_and_mdd80_is_its_closed_form_approximation() -> None:
    sds = [0.3, 0.2, 0.45, 0.25]
    for n in (3, 10, 25):
        found = detectable(sds, n)
        assert power(sds, n, found) == pytest.approx(0.8, abs=1e-9)
        rng = np.random.default_rng(n)
        # differences whose per-benchmark sample sds are exactly ``sds``: paired_t's mdd80 on them
        columns = []
        for sd in sds:
            z = rng.standard_normal(n)
            columns.append((z - z.mean()) / z.std(ddof=1) * sd)
        t = paired_t(np.concatenate(columns)[None, :], [slice(i * n, (i + 1) * n) for i in range(len(sds))])
        se, df = standard_error(sds, n)
        assert (se, df) == pytest.approx((t.se[0], t.df[0]), rel=1e-12)  # the same SE and df as paired_t
        tolerance = 0.01 if n >= 10 else 0.05
        assert t.mdd80[0] == pytest.approx(found, rel=tolerance)


def test_the_sd_of_differences_follows_from_the_sds_and_their_correlation() -> None:
    rng = np.random.default_rng(1)
    a = rng.uniform(0, 1, 40)
    b = 0.6 * a + rng.uniform(0, 0.5, 40)
    rho = np.corrcoef(a, b)[0, 1]
    assert sd_of_differences(a.std(ddof=1), b.std(ddof=1), rho) == pytest.approx((a - b).std(ddof=1), rel=1e-12)
    frame = pl.DataFrame({"run_id": ["a"] * 40 + ["b"] * 40, "benchmark": ["x"] * 80,
                          "case_id": [str(i) for i in range(40)] * 2, "score": [*a, *b]})
    row = pair_variance(frame, "a", "b").row(0, named=True)
    assert (row["cases"], row["rho"], row["sd_diff"]) == (40, pytest.approx(rho), pytest.approx((a - b).std(ddof=1)))
    assert row["difference"] == pytest.approx(a.mean() - b.mean())


def test_at_the_planned_size_the_real_test_finds_the_difference_as_often_as_planned() -> None:
    # Three benchmarks of different spread and correlation; the truth is a 0.08 macro-mean difference.
    sd_a, sd_b, rho = np.array([0.30, 0.20, 0.35]), np.array([0.25, 0.25, 0.30]), np.array([0.6, 0.3, 0.5])
    sds = [sd_of_differences(*v) for v in zip(sd_a, sd_b, rho)]
    delta = 0.08
    n = cases_needed(sds, delta)
    rng = np.random.default_rng(2024)
    sims, b = 4000, len(sds)
    cov = [np.array([[x * x, r * x * y], [r * x * y, y * y]]) for x, y, r in zip(sd_a, sd_b, rho)]
    diffs = np.concatenate([np.diff(rng.multivariate_normal([delta, 0.0], c, size=(sims, n)), axis=2)[..., 0] * -1
                            for c in cov], axis=1)
    result = paired_t(diffs, [slice(i * n, (i + 1) * n) for i in range(b)])
    found = float(np.mean(result.p_value < 0.05))
    assert abs(found - 0.8) < 4 * math.sqrt(0.8 * 0.2 / sims) + 0.005, (n, found)
    # and one case fewer per benchmark falls short of the plan by as much as the power says
    assert power(sds, n - 1, delta) < 0.8 <= power(sds, n, delta)


def test_plan_power_on_two_runs_and_its_refusals() -> None:
    rng = np.random.default_rng(5)
    rows = []
    for bench in ("b1", "b2"):
        base = rng.uniform(0.2, 0.9, 12)
        for run, shift in (("x", 0.1), ("y", 0.0)):
            rows += [{"run_id": run, "benchmark": bench, "case_id": f"{bench}{i}",
                      "score": float(np.clip(v + shift + rng.normal(0, 0.1), 0, 1))} for i, v in enumerate(base)]
    cases = pl.DataFrame(rows)
    plan = plan_power(cases, "x", "y", differences=(0.05, 0.1))
    assert plan.variance["cases"].to_list() == [12, 12]
    assert plan.needed["cases_per_benchmark"].to_list() == [cases_needed(plan.sd_diff, d) for d in (0.05, 0.1)]
    assert plan.needed["cases"].to_list() == [2 * n for n in plan.needed["cases_per_benchmark"].to_list()]
    assert plan.needed["power_now"][1] == pytest.approx(power(plan.sd_diff, 12, 0.1))
    curve = plan.curve([5, 12, 40])
    assert curve["detectable"].to_list() == sorted(curve["detectable"].to_list(), reverse=True)
    assert curve.filter(pl.col("cases_per_benchmark") == 12)["detectable"][0] == pytest.approx(plan.current["detectable"])
    noise = pl.DataFrame({"benchmark": ["b1", "b2"], "within_a": [0.004, 0.003], "within_b": [0.002, 0.001]})
    same = plan_power(cases, "x", "y", differences=(0.05, 0.1), within=noise, repeats_now=2, repeats=2)
    assert same.needed.equals(plan.needed)
    more = plan_power(cases, "x", "y", differences=(0.05, 0.1), within=noise, repeats_now=1, repeats=3)
    assert more.needed["power_now"].to_list() == plan.needed["power_now"].to_list()  # today's design
    assert (more.needed["cases_per_benchmark"] <= plan.needed["cases_per_benchmark"]).all()
    assert more.sd_diff == pytest.approx(with_repeats(plan.variance, noise, 1, 3)["sd_diff"].to_list())
    one = plan_power(cases, "x", "y", differences=(0.1,), benchmarks=["b2"])
    assert one.variance["benchmark"].to_list() == ["b2"]
    with pytest.raises(ValueError, match="benchmark 'nope' has no case both runs completed"):
        plan_power(cases, "x", "y", benchmarks=["nope"])
    with pytest.raises(ValueError, match="run 'z' has no completed case"):
        plan_power(cases, "x", "z")
    with pytest.raises(ValueError, match="not detectable"):
        cases_needed(plan.sd_diff, 0.0)
    with pytest.raises(ValueError, match="at least 2 cases"):
        power(plan.sd_diff, 1, 0.1)


def test_repeats_shrink_only_the_within_case_part_and_the_plan_holds_by_simulation() -> None:
    # Case differences: a between-case part (sd 0.15) plus each grading's noise (sd 0.2 per run and case);
    # observed with one grading, planned with four averaged.
    between, tau, delta, k = 0.15, 0.2, 0.08, 4
    one = math.sqrt(between ** 2 + 2 * tau ** 2)
    variance = pl.DataFrame({"benchmark": ["x", "y"], "cases": [20, 20], "sd_diff": [one, one], "difference": [0.0, 0.0]})
    within = pl.DataFrame({"benchmark": ["x"], "within_a": [tau ** 2], "within_b": [tau ** 2]})  # y: none known
    planned = with_repeats(variance, within, 1, k)
    assert planned["sd_diff"][0] == pytest.approx(math.sqrt(between ** 2 + 2 * tau ** 2 / k), rel=1e-12)
    assert planned["sd_diff"][1] == pytest.approx(one) and planned["sd_diff_observed"].to_list() == [one, one]
    assert with_repeats(variance, within, k, k)["sd_diff"].to_list() == pytest.approx([one, one])
    full = pl.DataFrame({"benchmark": ["x", "y"], "within_a": [tau ** 2] * 2, "within_b": [tau ** 2] * 2})
    sds = with_repeats(variance, full, 1, k)["sd_diff"].to_list()
    n = cases_needed(sds, delta)
    assert n < cases_needed([one, one], delta)
    rng = np.random.default_rng(7)
    sims = 3000
    truth = delta + rng.normal(0, between, (sims, 2 * n))  # per case: the true difference of the two runs
    graded = truth[..., None] + rng.normal(0, tau, (sims, 2 * n, k)) - rng.normal(0, tau, (sims, 2 * n, k))
    result = paired_t(graded.mean(axis=2), [slice(0, n), slice(n, 2 * n)])
    found = float(np.mean(result.p_value < 0.05))
    assert abs(found - 0.8) < 4 * math.sqrt(0.8 * 0.2 / sims) + 0.005, (n, found)
    with pytest.raises(ValueError, match="at least 1"):
        with_repeats(variance, within, 0, 2)


def test_within_variance_per_pair_from_the_judge_noise_rows() -> None:
    within = pl.DataFrame({"run_id": ["a", "a", "b"], "benchmark": ["x", "y", "x"], "within_var": [0.1, 0.2, 0.3]})
    pair = within_for_pair(within, "a", "b")
    assert pair.rows() == [("x", 0.1, 0.3), ("y", 0.2, 0.0)]


def test_power_is_a_number_where_scipys_noncentral_t_gives_nan() -> None:
    """nct.cdf is NaN at df 2 and shift 9.54 (a false `power < target` then passed as reaching it), and
    every tail is NaN past a shift of 1e10 (subnormal variances): power stays a probability, as statsmodels'."""
    from scipy import stats

    sd, n = 1.0, 3
    se = sd / math.sqrt(n)
    assert math.isnan(stats.nct.cdf(-stats.t.ppf(0.975, 2), 2, 9.54))  # the hole this test is about
    want = TTestPower().power(effect_size=9.54 * se / sd, nobs=n, alpha=0.05, alternative="two-sided")
    assert power([sd], n, 9.54 * se) == pytest.approx(want, abs=1e-12)
    tiny = [math.sqrt(3e-323)]  # components of 5e-324
    assert all(0 <= power(tiny, m, 0.05) <= 1 for m in range(2, 12))
    assert cases_needed(tiny, 0.05) == 2 and 0 <= detectable(tiny, 5) < 1e-150
