"""``bedside runs`` reads what its listing shows: with every run's scores stored, no decisions (the largest
table: one row per rubric item) and only the columns it counts; runs stored without scores list the same."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests import reference_model as rm
from tests.conftest import SAMPLE
from toolkit.analysis.run_list import list_runs
from toolkit.cli import main
from toolkit.store import Store, transaction

# Fields that differ between two imports of the same rows (their times).
_TIMES = ("created", "updated", "created_at", "updated_at")


def _import_two(tmp_path: Path, store: str, dataset) -> None:
    for run_id, seed, rate, cases in (("a", 41, 0.3, None), ("b", 42, 0.0, 4)):
        rows = rm.make_rows(list(dataset.raw_cases[:cases] if cases else dataset.raw_cases), seed=seed,
                            error_rate=rate)
        path = tmp_path / f"{run_id}.jsonl"
        rm.write_rows(path, rows)
        assert main(["import", str(path), "--run-id", run_id, "--store", store, "--dataset", str(SAMPLE)]) == 0


def _listed(store: Store) -> list[dict]:
    return [{k: v for k, v in r.items() if k not in _TIMES} for r in list_runs(store)]


def test_the_listing_of_scored_runs_reads_no_decisions_and_equals_that_of_unscored_runs(
        tmp_path: Path, sample_dataset, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    _import_two(tmp_path, str(tmp_path / "scored"), sample_dataset)
    monkeypatch.setattr(transaction, "_SCORERS", [])  # the base tables only, as an earlier version wrote them
    _import_two(tmp_path, str(tmp_path / "unscored"), sample_dataset)
    capsys.readouterr()
    scored, unscored = Store.open(tmp_path / "scored"), Store.open(tmp_path / "unscored")
    assert scored.unscored() == [] and sorted(unscored.unscored()) == ["a", "b"]

    reads: list[tuple[str, tuple[str, ...] | None]] = []
    read = Store.read

    def spy(self, table, run_ids=None, columns=None, keys=None):
        reads.append((table, None if columns is None else tuple(columns)))
        return read(self, table, run_ids, columns, keys)

    monkeypatch.setattr(Store, "read", spy)
    listed = _listed(scored)
    assert "decisions" not in [t for t, _ in reads]
    answers = [c for t, c in reads if t == "answers"]
    assert answers and all(c is not None and "answer_temperature" not in c for c in answers)

    reads.clear()
    assert _listed(unscored) == listed  # computed from the decisions: the same counts, judges, causes, costs
    assert "decisions" in [t for t, _ in reads]
    a = next(r for r in listed if r["run_id"] == "a")
    assert a["failed"] > 0 and a["failure_causes"] and a["completed"] > 0
