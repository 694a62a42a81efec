"""What the notebooks 03 (items and harms), 05 (judge reliability) and 06 (planning) show on the demo
store, checked against the API computed here: the same items, agreement coefficients, judge-noise figures,
cases needed and costs, and their figures drawn. Runs on a real kernel (tests/notebook_support.py)."""

from __future__ import annotations

import re
from pathlib import Path

import polars as pl
import pytest

import toolkit as bs
from tests.notebook_support import executed
from toolkit.analysis.planning import cases_needed

ITEMS, JUDGES, PLANNING = "03-items-and-harms.ipynb", "05-judge-reliability.ipynb", "06-planning.ipynb"


def num(cell: str) -> float:
    return float(cell)


def close(shown: str, value: float) -> bool:
    """A float as a polars frame displays it (six significant digits or so) against the API's value."""
    return num(shown) == pytest.approx(value, rel=1e-5, abs=1e-6)


@pytest.fixture(scope="module")
def data(demo_store: Path):
    store = bs.Store.open(demo_store)
    return bs.read_runs(store, store.run_ids(), texts=True)


def test_items_notebook_shows_the_most_missed_and_endorsed_items_and_the_answers(demo_store: Path, data) -> None:
    shown = executed(ITEMS, demo_store)
    items = bs.analyse_items(data, bs.ItemOptions(top=10))
    missed = shown.table("missed")
    assert [r["item_id"] for r in missed] == items.missed["item_id"].to_list()
    assert all(close(r["miss_rate"], v) for r, v in zip(missed, items.missed["miss_rate"].to_list()))
    top = items.missed.row(0, named=True)
    text = shown.text("missed-text")
    assert f"item {top['item_id']} " in text and top["text"] in text and top["case_id"] in text
    assert f"missed by {top['miss_rate']:.0%} of {top['n_runs']} runs" in text
    assert [r["item_id"] for r in shown.table("endorsed")] == items.endorsed["item_id"].to_list()
    assert shown.has_png("fig-items") and shown.pngs("fig-harms") == 2

    harm = bs.harms(data).filter(pl.col("scope") == "both")
    rows = shown.table("harms")
    assert {r["run_id"] for r in rows} == set(data.runs["run_id"].to_list())
    for row in rows:
        for metric in ("precision", "recall", "severe_omission_case_rate"):
            value = harm.filter(pl.col("run_id") == row["run_id"], pl.col("metric") == metric)["value"][0]
            assert close(row[metric], value), (row["run_id"], metric)

    # the cases behind the top items: their prompts, and which runs matched them
    endorsed = items.endorsed.row(0, named=True)
    prompts = dict(data.cases.select("case_id", "prompt").iter_rows())
    cases_text = shown.text("cases")
    assert prompts[top["case_id"]].splitlines()[0] in cases_text
    assert prompts[endorsed["case_id"]].splitlines()[0] in cases_text
    behind = shown.table("cases")
    expected = items.item_runs.filter(pl.col("item_id") == endorsed["item_id"])
    got = {r["run_id"]: num(r["matched"]) for r in behind if r["kind"] == "endorsed"}
    assert got == dict(expected.select("run_id", "matched").iter_rows())

    # side by side: the best and the worst run's whole answers to the top missed item's case
    board = bs.compare(bs.Store.open(demo_store), data.runs["run_id"].to_list()).leaderboard["run_id"].to_list()
    side = shown.text("side-by-side")
    answers = data.answers.filter(pl.col("case_id") == top["case_id"], pl.col("error").is_null())
    for run_id in (board[0], board[-1]):
        assert f"{run_id}: case {top['case_id']}, score " in side
        mine = answers.filter(pl.col("run_id") == run_id)
        first = mine.filter(pl.col("sample") == mine["sample"].min()).sort("attempt")  # the first sample's latest
        assert first["answer"][-1] in side
        if mine["sample"].n_unique() > 1:  # the demo asks three times: which answer it shows is said
            assert f"(answer sample {first['sample'][0]}, one of {mine['sample'].n_unique()}; " in side
    assert side.index(f"{board[0]}: case") < side.index(f"{board[-1]}: case")


