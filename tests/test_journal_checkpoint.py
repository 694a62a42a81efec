"""The collecting process commits its journal from the records it appended (no read-back), with exactly the
rows a recovery from the file stores; a run is compacted when a collection ends only once it holds many
writes."""

from __future__ import annotations

import json
from pathlib import Path

from toolkit.collect.journal import COMPACT_WRITES, RunJournal, pending_rows
from toolkit.store import Store


def _rows(run_id: str) -> list[dict]:
    return [{"run_id": run_id, "case_id": f"c{i}", "attempt": 1, "answer_model": "m", "seq": i,
             "answer": text, "latency_s": 0.25 * i, "prompt_tokens": i}
            for i, text in enumerate(["plain", "lone \ud800 surrogate", "ünï €", ""])]


def _stored(store: Store, run_id: str) -> list[dict]:
    return store.read("answers", [run_id]).drop("run_id").sort("case_id").to_dicts()


def test_held_records_store_what_a_recovery_from_the_file_stores(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s")
    for run_id in ("live", "crashed"):
        store.commit_run(run_id, None, {"answer_model": "m"})
    live = RunJournal(store, "live")
    for row in _rows("live"):
        live.append("answers", row)
    live.checkpoint()  # from the records held in memory
    crashed = RunJournal(store, "crashed")
    for row in _rows("crashed"):
        crashed.append("answers", row)
    crashed.rotate()  # killed before its checkpoint: the file is all that is left
    assert RunJournal(store, "crashed").recover() == 4  # read back from the file
    assert _stored(store, "live") == _stored(store, "crashed")
    assert _stored(store, "live")[1]["answer"] == "lone \ufffd surrogate"
    assert not list(live.folder.glob("*.jsonl")) and not list(crashed.folder.glob("*.jsonl"))


def _writes(store: Store, run_id: str) -> int:
    return len(json.loads(store.run(run_id)["write_ids"]))


def test_a_run_is_compacted_at_the_end_only_when_it_holds_many_writes(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "s")
    for run_id, checkpoints in (("few", 3), ("many", COMPACT_WRITES + 1)):
        store.commit_run(run_id, None, {"answer_model": "m"})
        journal = RunJournal(store, run_id)
        for i in range(checkpoints):
            journal.append("answers", {**_rows(run_id)[0], "case_id": f"c{i}", "seq": i})
            journal.checkpoint()
        journal.close()
    assert _writes(store, "few") == 3
    assert _writes(store, "many") == 1  # rewritten as one write
    assert store.read("answers", ["many"]).height == COMPACT_WRITES + 1 and store.read("answers", ["few"]).height == 3


def test_a_journal_committed_before_a_crash_is_neither_pending_nor_stored_again(tmp_path: Path) -> None:
    """A crash after a checkpoint's commits but before its journal file was removed: the file's write id is
    live in the run, so a dry run does not count its rows as still pending and a recovery writes nothing."""
    store = Store.open(tmp_path / "s")
    store.commit_run("r", None, {"answer_model": "m"})
    first, second, third = (row for row in _rows("r") if "\ud800" not in row["answer"])
    journal = RunJournal(store, "r")
    for row in (first, second):
        journal.append("answers", row)
    path = journal.rotate()
    store.commit_run("r", {"answers": [first, second]}, write_id=path.stem)  # the checkpoint's commit landed
    waiting = RunJournal(store, "r")
    waiting.append("answers", third)
    waiting.rotate()  # a second file, never committed: pending
    assert [row["case_id"] for row in pending_rows(store, "r")["answers"]] == [third["case_id"]]
    assert path.exists()
    assert RunJournal(store, "r").recover() == 1  # only the uncommitted file's row
    assert [row["case_id"] for row in _stored(store, "r")] == [r["case_id"] for r in (first, second, third)]
    assert not list(journal.folder.glob("*.jsonl"))
