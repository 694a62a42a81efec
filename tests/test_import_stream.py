"""Streamed import: a file goes to the store a chunk at a time (small chunks here, so one file makes many data
commits), invisible until the one runs commit; a bad last line or a kill -9 in the middle leaves the store
as it was (readable, the run absent, its rows swept or invisible)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests import reference_model as rm
from tests.conftest import snapshot
from toolkit.reference._read import ImportError_, RunExists, import_many, import_reference
from toolkit.store import Store
from toolkit.store.paths import part_of
from toolkit.tables import TABLES

ROOT = Path(__file__).resolve().parents[1]
RUN_TABLES = ("answers", "judgments", "decisions")


def _rows(dataset, seeds: range) -> list[dict]:
    """Several runs' rows appended to one file: most cases succeed more than once (later rows supersede)."""
    return [r for seed in seeds for r in rm.make_rows(list(dataset.raw_cases), seed=seed, error_rate=0.3)]


def _write(path: Path, rows: list[dict], tail: str = "") -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows) + tail, encoding="utf-8")
    return path


def _log_entries(store: Path, table: str) -> int:
    folder = store / table / "_delta_log"
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def _content(store: Path) -> dict[str, list]:
    """Every visible row of every table, sorted by key (runs without its commit times and write ids)."""
    st = Store.open(store)
    out = {t: st.read(t).sort(list(TABLES[t].key)).rows() for t in ("answers", "judgments", "decisions", "cases")}
    out["runs"] = st.read("runs").drop("created_at", "updated_at", "steps", "write_ids").sort("run_id").rows()
    return out


def _parts(store: Path, table: str) -> set[str]:
    """The partitions the table's latest version has files in (swept rows are gone from it)."""
    return {uri.split("part=")[1].split("/")[0] for uri in DeltaTable(str(store / table)).file_uris()}


def test_many_small_chunks_store_what_one_chunk_stores(tmp_path: Path, sample_dataset) -> None:
    path = _write(tmp_path / "rerun.jsonl", _rows(sample_dataset, range(6)))
    whole, streamed = tmp_path / "whole", tmp_path / "streamed"
    one = import_reference(Store.open(whole), path, sample_dataset, "r")
    before = _log_entries(streamed, "answers")
    many = import_reference(Store.open(streamed), path, sample_dataset, "r", chunk_bytes=40_000)
    assert _log_entries(streamed, "answers") - before >= 5  # the file really went in several data commits
    assert one == many and one.rows == path.read_text().count("\n")
    assert _content(whole) == _content(streamed)
    assert len(json.loads(Store.open(streamed).run("r")["write_ids"])) == 1  # one write id, one runs commit


def test_a_bad_last_line_leaves_the_store_as_it_was(tmp_path: Path, sample_dataset) -> None:
    store = tmp_path / "store"
    good = _write(tmp_path / "good.jsonl", _rows(sample_dataset, range(1)))
    import_reference(Store.open(store), good, sample_dataset, "kept")
    rows = _rows(sample_dataset, range(1, 5))
    scored = max(i for i, r in enumerate(rows) if "score" in r)
    rows[scored] = {**rows[scored], "score": 1.5}
    rows = rows[: scored + 1]  # the bad row is the last line
    bad = _write(tmp_path / "bad.jsonl", rows)
    runs_before, content_before = snapshot(store / "runs"), _content(store)
    for run_id, replace in (("new", False), ("kept", True)):
        logs = _log_entries(store, "answers")
        with pytest.raises(ImportError_) as caught:
            import_reference(Store.open(store), bad, sample_dataset, run_id, replace=replace, chunk_bytes=40_000)
        assert str(caught.value) == f"{bad}:{len(rows)}: score: 1.5 is outside [0, 1]"
        assert _log_entries(store, "answers") > logs + 2  # chunks were committed before the last line was read
        assert snapshot(store / "runs") == runs_before  # no runs commit: the store version did not move
        assert _content(store) == content_before
        assert part_of("new") not in _parts(store, "answers")  # the new run's rows were swept
    assert Store.open(store).run_ids() == ["kept"]
    # A whole-file problem found at the end (a line that is not JSON) is refused the same way.
    _write(bad, rows[:-1], tail="{not json\n")
    with pytest.raises(ImportError_, match=rf":{len(rows)}: column 2: line is not JSON"):
        import_reference(Store.open(store), bad, sample_dataset, "new", chunk_bytes=40_000)
    assert _content(store) == content_before


def test_a_bulk_import_with_a_bad_file_between_streamed_ones(tmp_path: Path, sample_dataset) -> None:
    folder = tmp_path / "files"
    folder.mkdir()
    big = _write(folder / "a_big.jsonl", _rows(sample_dataset, range(3)))
    rows = _rows(sample_dataset, range(3, 5))
    _write(folder / "b_bad.jsonl", rows, tail='{"case_id": 3}\n')
    small = _write(folder / "c_small.jsonl", rows[:5])
    results = import_many(Store.open(tmp_path / "store"), sorted(folder.iterdir()), sample_dataset, chunk_bytes=30_000)
    assert [type(r).__name__ for r in results] == ["ImportReport", "ImportFailure", "ImportReport"]
    assert results[1].message == f"{folder / 'b_bad.jsonl'}:{len(rows) + 1}: case_id: missing or not a string"
    assert Store.open(tmp_path / "store").run_ids() == ["a_big", "c_small"]
    for path in (big, small):
        alone = tmp_path / f"alone-{path.stem}"
        import_reference(Store.open(alone), path, sample_dataset)
        assert _content(alone)["answers"] == [r for r in _content(tmp_path / "store")["answers"] if r[0] == path.stem]
    assert part_of("b_bad") not in _parts(tmp_path / "store", "answers")


