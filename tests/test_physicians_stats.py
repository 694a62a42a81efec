"""The judge-vs-physician arithmetic against hand counts and independent implementations: ppi-python for
PPI++, scikit-learn for Cohen's kappa, ``toolkit.analysis.reliability`` for Fleiss' kappa."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
import pytest

from toolkit.analysis.physician_labels import agreement_by_class, combine_labels, judge_errors, with_classes
from toolkit.analysis.physician_stats import (PPIMean, cluster_share, kappa_jackknife, kappa_tables, labels_to_halve,
                                              pair_kappa_tables, ppi_mean, rogan_gladen, share_interval)
from toolkit.analysis.reliability import fleiss_kappa


def _data(seed: int, n: int = 40, big_n: int = 300):
    rng = np.random.default_rng(seed)
    truth = rng.beta(2, 2, n + big_n)
    judge = np.clip(truth * 0.8 + rng.normal(0, 0.1, truth.size) - 0.05, 0, 1)
    return truth[:n], judge[:n], judge[n:]


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("lam", [None, 0.0, 0.5, 1.0])
def test_ppi_mean_is_ppi_pythons_point_and_interval(seed: int, lam: float | None) -> None:
    from ppi_py import ppi_mean_ci, ppi_mean_pointestimate

    y, yhat, rest = _data(seed)
    mine = ppi_mean(y, yhat, rest, lam=lam, small_sample=False)
    point = ppi_mean_pointestimate(y, yhat, rest, lam=lam)
    low, high = ppi_mean_ci(y, yhat, rest, alpha=0.05, lam=lam)
    assert mine.mean == pytest.approx(float(np.ravel(point)[0]), abs=1e-9)
    assert (mine.ci_low, mine.ci_high) == pytest.approx((float(np.ravel(low)[0]), float(np.ravel(high)[0])), abs=1e-9)


def test_the_small_sample_interval_only_widens_ppi_pythons() -> None:
    """The default interval: same estimate and lambda, unbiased variances (two parameters spent when lambda
    is tuned) and a Student t quantile: wider by exactly those factors."""
    y, yhat, rest = _data(3, n=12)
    plain, small = ppi_mean(y, yhat, rest, small_sample=False), ppi_mean(y, yhat, rest)
    assert small.mean == plain.mean and small.lam == plain.lam and 0 < small.lam < 1
    assert small.rectifier_var == pytest.approx(plain.rectifier_var * 12 / 10)
    assert small.ci_high - small.ci_low > plain.ci_high - plain.ci_low
    assert 10 <= small.df < 10 + 299  # Satterthwaite: between the smallest df (n - 2) and their sum


def test_every_case_labelled_is_the_labelled_mean() -> None:
    y, yhat, _ = _data(4)
    est = ppi_mean(y, yhat, np.array([]))
    assert est.lam == 0 and est.mean == pytest.approx(y.mean())
    assert est.se == pytest.approx(y.std(ddof=1) / math.sqrt(y.size))


@pytest.mark.parametrize("seed", range(5))
def test_kappa_of_a_table_is_scikit_learns(seed: int) -> None:
    from sklearn.metrics import cohen_kappa_score

    rng = np.random.default_rng(seed)
    a = rng.random(200) < 0.6
    b = np.where(rng.random(200) < 0.8, a, ~a)
    table = [(a & b).sum(), (a & ~b).sum(), (~a & b).sum(), (~a & ~b).sum()]
    assert float(kappa_tables(np.array(table))) == pytest.approx(cohen_kappa_score(a, b), abs=1e-12)


def test_pair_kappa_is_fleiss_kappa_with_two_ratings() -> None:
    rng = np.random.default_rng(7)
    first = rng.random(120) < 0.4
    second = np.where(rng.random(120) < 0.75, first, ~first)
    counts = np.stack([first.astype(int) + second, 2 - first.astype(int) - second], axis=1)
    table = np.array([(first == second).sum(), 120, first.sum() + second.sum()])
    assert float(pair_kappa_tables(table)) == pytest.approx(fleiss_kappa(counts), abs=1e-12)


def test_cluster_share_and_its_logit_interval() -> None:
    share, var = cluster_share(np.array([3, 0, 2]), np.array([4, 2, 2]))
    assert share == 5 / 8
    # n/(n-1) * sum (a - p m)^2 / (sum m)^2 by hand
    assert var == pytest.approx(1.5 * ((3 - 2.5) ** 2 + (0 - 1.25) ** 2 + (2 - 1.25) ** 2) / 64)
    low, high = share_interval(share, var, 3, 8)
    # logit(5/8) +- t(2) sqrt(var (k - 1) / k) / (p (1 - p)) (the sandwich variance), back through the logistic
    half = 4.302652729911275 * math.sqrt(var * 2 / 3) / (share * (1 - share))
    centre = math.log(5 / 3)
    assert (low, high) == pytest.approx((1 / (1 + math.exp(half - centre)), 1 / (1 + math.exp(-centre - half))))
    # a case with no trials is no cluster: the same share, variance and interval without it
    assert cluster_share(np.array([3, 0, 2, 0]), np.array([4, 2, 2, 0])) == (share, var)
    # every item one way: no logit spread, the Wilson interval at every item; one case: likewise
    from toolkit.analysis.items import wilson_interval

    every = tuple(float(x[0]) for x in wilson_interval(np.array([8.0]), np.array([8.0])))
    assert share_interval(*cluster_share(np.array([3, 5]), np.array([3, 5])), 2, 8) == every
    assert share_interval(*cluster_share(np.array([5]), np.array([8])), 1, 8)[0] < 5 / 8


def test_cluster_share_per_row_is_the_one_table_arithmetic() -> None:
    rng = np.random.default_rng(2)
    trials = rng.integers(0, 5, size=(6, 9))
    hits = rng.binomial(trials, 0.7)
    shares, variances = cluster_share(hits, trials)
    lows, highs = share_interval(shares, variances, (trials > 0).sum(axis=1), trials.sum(axis=1))
    for r in range(6):
        one = cluster_share(hits[r], trials[r])
        assert (shares[r], variances[r]) == pytest.approx(one, rel=1e-12)
        assert (lows[r], highs[r]) == pytest.approx(share_interval(*one, (trials[r] > 0).sum(), trials[r].sum()))


def test_kappa_jackknife_by_hand() -> None:
    rng = np.random.default_rng(4)
    tables = rng.integers(0, 4, size=(7, 4)).astype(float)
    kappa, low, high = kappa_jackknife(tables)
    assert float(kappa) == float(kappa_tables(tables.sum(axis=0)))
    left = np.array([math.log(1 - float(kappa_tables(tables.sum(axis=0) - row))) for row in tables])
    se = math.sqrt(6 / 7 * ((left - left.mean()) ** 2).sum())
    t6 = 2.4469118511449692
    assert float(low) == pytest.approx(max(1 - math.exp(math.log(1 - kappa) + t6 * se), -1.0))
    assert float(high) == pytest.approx(1 - math.exp(math.log(1 - kappa) - t6 * se))
    assert low < kappa < high < 1
    perfect = np.array([[2.0, 0, 0, 1], [1, 0, 0, 3]])
    assert float(kappa_jackknife(perfect)[0]) == 1.0 and np.isnan(kappa_jackknife(perfect)[1:]).all()


def test_rogan_gladen_by_hand_and_clipped() -> None:
    fixed = rogan_gladen(0.4, 0.001, 0.9, 0.002, 0.75, 0.003)
    rate = (0.4 + 0.75 - 1) / (0.9 + 0.75 - 1)
    assert fixed.rate == pytest.approx(rate) and not fixed.clipped
    assert fixed.variance == pytest.approx((0.001 + rate ** 2 * 0.002 + (1 - rate) ** 2 * 0.003) / 0.65 ** 2)
    assert rogan_gladen(0.2, 0.001, 0.9, 0.0, 0.75, 0.0).rate == 0.0  # below the judge's false-positive floor
    assert rogan_gladen(0.2, 0.001, 0.9, 0.0, 0.75, 0.0).clipped
    assert math.isnan(rogan_gladen(0.5, 0.0, 0.5, 0.0, 0.5, 0.0).rate)  # a judge no better than chance


def test_labels_to_halve_quarters_the_variance() -> None:
    part = PPIMean(0.5, 0.0, 0.5, 20, 180, rectifier_var=0.04, imputed_var=0.01)
    needed = labels_to_halve([part], [200])
    assert needed is not None

    def variance(m: int) -> float:
        return 0.01 / (200 - m) + 0.04 / m

    assert variance(needed) <= variance(20) / 4 < variance(needed - 1)
    assert labels_to_halve([PPIMean(0.5, 0.0, 0.5, 20, 5, 0.04, 1e-4)], [25]) is None  # not even with all 25 labelled


def _labels(rows: list[tuple]) -> pl.DataFrame:
    return pl.DataFrame(rows, schema={"reviewer": pl.String, "run_id": pl.String, "case_id": pl.String,
                                      "item_id": pl.String, "label": pl.String, "labelled_at": pl.Int64},
                        orient="row").with_columns(pl.col("labelled_at").cast(pl.Datetime("us", "UTC")),
                                                   sample=pl.lit(0, pl.Int32), review_id=pl.lit(None, pl.String))


def test_reviewers_combine_by_majority_and_a_tie_goes_to_the_earliest() -> None:
    labels = _labels([
        ("ann", "r", "c", "i1", "met", 3), ("bob", "r", "c", "i1", "not_met", 1), ("cy", "r", "c", "i1", "met", 2),
        ("ann", "r", "c", "i2", "met", 5), ("bob", "r", "c", "i2", "not_met", 4),
        ("ann", "r", "c", "i3", "unsure", 1), ("bob", "r", "c", "i3", "unsure", 2),
        ("ann", "r", "c", "i4", "unsure", 1), ("bob", "r", "c", "i4", "met", 2)])
    out = {r["item_id"]: r for r in combine_labels(labels).iter_rows(named=True)}
    assert out["i1"]["physician"] is True  # two of three
    assert out["i2"]["physician"] is False  # a tie: bob labelled first
    assert out["i3"]["physician"] is None and out["i3"]["unsure"] == 2
    assert out["i4"]["physician"] is True and out["i4"]["labels"] == 2


def _fixture_items() -> pl.DataFrame:
    """Twelve labelled items over three cases, the judge's decision beside the physician's."""
    rows = [  # case, points, physician, judge
        ("c1", 2, True, True), ("c1", 1, True, False), ("c1", -2, False, True), ("c1", -1, False, False),
        ("c2", 3, True, True), ("c2", 2, False, False), ("c2", -3, False, True), ("c2", 1, True, True),
        ("c3", 1, True, False), ("c3", -1, True, True), ("c3", 2, None, True), ("c3", -2, False, False)]
    return with_classes(pl.DataFrame(
        [(c, f"{c}_{i}", float(p), ph, j) for i, (c, p, ph, j) in enumerate(rows)],
        schema={"case_id": pl.String, "item_id": pl.String, "points": pl.Float64, "physician": pl.Boolean,
                "judge": pl.Boolean}, orient="row").with_columns(
        severity_class=pl.lit(None, pl.Int32), run_id=pl.lit("r"), sample=pl.lit(0, pl.Int32),
        benchmark=pl.lit("drug_safety"), text=pl.lit("criterion")))


def test_sensitivity_and_specificity_are_a_hand_count() -> None:
    table = {r["item_class"]: r for r in agreement_by_class(_fixture_items()).iter_rows(named=True)}
    every = table["all items"]
    # physician met: c1 2 (judge 1), c2 2 (2), c3 2 (1) -> 4 / 6; not met: 5 items, judge says not met on 3
    assert (every["items"], every["unsure"]) == (11, 1)
    assert every["sensitivity"] == 4 / 6 and every["specificity"] == 3 / 5
    assert every["agreement"] == 7 / 11
    assert table["positive"]["sensitivity"] == 3 / 5 and table["positive"]["specificity"] == 1.0
    assert table["negative"]["sensitivity"] == 1.0 and table["negative"]["specificity"] == 2 / 4
    assert every["sensitivity_low"] < every["sensitivity"] < every["sensitivity_high"]


def test_kappa_in_the_table_is_scikit_learns_with_a_jackknife_interval() -> None:
    from sklearn.metrics import cohen_kappa_score

    items = _fixture_items()
    every = agreement_by_class(items).row(0, named=True)
    definite = items.filter(pl.col("physician").is_not_null())
    assert every["kappa"] == pytest.approx(cohen_kappa_score(definite["physician"], definite["judge"]), abs=1e-12)
    assert every["kappa_low"] <= every["kappa"] <= every["kappa_high"]


def test_the_items_the_judge_errs_on_most_come_first() -> None:
    errors = judge_errors(_fixture_items(), top=3)
    assert errors.height == 3 and set(errors["errors"].to_list()) == {1}
    assert errors["judge_false_met"].sum() + errors["judge_false_not_met"].sum() == 3


def test_a_benchmark_with_one_labelled_case_says_one_not_zero() -> None:
    from toolkit.analysis.physicians import OVERALL, corrected_means

    # benchmark "a": 3 labelled cases of 4; "b": 1 labelled case of 4 (too few for its own estimate)
    cases = pl.DataFrame({
        "run_id": ["r"] * 8, "case_id": [f"c{i}" for i in range(8)], "benchmark": ["a"] * 4 + ["b"] * 4,
        "judge": [0.5, 0.6, 0.7, 0.8, 0.2, 0.3, 0.4, 0.5],
        "physician": [0.4, 0.6, 0.6, None, 0.1, None, None, None],
        "judge_labelled": [0.5, 0.6, 0.7, None, 0.2, None, None, None],
        "labels": [3, 3, 3, None, 3, None, None, None]})
    corrected, plan = corrected_means(cases, ["r"])
    counts = dict(corrected.select("benchmark", "labelled_cases").iter_rows())
    assert counts == {"a": 3, "b": 1, OVERALL: 4}
    note = corrected.filter(pl.col("benchmark") == "b")["ci_note"][0]
    assert note.startswith("1 labelled case(s)")
    assert plan["labelled_cases"].to_list() == [4]
    # one labelled case in all: no estimate at all, and still counted
    one = cases.with_columns(pl.when(pl.col("case_id") == "c4").then(pl.col(c)).otherwise(None).alias(c)
                             for c in ("physician", "judge_labelled", "labels"))
    corrected, plan = corrected_means(one, ["r"])
    assert dict(corrected.select("benchmark", "labelled_cases").iter_rows()) == {"a": 0, "b": 1, OVERALL: 1}
    assert corrected["mean"].null_count() == 3 and plan["labelled_cases"].to_list() == [1]


def test_corrected_intervals_stay_within_what_a_score_can_be() -> None:
    """A case score lies in [0, 1] (a difference of two in [-1, 1]); a t interval can pass the bound, and
    what it passes holds no truth, so it is cut there."""
    from toolkit.analysis.physicians import corrected_means

    # 12 of 24 cases labelled (lambda N / (N + n) = 1/2): the rectifier 1 - judge / 2 is 0.7 or 0.5, symmetric
    n = 24
    judge = [0.6, 1.0] * 6 + [0.8] * 12
    cases = pl.DataFrame({"run_id": ["r"] * n, "case_id": [f"c{i}" for i in range(n)], "benchmark": ["b"] * n,
                          "judge": judge, "judge_labelled": judge[:12] + [None] * 12,
                          "physician": [1.0] * 12 + [None] * 12, "labels": [5] * 12 + [None] * 12})
    row = corrected_means(cases, ["r"])[0].row(0, named=True)
    assert row["mean"] == pytest.approx(1.0) and row["mean"] + 2.2 * row["se"] > 1.0  # t would pass 1
    assert row["ci_high"] == 1.0 and 0.0 < row["ci_low"] < row["mean"]


def test_a_judge_that_agrees_with_the_physicians_corrects_nothing() -> None:
    """Few labelled cases (lambda not tuned): the estimate is the judge's mean over every case plus the
    labelled cases' mean error, so physician scores equal to the judge's leave the judge's mean as it is."""
    from toolkit.analysis.physicians import corrected_means

    n = 15
    judge = [0.2, 0.9, 0.5, 1.0, 0.0] * 3
    cases = pl.DataFrame({"run_id": ["r"] * n, "case_id": [f"c{i}" for i in range(n)], "benchmark": ["b"] * n,
                          "judge": judge, "judge_labelled": [j if i < 12 else None for i, j in enumerate(judge)],
                          "physician": [j if i < 12 else None for i, j in enumerate(judge)],
                          "labels": [5 if i < 12 else None for i in range(n)]})
    row = corrected_means(cases, ["r"])[0].row(0, named=True)
    assert row["mean"] == pytest.approx(row["judge_mean"], abs=1e-12) and row["labelled_cases"] == 12


