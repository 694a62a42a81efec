"""What ``bedside compare`` / ``harms`` / ``agreement`` say about the runs they compare: leaderboard
columns for what a run did not cover, notes on differing case sets, single runs, pairs without a common
case and small benchmarks, and the command-line guards (repeated run ids, too few resamples, memory)."""

from __future__ import annotations

import json

import numpy as np
import polars as pl
import pytest

import toolkit.cli.analysis as analysis_cli
from tests.analysis_sim import rule_decisions, simulate_decisions, write_rows, write_run
from toolkit.analysis.compare import compare_matrix
from toolkit.analysis.matrix import from_arrays
from toolkit.analysis.multiplicity import adjust
from toolkit.analysis.paired import ResampleSettings, small_sample_note
from toolkit.cli import main
from toolkit.cli.common import selected_runs
from toolkit.cli.options import RunChoice
from toolkit.dataset import load_dataset
from toolkit.selection import read_runs
from toolkit.store import Store

SAFETY = "safety_diagnostic"


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Store:
    """'full' and 'twice' (two passes) did every case; 'partial' never attempted the safety_diagnostic
    cases and failed one more; 'only-drug' and 'only-calc' judged one benchmark each."""
    dataset = load_dataset()
    store = Store.open(tmp_path_factory.mktemp("runs") / "store")
    write_run(store, dataset, "full", skill=0.5, seed=1, created=0)
    write_run(store, dataset, "twice", skill=0.2, seed=2, passes=2, created=1)
    safety = dataset.cases.filter(pl.col("benchmark") == SAFETY)["case_id"].to_list()
    failed = dataset.cases.filter(pl.col("benchmark") == "drug_safety")["case_id"][0]
    decisions = simulate_decisions(dataset, "partial", skill=0.4, seed=3).filter(
        ~pl.col("case_id").is_in(safety + [failed]))
    write_rows(store, dataset, "partial", decisions, failed=frozenset({failed}), created=2)
    for k, (run_id, benchmark) in enumerate((("only-drug", "drug_safety"), ("only-calc", "clinical_calculations"))):
        write_rows(store, dataset, run_id, rule_decisions(dataset, run_id, pl.col("points") > 0,
                                                          benchmarks=(benchmark,)), created=3 + k)
    return store


def _json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


def test_leaderboard_says_what_each_run_did_not_cover(store: Store, capsys) -> None:
    out = _json(capsys, "compare", "--run", "full", "--run", "partial", "--store", str(store.root),
                "--samples", "200", "--format", "json")
    assert [row["run_id"] for row in out["leaderboard"]] == ["full"] and out["pairwise"] == []
    partial = out["not_ranked"][0]  # a macro mean over 9 benchmarks is not ranked against one over 10
    assert (partial["run_id"], partial["completed"], partial["n_benchmarks"]) == ("partial", 26, 9)
    assert (partial["benchmarks_missing"], partial["reason"]) == (SAFETY, "covers 9 of 10 benchmarks")
    assert partial["ci_low"] < partial["overall"] < partial["ci_high"]  # its own numbers, over what it has
    assert (out["leaderboard"][0]["not_attempted"], out["leaderboard"][0]["benchmarks_missing"]) == (0, "")
    notes = " | ".join(out["notes"])
    assert "1 run(s) not ranked (partial; see not_ranked)" in notes
    assert "runs cover different benchmarks" not in notes


def test_same_case_sets_get_no_case_set_note(store: Store, capsys) -> None:
    out = _json(capsys, "compare", "--run", "full", "--run", "twice", "--store", str(store.root),
                "--samples", "200", "--format", "json")
    assert not any("case sets differ" in n or "different benchmarks" in n for n in out["notes"])
    # The sample has 3 cases per benchmark: one benchmark's own t intervals under-cover there. The figures are
    # those tests/test_calibration_coverage.py prints (coverage of the intervals given; flat ones give none).
    assert any("few cases per benchmark (smallest here: 3)" in n and "worst benchmark 91% and 83%" in n
               for n in out["notes"])


