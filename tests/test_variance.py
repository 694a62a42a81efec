"""The variance budget against independent computations: worst-at-k and pass^k by brute force over every
k-subset of a case's answers, the components by the classical nested-ANOVA mean squares, and designs that
cannot separate a component (K = 1, J = 1) or are unbalanced."""

from __future__ import annotations

import math
from itertools import combinations

import numpy as np
import polars as pl
import pytest

from tests.variance_sim import frame
from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.variance import VarianceOptions, variance_budget
from toolkit.summary import benchmark_means, macro_mean

FAST = VarianceOptions(resamples=ResampleSettings(samples=200, seed=3))


def _scores(seed: int, cases: int, answers: int, passes: int, benchmarks: int = 3) -> np.ndarray:
    """(1, B, n, K, J) scores in [0, 1] with ties and exact 0s and 1s, as rubric scores have."""
    rng = np.random.default_rng(seed)
    raw = rng.integers(0, 5, (1, benchmarks, cases, answers, passes)) / 4.0
    return np.where(rng.random(raw.shape) < 0.2, rng.random(raw.shape), raw)


def _answer_scores(scores: np.ndarray) -> dict[str, list[list[float]]]:
    """Benchmark -> per case, its answers' scores (mean over passes), from the frame, as plain floats."""
    f = frame(scores)
    per_answer = f.group_by("benchmark", "case_id", "sample").agg(pl.col("score").mean()).sort(
        "benchmark", "case_id", "sample")
    out: dict[str, list[list[float]]] = {}
    for (benchmark, _), rows in per_answer.group_by("benchmark", "case_id", maintain_order=True):
        out.setdefault(benchmark, []).append(rows["score"].to_list())
    return out


def _overall(budget, table: str) -> dict[int, float]:
    rows = getattr(budget, table).filter(pl.col("benchmark") == "overall")
    return dict(zip(rows["k"].to_list(), rows["value"].to_list()))


def test_worst_at_k_is_the_mean_minimum_over_every_k_subset() -> None:
    scores = _scores(1, cases=7, answers=5, passes=2)
    budget = variance_budget(frame(scores), FAST)
    answers = _answer_scores(scores)
    for k in range(1, 6):
        per_benchmark = {b: [float(np.mean([min(s) for s in combinations(case, k)])) for case in cases]
                         for b, cases in answers.items()}
        brute = {b: float(np.mean(v)) for b, v in per_benchmark.items()}
        got = budget.worst_at_k.filter(pl.col("k") == k)
        for benchmark, value in zip(got["benchmark"].to_list(), got["value"].to_list()):
            expected = float(np.mean(list(brute.values()))) if benchmark == "overall" else brute[benchmark]
            assert abs(value - expected) <= 1e-12, (k, benchmark)
    # k = 1 is the run mean, as the protocol computes it (case score = mean over answers and passes)
    case_scores = {b: [float(np.mean(c)) for c in cases] for b, cases in answers.items()}
    means = benchmark_means(case_scores)
    assert abs(_overall(budget, "worst_at_k")[1] - macro_mean([m for _, m in means.values()])) <= 1e-12
    worst = _overall(budget, "worst_at_k")
    assert all(worst[k + 1] <= worst[k] + 1e-15 for k in range(1, 5))


@pytest.mark.parametrize("points, f1", [(1.0, 1.0), (0.75, 0.5)])
def test_pass_k_is_the_share_of_k_subsets_that_all_pass(points: float, f1: float) -> None:
    scores = _scores(2, cases=6, answers=4, passes=3, benchmarks=10)
    options = VarianceOptions(resamples=ResampleSettings(samples=200, seed=3), points_threshold=points, f1_threshold=f1)
    budget = variance_budget(frame(scores), options)
    answers = _answer_scores(scores)
    for k in range(1, 5):
        brute = {}
        for benchmark, cases in answers.items():
            threshold = f1 if benchmark.startswith("safety_") else points
            brute[benchmark] = float(np.mean([np.mean([all(s >= threshold - 1e-12 for s in subset)
                                                        for subset in combinations(case, k)]) for case in cases]))
        got = budget.pass_k.filter(pl.col("k") == k)
        for benchmark, value, threshold in got.select("benchmark", "value", "threshold").rows():
            expected = float(np.mean(list(brute.values()))) if benchmark == "overall" else brute[benchmark]
            assert abs(value - expected) <= 1e-12, (k, benchmark)
            if benchmark != "overall":
                assert threshold == (f1 if benchmark.startswith("safety_") else points)
            else:  # two thresholds in one macro: none to name
                assert threshold is None or points == f1


