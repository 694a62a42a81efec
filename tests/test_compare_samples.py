"""compare of runs with K > 1 answers per case: a case score is the mean of its K answers, the intervals and
paired tests are those of the case means (paired by case), exactly reproducible, and a note says so."""

from __future__ import annotations

import math

import numpy as np
import polars as pl
from scipy import stats

from tests.analysis_sim import write_run
from tests.samples_support import sample_decisions, write_samples
from toolkit.analysis.compare import INTERVAL_NOTE, CompareOptions, compare
from toolkit.analysis.paired import ResampleSettings
from toolkit.scoring import sample_scores
from toolkit.selection import pass_level_scores, read_runs
from toolkit.store import Store


def _three_sample_runs(store: Store, dataset) -> None:
    for seed, run in enumerate(("a", "b", "c"), start=1):
        write_samples(store, dataset, run, sample_decisions(dataset, run, 3, seed=seed))


def _case_means(store: Store, runs: list[str]) -> pl.DataFrame:
    """Case means over the K answers, computed from the per-answer scores here (not by compare's path)."""
    answers = sample_scores(pass_level_scores(read_runs(store, runs, texts=False)))
    assert answers.group_by("run_id", "case_id").len()["len"].unique().to_list() == [3]
    return answers.group_by("run_id", "benchmark", "case_id").agg(pl.col("score").mean())


def _hand_pair(cases: pl.DataFrame, a: str, b: str) -> tuple[float, float, float, float]:
    """delta, se, df and p of the stratified paired t on case means, by the formulas in paired_t."""
    pairs = cases.filter(pl.col("run_id") == a).join(cases.filter(pl.col("run_id") == b),
                                                     on=["benchmark", "case_id"])
    parts = []
    for _, group in pairs.group_by("benchmark"):
        d = (group["score"] - group["score_right"]).to_numpy()
        parts.append((d.mean(), d.var(ddof=1) / len(d), len(d)))
    count = len(parts)
    delta = sum(m for m, _, _ in parts) / count
    total = sum(v for _, v, _ in parts)
    se = math.sqrt(total) / count
    df = total ** 2 / sum(v * v / (m - 1) for _, v, m in parts)
    return delta, se, df, 2 * stats.t.sf(abs(delta) / se, df)


def test_k3_runs_compare_on_case_means_and_reproduce_exactly(store: Store, sample_dataset) -> None:
    _three_sample_runs(store, sample_dataset)
    runs = ["a", "b", "c"]
    options = CompareOptions(resamples=ResampleSettings(samples=300, seed=7))
    first, again = compare(store, runs, options), compare(store, runs, options)
    for name, frame in first.sections().items():
        assert frame.equals(again.sections()[name]), name
    assert first.notes == again.notes
    cases = _case_means(store, runs)
    for row in first.leaderboard.iter_rows(named=True):
        own = cases.filter(pl.col("run_id") == row["run_id"])
        means = [g["score"].mean() for _, g in own.group_by("benchmark")]
        assert abs(row["overall"] - sum(means) / len(means)) <= 1e-12
    for row in first.pairwise.iter_rows(named=True):
        delta, se, df, p = _hand_pair(cases, row["run_a"], row["run_b"])
        assert abs(row["delta"] - delta) <= 1e-12 and abs(row["se"] - se) <= 1e-12
        assert abs(row["df"] - df) <= 1e-9 and abs(row["p_value"] - p) <= 1e-9
        half = stats.t.ppf(0.975, df) * se
        assert np.allclose([row["ci_low"], row["ci_high"]], [delta - half, delta + half], atol=1e-9)
        assert row["n_cases"] == sample_dataset.cases.height
    ranks = first.ranks.sort("run_id")
    assert ranks["run_id"].to_list() == runs and ranks.height == 3


def test_a_note_says_case_scores_average_k_answers(store: Store, sample_dataset) -> None:
    _three_sample_runs(store, sample_dataset)
    write_run(store, sample_dataset, "once", 0.3, 9)
    notes = compare(store, ["a", "b", "once"], CompareOptions(resamples=ResampleSettings(samples=100))).notes
    said = [n for n in notes if "averages its" in n]
    assert said == ["runs a, b have 3 answers per case: each case score averages its answers, so the "
                    "intervals and paired tests include answer (and judge) variance; pairs stay paired by case"]
    single = compare(store, ["once"], CompareOptions(resamples=ResampleSettings(samples=100))).notes
    assert not [n for n in single if "averages its" in n]


def test_the_interval_note_says_what_it_covers_and_what_not() -> None:
    assert "not answer or judge variance" not in INTERVAL_NOTE
    assert "answer and judge variance" in INTERVAL_NOTE and "systematic" in INTERVAL_NOTE