def test_single_run_and_pairs_without_common_cases_are_said(store: Store, capsys) -> None:
    out = _json(capsys, "compare", "--run", "full", "--store", str(store.root), "--samples", "200",
                "--format", "json")
    assert out["pairwise"] == [] and any("a single ranked run (full): there is no pair to compare" in n
                                         for n in out["notes"])
    out = _json(capsys, "compare", "--run", "only-drug", "--run", "only-calc", "--store", str(store.root),
                "--samples", "200", "--format", "json")
    assert out["leaderboard"] == [] and out["pairwise"] == []
    assert [(r["run_id"], r["reason"]) for r in out["not_ranked"]] == [("only-drug", "covers 1 of 10 benchmarks"),
                                                                      ("only-calc", "covers 1 of 10 benchmarks")]
    present = np.zeros((2, 8))
    present[0, [0, 1, 4, 5]] = present[1, [2, 3, 6, 7]] = 1  # both ranked, no case in common
    result = compare_matrix(from_arrays(np.random.default_rng(0).random((2, 8)), {"a": 4, "b": 4}, present=present),
                            ResampleSettings(200, 1))
    assert result.pairwise["n_cases"].to_list() == [0] and result.pairwise["p_holm"].to_list() == [None]
    assert any("1 pair(s) of runs share no completed case" in n for n in result.notes)
    assert main(["compare", "--run", "full", "--store", str(store.root), "--samples", "200"]) == 0
    assert "no pair to compare" in capsys.readouterr().err  # the table format prints the notes too, after the tables


def test_small_benchmark_note_threshold() -> None:
    rng = np.random.default_rng(0)
    for size, smallest in ((26, 26), (19, 19)):
        sizes = {"a": size, "b": 40}
        present = np.ones((3, size + 40))
        present[2, 0] = 0  # a pair in common has one case fewer than its runs
        result = compare_matrix(from_arrays(rng.random((3, size + 40)), sizes, present=present),
                                ResampleSettings(200, 1))
        assert result.smallest_benchmark == smallest - 1
    assert small_sample_note(25) == [] and small_sample_note(None) == []
    assert small_sample_note(24)[0].startswith("few cases per benchmark (smallest here: 24)")
    assert small_sample_note(24, paired=False)[0].startswith("bootstrap intervals are optimistic below ~25 cases")


def test_harms_and_agreement_print_the_small_benchmark_note(store: Store, capsys) -> None:
    out = _json(capsys, "harms", "--run", "full", "--store", str(store.root), "--samples", "200", "--format", "json")
    assert any("optimistic below ~25" in n for n in out["notes"])
    out = _json(capsys, "agreement", "--run", "twice", "--store", str(store.root), "--samples", "200",
                "--format", "json")
    assert any("optimistic below ~25" in n for n in out["notes"])


def test_repeated_run_ids_count_once(store: Store, capsys) -> None:
    out = _json(capsys, "compare", "--run", "full", "--run", "twice", "--run", "full", "--store", str(store.root),
                "--samples", "200", "--format", "json")
    assert [r["run_id"] for r in out["leaderboard"]] == ["full", "twice"] and len(out["pairwise"]) == 1
    assert selected_runs(store, RunChoice(ids=("twice", "full", "twice", "full"))) == ["twice", "full"]
    data = read_runs(store, ["twice", "full", "twice"])
    assert data.runs["run_id"].to_list() == ["twice", "full"]
    assert data.decisions.height == read_runs(store, ["twice", "full"]).decisions.height


def test_too_few_resamples_and_out_of_memory_are_one_line_errors(store: Store, capsys,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    for command in ("compare", "agreement"):
        assert main([command, "--all", "--store", str(store.root), "--samples", "99"]) == 1
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"bedside: error: {command}: --samples must be >= 100 for its resampled intervals (got 99)"]

    def exhausted(*args, **kwargs):
        raise MemoryError(("Unable to allocate 74.5 GiB for an array with shape (100000, 100000)"))

    monkeypatch.setattr(analysis_cli, "compare_data", exhausted)
    assert main(["compare", "--all", "--store", str(store.root), "--samples", "100000"]) == 1
    assert capsys.readouterr().err.strip().splitlines() == [
        "bedside: error: out of memory: use fewer --samples or fewer runs"]


def test_adjusted_p_values_of_untestable_rows_are_null() -> None:
    frame = adjust(pl.DataFrame({"p_value": [0.01, None, float("nan"), 0.04]}))
    assert frame["p_holm"].null_count() == 2 and frame["p_bh"].null_count() == 2
    assert not frame["p_holm"].is_nan().any() and frame["p_holm"].to_list()[::3] == pytest.approx([0.02, 0.04])
