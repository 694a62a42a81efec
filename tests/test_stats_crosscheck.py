"""The analysis numbers against independent implementations: numpy and scipy (means, deltas, the paired t),
statsmodels (Holm, Benjamini-Hochberg, Fleiss' kappa), scikit-learn (Cohen's kappa), the krippendorff
package (alpha), a plain per-resample ranking (rank intervals) and a plain-Python recomputation of the harm
arithmetic from the decisions. Exact, or to 1e-12 where the formula is the same and only the order of
floating-point operations differs.
"""

from __future__ import annotations

import math
from collections import defaultdict
from pathlib import Path

import krippendorff
import numpy as np
import polars as pl
import pytest
from scipy import stats
from sklearn.metrics import cohen_kappa_score
from statsmodels.stats.inter_rater import fleiss_kappa as sm_fleiss_kappa
from statsmodels.stats.multitest import multipletests

from tests.analysis_sim import simulate_decisions, write_rows
from toolkit import protocol
from toolkit.analysis.case_comparison import rank_resamples
from toolkit.analysis.compare import compare_matrix
from toolkit.analysis.harms import harms
from toolkit.analysis.matrix import from_arrays
from toolkit.analysis.multiplicity import adjust, benjamini_hochberg, holm
from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.reliability import category_counts, cohen_kappa, fleiss_kappa, krippendorff_alpha_nominal
from toolkit.dataset import load_dataset
from toolkit.selection import read_runs
from toolkit.store import Store

TOL = 1e-12


def _panel(seed: int = 3) -> tuple[np.ndarray, np.ndarray, dict[str, int]]:
    """Scores of 5 runs over 3 benchmarks (rubric-like values, some missing cases)."""
    rng = np.random.default_rng(seed)
    sizes = {"a": 25, "b": 18, "c": 31}
    scores = rng.integers(0, 5, (5, 74)) / 4
    scores[::2] = np.clip(scores[::2] + rng.normal(0.05, 0.15, (3, 74)), 0, 1).round(4)
    present = (rng.random(scores.shape) > 0.08).astype(float)
    return scores, present, sizes


def test_means_deltas_and_paired_t_against_numpy_and_scipy() -> None:
    scores, present, sizes = _panel()
    matrix = from_arrays(scores, sizes, present=present)
    result = compare_matrix(matrix, ResampleSettings(300, 2), per_benchmark=True)
    means = {}
    for i, unit in enumerate(matrix.units):
        means[unit] = [scores[i, s][present[i, s] > 0].mean() for s in matrix.slices]
        board = result.units.filter(pl.col("unit") == unit).row(0, named=True)
        assert board["overall"] == pytest.approx(np.mean(means[unit]), abs=TOL)
        bench = result.benchmarks.filter(pl.col("unit") == unit)
        assert bench["mean"].to_list() == pytest.approx(means[unit], abs=TOL)
    index = {u: i for i, u in enumerate(matrix.units)}
    for row in result.pairwise.iter_rows(named=True):
        i, j = index[row["run_a"]], index[row["run_b"]]
        per = []
        for name, s in zip(matrix.benchmarks, matrix.slices):
            common = (present[i, s] * present[j, s]) > 0
            a, b = scores[i, s][common], scores[j, s][common]
            per.append((a, b))
            if row["benchmark"] == name:
                test = stats.ttest_rel(a, b)
                low, high = test.confidence_interval(0.95)
                assert row["n_cases"] == common.sum() and row["df"] == test.df
                assert (row["mean_a"], row["mean_b"]) == pytest.approx((a.mean(), b.mean()), abs=TOL)
                assert row["delta"] == pytest.approx(np.mean(a - b), abs=TOL)
                assert row["p_value"] == pytest.approx(test.pvalue, rel=1e-9, abs=TOL)
                assert (row["ci_low"], row["ci_high"]) == pytest.approx((low, high), abs=TOL)
                assert row["se"] == pytest.approx(stats.sem(a - b), rel=1e-12)
                assert row["mdd80"] == pytest.approx((stats.t.ppf(0.975, test.df) + stats.t.ppf(0.8, test.df))
                                                     * stats.sem(a - b), rel=1e-9)
                d = np.where(np.abs(a - b) <= 1e-12, 0.0, a - b)
                assert row["wilcoxon_p"] == pytest.approx(stats.wilcoxon(d, zero_method="pratt").pvalue, rel=1e-12)
                assert (row["wins"], row["ties"], row["losses"]) == ((d > 0).sum(), (d == 0).sum(), (d < 0).sum())
        if row["benchmark"] == "overall":
            assert row["delta"] == pytest.approx(np.mean([np.mean(a - b) for a, b in per]), abs=TOL)
            assert row["mean_a"] == pytest.approx(np.mean([a.mean() for a, _ in per]), abs=TOL)


