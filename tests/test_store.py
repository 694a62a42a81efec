"""The store: Delta tables, path-safe run ids, one runs commit per transaction, locks, the journal."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from toolkit.collect.journal import RunJournal
from toolkit.sql._query import connect
from toolkit.store import Store, StoreError, default_store_path, safe_segment
from toolkit.store.runs_ops import compact_run, delete_run, rename_run

ROOT = Path(__file__).resolve().parents[1]
SHA = "0" * 64


def _answer(run: str, case: str, seq: int) -> dict:
    return {"run_id": run, "case_id": case, "attempt": 1, "seq": seq, "answer": f"a{seq}"}


def _run_row(run: str, created: str = "2026-01-01T00:00:00Z") -> dict:
    return {"run_id": run, "answer_model": "m", "judge_model": "j", "protocol_version": "1", "dataset_sha256": SHA,
            "source": "collected", "created_at": created}


def _new_run(store: Store, run: str) -> None:
    store.commit_run(run, None, _run_row(run))


@pytest.mark.parametrize("run_id", ["accounts/fireworks/models/x", "../x", "..", ".", "a b", "x" * 500, "/etc/passwd",
                                    "é/..", "C:\\evil", "it's"])
def test_hostile_run_ids_stay_inside_the_store(store: Store, run_id: str) -> None:
    _new_run(store, run_id)
    store.write("answers", run_id, [_answer(run_id, "c", 1)])
    for path in store.files("answers", run_id):
        assert path.resolve().is_relative_to((store.root / "answers").resolve())
    assert store.read("answers", [run_id])["run_id"].to_list() == [run_id]
    assert store.run_ids() == [run_id]


def test_segments_are_injective_and_plain() -> None:
    ids = ["a/b", "a%2Fb", "a_b", "a-b", "A/B", "a.b", "a%2Eb"]
    segments = [safe_segment(i) for i in ids]
    assert len(set(segments)) == len(ids)
    assert all("/" not in s and s not in (".", "..") and not s.startswith(".") for s in segments)


def test_default_store_is_relative_to_the_current_directory(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("BEDSIDE_STORE", raising=False)
    monkeypatch.chdir(tmp_path)
    assert default_store_path() == tmp_path / "data" / "results" and Store.open().root == tmp_path / "data" / "results"
    monkeypatch.setenv("BEDSIDE_STORE", str(tmp_path / "elsewhere"))
    assert Store.open(None).root == tmp_path / "elsewhere"


def test_data_rows_are_invisible_until_the_runs_commit(store: Store) -> None:
    with pytest.raises(StoreError, match="no run"):
        store.write("answers", "r", [_answer("r", "c0", 0)])  # no run to add them to
    _new_run(store, "r")
    store.write("answers", "r", [_answer("r", "c0", 0)])
    before = store.version()
    # A writer that died between its data commit and its runs commit: the rows are in the Delta table ...
    from toolkit.store import delta
    import pyarrow as pa
    from toolkit.tables import to_arrow
    frame = to_arrow("answers", [_answer("r", "c1", 1)])
    frame = frame.append_column("write_id", pa.array(["deadbeef"])).append_column("part", pa.array(["r"]))
    delta.overwrite(store.root / "answers", "answers", frame, "part = 'r' AND write_id = 'deadbeef'")
    # ... but no reader sees them, and the store version did not move.
    assert store.read("answers")["case_id"].to_list() == ["c0"]
    assert store.version() == before
    con = connect(store, derived=())
    assert con.execute("select count(*) from answers").fetchone() == (1,)


def test_replay_of_a_write_id_never_duplicates(store: Store) -> None:
    _new_run(store, "r")
    for _ in range(3):
        store.commit_run("r", {"answers": [_answer("r", "c0", 0), _answer("r", "c1", 1)]}, write_id="tag1")
    assert store.read("answers").height == 2
    assert list(json.loads(store.run("r")["write_ids"])) == ["tag1"]


def test_one_runs_row_per_run_and_steps_are_kept(store: Store) -> None:
    store.commit_run("r", None, _run_row("r"), step={"kind": "run", "settings": {"cases": 10}})
    store.commit_run("r", None, {"settings": json.dumps({"cases": 250})}, step={"kind": "run", "settings": {"cases": 250}})
    store.commit_run("r", None, None, step={"kind": "judge", "judge_model": "other"})
    runs = store.read("runs")
    assert runs.height == 1
    row = store.run("r")
    assert json.loads(row["settings"]) == {"cases": 250} and row["created_at"] == "2026-01-01T00:00:00Z"
    assert [s["kind"] for s in json.loads(row["steps"])] == ["run", "run", "judge"]


def test_replace_swaps_in_one_commit_and_old_versions_stay_readable(store: Store) -> None:
    _new_run(store, "r")
    store.write("answers", "r", [_answer("r", "old", 0)])
    version = store.version()
    store.commit_run("r", {"answers": [_answer("r", "new", 0)]}, _run_row("r"), replace=True)
    assert store.read("answers")["case_id"].to_list() == ["new"]
    assert store.version() == version + 1  # the swap is the one runs commit
    past = Store.open(store.root, version=version)
    assert past.read("answers")["case_id"].to_list() == ["old"] and past.version() == version
    with pytest.raises(StoreError, match="for reading"):
        past.write("answers", "r", [_answer("r", "x", 1)])


def test_a_value_that_cannot_be_stored_fails_before_any_commit(store: Store) -> None:
    _new_run(store, "r")
    store.write("answers", "r", [_answer("r", "c0", 0)])
    version = store.version()
    with pytest.raises(StoreError, match="answers: cannot store"):
        store.commit_run("r", {"judgments": [], "answers": [{**_answer("r", "c1", 1), "started_at": 12}]},
                         replace=True)
    with pytest.raises(StoreError, match="cannot store"):
        store.commit_run("r", {"answers": [{**_answer("r", "c1", 1), "answer": "x\ud800"}]}, replace=True)
    assert store.version() == version and store.read("answers")["case_id"].to_list() == ["c0"]


def test_delete_and_rename_are_single_runs_commits(store: Store) -> None:
    for run in ("a", "b"):
        _new_run(store, run)
        store.write("answers", run, [_answer(run, "c0", 0)])
    version = store.version()
    rename_run(store, "a", "a2")
    assert store.version() == version + 1
    assert sorted(store.run_ids()) == ["a2", "b"]
    assert store.read("answers", ["a2"])["run_id"].to_list() == ["a2"] and store.read("answers", ["a"]).is_empty()
    with pytest.raises(StoreError, match="exists"):
        rename_run(store, "a2", "b")
    delete_run(store, "b")
    assert store.run_ids() == ["a2"] and store.read("answers")["run_id"].to_list() == ["a2"]
    with pytest.raises(StoreError, match="no run"):
        delete_run(store, "b")


def test_compaction_keeps_every_row(store: Store) -> None:
    _new_run(store, "r")
    for seq in range(5):
        store.write("answers", "r", [_answer("r", f"c{seq}", seq)])
    compact_run(store, "r")
    assert len(store.files("answers", "r")) == 1 and len(json.loads(store.run("r")["write_ids"])) == 1
    assert sorted(store.read("answers")["case_id"]) == [f"c{i}" for i in range(5)]


def test_lock_is_exclusive_and_names_its_holder(store: Store) -> None:
    with store.lock("r"):
        with pytest.raises(StoreError, match="being written by this process"):
            with store.lock("r"):
                pass
    with store.lock("r"):
        pass
    code = ("import sys, time; from toolkit.store import Store; s = Store.open(sys.argv[1])\n"
            "with s.lock('r'):\n    print('held', flush=True); time.sleep(30)")
    holder = subprocess.Popen([sys.executable, "-c", code, str(store.root), "--marker"], cwd=ROOT,
                              stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(StoreError, match=rf"run 'r' is being written by pid {holder.pid} \(.*--marker\) since "):
            with store.lock("r"):
                pass
    finally:
        holder.kill()
        holder.wait()


def test_journal_survives_a_torn_tail_and_never_duplicates(store: Store) -> None:
    _new_run(store, "r")
    journal = RunJournal(store, "r")
    journal.append("answers", _answer("r", "c0", 0))
    journal.append_many([("judgments", {"run_id": "r", "case_id": "c0", "judge_model": "j", "judge_pass": 1,
                                        "attempt": 1, "seq": 1}),
                         ("decisions", {"run_id": "r", "case_id": "c0", "judge_model": "j", "judge_pass": 1,
                                        "item_id": "i_0", "matched": True, "judgment_attempt": 1})])
    path = next(journal.folder.glob("*.jsonl"))
    with open(path, "ab") as handle:
        handle.write(b'[{"t":"answers","r":{"run_id":"r","case_')  # killed mid-write
    os.close(journal._fd)  # the writer dies; nothing was checkpointed
    # A crash after the checkpoint's commits but before the journal was removed:
    store.commit_run("r", {"answers": [_answer("r", "c0", 0)]}, write_id=path.stem)
    assert RunJournal(store, "r").recover() == 0  # its write id is live: nothing is written again
    assert store.read("answers").height == 1
    # and a crash after the data commit but before the runs commit: replayed, once.
    journal = RunJournal(store, "r")
    journal.append("answers", _answer("r", "c1", 2))
    path = next(journal.folder.glob("*.jsonl"))
    os.close(journal._fd)
    from toolkit.store import delta
    import pyarrow as pa
    from toolkit.tables import to_arrow
    frame = to_arrow("answers", [_answer("r", "c1", 2)])
    frame = frame.append_column("write_id", pa.array([path.stem])).append_column("part", pa.array(["r"]))
    delta.overwrite(store.root / "answers", "answers", frame, f"part = 'r' AND write_id = '{path.stem}'")
    store.commit_run("r", {"answers": [_answer("r", "c9", 9)]}, write_id="other")
    assert RunJournal(store, "r").recover() == 1
    assert sorted(store.read("answers")["case_id"]) == ["c0", "c1", "c9"]
    assert not list(journal.folder.glob("*.jsonl"))


def test_a_truncated_part_file_is_named_and_other_runs_still_read(store: Store) -> None:
    for run in ("good", "bad"):
        _new_run(store, run)
        store.write("answers", run, [_answer(run, f"c{i}", i) for i in range(50)])
    victim = store.files("answers", "bad")[0]
    victim.write_bytes(victim.read_bytes()[:-40])
    assert list(store.damaged()) == ["bad"] and str(victim) in store.damaged()["bad"]
    assert store.read("answers", ["good"]).height == 50
    with pytest.raises(StoreError, match="damaged part file"):
        store.read("answers", ["bad"])


def test_stray_files_are_invisible(store: Store) -> None:
    _new_run(store, "r")
    store.write("answers", "r", [_answer("r", "c0", 0)])
    folder = store.files("answers", "r")[0].parent
    pl.DataFrame({"run_id": ["r"], "case_id": ["evil"]}).write_parquet(folder / "compact-999.parquet")
    assert store.read("answers")["case_id"].to_list() == ["c0"]
    assert all(p.name != "compact-999.parquet" for p in store.files("answers"))


def test_duckdb_views_over_every_table(store: Store) -> None:
    _new_run(store, "r/1")
    store.write("answers", "r/1", [_answer("r/1", "c0", 0), _answer("r/1", "c1", 1)])
    con = connect(store, derived=())
    assert con.execute("select count(*) from answers").fetchone() == (2,)
    assert con.execute("select count(*) from decisions").fetchone() == (0,)
    assert {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()} >= {
        "runs", "answers", "judgments", "decisions", "cases", "rubric_items"}


def test_schema_docs_are_generated_from_the_definitions() -> None:
    from toolkit.sql._schema_docs import markdown

    doc = (Path(__file__).resolve().parents[1] / "schemas" / "tables.md").read_text()
    assert doc == markdown() + "\n", "run: python -m toolkit.sql._schema_docs"


@pytest.mark.parametrize("where,crash_at", [("commit", 1), ("commit", 2), ("commit", 3), ("delete", 1)])
def test_a_crash_at_any_commit_of_a_replace_leaves_the_old_run_or_the_new_one(store: Store, monkeypatch, where: str,
                                                                               crash_at: int) -> None:
    from toolkit.store import delta

    _new_run(store, "r")
    store.commit_run("r", {"answers": [_answer("r", "old", 0)], "decisions": []})
    store.commit_run("r", {"judgments": [{"run_id": "r", "case_id": "old", "judge_model": "j", "judge_pass": 1,
                                          "attempt": 1, "seq": 1}]})
    calls = []

    def dying(real):
        def call(*args, **kwargs):  # the process dies at the crash_at-th commit of this kind
            calls.append(args)
            if len(calls) == crash_at:
                raise KeyboardInterrupt
            return real(*args, **kwargs)
        return call

    kinds = ("append", "overwrite") if where == "commit" else ("delete",)
    originals = {k: getattr(delta, k) for k in kinds}
    for kind in kinds:
        monkeypatch.setattr(delta, kind, dying(originals[kind]))
    new = {"answers": [_answer("r", "new", 0)],
           "judgments": [{"run_id": "r", "case_id": "new", "judge_model": "j", "judge_pass": 1, "attempt": 1,
                          "seq": 1}]}
    with pytest.raises(KeyboardInterrupt):
        store.commit_run("r", new, _run_row("r"), replace=True)
    for kind in kinds:
        monkeypatch.setattr(delta, kind, originals[kind])
    state = {t: store.read(t)["case_id"].to_list() for t in ("answers", "judgments")}
    # data commits (1, 2) and the runs commit (3) are all-or-nothing; a death in the sweep after it keeps the new run
    expected = "new" if where == "delete" else "old"
    assert state == {"answers": [expected], "judgments": [expected]}  # never a mix, never empty
    store.commit_run("r", new, _run_row("r"), replace=True)  # the next writer sweeps what the dead one left
    assert {t: store.read(t)["case_id"].to_list() for t in ("answers", "judgments")} == {
        "answers": ["new"], "judgments": ["new"]}
    assert store.read("runs").height == 1


def test_a_store_of_the_plain_parquet_layout_gets_one_clear_line(tmp_path: Path) -> None:
    old = tmp_path / "old" / "runs" / "r"
    old.mkdir(parents=True)
    pl.DataFrame({"run_id": ["r"]}).write_parquet(old / "part-000000000000-abcd.parquet")
    with pytest.raises(StoreError, match="older bedside"):
        Store.open(tmp_path / "old").run_ids()


def test_a_store_removed_and_written_again_in_one_process_reads_its_new_rows(tmp_path: Path) -> None:
    import shutil

    for answer in ("first", "second"):
        store = Store.open(tmp_path / "st")
        _new_run(store, "r")
        store.write("answers", "r", [{**_answer("r", "c0", 0), "answer": answer}])
        assert store.read("answers")["answer"].to_list() == [answer]
        shutil.rmtree(tmp_path / "st")


def test_read_runs_frames_come_from_one_commit(store: Store, sample_dataset, monkeypatch) -> None:
    """A replace committed while read_runs goes table by table must not mix the old answers with the new
    judgments: the frames are read again as of the version the reading began at."""
    from toolkit.selection import read_runs

    store.write_dataset(sample_dataset)
    case = sample_dataset.cases["case_id"][0]
    store.commit_run("r", {"answers": [_answer("r", case, 0)]}, {**_run_row("r"), "dataset_sha256": sample_dataset.sha256})
    judgment = {"run_id": "r", "case_id": case, "judge_model": "j", "judge_pass": 1, "attempt": 1, "answer_attempt": 1,
                "seq": 1}
    real_read = Store.read
    def read_then_replace(self: Store, table: str, *args, **kwargs):
        out = real_read(self, table, *args, **kwargs)
        if table == "answers" and self.pinned is None:
            monkeypatch.setattr(Store, "read", real_read)
            store.commit_run("r", {"answers": [_answer("r", case, 1)], "judgments": [judgment]},
                             {**_run_row("r"), "dataset_sha256": sample_dataset.sha256}, replace=True)
        return out
    monkeypatch.setattr(Store, "read", read_then_replace)
    data = read_runs(store, ["r"])
    assert data.answers["seq"].to_list() == [0] and data.judgments.is_empty()
    fresh = read_runs(store, ["r"])
    assert fresh.answers["seq"].to_list() == [1] and fresh.judgments["seq"].to_list() == [1]


def test_a_store_made_from_a_text_path_reads_like_one_made_from_a_path(tmp_path) -> None:
    """``bs.Store("results")`` is what a notebook writes first; it must not fail on the first read."""
    from toolkit.store import Store

    Store.open(tmp_path / "s").run_ids()  # an empty store folder
    assert Store(str(tmp_path / "s")).run_ids() == []
    assert Store(str(tmp_path / "s")).root == tmp_path / "s"
