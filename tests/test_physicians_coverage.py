"""Corrected scores in simulation (tests/physicians_sim.py): a judge that endorses 25% of unmet negative
items and misses 10% of met positive ones, 250 cases in a points-rubric and an F1-rubric benchmark, physician
labels on a random subset, 1,000 replicates.

Monte Carlo tolerance: with 1,000 replicates a coverage's standard error is 0.7%, so a true 95% reads
93.6-96.4% two times in three; the tests accept 93.0-97.0%. Measured (seeds 5 and 6): 60 labelled cases
94.1% / 94.5%, 40: 93.7 / 94.5, 25: 94.2 / 95.5, 10: 94.3 / 94.3; below ``MIN_LABELLED`` (10) they
under-cover (4: 88%, 6: 89%, 8: 91%), so such estimates are shown without an interval. (Ten benchmarks of
25 cases with 60 labelled, about six per benchmark, measured 96%.)
"""

from __future__ import annotations

import numpy as np
import polars as pl
import pytest

from tests import physicians_sim as sim
from toolkit.analysis.physician_stats import Z, cluster_share, ppi_mean, rogan_gladen
from toolkit.analysis.physicians import (MIN_LABELLED, OVERALL, UNBALANCED, corrected_means, macro_mean,
                                         weighted_macro)

REPLICATES = 1000


@pytest.fixture(scope="module")
def world() -> tuple[sim.Simulated, float]:
    items = sim.rubric(2, 125)
    return sim.Simulated(items, REPLICATES, 60, seed=5), sim.true_mean(items)


