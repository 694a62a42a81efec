"""``bedside calibrate`` as a process, on a real Delta store of simulated runs whose physician labels went in
through ``toolkit.labels.add_labels``, the checks and commit of ``bedside labels import``."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

import toolkit as bs
from tests.analysis_sim import write_run
from tests.test_cli_process import bedside_process

def physician_labels(decisions: pl.DataFrame, seed: int, flip: float = 0.15) -> pl.DataFrame:
    """The judge's pass-1 decisions with some flipped: a physician who disagrees with the judge at ``flip``;
    a second reviewer on the first 60 items and an unsure label."""
    first = decisions.filter(pl.col("judge_pass") == 1).sort("run_id", "case_id", "item_id")
    flips = np.random.default_rng(seed).random(first.height) < flip
    labels = first.select(
        pl.lit(None, pl.String).alias("review_id"), pl.lit("dr-a").alias("reviewer"), "run_id", "case_id",
        pl.lit(0, pl.Int32).alias("sample"), "item_id",
        pl.Series("label", np.where(first["matched"].to_numpy() ^ flips, "met", "not_met")),
        pl.lit(None, pl.String).alias("labelled_at"))
    second = labels.head(60).with_columns(reviewer=pl.lit("dr-b"))
    unsure = labels.slice(60, 1).with_columns(reviewer=pl.lit("dr-b"), label=pl.lit("unsure"))
    return pl.concat([labels, second, unsure])


def store_labels(store: bs.Store, labels: pl.DataFrame) -> pl.DataFrame:
    """``labels`` added to the store as ``bedside labels import`` adds a file's; the stored rows."""
    from toolkit.labels import add_labels, read_labels

    rows = [{**row, "where": f"labels row {i + 1}"} for i, row in enumerate(labels.iter_rows(named=True))]
    add_labels(store, rows, "physician_labels")
    return read_labels(store)


@pytest.fixture(scope="module")
def labelled_store(tmp_path_factory, sample_dataset) -> tuple[Path, Path, pl.DataFrame]:
    root = tmp_path_factory.mktemp("physicians") / "store"
    store = bs.Store.open(root)
    write_run(store, sample_dataset, "strong", 0.8, 1, passes=2)
    write_run(store, sample_dataset, "weak", -0.4, 2)
    write_run(store, sample_dataset, "unlabelled", 0.0, 3)
    decisions = store.read("decisions", ["strong", "weak"])
    labels = store_labels(store, physician_labels(decisions, 4))
    return root, root, labels


def calibrate(args: list[str], _store: Path) -> object:
    return bedside_process(["calibrate", *args])


def test_json_holds_corrected_estimates_under_corrected_with_overall(labelled_store) -> None:
    root, path, labels = labelled_store
    done = calibrate(["--run", "strong", "--run", "weak", "--store", str(root), "--format", "json",
                      "--samples", "500"], path)
    assert done.returncode == 0, done.stderr
    out = json.loads(done.stdout)
    runs = out["corrected"]["runs"]
    overall = {r["run_id"]: r for r in runs if r["benchmark"] == "overall"}
    assert set(overall) == {"strong", "weak"}
    for row in runs:
        assert {"mean", "ci_low", "ci_high", "labelled_cases", "labels", "cases", "judge_mean"} <= set(row)
    for row in overall.values():
        assert row["ci_low"] < row["mean"] < row["ci_high"] and row["labelled_cases"] == 30 == row["cases"]
    # every label of a fully labelled answer counts, the second reviewer's and the unsure one too
    assert sum(r["labels"] for r in overall.values()) == labels.height
    diff = [r for r in out["corrected"]["differences"] if r["benchmark"] == "overall"]
    assert len(diff) == 1 and diff[0]["run_a"] == "strong" and diff[0]["ci_low"] < diff[0]["mean"] < diff[0]["ci_high"]
    assert out["agreement"][0]["item_class"] == "all items" and out["agreement"][0]["unsure"] == 0
    assert out["physician_agreement"][0]["items"] == 60  # the unsure label pairs with nothing
    assert {r["run_id"] for r in out["plan"]} == {"strong", "weak"}
    assert any("PPI++" in n for n in out["notes"])


def test_the_api_gives_the_commands_numbers(labelled_store) -> None:
    root, path, labels = labelled_store
    check = bs.calibrate(bs.Store.open(root), ["strong", "weak"], labels=labels,
                         options=bs.PhysicianOptions(resamples=bs.analysis.ResampleSettings(samples=500)))
    done = calibrate(["--run", "strong", "--run", "weak", "--store", str(root), "--format", "json",
                      "--samples", "500"], path)
    out = json.loads(done.stdout)
    assert out["corrected"]["runs"] == check.corrected.to_dicts()
    assert bs.plan_labels(check).to_dicts() == out["plan"]


def test_the_table_shows_accuracy_corrected_scores_and_notes(labelled_store) -> None:
    root, path, _ = labelled_store
    done = calibrate(["--run", "strong", "--run", "weak", "--store", str(root), "--samples", "500"], path)
    assert done.returncode == 0, done.stderr
    for title in ("judge vs physicians", "physician vs physician", "corrected means", "corrected differences",
                  "Rogan-Gladen", "wrong most often", "halve"):
        assert title in done.stdout, title
    assert "note: corrected = PPI++" in done.stderr


def test_a_run_without_labels_is_one_line_and_a_failure(labelled_store) -> None:
    root, path, _ = labelled_store
    done = calibrate(["--run", "strong", "--run", "unlabelled", "--store", str(root)], path)
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.strip().splitlines() == [
        "bedside: error: calibrate: run 'unlabelled' has no physician labels (make them with `bedside review` and "
        "`bedside labels import`)"]


def test_all_runs_leave_out_the_unlabelled_with_a_note(labelled_store) -> None:
    root, path, _ = labelled_store
    done = calibrate(["--all", "--store", str(root), "--format", "csv", "--section", "corrected", "--samples", "200"],
                     path)
    assert done.returncode == 0, done.stderr
    frame = pl.read_csv(done.stdout.encode())
    assert set(frame["run_id"]) == {"strong", "weak"} and "overall" in frame["benchmark"].to_list()
    assert "note: run unlabelled has no physician labels and is left out" in done.stderr


def test_judge_and_pass_choose_what_is_checked_and_corrected(labelled_store) -> None:
    root, path, _ = labelled_store
    first = calibrate(["--run", "strong", "--store", str(root), "--format", "json", "--samples", "200"], path)
    second = calibrate(["--run", "strong", "--store", str(root), "--format", "json", "--samples", "200",
                        "--pass", "2"], path)
    assert first.returncode == 0 == second.returncode, second.stderr
    one, two = json.loads(first.stdout), json.loads(second.stdout)
    # the labels copy pass 1 with flips: pass 2 (pass 1 with its own flips) agrees with them less
    assert two["agreement"][0]["agreement"] < one["agreement"][0]["agreement"]
    assert any("pass 2" in n for n in two["notes"]) and any("pass 1" in n for n in one["notes"])
    judge = {r["benchmark"]: r["judge_mean"] for r in two["corrected"]["runs"]}
    assert judge != {r["benchmark"]: r["judge_mean"] for r in one["corrected"]["runs"]}  # pass 2's scores alone
