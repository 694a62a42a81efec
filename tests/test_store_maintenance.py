"""Store-wide upkeep (toolkit/store/maintenance.py, ``bedside runs compact [--vacuum --retention HOURS]``):
compaction leaves one file per run and table and a short log to replay, keeping every row; vacuum deletes
only the files no version within the retention needs. Real Delta tables; the command as a process."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import reference_model as rm
from toolkit.dataset import load_dataset
from toolkit.reference import ImportFailure, import_many
from toolkit.store import Store, delta
from toolkit.store.maintenance import CHECKPOINT_EVERY, _last_checkpoint, compact_store

ROOT = Path(__file__).resolve().parents[1]
RUNS = 18  # more runs commits than the runs table keeps files (16), and than CHECKPOINT_EVERY


def bedside(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolkit", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ), timeout=300)


def _answer(run: str, case: str, seq: int) -> dict:
    return {"run_id": run, "case_id": case, "attempt": 1, "seq": seq, "answer": f"a{seq}"}


def test_compaction_rewrites_the_runs_of_many_writes_and_keeps_every_row(store: Store) -> None:
    for run, writes in (("many", 5), ("one", 1)):
        store.commit_run(run, None, {"run_id": run, "answer_model": "m", "judge_model": "j", "protocol_version": "1",
                                     "dataset_sha256": "0" * 64, "source": "collected",
                                     "created_at": "2026-01-01T00:00:00Z"})
        for seq in range(writes):
            store.write("answers", run, [_answer(run, f"c{seq}", seq)])
    before = store.read("answers").sort("run_id", "case_id")
    assert len(store.files("answers", "many")) == 5
    done = compact_store(store)
    assert done.compacted == ["many"] and not done.skipped
    assert len(store.files("answers", "many")) == 1 and len(store.files("answers", "one")) == 1
    assert store.read("answers").sort("run_id", "case_id").equals(before)
    assert compact_store(store).compacted == []  # nothing left to do


def _disk_files(store: Path) -> set[Path]:
    return {p for p in store.glob("*/**/*.parquet") if "_delta_log" not in p.parts}


def _tables(store: Path) -> list[Path]:
    return [t for t in store.iterdir() if (t / "_delta_log").is_dir()]


def _named_files(store: Path) -> set[Path]:
    named = set()
    for table in _tables(store):
        if delta.latest_version(table) is not None:
            named |= {f for f, _, _ in delta.files_of(delta.actions_as_of(table, None), table, None, None)}
    return named


@pytest.fixture(scope="module")
def imported(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("upkeep")
    cases = list(load_dataset(None).raw_cases)
    for i in range(RUNS):
        (folder / f"run-{i:02d}.jsonl").write_text(
            "".join(json.dumps(r) + "\n" for r in rm.make_rows(cases, seed=i, answer_model=f"m{i}")), encoding="utf-8")
    dataset = load_dataset(None)
    for path in sorted(folder.glob("*.jsonl")):  # a commit each (a folder's new runs would share one)
        [report] = import_many(Store.open(folder / "store"), [path], dataset)
        assert not isinstance(report, ImportFailure), report
    assert bedside("runs", "rename", "run-00", "renamed", "--store", folder / "store").returncode == 0
    return folder / "store"


def test_compact_checkpoints_long_logs_and_vacuum_keeps_what_the_retention_needs(imported: Path) -> None:
    summary = ["summary", "--all", "--json", "--samples", "200", "--store", imported]
    before = bedside(*summary).stdout
    old_version = Store.open(imported).version() - 1  # before the rename: one runs commit
    stale = _disk_files(imported) - _named_files(imported)
    assert stale  # the rename's old rows, kept for readers of older versions
    assert any(delta.latest_version(t) - _last_checkpoint(t) >= CHECKPOINT_EVERY for t in _tables(imported))

    done = bedside("runs", "compact", "--store", imported)
    assert done.returncode == 0, done.stderr
    for table in _tables(imported):  # a reader replays fewer than CHECKPOINT_EVERY entries after the checkpoint
        assert delta.latest_version(table) - _last_checkpoint(table) < CHECKPOINT_EVERY, table.name
    assert bedside(*summary).stdout == before

    kept = bedside("runs", "compact", "--vacuum", "--retention", "24", "--store", imported)
    assert kept.returncode == 0 and "vacuumed 0 file(s)" in kept.stdout, kept.stdout + kept.stderr
    assert stale <= _disk_files(imported)  # younger than the retention: still there
    assert Store.open(imported, version=old_version).read("answers", ["run-00"]).height > 0

    freed = bedside("runs", "compact", "--vacuum", "--retention", "0", "--store", imported)
    assert freed.returncode == 0, freed.stderr
    assert not stale & _disk_files(imported) and _disk_files(imported) == _named_files(imported)
    assert bedside(*summary).stdout == before


def test_a_bulk_import_keeps_the_runs_table_to_a_few_files(imported: Path) -> None:
    """Every commit and every reader reads all of the runs table's files: imports compact it as they go,
    instead of leaving one file a run."""
    table = imported / "runs"
    assert len(delta.files_of(delta.actions_as_of(table, None), table, None, None)) <= 16


def test_vacuum_without_a_retention_is_one_line(imported: Path) -> None:
    done = bedside("runs", "compact", "--vacuum", "--store", imported)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1 and "--retention" in lines[0], done.stderr


def test_compacting_a_store_that_is_not_there_is_one_line_and_makes_nothing(tmp_path: Path) -> None:
    missing = tmp_path / "typo-store"
    done = bedside("runs", "compact", "--store", missing)
    assert done.returncode == 1 and not missing.exists(), done.stdout + done.stderr
    assert done.stderr.startswith(f"bedside: error: {missing}: the store has no runs") and done.stderr.count("\n") == 1


def test_a_vacuum_refused_by_the_file_system_names_the_table_and_why(imported: Path, monkeypatch) -> None:
    from deltalake import DeltaTable

    from toolkit.store import StoreError
    from toolkit.store import maintenance

    def refused(self, **kwargs):
        raise OSError("Generic LocalFileSystem error: Unable to delete file")  # what delta-rs says, no cause

    monkeypatch.setattr(DeltaTable, "vacuum", refused)
    monkeypatch.setattr(maintenance.os, "access", lambda path, mode: False)  # as for a user who may not write
    with pytest.raises(StoreError) as raised:
        compact_store(Store.open(imported), 24)
    assert str(raised.value) == (f"{imported / 'runs'}: vacuum: permission denied (this user cannot delete files "
                                 f"in {imported / 'runs'})")