def test_components_are_the_nested_anova_mean_squares() -> None:
    scores = _scores(3, cases=9, answers=3, passes=4, benchmarks=2)
    budget = variance_budget(frame(scores), FAST)
    n, answers, passes = 9, 3, 4
    expected = {}
    for b in range(2):
        y = scores[0, b]
        grand, case, answer = y.mean(), y.mean(axis=(1, 2)), y.mean(axis=2)
        ms_case = answers * passes * ((case - grand) ** 2).sum() / (n - 1)
        ms_answer = passes * ((answer - case[:, None]) ** 2).sum() / (n * (answers - 1))
        ms_pass = ((y - answer[..., None]) ** 2).sum() / (n * answers * (passes - 1))
        expected[b] = {"judge": ms_pass, "answer": (ms_answer - ms_pass) / passes,
                       "case": (ms_case - ms_answer) / (answers * passes)}
    rows = budget.components
    for b, name in enumerate(("drug_safety", "guideline_adherence")):
        for component, value in expected[b].items():
            got = rows.filter((pl.col("benchmark") == name) & (pl.col("component") == component))["variance"][0]
            assert abs(got - value) <= 1e-12, (name, component)
    for component in ("case", "answer", "judge"):
        got = rows.filter((pl.col("benchmark") == "overall") & (pl.col("component") == component))["variance"][0]
        assert abs(got - (expected[0][component] + expected[1][component]) / 2) <= 1e-12
    shares = budget.sections()["shares"].filter(pl.col("benchmark") == "overall")["share"]
    assert abs(shares.sum() - 1.0) <= 1e-12
    # the variance of the run mean the shares divide is the case scores' own: var(S_c) / n per benchmark
    record = budget.records()[-1]
    assert record["answers_per_case"] == answers and record["passes_per_answer"] == passes
    assert record["var_case"] == pytest.approx((expected[0]["case"] + expected[1]["case"]) / 2, abs=1e-12)


def test_one_answer_per_case_leaves_the_answer_component_null_with_the_reason() -> None:
    budget = variance_budget(frame(_scores(4, cases=30, answers=1, passes=2, benchmarks=1)), FAST)
    rows = {r["component"]: r for r in budget.components.filter(pl.col("benchmark") == "overall").to_dicts()}
    assert rows["answer"]["variance"] is None and "K = 1" in rows["answer"]["ci_note"]
    assert rows["case"]["variance"] is None  # not a case variance: the answers' spread is inside it
    assert rows["case+answer"]["variance"] is not None and rows["judge"]["variance"] is not None
    assert any("answer component cannot be estimated" in note for note in budget.notes)
    record = budget.records()[-1]
    assert record["var_answer"] is None and record["var_case"] is None and record["var_judge"] is not None
    same = budget.intervals.filter(pl.col("kind") == "same_cases").row(0, named=True)
    assert same["ci_low"] is None and "K = 1" in same["note"]
    single = variance_budget(frame(_scores(4, cases=30, answers=1, passes=1, benchmarks=1)), FAST)
    names = single.components.filter(pl.col("variance").is_not_null())["component"].unique().to_list()
    assert names == ["case+answer+judge"]


def test_an_unbalanced_run_is_refused_naming_a_case() -> None:
    whole = frame(_scores(5, cases=12, answers=3, passes=2, benchmarks=2))
    short = whole.filter(~((pl.col("case_id") == "4") & (pl.col("sample") == 2)))
    with pytest.raises(ValueError, match=r"run 0 is unbalanced: case 4 has 2 answer sample\(s\)"):
        variance_budget(short, FAST)
    with pytest.raises(ValueError, match="appears twice"):
        variance_budget(pl.concat([whole, whole.head(1)]), FAST)
    with pytest.raises(ValueError, match="not finite"):
        variance_budget(whole.with_columns(score=pl.when(pl.col("case_id") == "3").then(math.nan)
                                           .otherwise(pl.col("score"))), FAST)


def test_few_cases_give_estimates_without_intervals() -> None:
    budget = variance_budget(frame(_scores(6, cases=5, answers=3, passes=2, benchmarks=2)), FAST)
    assert budget.components["ci_low"].null_count() == budget.components.height
    assert budget.worst_at_k["ci_low"].null_count() == budget.worst_at_k.height
    assert set(budget.intervals["ci_low"].to_list()) == {None}
    assert budget.components["variance"].null_count() == 0


