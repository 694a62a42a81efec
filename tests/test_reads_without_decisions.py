"""``bedside runs`` and ``bedside compare`` read what they show: with every run's scores stored, no decisions
(the largest table: one row per rubric item); runs stored without scores show the same."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import reference_model as rm
from tests.conftest import SAMPLE
from toolkit.listing.run_list import list_runs
from toolkit.cli import main
from toolkit import score_tables
from toolkit.store import Store, transaction

# Fields that differ between two imports of the same rows (their times).
_TIMES = ("created", "updated", "created_at", "updated_at")


def _import_two(tmp_path: Path, store: str, dataset, b_cases: int | None = 4) -> None:
    for run_id, seed, rate, cases in (("a", 41, 0.3, None), ("b", 42, 0.0, b_cases)):
        rows = rm.make_rows(list(dataset.raw_cases[:cases] if cases else dataset.raw_cases), seed=seed,
                            error_rate=rate)
        path = tmp_path / f"{run_id}.jsonl"
        rm.write_rows(path, rows)
        assert main(["import", str(path), "--run-id", run_id, "--store", store, "--dataset", str(SAMPLE)]) == 0


def _spy(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[str, ...] | None]]:
    """The (table, columns) of every ``Store.read`` from now on."""
    reads: list[tuple[str, tuple[str, ...] | None]] = []
    read = Store.read

    def spy(self, table, run_ids=None, columns=None, keys=None):
        reads.append((table, None if columns is None else tuple(columns)))
        return read(self, table, run_ids, columns, keys)

    monkeypatch.setattr(Store, "read", spy)
    return reads


def _listed(store: Store) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in _TIMES} for r in list_runs(store)]


def test_the_listing_of_scored_runs_reads_no_decisions_and_equals_that_of_unscored_runs(
        tmp_path: Path, sample_dataset, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    _import_two(tmp_path, str(tmp_path / "listed"), sample_dataset)
    with monkeypatch.context() as m:  # scores without the listing's facts, as the previous version stored them
        m.setattr(score_tables, "listing_facts", lambda data, cases: {})
        _import_two(tmp_path, str(tmp_path / "scored"), sample_dataset)
    monkeypatch.setattr(transaction, "_SCORERS", [])  # the base tables only, as an earlier version wrote them
    _import_two(tmp_path, str(tmp_path / "unscored"), sample_dataset)
    capsys.readouterr()
    stores = {name: Store.open(tmp_path / name) for name in ("listed", "scored", "unscored")}
    assert stores["scored"].unscored() == [] and sorted(stores["unscored"].unscored()) == ["a", "b"]
    assert all(r["listing"] is None for r in stores["scored"].read("runs").iter_rows(named=True))

    reads = _spy(monkeypatch)
    listed = _listed(stores["listed"])
    assert {t for t, _ in reads} == {"runs"}  # the facts its commits stored: no data table is read

    reads.clear()
    assert _listed(stores["scored"]) == listed  # computed from the stored case scores and the calls
    assert "decisions" not in [t for t, _ in reads]
    answers = [c for t, c in reads if t == "answers"]
    assert answers and all(c is not None and "answer_temperature" not in c for c in answers)

    reads.clear()
    assert _listed(stores["unscored"]) == listed  # computed from the decisions: the same counts, judges, causes, costs
    assert "decisions" in [t for t, _ in reads]
    a = next(r for r in listed if r["run_id"] == "a")
    assert a["failed"] > 0 and a["failure_causes"] and a["completed"] > 0


def test_compare_of_scored_runs_reads_no_decisions_and_shows_what_unscored_runs_show(
        tmp_path: Path, sample_dataset, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    _import_two(tmp_path, str(tmp_path / "scored"), sample_dataset, b_cases=None)
    monkeypatch.setattr(transaction, "_SCORERS", [])
    _import_two(tmp_path, str(tmp_path / "unscored"), sample_dataset, b_cases=None)
    capsys.readouterr()
    reads = _spy(monkeypatch)
    shown = {}
    for name in ("scored", "unscored"):
        for extra in ([], ["--judge", "judge-x"]):  # another selection than the stored one: from the decisions
            reads.clear()
            args = ["compare", "--all", "--store", str(tmp_path / name), "--format", "json", "--samples", "200"]
            assert main(args + extra) == 0
            shown[name, bool(extra)] = json.loads(capsys.readouterr().out)
            assert ("decisions" in [t for t, _ in reads]) == (name == "unscored" or bool(extra)), (name, extra)
    assert shown["scored", False] == shown["unscored", False]
    assert {r["passes"] for r in shown["scored", False]["leaderboard"]} == {"1"}
    assert shown["scored", True]["leaderboard"] == shown["unscored", True]["leaderboard"]