def test_a_skewed_rectifier_widens_the_interval_on_its_long_side_by_halls_transformation() -> None:
    """Hall (1992): g(T) = T + a T^2 + a^2 T^3 / 3 + b, a = skew / 3, b = skew / 6, skew the estimate's third
    cumulant over se^3 (k3 of the rectifier / n^2 / se^3). The bounds solve g(T) = +-q; the interval shown
    takes in the symmetric t interval as well, so it only ever widens."""
    y = np.array([1.0] * 9 + [0.2, 0.4, 0.0])  # scores piling up near 1: a long tail towards 0
    yhat = np.full(12, 0.9)
    est = ppi_mean(y, yhat, np.full(30, 0.9), lam=30 / 42)
    r = y - est.lam * yhat
    k3 = ((r - r.mean()) ** 3).sum() * 12 / (11 * 10)
    assert est.skew == pytest.approx(k3 / (144 * est.se ** 3)) and est.skew < 0
    a, b = est.skew / 3, est.skew / 6
    q = est.half_width / est.se

    def g(t: float) -> float:
        return t + a * t * t + a * a * t ** 3 / 3 + b

    low_t, high_t = (est.mean - est.ci_low) / est.se, (est.mean - est.ci_high) / est.se
    assert g(low_t) == pytest.approx(q) and est.ci_low < est.mean - est.half_width  # the long side: wider
    assert est.ci_high == est.mean + est.half_width and g(high_t) <= -q  # the short side: the t bound kept
    symmetric = ppi_mean(np.array([0.2, 0.8] * 6), yhat, np.full(30, 0.9), lam=30 / 42)
    assert symmetric.skew == pytest.approx(0.0, abs=1e-9)
    assert symmetric.ci_low == pytest.approx(symmetric.mean - symmetric.half_width)
    assert ppi_mean(y, yhat, np.full(30, 0.9), small_sample=False).skew == 0.0  # ppi_py's interval untouched
