"""A DuckDB connection over the store: every table as a view, plus derived relations.

The views are ``toolkit.sql._views``' statements, the same ones ``bedside db`` writes into a database file:
the tables (their schema's columns and types, over the current snapshot's Parquet files) and the derived
``pass_scores``, ``sample_scores``, ``case_scores``, ``benchmark_scores`` and ``run_summary``: the score
tables the toolkit stored with each commit, and those it computes here for what is not stored
(``fill_computed``). Bootstrap intervals are not stored: ``run_intervals`` is filled here with
``toolkit.summary`` when a query needs them (they cost a bootstrap).

``query`` is what ``bedside sql`` runs: one read-only statement on a locked connection that
can read the store's current Parquet files and nothing else; ``query_head`` runs it for a table of its
first rows, counting the rest without holding them.
"""

from __future__ import annotations

import re
import threading
import time
from typing import Callable, TypeVar

import duckdb
import polars as pl

from toolkit.sql import _views as views
from toolkit.sql._connection import LockedConnection, explained, parsed
from toolkit.selection import read_runs
from toolkit.store import Store, StoreError
from toolkit.summary import SummaryOptions, ci_method, summarize_data
from toolkit.selection import JudgeSelection
from toolkit.tables import SCORE_TABLES, STORED

# Every score view: a query naming only one (say sample_scores) still gets the rows of runs stored without it.
DERIVED = tuple(SCORE_TABLES)
_WITH_INTERVALS = ("benchmark_scores", "run_summary", "run_intervals")
READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
_FIRST_WORD = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)", re.S)
COUNT_SECONDS = 5.0  # how long ``query_head`` counts the rows it does not show before it says "at least"
_BATCH_ROWS = 65536  # rows DuckDB hands over at a time while the rest is counted
T = TypeVar("T")


class SQLRefused(ValueError):
    """A statement ``query`` does not run (it is not a single read)."""


def connect(store: Store, derived: tuple[str, ...] = DERIVED, options: SummaryOptions = SummaryOptions(),
            read_only: bool = True) -> LockedConnection | duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's tables and the derived relations as views.

    Every view is always there (they are SQL, computed when read); ``derived`` names the ones the caller
    will read: only when ``benchmark_scores`` or ``run_summary`` is among them are the bootstrap intervals
    computed into ``run_intervals`` (else their ``ci_*`` columns are null). ``options``: the judge,
    passes, order and bootstrap settings of ``toolkit.summary``.

    ``read_only`` (the default, and what ``bedside sql`` uses): the views are built first, then
    DuckDB's file access is switched off except for the current snapshot's Parquet files
    (``enable_external_access=false`` with ``allowed_paths``), Python variables are no longer
    scanned as tables, and the configuration is locked, so ``read_text('/etc/passwd')``,
    ``ATTACH``, ``INSTALL``/``LOAD`` and ``COPY`` to any other file fail. DuckDB would still write
    the snapshot files themselves, so the connection comes wrapped (``toolkit.sql._connection``):
    ``COPY``, ``EXPORT`` and ``ATTACH`` statements and a relation's ``to_parquet``/``to_csv`` are
    refused (``ReadOnlyRefused``, a ``duckdb.PermissionException``). ``con.register`` of your own
    frames, temporary tables and views still work. ``read_only=False``: the same views on an unrestricted connection (to ``COPY`` results out or
    ``ATTACH`` a database of your own; the views still only read).
    Raises StoreError when a part file is unreadable or the store path is not UTF-8 text.
    """
    _utf8_path(store, store.root)  # before any reader meets it
    version = store.version()
    con = duckdb.connect(":memory:")
    if store.is_remote:  # Arrow datasets of the visible files: DuckDB reads them with no extension to fetch
        files = {name: [] for name in STORED}
        relations = {name: f"_bedside_source_{name}" for name in STORED}
        for name, relation in relations.items():
            con.register(relation, store.arrow_dataset(name))
    else:
        files = {name: [_utf8_path(store, f) for f in store.files(name)] for name in STORED}
        relations = None
    build(con, files, options, relations)
    if derived:
        fill_computed(con, store, options)
    if any(d in derived for d in _WITH_INTERVALS):
        fill_intervals(con, store, version, options)
    if read_only:
        allowed = [f for table in files.values() for f in table]
        con.execute(f"SET allowed_paths = [{', '.join(_literal(f) for f in allowed)}]")
        for setting in ("enable_external_access", "python_enable_replacements", "autoinstall_known_extensions",
                        "autoload_known_extensions", "allow_community_extensions"):
            con.execute(f"SET {setting} = false")
        con.execute("SET lock_configuration = true")
        return LockedConnection(con)
    return con


def build(con: duckdb.DuckDBPyConnection, files: dict[str, list[str]], options: SummaryOptions,
          relations: dict[str, str] | None = None) -> None:
    """Run ``toolkit.sql._views``' statements on ``con``; StoreError naming a damaged part file."""
    for statement in views.statements(files, options, relations):
        try:
            con.execute(statement)
        except duckdb.Error as error:  # binding read_parquet reads the files' footers: name a damaged one
            raise StoreError(_unreadable([f for t in files.values() for f in t], error)) from None


