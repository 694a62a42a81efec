"""A bulk import makes the new runs of a batch of files in ONE runs commit, their scores computed together:
the same rows and scores as one file at a time, all or none of the batch, and a run that cannot be scored
leaves the others scored."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests import reference_model as rm
from toolkit.reference._read import ImportFailure, import_many, import_reference
from toolkit.score_tables import score_commits
from toolkit.store import Store, delta, transaction
from toolkit.store.disk import NoSpace
from toolkit.store.paths import part_of
from toolkit.tables import SCORE_TABLES, TABLES


def _files(folder: Path, dataset, names: list[str]) -> list[Path]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for seed, name in enumerate(names):
        rows = rm.make_rows(list(dataset.raw_cases), seed=seed, error_rate=0.2, answer_model=f"m-{name}")
        path = folder / f"{name}.jsonl"
        path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
        paths.append(path)
    return paths


def _tables(store: Path) -> dict[str, list]:
    """Every visible row of the run and score tables, sorted (without write ids: each run has its own)."""
    st = Store.open(store)
    out = {}
    for table in ("answers", "judgments", "decisions", *SCORE_TABLES):
        frame = st.read(table)
        out[table] = frame.sort(frame.columns, nulls_last=True).rows()
    out["runs"] = st.read("runs").drop("created_at", "updated_at", "steps", "write_ids").sort("run_id").rows()
    return out


def _alone(tmp_path: Path, paths: list[Path], dataset) -> Path:
    store = tmp_path / "alone"
    for path in paths:
        import_reference(Store.open(store), path, dataset)
    return store


def test_new_runs_share_one_runs_commit_and_store_what_one_file_at_a_time_stores(tmp_path, sample_dataset):
    paths = _files(tmp_path / "files", sample_dataset, ["a", "b", "c", "d"])
    store = tmp_path / "bulk"
    results = import_many(Store.open(store), paths, sample_dataset)
    assert [r.run_id for r in results] == ["a", "b", "c", "d"]
    assert DeltaTable(str(store / "runs")).version() == 1  # created, then one commit for the four runs
    assert Store.open(store).unscored() == []
    assert _tables(store) == _tables(_alone(tmp_path, paths, sample_dataset))
    steps = [json.loads(Store.open(store).run(r)["steps"]) for r in "abcd"]
    assert [s[0]["source_file"] for s in steps] == [str(p) for p in paths]


def test_a_failed_runs_commit_makes_no_run_of_the_batch(tmp_path, sample_dataset, monkeypatch):
    paths = _files(tmp_path / "files", sample_dataset, ["a", "b", "c"])
    store = tmp_path / "bulk"
    append = delta.append

    def full_at_the_runs_commit(path, table, data):
        if table == "runs":
            raise NoSpace(f"no space left on {store}")
        append(path, table, data)

    monkeypatch.setattr(delta, "append", full_at_the_runs_commit)
    results = import_many(Store.open(store), paths, sample_dataset)
    assert all(isinstance(r, ImportFailure) and "no space left" in r.message for r in results), results
    assert Store.open(store).run_ids() == []
    for table in ("answers", "decisions", "case_scores"):  # the batch's rows (data and scores) were swept
        parts = {u.split("part=")[1].split("/")[0] for u in DeltaTable(str(store / table)).file_uris()}
        assert not parts & {part_of(n) for n in "abc"}, table
    monkeypatch.setattr(delta, "append", append)
    assert [r.run_id for r in import_many(Store.open(store), paths, sample_dataset)] == ["a", "b", "c"]
    assert _tables(store) == _tables(_alone(tmp_path, paths, sample_dataset))


def test_a_run_that_cannot_be_scored_leaves_the_others_of_its_batch_scored(tmp_path, sample_dataset):
    paths = _files(tmp_path / "files", sample_dataset, ["a", "b", "c"])

    def refusing_b(batch):  # as a run whose decisions do not fit the rubric: its scoring raises
        if any(txn.run_id == "b" for txn, _ in batch):
            raise ValueError("decisions outside the rubric")
        return score_commits(batch)

    before = list(transaction._SCORERS)
    transaction._SCORERS[:] = [refusing_b]
    try:
        import_many(Store.open(tmp_path / "bulk"), paths, sample_dataset)
    finally:
        transaction._SCORERS[:] = before
    store = Store.open(tmp_path / "bulk")
    assert store.run_ids() == ["a", "b", "c"] and store.unscored() == ["b"]
    stored = store.read("case_scores")["run_id"].unique().sort().to_list()
    assert stored == ["a", "c"]


def test_a_file_of_an_existing_run_in_the_batch_is_committed_on_its_own(tmp_path, sample_dataset):
    paths = _files(tmp_path / "files", sample_dataset, ["a", "b", "c"])
    store = tmp_path / "bulk"
    import_reference(Store.open(store), paths[1], sample_dataset)
    results = import_many(Store.open(store), paths, sample_dataset, replace=True)
    assert [r.run_id for r in results] == ["a", "b", "c"]
    assert _tables(store) == _tables(_alone(tmp_path, paths, sample_dataset))
    assert set(TABLES["runs"].names) <= set(Store.open(store).run("b"))


_BULK = """
import sys
from toolkit.reference import _read as reference
reference.BATCH_FILES = 3  # several batches of a small folder: the next is read while the last commits
from toolkit.cli import main
sys.exit(main(["import", sys.argv[1], "--store", sys.argv[2]]))
"""


def test_ctrl_c_during_a_bulk_import_leaves_whole_runs_of_whole_batches(tmp_path, sample_dataset):
    import signal
    import subprocess
    import sys
    import time

    paths = _files(tmp_path / "files", sample_dataset, [f"r{i:02d}" for i in range(30)])
    store = tmp_path / "bulk"
    proc = subprocess.Popen([sys.executable, "-c", _BULK, str(tmp_path / "files"), str(store)],
                            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while proc.poll() is None and time.monotonic() < deadline:  # a batch committed, the next ones underway
        if (store / "runs" / "_delta_log").is_dir() and len(list((store / "runs" / "_delta_log").glob("*.json"))) >= 3:
            break
        time.sleep(0.01)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and err.strip().splitlines()[-1] == "bedside: interrupted", err
    made = Store.open(store).run_ids()
    assert 3 <= len(made) < 30 and len(made) % 3 == 0, made  # whole batches, in file order
    assert made == [p.stem for p in paths[: len(made)]]
    assert [p.name for p in (store / ".locks").glob("*.lock")] == ["store.lock"]  # no run left locked
    alone = _alone(tmp_path, paths[: len(made)], sample_dataset)
    assert _tables(store) == _tables(alone)
    rest = import_many(Store.open(store), paths[len(made):], sample_dataset)  # the rest, as if never begun
    assert [r.run_id for r in rest] == [p.stem for p in paths[len(made):]]
