"""``bedside agreement`` on runs with several judge passes or judges, checked against direct counts."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from polars.testing import assert_frame_equal

from tests.analysis_sim import rule_decisions, simulate_decisions, write_rows, write_run
from toolkit.analysis.agreement import AgreementOptions, judge_agreement
from toolkit.analysis.paired import ResampleSettings
from toolkit.cli import main
from toolkit.dataset import load_dataset
from toolkit.scoring import pass_scores
from toolkit.selection import read_runs
from toolkit.store import Store


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """'twice': pass 2 flips every +1 item of pass 1; 'three': three passes; 'single': one pass."""
    dataset = load_dataset()
    store = Store.open(tmp_path_factory.mktemp("agreement") / "store")
    first = rule_decisions(dataset, "twice", pl.col("points") >= 2)
    second = rule_decisions(dataset, "twice", (pl.col("points") >= 2) ^ (pl.col("points") == 1), judge_pass=2)
    write_rows(store, dataset, "twice", pl.concat([first, second]), created=0)
    write_run(store, dataset, "three", skill=0.3, seed=4, passes=3, flip=0.1, created=1)
    write_run(store, dataset, "single", skill=0.3, seed=5, created=2)
    return store


def test_two_passes_by_hand(store: Store) -> None:
    result = judge_agreement(read_runs(store, ["twice"]), AgreementOptions(resamples=ResampleSettings(300, 1)))
    items = load_dataset().rubric_items
    points = items["points"].to_numpy()
    a = (points >= 2).astype(float)
    b = ((points >= 2) ^ (points == 1)).astype(float)
    p_o = np.mean(a == b)
    p_e = a.mean() * b.mean() + (1 - a.mean()) * (1 - b.mean())
    row = result.summary.row(0, named=True)
    assert row["raters"] == 2 and row["items"] == items.height
    assert row["percent_agreement"] == pytest.approx(1 - np.mean(points == 1))
    assert row["cohen_kappa"] == pytest.approx((p_o - p_e) / (1 - p_e))
    assert result.pairs.row(0, named=True)["cohen_kappa"] == pytest.approx(row["cohen_kappa"])
    # Score difference between passes: per benchmark mean of pass-1 minus pass-2 case scores, macro overall.
    decisions = store.read("decisions", ["twice"])
    scores = pass_scores(decisions, items)
    wide = scores.pivot(on="judge_pass", index=["case_id", "benchmark"], values="score")
    per_bench = wide.group_by("benchmark").agg((pl.col("1") - pl.col("2")).mean().alias("d"))
    overall = result.scores.filter(pl.col("benchmark") == "overall").row(0, named=True)
    sign = 1 if overall["rater_a"] == "judge-x#1" else -1
    assert overall["delta"] == pytest.approx(sign * per_bench["d"].mean())
    assert overall["ci_low"] <= overall["delta"] <= overall["ci_high"]
    assert result.scores.height == 11 and (result.scores["p_holm"] >= result.scores["p_value"] - 1e-15).all()
    # Flips: score range per case across the two passes, largest first.
    ranges = wide.with_columns(r=(pl.col("1") - pl.col("2")).abs()).sort("r", descending=True)
    assert result.flips["score_range"].to_list() == pytest.approx(ranges["r"].head(10).to_list())


def test_three_passes_use_fleiss_and_krippendorff(store: Store) -> None:
    result = judge_agreement(read_runs(store, ["three", "single"]),
                             AgreementOptions(resamples=ResampleSettings(200, 1)))
    assert result.skipped == ["single"]
    row = result.summary.row(0, named=True)
    assert row["raters"] == 3 and row["cohen_kappa"] is None
    assert 0.5 < row["fleiss_kappa"] < 1 and 0.5 < row["krippendorff_alpha"] < 1
    # With complete ratings alpha and Fleiss' kappa differ only by the small-sample factor.
    assert row["krippendorff_alpha"] == pytest.approx(row["fleiss_kappa"], abs=0.01)
    assert result.pairs.height == 3
    assert result.scores.filter(pl.col("benchmark") == "overall").height == 3
    # Raters get no tie groups in any output, so no note may describe them.
    assert not [n for n in result.notes if "separab" in n or "tie_group" in n], result.notes


def test_agreement_cli(store: Store, capsys) -> None:
    assert main(["agreement", "--all", "--store", str(store.root), "--samples", "200", "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in out["summary"]] == ["twice", "three"]
    assert "run single has a single rater and is left out" in out["notes"]
    assert len(out["flips"]) == 10
    assert main(["agreement", "--run", "twice", "--store", str(store.root), "--pass", "1"]) == 1
    assert "no selected run has two or more" in capsys.readouterr().err
    assert main(["agreement", "--run", "three", "--store", str(store.root), "--samples", "200", "--top", "3"]) == 0
    table = capsys.readouterr().out
    for title in ("summary", "pairs", "scores", "flips", "krippendorff_alpha"):
        assert all(word in table for word in title.split("_"))  # a header may wrap between its words


def test_a_second_judge_is_a_rater(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    write_run(store, load_dataset(), "r", skill=0.0, seed=3, extra_judges=(("judge-y", 0.2),))
    result = judge_agreement(read_runs(store, ["r"]), AgreementOptions(resamples=ResampleSettings(200, 1)))
    assert result.summary["rater_labels"][0] == "judge-x#1, judge-y#1"
    assert 0.7 < result.summary["percent_agreement"][0] < 0.9  # about 20% of decisions flipped
    with pytest.raises(ValueError, match="two or more"):
        judge_agreement(read_runs(store, ["r"]), AgreementOptions(judge="judge-x"))


def test_each_rater_is_scored_from_its_latest_valid_reply(tmp_path: Path) -> None:
    """A case judged twice validly keeps both replies' decisions (judgment_attempt 1 and 2); agreement must
    use the second, exactly as if it had been the only reply, and ignore a later failed one."""
    dataset = load_dataset()
    decisions = simulate_decisions(dataset, "r", skill=0.3, seed=1, passes=2, flip=0.2)
    case = decisions["case_id"][0]
    redone = (pl.col("case_id") == case) & (pl.col("judge_pass") == 1)
    second = decisions.filter(redone).with_columns(judgment_attempt=pl.lit(2, pl.Int32), matched=~pl.col("matched"))
    retried = Store.open(tmp_path / "retried")
    write_rows(retried, dataset, "r", pl.concat([decisions, second]))
    later = {"run_id": "r", "case_id": case, "judge_model": "judge-x", "judge_pass": 1, "answer_attempt": 1}
    retried.write("judgments", "r", [{**later, "attempt": 2, "seq": 900, "raw_reply": "{}", "error": None},
                                     {**later, "attempt": 3, "seq": 901, "raw_reply": None, "error": "timeout"}])
    only = Store.open(tmp_path / "only")
    write_rows(only, dataset, "r", pl.concat([decisions.filter(~redone),
                                              second.with_columns(judgment_attempt=pl.lit(1, pl.Int32))]))
    options = AgreementOptions(resamples=ResampleSettings(200, 1))
    got = judge_agreement(read_runs(retried, ["r"]), options)
    want = judge_agreement(read_runs(only, ["r"]), options)
    for name, frame in want.sections().items():
        assert_frame_equal(got.sections()[name], frame, check_row_order=False)
    # Not vacuous: scored from the first reply instead, the agreement would differ.
    first = Store.open(tmp_path / "first")
    write_rows(first, dataset, "r", decisions)
    stale = judge_agreement(read_runs(first, ["r"]), options)
    assert stale.summary["percent_agreement"][0] != got.summary["percent_agreement"][0]
