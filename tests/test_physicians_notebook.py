"""notebooks/08-judge-vs-physicians.ipynb on the demo store: the judge's accuracy per item class, the
corrected scores, rates and label plan it shows are ``bs.calibrate``'s for the same labels. The demo store
of this branch has no physician labels, so the notebook's stand-in physician labels 24 cases of each run."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.notebook_support import ExecutedNotebook, executed

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

    assert "labels from a simulated stand-in" in shown.text("labels")  # this branch's demo store has none
    rows = shown.table("corrected")
    assert {r["run_id"] for r in rows} == set(bs.Store.open(demo_store).run_ids())
    for row in rows:
        assert int(row["labelled_cases"]) == 24 and row["ci_note"] == "null"
        assert float(row["ci_low"]) < float(row["mean"]) < float(row["ci_high"])
    assert len(shown.table("differences")) == 6  # every pair of the four runs
    assert shown.table("plan") and "note: corrected = PPI++" in shown.text("plan")
    assert {r["harm"] for r in shown.table("rates")} >= {"severe omission rate = 1 - rate", "null"}


def test_without_double_grading_it_says_there_is_no_ceiling(shown: ExecutedNotebook) -> None:
    assert "no item was labelled by two physicians" in shown.text("ceiling")


def test_the_words_say_when_intervals_are_withheld(shown: ExecutedNotebook) -> None:
    words = " ".join(" ".join(shown.markdown()).split())
    assert "fewer than 10 labelled cases" in words and "random sample" in words
