"""The Parquet store: path-safe run ids, atomic parts, compaction, locks, the journal."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from toolkit.journal import RunJournal
from toolkit.store import Store, StoreError, safe_segment
from toolkit.sql import connect


def _answer(run: str, case: str, seq: int) -> dict:
    return {"run_id": run, "case_id": case, "attempt": 1, "seq": seq, "answer": f"a{seq}"}


@pytest.mark.parametrize("run_id", ["accounts/fireworks/models/x", "../x", "..", ".", "a b", "x" * 500, "/etc/passwd",
                                    "é/..", "C:\\evil"])
def test_hostile_run_ids_stay_inside_the_store(store: Store, run_id: str) -> None:
    path = store.write("answers", run_id, [_answer(run_id, "c", 1)])
    assert path is not None
    assert path.resolve().is_relative_to((store.root / "answers").resolve())
    assert path.parent.parent == store.root / "answers"
    assert store.read("answers", [run_id])["run_id"].to_list() == [run_id]


def test_segments_are_injective_and_plain() -> None:
    ids = ["a/b", "a%2Fb", "a_b", "a-b", "A/B", "a.b", "a%2Eb"]
    segments = [safe_segment(i) for i in ids]
    assert len(set(segments)) == len(ids)
    assert all("/" not in s and s not in (".", "..") and not s.startswith(".") for s in segments)


def test_writes_are_atomic_and_compaction_keeps_every_row(store: Store) -> None:
    for seq in range(5):
        store.write("answers", "r", [_answer("r", f"c{seq}", seq)])
    folder = store.partition_dir("answers", "r")
    assert not [p for p in folder.iterdir() if p.name.startswith(".tmp")]
    store.compact("answers", "r")
    assert [p.name for p in folder.iterdir()] == ["compact-000000000004.parquet"]
    assert sorted(store.read("answers")["case_id"]) == [f"c{i}" for i in range(5)]
    store.write("answers", "r", [_answer("r", "c5", 5)])
    assert store.read("answers").height == 6


def test_superseded_parts_left_by_a_crash_are_ignored(store: Store) -> None:
    a = store.write("answers", "r", [_answer("r", "c0", 0)])
    store.write("answers", "r", [_answer("r", "c1", 1)])
    keep = a.read_bytes()
    store.compact("answers", "r")
    a.write_bytes(keep)  # as if the crash came between the compact rename and the clean-up
    assert store.read("answers").height == 2
    assert sorted(store.read("answers")["case_id"]) == ["c0", "c1"]


def test_lock_is_exclusive(store: Store) -> None:
    with store.lock("r"):
        with pytest.raises(StoreError, match="being written by another process"):
            with store.lock("r"):
                pass
    with store.lock("r"):
        pass


def test_journal_survives_a_torn_tail_and_never_duplicates(store: Store) -> None:
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
    # A crash after the answers part was written but before the journal was removed:
    tag = path.stem
    store.write_tagged("answers", "r", [_answer("r", "c0", 0)], tag)
    recovered = RunJournal(store, "r").recover()
    assert recovered == 2  # the judgment and its decision; the answer was already there
    assert store.read("answers").height == 1
    assert store.read("judgments").height == 1 and store.read("decisions").height == 1
    assert not list(journal.folder.glob("*.jsonl"))


def test_duckdb_views_over_every_table(store: Store) -> None:
    store.write("answers", "r/1", [_answer("r/1", "c0", 0), _answer("r/1", "c1", 1)])
    con = connect(store, derived=())
    assert con.execute("select count(*) from answers").fetchone() == (2,)
    assert con.execute("select count(*) from decisions").fetchone() == (0,)
    assert {r[0] for r in con.execute("select table_name from information_schema.tables").fetchall()} >= {
        "runs", "answers", "judgments", "decisions", "cases", "rubric_items"}


def test_schema_docs_are_generated_from_the_definitions() -> None:
    from toolkit.tables import markdown

    doc = (Path(__file__).resolve().parents[1] / "schemas" / "tables.md").read_text()
    assert doc == markdown() + "\n", "run: python -m toolkit.tables"