def test_the_command_reads_a_real_store_and_says_what_it_cannot_estimate(store, sample_dataset) -> None:
    import json

    from tests.analysis_sim import write_run
    from tests.test_cli_process import bedside_process

    write_run(store, sample_dataset, "two-passes", 0.5, 1, passes=2)
    args = ["--store", str(store.root), "--samples", "200"]
    done = bedside_process(["variance", "--run", "two-passes", "--format", "json", *args])
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    assert {"notes", "design", "components", "shares", "intervals", "worst_at_k", "pass_k"} <= set(out)
    overall = {r["component"]: r for r in out["components"] if r["benchmark"] == "overall"}
    assert overall["answer"]["variance"] is None and "K = 1" in overall["answer"]["ci_note"]
    assert overall["judge"]["variance"] is not None
    assert any("(K = 1)" in note for note in out["notes"])
    # k = 1 over the stored pass scores is the run's mean as `summary` gives it
    summary = json.loads(bedside_process(["summary", "--run", "two-passes", "--json", "--store", str(store.root)]
                                         ).stdout)["two-passes"]
    worst = [r for r in out["worst_at_k"] if r["benchmark"] == "overall" and r["k"] == 1][0]
    assert abs(worst["value"] - summary["overall_macro_mean"]) <= 1e-12
    bad = bedside_process(["variance", "--run", "two-passes", "--f1-threshold", "1.5", *args])
    assert bad.returncode == 1 and bad.stdout == "" and bad.stderr.count("\n") == 1 and "--f1-threshold" in bad.stderr


def test_a_run_without_scores_under_the_selection_is_named_not_dropped(store, sample_dataset) -> None:
    from tests.analysis_sim import write_run
    from toolkit.analysis.variance import variance_components
    from toolkit.selection import JudgeSelection

    write_run(store, sample_dataset, "two", 0.5, 1, passes=2)
    write_run(store, sample_dataset, "one", 0.2, 2, passes=1)
    options = VarianceOptions(resamples=ResampleSettings(samples=100), selection=JudgeSelection(passes=(2,)))
    budget = variance_components(store, ["two", "one"], options)
    assert budget.design["run_id"].unique().to_list() == ["two"]
    assert "run one has no scored answer under this judge selection: left out" in budget.notes
    with pytest.raises(ValueError, match="no selected run has a scored answer"):
        variance_components(store, ["one"], options)


def test_a_statistic_that_never_varies_between_cases_gets_no_zero_width_interval() -> None:
    # 30 cases of one benchmark that never reach a perfect score: pass^k is 0 in every resample, but a true rate
    # of a few percent is as consistent with these cases; "[0, 0]" would claim what they cannot show.
    scores = _scores(8, cases=30, answers=3, passes=2, benchmarks=2)
    scores[0, 0] = np.minimum(scores[0, 0], 0.9)
    budget = variance_budget(frame(scores), FAST)
    flat = budget.pass_k.filter(pl.col("benchmark") == "drug_safety")
    assert flat["value"].to_list() == [0.0] * 3
    assert flat["ci_low"].null_count() == flat["ci_high"].null_count() == 3
    assert all("no variation between cases" in note for note in flat["ci_note"].to_list())
    varied = budget.pass_k.filter((pl.col("benchmark") == "overall") & (pl.col("k") == 1))
    assert varied["value"][0] > 0 and varied["ci_high"][0] > varied["ci_low"][0]
    # Every score alike: no interval for the components or the run mean either.
    same = variance_budget(frame(np.full((1, 2, 30, 3, 2), 0.5)), FAST)
    assert same.components["ci_low"].null_count() == same.components.height
    cases = same.intervals.filter(pl.col("kind") == "cases")
    assert cases["ci_low"].to_list() == [None] and "no variation between cases" in cases["note"][0]


def test_the_command_says_worst_at_k_and_pass_k_depend_on_the_judge_passes(store, sample_dataset) -> None:
    """An answer's score is the mean of its J judge passes, so worst-at-k and pass^k change with J: the output
    names J for every run beside them."""
    from tests.analysis_sim import write_run
    from tests.test_cli_process import bedside_process

    write_run(store, sample_dataset, "two", 0.5, 1, passes=2)
    write_run(store, sample_dataset, "one", 0.2, 2)
    done = bedside_process(["variance", "--run", "two", "--run", "one", "--samples", "200",
                            "--store", str(store.root)])
    assert done.returncode == 0, done.stderr
    said = [line for line in done.stderr.splitlines() if "worst_at_k and pass_k" in line]
    assert len(said) == 1, done.stderr
    assert "J = 2 (two), 1 (one)" in said[0] and "depend on J" in said[0]
