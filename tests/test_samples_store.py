"""Stores written before answer samples existed: their files have no ``sample`` column and their stored scores
no ``sample_scores``. They read as sample 0 through every surface with no migration step, a later commit
widens the table and writes on, and the marker keeps an earlier bedside from mixing samples up."""

from __future__ import annotations

import json
from contextlib import contextmanager

import polars as pl
import pyarrow as pa
import pytest

from tests import analysis_sim
from tests.samples_support import sample_decisions, write_samples
from toolkit.score_tables import score_commits
from toolkit.sql._query import connect
from toolkit.store import Store, delta, transaction
from toolkit.summary import summarize

OLD_MARKER = "bedside-store 2\n"


def _old_schema(table: str) -> pa.Schema:
    return pa.schema([f for f in delta.physical_schema(table) if f.name != "sample"])


@contextmanager
def old_writing():
    """Commits as the toolkit before samples wrote them: tables and files without ``sample``, stored scores
    without ``sample_scores`` (format 2)."""
    def append(path, table, data):
        if not delta.is_table(path):
            from deltalake import DeltaTable
            DeltaTable.create(str(path), _old_schema(table), partition_by=delta.partition_by(table), name=table)
        data = data.select(_old_schema(table).names).cast(_old_schema(table))
        delta._write(path, data, mode="append", partition_by=delta.partition_by(table))

    def overwrite(path, table, data, predicate):
        data = data.select(_old_schema(table).names).cast(_old_schema(table))
        delta._write(path, data, mode="overwrite", predicate=predicate, partition_by=delta.partition_by(table))

    def scorer(batch):
        return [None if out is None else {t: f for t, f in out.items()
                                          if t not in ("sample_scores", "reliability_scores")}
                for out in score_commits(batch)]

    before = list(transaction._SCORERS)
    transaction._SCORERS[:] = [scorer]
    patch = pytest.MonkeyPatch()
    patch.setattr(delta, "append", append)
    patch.setattr(delta, "overwrite", overwrite)
    try:
        yield
    finally:
        patch.undo()
        transaction._SCORERS[:] = before


@pytest.fixture(autouse=True)
def scorer(scoring_commits):
    """Commits in these tests store scores (conftest.scoring_commits)."""


def _rows(frame: pl.DataFrame) -> pl.DataFrame:
    """A table's rows in a fixed order, without the columns that record when they were written."""
    frame = frame.drop("started_at", "finished_at", strict=False)
    return frame.sort(frame.columns, nulls_last=True)


def _old_store(root, dataset, **kwargs) -> Store:
    """A store holding run "old" as the toolkit before samples wrote it, marked format 2."""
    with old_writing():
        analysis_sim.write_run(Store.open(root), dataset, "old", 0.3, 1, **kwargs)
    (root / ".bedside-store").write_text(OLD_MARKER, encoding="utf-8")
    from toolkit.store import paths
    paths._CHECKED.clear()
    paths._OLDER.clear()
    return Store.open(root)


def test_a_store_written_before_samples_reads_as_sample_0_everywhere(tmp_path, sample_dataset) -> None:
    store = _old_store(tmp_path / "s", sample_dataset, passes=2)
    new = Store.open(tmp_path / "n")
    analysis_sim.write_run(new, sample_dataset, "old", 0.3, 1, passes=2)
    # The old files really lack the column.
    for table in ("answers", "judgments", "decisions", "pass_scores"):
        files = store.files(table)
        assert files and all("sample" not in pl.read_parquet_schema(f) for f in files), table
    assert store.files("sample_scores") == []
    for table in ("answers", "judgments", "decisions", "pass_scores"):
        frame = store.read(table, ["old"])
        assert frame["sample"].to_list() == [0] * frame.height and frame.height > 0
        assert _rows(frame).equals(_rows(new.read(table, ["old"]))), table
    # The same summary, bit for bit, as the same rows written now.
    assert json.dumps(summarize(store, ["old"])) == json.dumps(summarize(new, ["old"]))
    # SQL: the base views fill the column, and sample_scores is computed for the run (its scores hold none).
    with connect(store) as con:
        assert con.execute("SELECT DISTINCT sample FROM answers").fetchall() == [(0,)]
        old_rows = con.execute("SELECT * FROM sample_scores ORDER BY case_id").fetchall()
    with connect(new) as con:
        assert old_rows == con.execute("SELECT * FROM sample_scores ORDER BY case_id").fetchall()
    assert len(old_rows) == sample_dataset.cases.height