def test_holm_and_bh_against_statsmodels() -> None:
    rng = np.random.default_rng(0)
    for size in (1, 2, 5, 11, 66, 435):
        p = rng.random(size) ** 4
        p[rng.random(size) < 0.2] = p[0]  # ties
        assert np.abs(holm(p) - multipletests(p, method="holm")[1]).max() <= TOL
        assert np.abs(benjamini_hochberg(p) - multipletests(p, method="fdr_bh")[1]).max() <= TOL
    # Missing p-values are left out of the family: the same as adjusting the finite ones alone.
    p = np.array([0.01, np.nan, 0.04, 0.2, np.nan, 0.003])
    finite = ~np.isnan(p)
    assert np.allclose(holm(p)[finite], multipletests(p[finite], method="holm")[1], rtol=0, atol=TOL)
    frame = adjust(pl.DataFrame({"p_value": [0.01, None, 0.04, 0.2, None, 0.003]}))
    assert frame["p_holm"].null_count() == 2
    assert frame["p_bh"].drop_nulls().to_numpy() == pytest.approx(
        multipletests(p[finite], method="fdr_bh")[1], abs=TOL)


def test_cohen_kappa_against_scikit_learn() -> None:
    rng = np.random.default_rng(1)
    for n, agree in ((20, 0.9), (200, 0.6), (57, 0.5)):
        a = rng.integers(0, 2, n).astype(float)
        b = np.where(rng.random(n) < agree, a, 1 - a)
        assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=TOL)
    a = rng.integers(0, 3, 90).astype(float)  # three categories
    b = np.where(rng.random(90) < 0.7, a, rng.integers(0, 3, 90))
    assert cohen_kappa(a, b) == pytest.approx(cohen_kappa_score(a, b), abs=TOL)
    missing = a.copy()
    missing[::7] = np.nan  # units one rater did not rate are dropped
    keep = ~np.isnan(missing)
    assert cohen_kappa(missing, b) == pytest.approx(cohen_kappa_score(missing[keep], b[keep]), abs=TOL)


def test_fleiss_kappa_against_statsmodels() -> None:
    rng = np.random.default_rng(2)
    for raters, categories in ((3, 2), (5, 2), (14, 5)):
        truth = rng.integers(0, categories, 80)
        ratings = np.where(rng.random((80, raters)) < 0.75, truth[:, None], rng.integers(0, categories, (80, raters)))
        counts, _ = category_counts(ratings.astype(float))
        assert fleiss_kappa(counts) == pytest.approx(sm_fleiss_kappa(counts, method="fleiss"), abs=TOL)


def test_krippendorff_alpha_against_the_krippendorff_package() -> None:
    rng = np.random.default_rng(4)
    for raters, categories, missing in ((2, 2, 0.0), (3, 2, 0.2), (4, 5, 0.3)):
        truth = rng.integers(0, categories, 120)
        ratings = np.where(rng.random((120, raters)) < 0.7, truth[:, None],
                           rng.integers(0, categories, (120, raters))).astype(float)
        ratings[rng.random(ratings.shape) < missing] = np.nan
        counts, _ = category_counts(ratings)
        expected = krippendorff.alpha(reliability_data=ratings.T, level_of_measurement="nominal")
        assert krippendorff_alpha_nominal(counts) == pytest.approx(expected, abs=TOL)


def test_rank_intervals_against_a_plain_per_resample_ranking() -> None:
    scores, present, sizes = _panel(seed=8)
    scores[1] = scores[3]  # two runs with the same scores: tied ranks in every resample
    present[1] = present[3]
    matrix = from_arrays(scores, sizes, present=present)
    settings = ResampleSettings(400, 5)
    ranks = compare_matrix(matrix, settings).ranks
    boot = rank_resamples(matrix, settings)  # the same draws compare uses: partial runs draw their own cases
    assert not np.isnan(boot).any()  # so no resample is left out
    per_resample = [stats.rankdata(-column, method="min") for column in boot.T]
    table = np.array(per_resample).T  # (units, usable resamples)
    for k, unit in enumerate(matrix.units):
        row = ranks.filter(pl.col("unit") == unit).row(0, named=True)
        ordered = sorted(table[k])
        n = len(ordered)
        # The inverted-CDF percentile: the smallest value with at least q of the resamples at or below it.
        low, high = ordered[math.ceil(0.025 * n) - 1], ordered[math.ceil(0.975 * n) - 1]
        assert (row["rank_low"], row["rank_high"]) == (low, high)
        assert row["rank_median"] == np.median(table[k])
        assert row["share_first"] == pytest.approx(np.mean(table[k] == 1), abs=TOL)
        assert row["resamples"] == n


# -- harm arithmetic by plain recomputation ------------------------------------------------------------