def _overall(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.filter(pl.col("benchmark") == OVERALL)


def _covers(rows: pl.DataFrame, truth: float) -> float:
    return float(((rows["ci_low"] <= truth) & (rows["ci_high"] >= truth)).mean())


def _labelled_only(cases: pl.DataFrame) -> np.ndarray:
    """Widths of the labelled cases' own interval (lambda 0: the judge ignored), per replicate."""
    widths = []
    for _, run in cases.group_by("run_id", maintain_order=True):
        parts = []
        for _, bench in run.group_by("benchmark"):
            lab = bench.filter(pl.col("physician").is_not_null())
            parts.append(ppi_mean(lab["physician"].to_numpy(), lab["judge_labelled"].to_numpy(), np.array([]), lam=0.0))
        macro = macro_mean(parts)
        widths.append(macro.ci_high - macro.ci_low)
    return np.array(widths)


def test_sixty_labelled_cases_cover_the_physician_mean_and_the_judge_alone_does_not(world) -> None:
    world_sim, truth = world
    cases = world_sim.cases(60)
    lab = world_sim.labelled
    assert float(np.corrcoef(lab["judge_labelled"], lab["physician"])[0, 1]) >= 0.5  # the premise below
    corrected, _ = corrected_means(cases, world_sim.runs())
    overall = _overall(corrected)
    assert overall["ci_low"].null_count() == 0 and overall.height == REPLICATES
    coverage = _covers(overall, truth)
    assert 0.930 <= coverage <= 0.970, coverage
    # the judge alone: its mean's 95% interval over all 250 cases (labelled-count none: lambda 0 on judge scores)
    judge_only = []
    for _, run in cases.group_by("run_id"):
        parts = [ppi_mean(b["judge"].to_numpy(), b["judge"].to_numpy(), np.array([]), lam=0.0)
                 for _, b in run.group_by("benchmark")]
        macro = macro_mean(parts)
        judge_only.append(macro.ci_low <= truth <= macro.ci_high)
    assert np.mean(judge_only) < 0.5
    # corrected narrower than the labelled cases alone, when the judge tracks the physicians (r >= 0.5)
    mine = (overall["ci_high"] - overall["ci_low"]).to_numpy()
    alone = _labelled_only(cases)
    assert mine.mean() < alone.mean() and np.mean(mine < alone) > 0.9


@pytest.mark.parametrize("labelled", [10, 25])
def test_few_labelled_cases_still_cover(world, labelled: int) -> None:
    world_sim, truth = world
    shown, _ = corrected_means(world_sim.cases(labelled), world_sim.runs())
    # With 10 cases a benchmark may get fewer than 2: the weighted overall, without an interval below 20
    overall = _overall(shown).filter(pl.col("ci_low").is_not_null())
    assert overall.height > 0.95 * REPLICATES
    assert 0.930 <= _covers(overall, truth) <= 0.970, _covers(overall, truth)


def test_fewer_than_the_minimum_get_no_interval_and_say_why(world) -> None:
    world_sim, truth = world
    cases = world_sim.cases(6)
    overall = _overall(corrected_means(cases, world_sim.runs())[0])
    assert overall["ci_low"].null_count() == overall.height  # never a "95%" interval that is not one
    notes = overall["ci_note"].drop_nulls().unique().to_list()
    assert notes and all("no valid 95% interval" in n or "too few" in n for n in notes)
    # what the withheld intervals would have covered: well below the nominal 95%
    raw = _overall(corrected_means(cases, world_sim.runs(), minimum=0)[0])
    raw = raw.filter(pl.col("ci_low").is_not_null() & pl.col("ci_low").is_not_nan())
    assert _covers(raw, truth) < 0.93, _covers(raw, truth)
    assert 6 < MIN_LABELLED


def test_an_overall_whose_labels_miss_a_benchmark_has_no_interval(world) -> None:
    """When a benchmark has fewer than 2 labelled cases, the overall is one PPI++ over all cases weighted to
    the macro mean. It is used exactly when the labels missed a benchmark, and then its variance misses that
    benchmark's share: the interval it would show under-covers, so none is shown."""
    world_sim, truth = world
    cases = world_sim.cases(25)
    second = sorted(cases["benchmark"].unique().to_list())[1]
    labelled = pl.col("physician").is_not_null()
    extra = (pl.col("benchmark") == second) & labelled & (labelled.cum_sum().over("run_id", "benchmark") > 1)
    cases = cases.with_columns(*(pl.when(extra).then(None).otherwise(pl.col(c)).alias(c)
                                 for c in ("physician", "judge_labelled", "labels")))
    overall = _overall(corrected_means(cases, world_sim.runs())[0])
    assert overall["mean"].null_count() == 0 and overall["ci_low"].null_count() == overall.height
    assert overall["ci_note"].unique().to_list() == [UNBALANCED]
    covered = []
    for _, run in cases.group_by("run_id"):
        est = weighted_macro(run, "judge", "judge_labelled", "physician")
        covered.append(est.ci_low <= truth <= est.ci_high)
    # what the withheld interval would have covered: measured 90.1% here (one labelled case left in the second
    # of two equal benchmarks); 0-69% with a small heavy benchmark (230 and 20 cases, 0 or 1 labelled in it)
    assert np.mean(covered) < 0.93, np.mean(covered)


@pytest.mark.parametrize(("sign", "true_rate"), [("negative", 0.15), ("positive", 0.5)])
def test_rogan_gladen_rates_cover_the_physician_rate(sign: str, true_rate: float) -> None:
    """A class's match rate corrected by the judge's sensitivity and specificity from 60 labelled cases of
    250 (points rubric), 1,000 replicates. The physicians' rate is known: E[0.3 (1 - t)] = 0.15 on negative
    items, E[t] = 0.5 on positive ones (t ~ Beta(2, 2)). The delta-method interval treats the observed rate
    and the judge's accuracy as independent although labelled items count in both, so it is conservative:
    measured 98.2% (negative) and 97.2% (positive), 96-97% at 25 labelled cases."""
    items = sim.rubric(1, 250)
    rng = np.random.default_rng(3)
    truth, judge = sim.draw(rng, items, REPLICATES)
    points = items["points"].to_numpy()
    mask = points < 0 if sign == "negative" else points > 0
    case = items["case_id"].rank("dense").cast(pl.Int64).to_numpy() - 1
    cases = case.max() + 1

    def per_case(values: np.ndarray) -> np.ndarray:  # (replicates, cases) counts over the class's items
        out = np.zeros((values.shape[0], cases))
        np.add.at(out, (slice(None), case[mask]), values[:, mask].astype(np.float64))
        return out

    judged, items_per_case = per_case(judge), per_case(np.ones_like(judge))
    tp, fn = per_case(truth & judge), per_case(truth & ~judge)
    tn, fp = per_case(~truth & ~judge), per_case(~truth & judge)
    covered, naive = [], []
    for r in range(REPLICATES):
        lab = rng.permutation(cases)[:60]
        p, p_var = cluster_share(judged[r], items_per_case[r])
        sens, sens_var = cluster_share(tp[r, lab], tp[r, lab] + fn[r, lab])
        spec, spec_var = cluster_share(tn[r, lab], tn[r, lab] + fp[r, lab])
        fixed = rogan_gladen(p, p_var, sens, sens_var, spec, spec_var)
        half = Z * np.sqrt(fixed.variance)
        covered.append(max(fixed.rate - half, 0.0) <= true_rate <= min(fixed.rate + half, 1.0))
        naive.append(p)
    assert np.mean(covered) >= 0.93, np.mean(covered)
    if sign == "negative":  # the judge endorses a quarter of the unmet harmful items: its own rate is far off
        assert np.mean(naive) > true_rate + 0.15


@pytest.mark.parametrize("per_benchmark", [3, 10, 25, 50])
def test_labels_drawn_within_benchmarks_cover_at_every_size(per_benchmark: int) -> None:
    """Ten benchmarks (points and F1 alternate) of 3, 10, 25 or 50 cases, two labelled cases in each drawn at
    random within it, as `bedside review` draws them. Measured (seed 7): 96.3%, 96.9%, 97.0%, 97.4%: with two
    labelled cases per benchmark the Student t interval is a little conservative. At 3 cases one case per
    benchmark is left to the judge: var(Yhat) comes from every case's judge score, not from that one."""
    items = sim.rubric(10, per_benchmark)
    world_sim = sim.Simulated(items, REPLICATES, 10 * per_benchmark, seed=7)
    within = pl.col("rank").rank("ordinal").over("run_id", "benchmark")
    lab = world_sim.labelled.filter(within <= 2).drop("rank", "benchmark")
    cases = world_sim.judge.join(lab, on=["run_id", "case_id"], how="left").with_columns(
        labels=pl.when(pl.col("physician").is_not_null()).then(pl.lit(len(sim.POINTS_ITEMS))))
    overall = _overall(corrected_means(cases, world_sim.runs())[0])
    assert overall["ci_low"].null_count() == 0
    assert 0.930 <= _covers(overall, sim.true_mean(items)) <= 0.985, _covers(overall, sim.true_mean(items))


SKEWED = (3.0, 0.8)  # difficulties piling up near 1: physician scores skewed towards their bound


@pytest.fixture(scope="module")
def skewed() -> tuple[sim.Simulated, dict[str, float]]:
    items = sim.rubric(2, 250)
    return (sim.Simulated(items, SKEWED_REPLICATES, 500, seed=11, difficulty=SKEWED),
            sim.true_means(items, replicates=400, difficulty=SKEWED))


SKEWED_REPLICATES = 2000


@pytest.mark.parametrize("per_benchmark", [10, 20, 50, 100])
def test_benchmark_means_cover_where_scores_pile_up_near_1(skewed, per_benchmark: int) -> None:
    """Per-benchmark corrected means of a points and an F1 benchmark of 250 cases whose difficulties are
    Beta(3, 0.8) (physician means 0.77 and 0.81, long tails towards 0), n labelled cases drawn within each,
    2,000 replicates: Monte Carlo SE 0.49%, so the test accepts coverage >= 94% less 1.96 SE (93.0%).
    A symmetric Student t interval misses on one side here (91.3-95.1%: below at 10-50 labelled cases);
    Hall's skewness correction of the rectifier's mean brings it to the figures in docs/methods.md."""
    world_sim, truths = skewed
    within = pl.col("rank").rank("ordinal").over("run_id", "benchmark")
    lab = world_sim.labelled.filter(within <= per_benchmark).drop("rank", "benchmark")
    cases = world_sim.judge.join(lab, on=["run_id", "case_id"], how="left").with_columns(
        labels=pl.when(pl.col("physician").is_not_null()).then(pl.lit(len(sim.POINTS_ITEMS))))
    rows = corrected_means(cases, world_sim.runs())[0].filter(pl.col("benchmark") != OVERALL)
    assert rows["ci_low"].null_count() == 0
    se = (0.95 * 0.05 / SKEWED_REPLICATES) ** 0.5
    for bench, truth in truths.items():
        mine = rows.filter(pl.col("benchmark") == bench)
        coverage = _covers(mine, truth)
        print(f"{bench}, {per_benchmark} labelled: {coverage:.1%} (MC SE {se:.2%})")
        assert coverage >= 0.94 - 1.96 * se, f"{bench}: {coverage:.3f} (Monte Carlo SE {se:.3f})"
