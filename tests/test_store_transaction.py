"""The store's one write transaction (begin, add rows, commit or abandon) and its commit hook: subscribers told
after each commit, in batches where commits repeat; the store itself knows nothing of DuckDB."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests import reference_model as rm
from tests.test_cli_process import bedside_process
from toolkit.store import Store, StoreError

ROOT = Path(__file__).resolve().parents[1]
SHA = "0" * 64


def _answer(run: str, case: str, seq: int) -> dict:
    return {"run_id": run, "case_id": case, "attempt": 1, "seq": seq, "answer": f"a{seq}"}


def _run_row(run: str) -> dict:
    return {"run_id": run, "answer_model": "m", "judge_model": "j", "protocol_version": "1", "dataset_sha256": SHA,
            "source": "collected", "created_at": "2026-01-01T00:00:00Z"}


@pytest.fixture
def told():
    """The (store root, version) of every commit subscribers are told of in this test."""
    seen: list[tuple[Path, int | None]] = []

    def listener(store: Store, version: int | None) -> None:
        seen.append((store.root, version))

    Store.subscribe(listener)
    try:
        yield seen
    finally:
        from toolkit.store import commits

        commits.unsubscribe(listener)


def test_a_transaction_adds_in_batches_and_shows_them_in_one_runs_commit(tmp_path: Path, told) -> None:
    store = Store.open(tmp_path / "st")
    txn = store.begin("r")
    assert txn.current is None
    txn.add({"answers": [_answer("r", "c0", 0), _answer("r", "c1", 1)]})
    txn.add({"answers": [_answer("r", "c2", 2)], "judgments": []})
    assert not store.has_run("r") and store.read("answers").is_empty() and told == []  # nothing visible yet
    before = store.version()
    wid = txn.commit(_run_row("r"), {"kind": "import"})
    assert store.version() == (before or 0) + 1 and told == [(store.root, store.version())]  # ONE runs commit
    assert sorted(store.read("answers", ["r"])["case_id"]) == ["c0", "c1", "c2"]
    assert json.loads(store.run("r")["write_ids"]) == {wid: {"answers": 3}}
    with pytest.raises(StoreError, match="committed or abandoned already"):
        txn.add({"answers": [_answer("r", "c3", 3)]})
    txn.abandon()  # after a commit: nothing to undo, the run stands
    assert sorted(store.read("answers", ["r"])["case_id"]) == ["c0", "c1", "c2"] and store.damaged() == {}
    with store.lock("r"):  # the transaction let the run's lock go
        pass


def test_an_abandoned_transaction_leaves_no_rows_and_no_lock(tmp_path: Path, told) -> None:
    store = Store.open(tmp_path / "st")
    store.commit_run("r", {"answers": [_answer("r", "c0", 0)]}, _run_row("r"))
    told.clear()
    files = {p.name for p in (store.root / "answers").rglob("*.parquet")}
    txn = store.begin("r")
    txn.add({"answers": [_answer("r", "c9", 9)]})
    txn.abandon()
    assert store.read("answers")["case_id"].to_list() == ["c0"] and told == []
    assert {p.name for p in (store.root / "answers").rglob("*.parquet")} == files  # its file is gone
    with store.lock("r"):
        pass


def test_a_replayed_write_id_replaces_its_rows_never_duplicates_them(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "st")
    store.commit_run("r", None, _run_row("r"))
    crashed = store.begin("r", write_id="tag")
    crashed.add({"answers": [_answer("r", "c0", 0)], "judgments": []})
    crashed.lock.close()  # its process killed before the runs commit: the rows stay, invisible
    txn = store.begin("r", write_id="tag")  # the journal's write replayed
    txn.add({"answers": [_answer("r", "c0", 0)]})
    txn.add({"answers": [_answer("r", "c1", 1)]})  # a second batch of the same write adds to the first
    txn.commit()
    assert sorted(store.read("answers")["case_id"]) == ["c0", "c1"]
    assert json.loads(store.run("r")["write_ids"]) == {"tag": {"answers": 2}}


def test_subscribers_are_told_of_commits_removals_and_renames_not_of_failures(tmp_path: Path, told) -> None:
    from toolkit.store.runs_ops import delete_run, rename_run

    store = Store.open(tmp_path / "st")
    store.commit_run("a", None, _run_row("a"))
    first = store.version()
    store.commit_run("b", {"answers": [_answer("b", "c0", 0)]}, _run_row("b"))
    rename_run(store, "b", "c")
    delete_run(store, "a")
    with pytest.raises(StoreError, match="no run 'x' to add rows to"):
        store.commit_run("x", {"answers": [_answer("x", "c0", 0)]})
    with pytest.raises(StoreError, match="no run 'x'"):
        delete_run(store, "x")
    assert told == [(store.root, first + v) for v in range(4)] and store.version() == first + 3


def test_a_batch_tells_at_most_every_so_often_and_once_at_its_end_however_it_ends(tmp_path: Path, told) -> None:
    store = Store.open(tmp_path / "st")
    store.commit_run("first", None, _run_row("first"))
    told.clear()
    v = store.version()
    with pytest.raises(KeyError):
        with store.batch():
            for run in ("a", "b", "c"):
                store.commit_run(run, None, _run_row(run))
            assert told == []
            raise KeyError("interrupted")
    assert told == [(store.root, v + 3)]  # once, with the version after the last commit
    told.clear()
    with store.batch(0.0):
        store.commit_run("d", None, _run_row("d"))
        store.commit_run("e", None, _run_row("e"))
    assert told == [(store.root, v + 4), (store.root, v + 5)]  # every_s 0: every commit told as it lands
    told.clear()
    with store.batch(3600):
        with store.batch(0.0):  # nested: the outermost decides
            store.commit_run("f", None, _run_row("f"))
        assert told == []
    assert told == [(store.root, v + 6)]


def test_a_replace_stands_when_the_sweep_after_its_commit_fails(tmp_path: Path, sample_dataset, monkeypatch) -> None:
    """The runs commit is the commit point: a sweep of the old, now invisible, rows that fails after it (a full
    disk) neither reports the replace as failed nor sweeps the rows the run now shows."""
    from toolkit.reference._read import import_reference
    from toolkit.store import delta

    rows = rm.make_rows(list(sample_dataset.raw_cases), seed=4, error_rate=0.0)
    first, second = tmp_path / "first.jsonl", tmp_path / "second.jsonl"
    first.write_text("".join(json.dumps(r) + "\n" for r in rows[:3]))
    second.write_text("".join(json.dumps(r) + "\n" for r in rows[3:8]))
    store = Store.open(tmp_path / "st")
    import_reference(store, first, sample_dataset, "r")
    real, calls = delta.delete, []

    def full_once(path, predicate):
        calls.append(path.name)
        if len(calls) == 1:
            raise StoreError(f"no space left on {path}")
        return real(path, predicate)

    monkeypatch.setattr(delta, "delete", full_once)
    report = import_reference(store, second, sample_dataset, "r", replace=True)
    monkeypatch.undo()
    assert report.rows == 5 and calls
    expected = sorted(r["case_id"] for r in rows[3:8])
    assert sorted(Store.open(store.root).read("answers", ["r"])["case_id"]) == expected
    assert Store.open(store.root).damaged() == {}


def test_the_store_imports_nothing_of_duckdb_and_says_nothing_of_databases(tmp_path: Path) -> None:
    """A process that writes through the store alone: no DuckDB, no database refresh, nothing on stderr, even
    with a registry of databases (here unreadable) in the store."""
    code = ("import sys, json\nfrom toolkit.store import Store\nfrom toolkit.store.runs_ops import delete_run\n"
            f"s = Store.open(sys.argv[1])\ns.commit_run('r', {{'answers': [{_answer('r', 'c0', 0)!r}]}}, {_run_row('r')!r})\n"
            "delete_run(s, 'r')\n"
            "bad = sorted(m for m in sys.modules if m.startswith(('duckdb', 'toolkit.sql._database', 'toolkit.sql._query')))\n"
            "print(json.dumps(bad))\n")
    store = tmp_path / "st"
    Store.open(store).commit_run("x", None, _run_row("x"))
    (store / ".databases.json").write_text("not json {")
    done = subprocess.run([sys.executable, "-c", code, str(store)], capture_output=True, text=True, cwd=ROOT,
                          timeout=60)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert json.loads(done.stdout) == []


def test_runs_rm_and_import_in_fresh_processes_refresh_a_registered_database(tmp_path: Path, sample_dataset) -> None:
    rows = rm.make_rows(list(sample_dataset.raw_cases), seed=2, error_rate=0.0)
    for name, part in (("keep", rows[:3]), ("gone", rows[3:5]), ("late", rows[5:7])):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
    store, out = str(tmp_path / "st"), str(tmp_path / "r.duckdb")
    for args in (["import", str(tmp_path / "keep.jsonl"), str(tmp_path / "gone.jsonl"), "--store", store],
                 ["db", "--out", out, "--store", store], ["runs", "rm", "gone", "--yes", "--store", store],
                 ["import", str(tmp_path / "late.jsonl"), "--store", store]):
        done = bedside_process(args)
        assert done.returncode == 0, done.stderr
    query = ("import duckdb, sys\ncon = duckdb.connect(sys.argv[1], read_only=True)\n"
             "print(con.execute('SELECT run_id FROM runs ORDER BY run_id').fetchall())")
    done = subprocess.run([sys.executable, "-c", query, out], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "[('keep',), ('late',)]", done.stderr