_SLOW_IMPORT = """
import sys, time
from toolkit.reference import _read as reference
from toolkit.dataset import load_dataset
from toolkit.store import Store
store = Store.open(sys.argv[1])
real = store.add_rows
def slow(writes):  # a data commit, then a pause: the test kills the process between two chunks
    real(writes)
    time.sleep(0.05)
object.__setattr__(store, "add_rows", slow)
reference.import_reference(store, sys.argv[2], load_dataset(None), "big", chunk_bytes=1_000)
"""


def test_kill_9_in_the_middle_of_a_streamed_import(tmp_path: Path, sample_dataset) -> None:
    store = tmp_path / "store"
    path = _write(tmp_path / "big.jsonl", _rows(sample_dataset, range(8)))
    import_reference(Store.open(store), _write(tmp_path / "other.jsonl", _rows(sample_dataset, range(1))),
                     sample_dataset, "other")
    before, logs = _content(store), _log_entries(store, "answers")
    proc = subprocess.Popen([sys.executable, "-c", _SLOW_IMPORT, str(store), str(path)], cwd=ROOT,
                            stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while _log_entries(store, "answers") < logs + 3 and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)
    assert proc.returncode == -signal.SIGKILL, proc.stderr.read()
    assert part_of("big") in _parts(store, "answers")  # orphan rows on disk ...
    assert _content(store) == before  # ... that no reader sees: the store reads as before, the run absent
    assert not Store.open(store).has_run("big")
    report = import_reference(Store.open(store), path, sample_dataset, "big")  # the next import sweeps them
    alone = tmp_path / "alone"
    assert import_reference(Store.open(alone), path, sample_dataset, "big") == report
    assert [r for r in _content(store)["answers"] if r[0] == "big"] == _content(alone)["answers"]


def test_disagreements_stay_with_their_file_and_line(tmp_path: Path, sample_dataset) -> None:
    # Scores are checked for a batch of files in one scoring call, and for a streamed file chunk by chunk.
    # The files share their lines but the altered ones: a line of one file must never be scored with another's.
    paths, expected = [], {}
    for k in range(3):
        rows = _rows(sample_dataset, range(3))
        scored = [i for i, r in enumerate(rows) if "score" in r]
        bad = [scored[k], scored[-1 - k]]
        for i in bad:
            rows[i] = {**rows[i], "score": 0.123456}
        paths.append(_write(tmp_path / f"f{k}.jsonl", rows))
        expected[f"f{k}"] = [(i + 1, rows[i]["case_id"], 0.123456) for i in bad]
    reports = import_many(Store.open(tmp_path / "batched"), paths, sample_dataset)
    assert {r.run_id: [(d.line, d.case_id, d.file_score) for d in r.disagreements] for r in reports} == expected
    for path in paths:
        report = import_reference(Store.open(tmp_path / "streamed"), path, sample_dataset, chunk_bytes=30_000)
        assert [(d.line, d.case_id, d.file_score) for d in report.disagreements] == expected[path.stem]


def test_two_files_of_one_run_id_in_one_bulk_import(tmp_path: Path, sample_dataset) -> None:
    # The first file makes (or, with replace, replaces) the run; the second, of the same run, is refused: with
    # replace it would silently replace what the same import just made.
    first = _write((tmp_path / "a").mkdir() or tmp_path / "a" / "x.jsonl", _rows(sample_dataset, range(1)))
    second = _write((tmp_path / "b").mkdir() or tmp_path / "b" / "x.jsonl", _rows(sample_dataset, range(1, 2)))
    store = tmp_path / "store"
    for replace in (False, True):
        results = import_many(Store.open(store), [first, second], sample_dataset, replace=replace)
        assert results[0].run_id == "x" and results[1].message == (
            f"{second}: names run 'x', as {first} does in this import: one run per file (import it alone, or "
            "rename it)"), results
        assert Store.open(store).run("x")["source_file"] == str(first)


def test_an_existing_run_is_refused_after_the_whole_file_is_checked(tmp_path: Path, sample_dataset) -> None:
    store = tmp_path / "store"
    path = _write(tmp_path / "x.jsonl", _rows(sample_dataset, range(4)))
    import_reference(Store.open(store), path, sample_dataset)
    logs, before = _log_entries(store, "answers"), _content(store)
    with pytest.raises(RunExists, match="run 'x' exists"):  # many chunks, none written
        import_reference(Store.open(store), path, sample_dataset, chunk_bytes=30_000)
    assert _log_entries(store, "answers") == logs and _content(store) == before
    _write(path, _rows(sample_dataset, range(4)), tail="[]\n")  # a bad line at the end still comes first
    with pytest.raises(ImportError_, match="row: must be a JSON object"):
        import_reference(Store.open(store), path, sample_dataset, chunk_bytes=30_000)


def test_a_broken_line_reads_as_a_sentence_and_counts_the_other_problems(tmp_path: Path, sample_dataset) -> None:
    # json says "Unterminated string starting at" and leaves the position to its own formatting: the line's
    # position is in the message already, and "(+1 more)" did not say more of what.
    rows = _rows(sample_dataset, range(1))
    text = "".join(json.dumps(r) + "\n" for r in rows[:3]) + '{"case_id": "x", "answer": "abc\n' + "[]\n"
    path = tmp_path / "broken.jsonl"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ImportError_) as caught:
        import_reference(Store.open(tmp_path / "store"), path, sample_dataset)
    assert str(caught.value) == (f"{path}:4: column 28: line is not JSON: Unterminated string "
                                 "(and 1 more problem in the file)")
