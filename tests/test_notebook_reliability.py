"""notebooks/07-reliability-and-cost.ipynb on the demo store shows the API's variance split, worst-at-k
and pass^k (with the figure), the runs' costs, and a planned design that is the cheapest of the alternatives
it lists; on runs with one answer per case it says what to collect instead of planning."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

import toolkit as bs
from tests.notebook_support import ExecutedNotebook, executed, run_notebook
from toolkit.analysis.costs import run_costs
from toolkit.prices import load_prices

NAME = "07-reliability-and-cost.ipynb"


def close(shown: str, value: float) -> bool:
    """A float as a polars frame displays it (six significant digits or so) against the API's value."""
    return float(shown) == pytest.approx(value, rel=1e-5, abs=1e-6)


@pytest.fixture(scope="module")
def shown(demo_store: Path) -> ExecutedNotebook:
    return executed(NAME, demo_store)


@pytest.fixture(scope="module")
def budget(demo_store: Path) -> bs.VarianceBudget:
    store = bs.Store.open(demo_store)
    return bs.variance_components(store, store.run_ids())


def test_the_split_is_the_apis_with_answers_inside_it(shown: ExecutedNotebook, budget) -> None:
    rows = shown.table("split")
    expected = budget.components.filter(pl.col("benchmark") == "overall", pl.col("variance").is_not_null())
    assert sorted((r["run_id"], r["component"]) for r in rows) == sorted(
        expected.select("run_id", "component").iter_rows())
    for row in rows:
        want = expected.filter(pl.col("run_id") == row["run_id"], pl.col("component") == row["component"]).row(
            0, named=True)
        assert close(row["variance"], want["variance"]) and close(row["share"], want["share"])
    # the demo asks each model three times with a spread: the answers' part is a real share of every run
    assert all(float(r["share"]) > 0.05 for r in rows if r["component"] == "answer+judge")


def test_a_judge_with_two_passes_splits_all_three_parts(shown: ExecutedNotebook) -> None:
    assert "scored by sim/judge-noisy, all its passes" in shown.text("split-passes")
    rows = shown.table("split-passes")
    assert {r["component"] for r in rows} == {"case", "answer", "judge"}
    assert len(rows) == 3 * 4


def test_the_intervals_say_what_they_include(shown: ExecutedNotebook) -> None:
    words = "\n".join(shown.markdown())
    assert "**includes** answer and judge variance" in words
    assert "cases only" not in words and "not answer or judge" not in words
    assert {r["kind"] for r in shown.table("intervals")} == {"cases", "same_cases"}


def test_worst_at_k_is_the_apis_and_drawn(shown: ExecutedNotebook, budget) -> None:
    rows = shown.table("worst-at-k")
    overall = budget.worst_at_k.filter(pl.col("benchmark") == "overall")
    assert len(rows) == 4 and set(rows[0]) == {"run_id", "worst_at_1", "worst_at_2", "worst_at_3"}
    for row in rows:
        for k in (1, 2, 3):
            want = overall.filter(pl.col("run_id") == row["run_id"], pl.col("k") == k)["value"][0]
            assert close(row[f"worst_at_{k}"], want)
        assert float(row["worst_at_3"]) < float(row["worst_at_1"])  # the demo's answers to a case differ
    assert shown.pngs("fig-worst-at-k") == 1
    passes = shown.table("pass-k")
    assert len(passes) == 4 and set(passes[0]) == {"run_id", "pass^1", "pass^2", "pass^3"}


def test_costs_are_the_runs_tokens_at_the_price_table(shown: ExecutedNotebook, demo_store: Path) -> None:
    store = bs.Store.open(demo_store)
    costs = run_costs(bs.read_runs(store, store.run_ids(), texts=False), load_prices(None))
    rows = {r["run_id"]: r for r in shown.table("costs")}
    for row in costs.iter_rows(named=True):
        assert int(rows[row["run_id"]]["tokens"]) == row["tokens"] and rows[row["run_id"]]["cost"] == row["cost"]
        assert row["answer_calls"] == 30 * 3  # three answers to each of the sample's 30 cases


def test_the_plan_is_the_cheapest_alternative_it_lists(shown: ExecutedNotebook) -> None:
    text = shown.text("plan")
    assert "example prices of gpt-4.1-mini" in text  # the demo's sim models are free: priced as an example
    assert "cheapest design detecting a macro-mean difference of 0.05 with 80% power" in text
    table = shown.table("plan-table")
    assert len(table) == 5 * 3  # answers per case 1..5 x judge passes 1..3
    cheapest = min(table, key=lambda r: float(r["cost_usd"]))
    assert (f"{cheapest['cases_per_benchmark']} cases per benchmark" in text
            and f"${float(cheapest['cost_usd']):,.2f} for both runs" in text)
    assert all(float(r["power"]) >= 0.8 for r in table)
    assert "smallest difference detectable with 80% power" in shown.text("plan-budget")


def test_runs_with_one_answer_per_case_are_told_what_to_collect(tmp_path: Path) -> None:
    from tests.analysis_sim import write_run
    from toolkit.dataset import load_dataset

    store, dataset = bs.Store.open(tmp_path / "store"), load_dataset()
    for i, run_id in enumerate(("sim/strong", "sim/weak")):
        write_run(store, dataset, run_id, skill=0.9 - 0.5 * i, seed=i, created=i)
    shown = run_notebook(NAME, tmp_path / "store")
    assert "--answer-samples 3" in shown.text("plan")
    assert shown.text("plan-table") == "" and shown.pngs("fig-worst-at-k") == 1
