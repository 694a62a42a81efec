"""``bedside runs``, ``runs rm`` and ``runs rename`` through the real CLI on a store of imported runs."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from tests import reference_model as rm
from tests.conftest import SAMPLE, snapshot
from toolkit.cli import main


def _import(tmp_path: Path, store: str, dataset, run_id: str, seed: int, error_rate: float, cases=None) -> list[dict]:
    rows = rm.make_rows(list(cases if cases is not None else dataset.raw_cases), seed=seed, error_rate=error_rate)
    path = tmp_path / f"{seed}.jsonl"
    rm.write_rows(path, rows)
    assert main(["import", str(path), "--run-id", run_id, "--store", store, "--dataset", str(SAMPLE)]) == 0
    return rows


@pytest.fixture
def two_runs(tmp_path: Path, sample_dataset, capsys) -> tuple[str, dict[str, list[dict]]]:
    store = str(tmp_path / "st")
    rows = {
        "sim/a": _import(tmp_path, store, sample_dataset, "sim/a", seed=31, error_rate=0.3),
        "b": _import(tmp_path, store, sample_dataset, "b", seed=32, error_rate=0.0,
                     cases=sample_dataset.raw_cases[:4]),
    }
    capsys.readouterr()
    return store, rows


def _expected_counts(rows: list[dict], dataset) -> tuple[int, int, int]:
    done = {r["case_id"] for r in rows if "score" in r}
    tried = {r["case_id"] for r in rows}
    return len(done), len(tried - done), len(dataset.raw_cases) - len(tried)


def test_list_shows_every_run_with_its_counts_and_causes(two_runs, sample_dataset, capsys) -> None:
    store, rows = two_runs
    assert main(["runs", "--store", store, "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)
    assert [r["run_id"] for r in listed] == ["sim/a", "b"]
    for r in listed:
        assert (r["completed"], r["failed"], r["not_attempted"]) == _expected_counts(rows[r["run_id"]], sample_dataset)
        assert r["source"] == "imported" and r["answer_model"] == "model-a" and r["judges"] == "judge-x (1 pass)"
        assert r["dataset_sha256"] == sample_dataset.sha256 and r["dataset"] == sample_dataset.sha256[:12]
        assert r["created_at"] <= r["updated_at"] and r["created"] == r["created_at"][:16].replace("T", " ")
    a = listed[0]
    assert a["failed"] > 0 and a["failure_causes"] == [
        {"cause": "RuntimeError", "cases": a["failed"], "first_message": "API request failed after 6 attempts: HTTP 503"}]
    assert listed[1]["failure_causes"] == [] and listed[1]["not_attempted"] == len(sample_dataset.raw_cases) - 4

    assert main(["runs", "--store", store, "--wide"]) == 0
    out = capsys.readouterr().out
    done, failed, untried = _expected_counts(rows["sim/a"], sample_dataset)
    assert f"{done} / {failed} / {untried}" in out and "judge-x (1 pass)" in out and "imported" in out
    assert f"sim/a: {failed} case{'s' if failed != 1 else ''} failed: {failed} × RuntimeError: API request failed" in out


def test_empty_store(tmp_path: Path, capsys) -> None:
    assert main(["runs", "--store", str(tmp_path / "none")]) == 0
    assert "the store has no runs" in capsys.readouterr().out
    assert main(["runs", "--store", str(tmp_path / "none"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == []


def test_rm_asks_says_what_it_removes_and_refuses_unknown_ids(two_runs, monkeypatch, capsys) -> None:
    store, rows = two_runs
    before = snapshot(Path(store))
    # An unknown id among known ones: one line, non-zero exit, nothing removed.
    assert main(["runs", "rm", "sim/a", "nope", "--store", store, "--yes"]) != 0
    err = capsys.readouterr().err
    assert err.startswith("bedside: error: ") and "no run 'nope'" in err and len(err.splitlines()) == 1
    assert snapshot(Path(store)) == before
    # Answering no (or nothing) removes nothing.
    for answer in ("n\n", ""):
        monkeypatch.setattr("sys.stdin", io.StringIO(answer))
        assert main(["runs", "rm", "sim/a", "--store", store]) == 1
        captured = capsys.readouterr()
        successes = [r for r in rows["sim/a"] if "score" in r]
        assert (f"run sim/a: {len(rows['sim/a'])} answers, {len(successes)} judgments, "
                f"{sum(len(r['decisions']) for r in successes)} decisions") in captured.out
        assert "Remove run 'sim/a'" in captured.out and "nothing removed" in captured.err
        assert snapshot(Path(store)) == before
    monkeypatch.setattr("sys.stdin", io.StringIO("y\n"))
    assert main(["runs", "rm", "sim/a", "--store", store]) == 0
    assert "removed sim/a" in capsys.readouterr().out
    assert main(["runs", "--store", store, "--json"]) == 0
    assert [r["run_id"] for r in json.loads(capsys.readouterr().out)] == ["b"]
    assert main(["runs", "--store", store, "rm", "b", "--yes"]) == 0  # --store before the subcommand works too
    capsys.readouterr()
    assert main(["summary", "--all", "--store", store]) != 0
    assert "the store has no runs" in capsys.readouterr().err


def test_rename_keeps_the_data_and_refuses_an_existing_id(two_runs, capsys) -> None:
    store, _ = two_runs
    assert main(["summary", "--run", "sim/a", "--store", store, "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)["sim/a"]
    before = snapshot(Path(store))
    assert main(["runs", "rename", "sim/a", "b", "--store", store]) != 0
    err = capsys.readouterr().err
    assert err.startswith("bedside: error: ") and "'b' exists" in err and len(err.splitlines()) == 1
    assert snapshot(Path(store)) == before
    assert main(["runs", "rename", "nope", "c", "--store", store]) != 0
    assert "no run 'nope'" in capsys.readouterr().err
    assert main(["runs", "rename", "sim/a", "sim/renamed", "--store", store]) == 0
    assert "renamed sim/a to sim/renamed" in capsys.readouterr().out
    assert main(["summary", "--run", "sim/renamed", "--store", store, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["sim/renamed"] == summary
    assert main(["runs", "--store", store, "--json"]) == 0
    assert {r["run_id"] for r in json.loads(capsys.readouterr().out)} == {"sim/renamed", "b"}


def test_list_a_collected_run_with_two_judges_and_passes(tmp_path: Path, sample_dataset, capsys) -> None:
    from tests.analysis_sim import write_run
    from toolkit.store import Store

    store = Store.open(tmp_path / "st")
    failed = frozenset(c["case_id"] for c in sample_dataset.raw_cases[:3])
    write_run(store, sample_dataset, "multi", skill=0.5, seed=1, passes=2, extra_judges=(("judge-y", 0.1),),
              failed=failed)
    assert main(["runs", "--store", str(store.root), "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    assert row["judges"] == "judge-x (2 passes: 1,2); judge-y (1 pass)"
    assert row["judge_passes"] == {"judge-x": [1, 2], "judge-y": [1]}
    assert (row["source"], row["completed"], row["failed"], row["not_attempted"]) == (
        "collected", len(sample_dataset.raw_cases) - 3, 3, 0)
    assert row["failure_causes"] == [{"cause": "APIStatusError", "cases": 3, "first_message": "simulated failure"}]
