"""notebooks/08-judge-vs-physicians.ipynb on the demo store: the judge's accuracy per item class, the
corrected scores, rates and label plan it shows are ``bs.calibrate``'s for the store's labels (the demo's
simulated physician); a store without labels stops it with one line that says they are needed."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from tests.notebook_support import ExecutedNotebook, executed, run_notebook

NAME = "08-judge-vs-physicians.ipynb"


@pytest.fixture(scope="module")
def shown(demo_store: Path) -> ExecutedNotebook:
    return executed(NAME, demo_store)


def test_the_noisy_judge_is_checked_against_the_labels(shown: ExecutedNotebook) -> None:
    assert "judge checked: sim/judge-noisy" in shown.text("accuracy")
    rows = shown.table("accuracy")
    assert rows[0]["item_class"] == "all items" and int(rows[0]["items"]) > 100
    assert 0 < float(rows[0]["kappa"]) < 1  # the noisy judge errs: neither chance nor perfect


def test_corrected_scores_with_intervals_and_the_plan(shown: ExecutedNotebook, demo_store: Path) -> None:
    import toolkit as bs
    from toolkit.selection import JudgeSelection

    store = bs.Store.open(demo_store)
    rows = shown.table("corrected")
    assert {r["run_id"] for r in rows} == set(store.run_ids())
    assert "labels from the store" in shown.text("labels")  # the demo's simulated physician labelled cases
    check = bs.calibrate(store, store.run_ids(), options=bs.PhysicianOptions(
        selection=JudgeSelection(judge="sim/judge-noisy")))
    want = {r["run_id"]: r for r in check.corrected.filter(pl.col("benchmark") == "overall").iter_rows(named=True)}
    for row in rows:
        expected = want[row["run_id"]]
        assert float(row["mean"]) == pytest.approx(expected["mean"], abs=2e-6)
        assert int(row["labelled_cases"]) == expected["labelled_cases"]
        assert (row["ci_low"] == "null") == (expected["ci_low"] is None)
    assert len(shown.table("differences")) == 6  # every pair of the four runs
    assert shown.table("plan") and "note: corrected = PPI++" in shown.text("plan")
    assert {r["harm"] for r in shown.table("rates")} >= {"severe omission rate = 1 - rate", "null"}


def test_without_double_grading_it_says_there_is_no_ceiling(shown: ExecutedNotebook) -> None:
    assert "no item was labelled by two physicians" in shown.text("ceiling")


def test_the_words_say_when_intervals_are_withheld(shown: ExecutedNotebook) -> None:
    words = " ".join(" ".join(shown.markdown()).split())
    assert "fewer than 10 labelled cases" in words and "random sample" in words


def test_a_store_without_labels_gets_the_message_not_numbers(tmp_path: Path) -> None:
    """No stand-in physician: labels made up by the simulator's rule would give numbers that mean nothing
    about a real judge, so the notebook stops at the labels cell and says labels are needed."""
    from tests.analysis_sim import write_run
    from toolkit.dataset import load_dataset
    from toolkit.store import Store

    root = tmp_path / "store"
    store, dataset = Store.open(root), load_dataset()
    for i, run_id in enumerate(("sim/strong", "sim/weak")):
        write_run(store, dataset, run_id, skill=0.8 - 0.8 * i, seed=i, created=i)
    with pytest.raises(AssertionError) as stopped:
        run_notebook(NAME, root)
    line = str(stopped.value)
    assert line.startswith(f"{NAME}: cell 3 (try:) failed: RuntimeError: no physician labels in {root}"), line
    assert "`bedside labels import`" in line and "the demo store" in line