def fill_computed(con: duckdb.DuckDBPyConnection, store: Store, options: SummaryOptions) -> None:
    """Fill the ``_bedside.computed_*`` tables with the score rows the stored tables do not hold for
    ``options`` (``toolkit.score_tables.computed``), replacing what they held."""
    from toolkit.score_tables import computed

    for table, frame in computed(store, options).items():
        con.register("_bedside_rows", frame.to_arrow())
        try:
            con.execute(f"DELETE FROM {views.INTERNAL}.computed_{table}")
            con.execute(f"INSERT INTO {views.INTERNAL}.computed_{table} SELECT * FROM _bedside_rows")
        finally:
            con.unregister("_bedside_rows")


def fill_intervals(con: duckdb.DuckDBPyConnection, store: Store, version: int | None,
                   options: SummaryOptions) -> int:
    """Compute every run's bootstrap intervals (``toolkit.summary``) into ``run_intervals``, each row
    stamped with its run's ``updated_at`` and the store version; returns the number of rows."""
    frame = intervals(store, options, version)
    con.register("_bedside_intervals", frame.to_arrow())
    con.execute("DELETE FROM run_intervals")
    con.execute("INSERT INTO run_intervals SELECT * FROM _bedside_intervals")
    con.unregister("_bedside_intervals")
    return frame.height


def intervals(store: Store, options: SummaryOptions = SummaryOptions(), version: int | None = None) -> pl.DataFrame:
    """run_id, benchmark (null: the overall macro mean), ci_low, ci_high, ci_method (null with the interval),
    run_updated_at, store_version."""
    run_ids = store.run_ids()
    data = read_runs(store, run_ids, texts=False)
    summaries = summarize_data(data, run_ids, options)
    updated = dict(zip(data.runs["run_id"].to_list(), data.runs["updated_at"].to_list()))
    method = ci_method(options.bootstrap)
    rows = []
    for rid, s in summaries.items():
        for name, bounds in ((None, s["overall_ci95"]), *((n, b["ci95"]) for n, b in s["benchmarks"].items())):
            low, high = _nulls(bounds)
            rows.append((rid, name, low, high, None if low is None else method, updated.get(rid), version))
    return pl.DataFrame(rows, orient="row", schema={
        "run_id": pl.String, "benchmark": pl.String, "ci_low": pl.Float64, "ci_high": pl.Float64,
        "ci_method": pl.String, "run_updated_at": pl.String, "store_version": pl.Int64})



def _nulls(bounds) -> tuple:
    """An interval's bounds with NaN (no case to resample) as NULL, as ``summary --json`` shows them."""
    return tuple(None if v is None or v != v else v for v in bounds)


def query(store: Store, sql: str, options: SummaryOptions = SummaryOptions()) -> pl.DataFrame:
    """Run one read statement (SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN) over
    the store on a read-only connection; SQLRefused for anything else (COPY, ATTACH, CREATE, DROP,
    INSERT, SET, PRAGMA, CALL, ... or several statements). duckdb.Error for a failing query."""
    con = _read_only(store, sql, options)
    try:
        return _interruptible(con, lambda: con.sql(sql).pl())
    finally:
        con.close()


def query_head(store: Store, sql: str, rows: int, show: Callable[[pl.DataFrame], None],
               options: SummaryOptions = SummaryOptions()) -> tuple[int, bool]:
    """Run ``sql`` as ``query`` does, hand its first ``rows`` rows to ``show``, then count the rows after
    them: DuckDB streams them in batches, so memory stays that of one batch however long the result.
    Returns (rows not shown, whether all were counted: counting stops after ``COUNT_SECONDS``)."""
    con = _read_only(store, sql, options)
    try:
        reader = _interruptible(con, lambda: con.sql(sql).to_arrow_reader(max(rows + 1, _BATCH_ROWS)))
        first, held = _interruptible(con, lambda: _first_rows(reader, rows))
        show(first)
        return _interruptible(con, lambda: _count_rest(reader, held - first.height))
    finally:
        con.close()