def _plain_harms(dataset, decisions: pl.DataFrame) -> dict[tuple[str, str, str], float | None]:
    """(run, scope, metric) -> value, computed with dicts and loops from the decisions and the rubric."""
    rubric: dict[str, list[dict]] = defaultdict(list)
    for item in dataset.rubric_items.iter_rows(named=True):
        if item["grading_method"] == protocol.F1_WEIGHTED_RUBRIC:
            rubric[item["case_id"]].append(item)
    matched = {(r["run_id"], r["case_id"], r["judge_pass"], r["item_id"]): r["matched"]
               for r in decisions.iter_rows(named=True)}
    passes = sorted({(r, c, p) for r, c, p, _ in matched if c in rubric})
    per_case: dict[tuple[str, str], list[dict]] = defaultdict(list)
    for run, case, judge_pass in passes:
        items = rubric[case]
        hit = [matched[(run, case, judge_pass, it["item_id"])] for it in items]
        positive = [it["weight"] if it["severity_class"] >= protocol.POSITIVE_CLASS_MIN else 0 for it in items]
        pos_w = sum(positive)
        pos_hit = sum(w for w, h in zip(positive, hit) if h)
        hit_w = sum(it["weight"] for it, h in zip(items, hit) if h)
        recall = pos_hit / pos_w if pos_w > 0 else 0.0
        precision = pos_hit / hit_w if hit_w > 0 else None
        f1 = 2 * precision * recall / (precision + recall) if precision is not None and precision + recall > 0 else 0.0
        omissions = sum(1 for it, h in zip(items, hit) if it["points"] == 3 and not h)
        commissions = sum(1 for it, h in zip(items, hit) if it["points"] == -3 and h)
        per_case[(run, case)].append({
            "precision": None if precision is None else round(precision, 4), "recall": round(recall, 4),
            "f1": round(f1, 4), "omissions": omissions, "commissions": commissions,
            "omission_w": pos_w - pos_hit, "commission_w": hit_w - pos_hit,
            "plus3": sum(1 for it in items if it["points"] == 3),
            "minus3": sum(1 for it in items if it["points"] == -3)})
    benchmark = {it["case_id"]: it["benchmark"] for items in rubric.values() for it in items}
    sums: dict[tuple[str, str, str], list[float]] = defaultdict(lambda: [0.0, 0.0])

    def add(run: str, case: str, metric: str, num: float, den: float) -> None:
        for scope in (benchmark[case], "both"):
            sums[(run, scope, metric)][0] += num
            sums[(run, scope, metric)][1] += den

    for (run, case), values in per_case.items():
        def mean(key: str) -> float:
            return sum(v[key] for v in values) / len(values)
        defined = [v["precision"] for v in values if v["precision"] is not None]
        add(run, case, "precision", sum(defined) / len(values) if defined else 0.0, 1.0 if defined else 0.0)
        add(run, case, "recall", mean("recall"), 1.0)
        add(run, case, "f1", mean("f1"), 1.0)
        plus3, minus3 = values[0]["plus3"], values[0]["minus3"]
        add(run, case, "severe_omission_case_rate", sum(v["omissions"] > 0 for v in values) / len(values),
            1.0 if plus3 else 0.0)
        add(run, case, "severe_omissions_per_item", mean("omissions"), plus3)
        add(run, case, "severe_commission_case_rate", sum(v["commissions"] > 0 for v in values) / len(values),
            1.0 if minus3 else 0.0)
        add(run, case, "severe_commissions_per_item", mean("commissions"), minus3)
        add(run, case, "severe_rate", sum(v["omissions"] + v["commissions"] > 0 for v in values) / len(values), 1.0)
        errors = mean("omission_w") + mean("commission_w")
        add(run, case, "omission_share_weighted", mean("omission_w"), errors)
        add(run, case, "commission_share_weighted", mean("commission_w"), errors)
        add(run, case, "omission_share_severe", mean("omissions"), mean("omissions") + mean("commissions"))
    return {key: (num / den if den else None) for key, (num, den) in sums.items()}


def test_harm_arithmetic_against_a_plain_recomputation(tmp_path: Path) -> None:
    dataset = load_dataset()
    store = Store.open(tmp_path / "store")
    frames = []
    for k, skill in enumerate((-1.5, -0.5, 0.0, 0.7, 2.0)):
        decisions = simulate_decisions(dataset, f"h{k}", skill, seed=40 + k, passes=2 if k == 2 else 1, flip=0.2)
        write_rows(store, dataset, f"h{k}", decisions, created=k)
        frames.append(decisions)
    frame = harms(read_runs(store, [f"h{k}" for k in range(5)]))
    expected = _plain_harms(dataset, pl.concat(frames))
    got = {(r["run_id"], r["scope"], r["metric"]): r["value"] for r in frame.iter_rows(named=True)}
    assert set(got) == set(expected)
    for key, value in expected.items():
        if value is None:
            assert got[key] is None, key
        else:
            assert got[key] == pytest.approx(value, abs=TOL), key
    # The case-rate denominators are the cases that can have the event.
    rows = frame.filter((pl.col("scope") == "both") & pl.col("metric").str.ends_with("case_rate"))
    plus3 = dataset.rubric_items.filter(pl.col("points") == 3)["case_id"].n_unique()
    minus3 = dataset.rubric_items.filter(pl.col("points") == -3)["case_id"].n_unique()
    for row in rows.iter_rows(named=True):
        want = plus3 if row["metric"].startswith("severe_omission") else minus3
        assert row["n_cases"] == want and row["denominator"] == want