def test_reliability_notebook_shows_the_apis_agreement_and_judge_noise(demo_store: Path, data) -> None:
    shown = executed(JUDGES, demo_store)
    assert "passes of sim/judge-noisy" in shown.text("passes")
    passes = bs.judge_agreement(data, bs.AgreementOptions(judge="sim/judge-noisy")).summary
    rows = shown.table("passes")
    assert [r["run_id"] for r in rows] == passes["run_id"].to_list()
    for row, want in zip(rows, passes.iter_rows(named=True)):
        assert close(row["percent_agreement"], want["percent_agreement"])
        assert close(row["cohen_kappa"], want["cohen_kappa"]) and close(row["krippendorff_alpha"], want["krippendorff_alpha"])
    across = bs.judge_agreement(data, bs.AgreementOptions(passes=(1,))).pairs
    pairs = shown.tables("judges")[0]
    assert [(r["rater_a"], r["rater_b"]) for r in pairs] == [("sim/judge#1", "sim/judge-noisy#1")] * 4
    assert all(close(r["cohen_kappa"], k) for r, k in zip(pairs, across["cohen_kappa"].to_list()))
    assert shown.has_png("fig-agreement") and shown.has_png("fig-noise")

    noise = bs.judge_noise(data, bs.NoiseOptions(judge="sim/judge-noisy"))
    runs, gaps = shown.tables("noise-passes")
    assert [r["run_id"] for r in runs] == noise.runs["run_id"].to_list()
    assert all(close(r["noise_sd"], v) for r, v in zip(runs, noise.runs["noise_sd"].to_list()))
    assert [(r["run_a"], r["run_b"], r["within_noise"]) for r in gaps] == \
        [(a, b, str(w).lower()) for a, b, w in noise.pairs.select("run_a", "run_b", "within_noise").iter_rows()]
    assert all(close(r["noise_band"], v) for r, v in zip(gaps, noise.pairs["noise_band"].to_list()))
    judges = bs.judge_noise(data, bs.NoiseOptions(passes=(1,)))
    assert all(close(r["noise_sd"], v) for r, v in zip(shown.tables("noise-judges")[0], judges.runs["noise_sd"].to_list()))
    closest = noise.pairs.filter(pl.col("run_a") == "sim/skill-0.45", pl.col("run_b") == "sim/weak").row(0, named=True)
    assert (f"pass to pass: the closest adjacent gap, sim/skill-0.45 − sim/weak = {closest['gap']:.3f}, is "
            f"{closest['ratio']:.1f} judge-noise sds; judge noise alone could not explain it") in shown.text("fig-noise")


def test_planning_notebook_states_the_apis_cases_and_the_dry_runs_cost(demo_store: Path, data) -> None:
    shown = executed(PLANNING, demo_store)
    board = bs.compare(bs.Store.open(demo_store), data.runs["run_id"].to_list()).leaderboard
    overall = dict(board.select("run_id", "overall").iter_rows())
    order = board["run_id"].to_list()
    run_a, run_b = min(zip(order, order[1:]), key=lambda p: overall[p[0]] - overall[p[1]])
    assert f"planning {run_a} against {run_b}" in shown.text("setup")
    plan = bs.plan_power(bs.per_case(data), run_a, run_b, differences=(0.02, 0.05, 0.10))
    needed = shown.table("needed")
    assert [int(r["cases_per_benchmark"]) for r in needed] == plan.needed["cases_per_benchmark"].to_list()
    n = plan.needed.filter(pl.col("difference") == 0.05)["cases_per_benchmark"][0]
    assert n == cases_needed(plan.sd_diff, 0.05)
    assert (f"to detect a true difference of 0.05 between {run_a} and {run_b} with 80% power: {n} cases per "
            f"benchmark, {10 * n} in all") in shown.text("needed")
    assert f"the smallest difference found 80% of the time is {plan.current['detectable']:.3f}" in shown.text("current")
    variance = shown.table("variance")
    assert all(close(r["sd_diff"], v) for r, v in zip(variance, plan.variance["sd_diff"].to_list()))
    assert shown.has_png("fig-power")

    # more judge passes instead of more cases: the plan for scores averaging k passes of the noisy judge
    from toolkit.analysis import rater_scores, within_for_pair, within_variance

    within = within_for_pair(within_variance(rater_scores(data, judge="sim/judge-noisy")), run_a, run_b)
    scored = bs.per_case(data, bs.JudgeSelection(judge="sim/judge-noisy"))
    want = [bs.plan_power(scored, run_a, run_b, differences=(0.05,), within=within, repeats_now=2,
                          repeats=k).needed["cases_per_benchmark"][0] for k in (1, 2, 4, 8)]
    assert [int(r["cases_per_benchmark"]) for r in shown.table("repeats")] == want
    assert want == sorted(want, reverse=True) and "scored by sim/judge-noisy" in shown.text("repeats")

    cost = shown.text("cost")
    assert "no call is made and nothing is written" in cost
    total = float(re.search(r"^total: ~\$([0-9.,]+) ", cost, re.MULTILINE).group(1).replace(",", ""))
    rows = shown.table("cost-plan")
    per_case = [num(r["cost_per_run_usd"]) / int(r["cases"]) for r in rows]
    assert max(per_case) == pytest.approx(min(per_case), rel=1e-5)  # one price per case, scaled
    assert abs(per_case[0] * 30 - total) <= 0.005  # the dry run priced the sample's 30 cases
    assert [int(r["cases"]) for r in rows] == plan.needed["cases"].to_list()