def _first_rows(reader, wanted: int) -> tuple[pl.DataFrame, int]:
    """The first ``wanted`` rows, and how many rows the batches read for them hold (one more at least, when
    there are more: so a result of exactly ``wanted`` rows is not said to have more)."""
    import pyarrow as pa

    batches, held = [], 0
    while held <= wanted:
        try:
            batch = reader.read_next_batch()
        except StopIteration:
            break
        batches.append(batch)
        held += batch.num_rows
    return pl.from_arrow(pa.Table.from_batches(batches, schema=reader.schema).slice(0, wanted)), held


def _count_rest(reader, seen: int) -> tuple[int, bool]:
    deadline = time.monotonic() + COUNT_SECONDS
    for batch in reader:
        seen += batch.num_rows
        if time.monotonic() > deadline:
            return seen, False
    return seen, True


def _read_only(store: Store, sql: str, options: SummaryOptions) -> LockedConnection:
    _check_read_only(parsed(sql))  # parses only: no store needed yet
    return connect(store, derived=referenced(sql), options=options, read_only=True)


def _interruptible(con: LockedConnection, work: Callable[[], T]) -> T:
    """Run ``work`` on a worker thread: DuckDB does not look at Python's signals while it runs, so
    the main thread waits, takes Ctrl-C (KeyboardInterrupt) and interrupts the query."""
    outcome: dict[str, object] = {}
    done = threading.Event()

    def run() -> None:
        try:
            outcome["value"] = work()
        except BaseException as error:  # handed to the main thread
            outcome["error"] = error
        finally:
            done.set()

    threading.Thread(target=run, name="bedside-sql", daemon=True).start()
    try:
        while not done.wait(0.2):  # an Event wait, not Thread.join: Ctrl-C reaches us here
            pass
    except KeyboardInterrupt:
        con.interrupt()
        done.wait(10)
        raise
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["value"]  # type: ignore[return-value]


def _check_read_only(statements: list) -> None:
    if not statements:
        raise SQLRefused("empty query: give one SELECT statement")
    if len(statements) > 1:
        raise SQLRefused(f"{len(statements)} statements: `bedside sql` runs one statement at a time")
    statement = statements[0]
    kind = statement.type
    if kind == duckdb.StatementType.EXPLAIN:
        # EXPLAIN ANALYZE runs what it explains: the explained statement must be a read too
        inner = explained(statement)
        if len(inner) != 1 or inner[0].type != duckdb.StatementType.SELECT:
            raise SQLRefused("EXPLAIN of a statement that is not a SELECT is refused: `bedside sql` only reads")
    elif kind not in READ_STATEMENTS:
        word = _FIRST_WORD.match(statement.query)  # what the user typed (INSTALL is a LOAD statement to DuckDB)
        name = word.group(1).upper() if word else str(kind).rsplit(".", 1)[-1]
        if kind == duckdb.StatementType.MULTI:  # DuckDB's PIVOT without an IN list first creates a type
            raise SQLRefused("PIVOT needs its values listed here (PIVOT ... ON col IN ('a', 'b') USING ...): "
                             "without them DuckDB creates a type, and `bedside sql` only reads")
        raise SQLRefused(f"{name} statements are refused: `bedside sql` only reads the store (SELECT, WITH, "
                         "DESCRIBE, SHOW, SUMMARIZE, EXPLAIN); to write, run duckdb on an exported file")


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _utf8_path(store: Store, path) -> str:
    text = str(path)
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        shown = str(store.root).encode("utf-8", "surrogateescape").decode("utf-8", "backslashreplace")
        raise StoreError(f"{shown}: path: not UTF-8 text, which DuckDB cannot open; rename the folder") from None
    return text


def _unreadable(files: list[str], error: duckdb.Error) -> str:
    import pyarrow.parquet as pq

    for f in files:
        try:
            pq.read_metadata(f)
        except Exception as problem:  # pyarrow raises several types for a damaged file
            return f"{f}: part file: unreadable Parquet ({str(problem).splitlines()[0]})"
    return f"SQL: {str(error).splitlines()[0]}"


def referenced(query: str) -> tuple[str, ...]:
    """Derived relations a query names (so a plain query does not pay for the bootstrap)."""
    lowered = query.lower()
    return tuple(d for d in (*DERIVED, "run_intervals") if d in lowered)
