"""Judge noise (toolkit.analysis.judge_noise): by hand on a small table, by simulation (the spread it
predicts for a run's macro mean is the spread of the macro means many independent raters give), and on
the demo store, whose second judge grades every run twice."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from tests.collect_support import bedside
from toolkit.analysis.agreement import AgreementOptions, judge_agreement
from toolkit.analysis.judge_noise import NoiseOptions, gaps, judge_noise, noise_by_run, noise_sd, rater_means
from toolkit.scoring import case_scores, pass_scores
from toolkit.selection import JudgeSelection, read_runs
from toolkit.store import Store


def frame(scores: np.ndarray, sizes: dict[str, int], run: str = "r") -> pl.DataFrame:
    """Long rows of a (raters x cases) array whose columns are benchmarks of ``sizes`` laid end to end."""
    names = [b for b, n in sizes.items() for _ in range(n)]
    return pl.DataFrame([{"run_id": run, "rater": f"j#{r + 1}", "benchmark": names[c], "case_id": f"c{c}",
                          "score": float(scores[r, c])} for r in range(scores.shape[0]) for c in range(scores.shape[1])])


def test_by_hand() -> None:
    # benchmark x: cases (1.0, 0.5 | 0.5, 0.5); benchmark y: one case (0.0, 1.0)
    scores = np.array([[1.0, 0.5, 0.0], [0.5, 0.5, 1.0]])
    # w per case: (0.5^2)/2 = 0.125, 0, 0.5; sigma2_x = 0.0625 over m_x = 2, sigma2_y = 0.5 over m_y = 1
    expected = math.sqrt(0.0625 / 2 + 0.5 / 1) / 2
    row = noise_by_run(frame(scores, {"x": 2, "y": 1})).row(0, named=True)
    assert row["noise_sd"] == pytest.approx(expected, rel=1e-12)
    assert (row["raters"], row["cases"], row["benchmarks"]) == (2, 3, 2)
    assert row["within_sd"] == pytest.approx(math.sqrt((0.125 + 0 + 0.5) / 3), rel=1e-12)
    assert noise_sd(scores, {"x": 2, "y": 1}) == pytest.approx(expected, rel=1e-12)
    means = rater_means(frame(scores, {"x": 2, "y": 1}))
    assert means["overall"].to_list() == pytest.approx([(0.75 + 0.0) / 2, (0.5 + 1.0) / 2])


def test_the_predicted_spread_is_the_spread_of_macro_means_over_many_raters() -> None:
    rng = np.random.default_rng(11)
    sizes = {"a": 12, "b": 30, "c": 8}
    tau = np.repeat([0.05, 0.12, 0.2], list(sizes.values()))  # judge noise sd of each benchmark's cases
    truth = rng.uniform(0.2, 0.9, tau.size)
    raters = truth + rng.normal(0.0, 1.0, (2000, tau.size)) * tau
    stops = np.cumsum(list(sizes.values()))
    macro = np.mean([raters[:, s - n:s].mean(axis=1) for s, n in zip(stops, sizes.values())], axis=0)
    exact = math.sqrt(sum(t ** 2 / n for t, n in zip((0.05, 0.12, 0.2), sizes.values()))) / 3
    assert macro.std(ddof=1) == pytest.approx(exact, rel=0.05)
    # estimated from two raters at a time: unbiased in variance, so the mean of the estimates' squares is exact
    estimates = [noise_sd(raters[i:i + 2], sizes) ** 2 for i in range(0, 2000, 2)]
    assert math.sqrt(np.mean(estimates)) == pytest.approx(exact, rel=0.05)
    assert noise_sd(raters[:200], sizes) == pytest.approx(exact, rel=0.1)


def test_gaps_against_the_noise_band() -> None:
    runs = pl.DataFrame({"run_id": ["a", "b", "c"], "overall": [0.8, 0.75, 0.5], "noise_sd": [0.03, 0.04, 0.0]})
    out = gaps(runs)
    first = out.row(0, named=True)
    assert (first["run_a"], first["run_b"]) == ("a", "b")
    assert first["noise_sd"] == pytest.approx(0.05) and first["ratio"] == pytest.approx(1.0)
    assert first["within_noise"] and not out.row(1, named=True)["within_noise"]
    assert out.filter(pl.col("run_a") == "b")["noise_band"][0] == pytest.approx(1.959963984540054 * 0.04)


def test_on_the_demo_store(demo_store: Path) -> None:
    store = Store.open(demo_store)
    data = read_runs(store, store.run_ids(), texts=False)
    passes = judge_noise(data, NoiseOptions(judge="sim/judge-noisy"))
    assert passes.runs["raters"].to_list() == [2] * 4 and passes.runs["cases"].to_list() == [30] * 4
    assert (passes.runs["noise_sd"] > 0).all() and passes.skipped == []
    board = passes.runs["run_id"].to_list()
    assert board == ["sim/strong", "sim/medium", "sim/skill-0.45", "sim/weak"]  # leaderboard order
    judges = judge_noise(data, NoiseOptions(passes=(1,)))  # sim/judge#1 against sim/judge-noisy#1
    assert judges.runs["overall"].to_list() == passes.runs["overall"].to_list()  # gaps from the primary judge
    assert set(judges.by_rater["rater"].to_list()) == {"sim/judge#1", "sim/judge-noisy#1"}
    # one rater's macro mean: the primary judge alone gives the leaderboard's
    primary = judges.by_rater.filter(pl.col("rater") == "sim/judge#1").sort("run_id")
    assert primary["overall"].to_list() == pytest.approx(judges.runs.sort("run_id")["overall"].to_list())
    with pytest.raises(ValueError, match="no selected run has two or more judge passes or judges"):
        judge_noise(data, NoiseOptions(judge="sim/judge"))
    other = judge_noise(data, NoiseOptions(judge="sim/judge-noisy", selection=JudgeSelection(judge="sim/judge-noisy")))
    assert other.runs["overall"].to_list() != passes.runs["overall"].to_list()


def test_the_demo_scores_from_its_primary_judge_and_gives_agreement_something_real(demo_store: Path) -> None:
    store = Store.open(demo_store)
    data = read_runs(store, store.run_ids(), texts=False)
    assert set(data.runs["judge_model"].to_list()) == {"sim/judge"}
    # the leaderboard's means are those of sim/judge's decisions alone, the second judge's left out by hand
    alone = case_scores(pass_scores(data.decisions.filter(pl.col("judge_model") == "sim/judge"), data.rubric_items))
    by_hand = dict(alone.group_by("run_id", "benchmark").agg(pl.col("score").mean())
                   .group_by("run_id").agg(pl.col("score").mean()).iter_rows())
    noise = judge_noise(data, NoiseOptions(judge="sim/judge-noisy"))
    assert dict(noise.runs.select("run_id", "overall").iter_rows()) == pytest.approx(by_hand, rel=1e-12)
    # `bedside agreement --run sim/strong` on the demo store: three raters and the API's coefficients
    code, out, err = bedside("agreement", "--run", "sim/strong", "--store", demo_store, "--section", "summary",
                             "--format", "csv")
    assert code == 0, err
    shown = pl.read_csv(out.encode()).row(0, named=True)
    want = judge_agreement(data, AgreementOptions()).summary.filter(pl.col("run_id") == "sim/strong").row(0, named=True)
    assert shown["raters"] == 3 and shown["rater_labels"] == "sim/judge#1, sim/judge-noisy#1, sim/judge-noisy#2"
    assert 0.5 < shown["fleiss_kappa"] < 1 and shown["fleiss_kappa"] == pytest.approx(want["fleiss_kappa"], rel=1e-9)
