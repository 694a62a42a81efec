"""The store's committed files cannot be written through any connection the toolkit hands out.

DuckDB's ``allowed_paths`` lets a locked connection write the files it may read: ``COPY ... TO
'<live part file>' (USE_TMP_FILE false)`` through ``bs.connect(store)`` used to overwrite a run's
decisions. It is refused there (and through ``bedside sql``), with one line, the store byte for byte
as it was; and the committed Parquet files are read-only on disk.
"""

from __future__ import annotations

import stat
from pathlib import Path

import duckdb
import pytest

from tests.conftest import snapshot
from tests.test_cli_process import bedside_process
from tests.test_sql import _filled_store
from toolkit.sql._query import connect


def _copy_onto(part: Path) -> str:
    target = str(part).replace("'", "''")
    return f"COPY (SELECT * FROM decisions LIMIT 7) TO '{target}' (FORMAT parquet, USE_TMP_FILE false)"


def test_copy_onto_a_part_file_through_connect_is_refused(tmp_path: Path, sample_dataset) -> None:
    store = _filled_store(tmp_path, sample_dataset)
    part = store.files("decisions")[0]
    before = snapshot(store.root)
    con = connect(store, derived=())
    rows = con.sql("SELECT count(*) FROM decisions").fetchall()[0][0]
    outside = tmp_path / "out"
    attempts = [
        lambda: con.execute(_copy_onto(part)),
        lambda: con.sql(_copy_onto(part)),
        lambda: con.query("  -- a comment first\n" + _copy_onto(part)),
        lambda: con.cursor().execute(_copy_onto(part)),
        lambda: con.execute(con.extract_statements(_copy_onto(part))[0]),
        lambda: con.execute("EXPLAIN ANALYZE " + _copy_onto(part)),
        lambda: con.execute(f"EXPORT DATABASE '{outside}'"),
        lambda: con.execute(f"ATTACH '{part}' AS p"),
        lambda: con.sql("SELECT * FROM decisions LIMIT 7").to_parquet(str(part), use_tmp_file=False, overwrite=True),
        lambda: con.sql("SELECT * FROM decisions LIMIT 7").limit(3).write_csv(str(part), overwrite=True),
        lambda: con.table("decisions").query("d", _copy_onto(part)),
    ]
    for attempt in attempts:
        with pytest.raises(duckdb.Error) as refused:
            attempt()
        message = str(refused.value)
        assert len(message.splitlines()) == 1 and "read-only connection" in message, message
    assert snapshot(store.root) == before and not outside.exists()
    # the connection still reads, and notebooks' own tables and frames still work
    assert con.sql("SELECT count(*) FROM decisions").fetchall()[0][0] == rows
    con.execute("CREATE TEMP TABLE mine AS SELECT run_id, count(*) AS n FROM decisions GROUP BY run_id")
    assert con.sql("SELECT sum(n) FROM mine").fetchall()[0][0] == rows
    joined = con.sql("SELECT run_id FROM runs").join(con.table("mine"), "run_id")
    assert joined.pl()["n"].to_list() == [rows] and len(joined) == 1
    with connect(store, derived=()) as again:
        assert again.execute("SELECT count(*) FROM runs").fetchone() == (1,)
    writable = connect(store, derived=(), read_only=False)  # an unlocked connection writes files of your own
    writable.execute(f"COPY runs TO '{tmp_path}/runs.csv'")
    assert (tmp_path / "runs.csv").exists()


def test_copy_onto_a_part_file_through_bedside_sql_is_refused(tmp_path: Path, sample_dataset) -> None:
    store = _filled_store(tmp_path, sample_dataset)
    before = snapshot(store.root)
    done = bedside_process(["sql", _copy_onto(store.files("decisions")[0]), "--store", str(store.root)])
    assert done.returncode == 1 and done.stdout == ""
    assert done.stderr.startswith("bedside: error: SQL: refused: COPY statements") and done.stderr.count("\n") == 1
    assert snapshot(store.root) == before


def test_committed_parquet_files_are_read_only_on_disk(tmp_path: Path, sample_dataset) -> None:
    store = _filled_store(tmp_path, sample_dataset)
    files = [f for table in ("runs", "answers", "judgments", "decisions", "cases", "rubric_items")
             for f in store.files(table)]
    assert files
    for f in files:
        assert stat.S_IMODE(f.stat().st_mode) & 0o222 == 0, (f, oct(f.stat().st_mode))