def test_a_later_commit_to_an_old_store_widens_its_tables_and_raises_the_marker(tmp_path, sample_dataset) -> None:
    root = tmp_path / "s"
    store = _old_store(root, sample_dataset)
    before = summarize(store, ["old"])["old"]
    # A second pass of the old run (a re-judge) and a new multi-sample run: both commits land.
    second = store.read("decisions", ["old"]).with_columns(judge_pass=pl.lit(2, pl.Int32))
    judged = store.read("judgments", ["old"]).with_columns(judge_pass=pl.lit(2, pl.Int32))
    store.commit_run("old", {"judgments": judged.to_arrow(), "decisions": second.to_arrow()})
    write_samples(store, sample_dataset, "k2", sample_decisions(sample_dataset, "k2", 2))
    assert (root / ".bedside-store").read_text() == "bedside-store 3\n"
    from deltalake import DeltaTable
    assert "sample" in [f.name for f in DeltaTable(str(root / "decisions")).schema().fields]
    decisions = store.read("decisions", ["old"])
    assert decisions.height == 2 * second.height and set(decisions["sample"]) == {0}
    assert store.read("sample_scores", ["old"]).height == sample_dataset.cases.height
    assert store.read("sample_scores", ["k2"]).height == 2 * sample_dataset.cases.height
    assert summarize(store, ["old"])["old"]["judge_passes_per_answer"] == 2
    assert before["completed_cases"] == summarize(store, ["old"])["old"]["completed_cases"]
    # What an earlier bedside does with the marker (toolkit/store/paths.py at format 2): refuses it.
    kind, _, version = (root / ".bedside-store").read_text().strip().partition(" ")
    assert kind == "bedside-store" and int(version) > 2


def test_a_db_file_written_before_samples_is_rebuilt_by_its_next_refresh(store: Store, sample_dataset,
                                                                        tmp_path) -> None:
    import duckdb

    from toolkit.sql import write_database

    write_samples(store, sample_dataset, "k", sample_decisions(sample_dataset, "k", 2))
    path = tmp_path / "bench.duckdb"
    write_database(store, path)
    with duckdb.connect(str(path)) as con:  # as the version before samples left it
        con.execute('DROP VIEW sample_scores')
        con.execute('DROP VIEW _bedside.stored_sample_scores')
        con.execute('DROP TABLE _bedside.computed_sample_scores')
        con.execute('DROP VIEW pass_scores')
        con.execute('ALTER TABLE _bedside.computed_pass_scores DROP COLUMN sample')
    analysis_sim.write_run(store, sample_dataset, "one", 0.3, 2)  # a commit: the file is refreshed
    with duckdb.connect(str(path), read_only=True) as con:
        rows = dict(con.execute("SELECT run_id, count(*) FROM sample_scores GROUP BY run_id").fetchall())
        assert con.execute("SELECT count(*) FROM pass_scores WHERE sample = 1").fetchone()[0] > 0
    assert rows == {"k": 2 * sample_dataset.cases.height, "one": sample_dataset.cases.height}


def test_an_old_store_is_read_in_one_polars_pass_per_table(tmp_path, sample_dataset) -> None:
    """Files without ``sample`` take the polars read that fills it, not the file-by-file pyarrow fallback
    kept for damaged files (it imports pyarrow.parquet, and pandas where installed: most of a cold command)."""
    import subprocess
    import sys

    root = tmp_path / "s"
    _old_store(root, sample_dataset)
    code = ("import sys\nfrom toolkit.store import Store\nfrom toolkit.selection import read_runs\n"
            f"data = read_runs(Store.open({str(root)!r}), ['old'])\n"
            "assert data.decisions['sample'].to_list() == [0] * data.decisions.height > [] \n"
            "print(sorted(m for m in ('pyarrow.parquet', 'pandas') if m in sys.modules))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_a_query_naming_only_sample_scores_computes_them_for_an_old_run(tmp_path, sample_dataset) -> None:
    # `bedside sql` builds only the derived views a query names (toolkit.sql._query.referenced): a query of
    # sample_scores alone must still have the old run's rows computed, not an empty view.
    from toolkit.sql._query import referenced
    store = _old_store(tmp_path / "s", sample_dataset)
    query = "SELECT count(*) FROM sample_scores"
    assert "sample_scores" in referenced(query)
    with connect(store, derived=referenced(query)) as con:
        assert con.execute(query).fetchone() == (sample_dataset.cases.height,)
