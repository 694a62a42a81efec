"""A DuckDB connection over the store: every table as a view, plus derived relations.

Derived relations: ``pass_scores`` (run x case x judge x pass), ``case_scores``
(run x case, mean over the primary judge's passes), ``benchmark_scores`` and
``run_summary`` (exact means and bootstrap intervals of ``toolkit.summary``).
Scores are computed in polars (exact Python rounding) and registered as Arrow
tables; the summaries are only computed when asked for, since they bootstrap.

``query`` is what ``bedside sql`` runs: one read-only statement on a locked connection that
can read the store's current Parquet files and nothing else.
"""

from __future__ import annotations

import re
import threading

import duckdb
import polars as pl

from toolkit.selection import latest_valid_decisions, per_case, read_runs, scored_passes
from toolkit.store import Store, StoreError
from toolkit.summary import SummaryOptions, resolve_order, summarize_data
from toolkit.tables import TABLES

DERIVED = ("pass_scores", "case_scores", "benchmark_scores", "run_summary")
READ_STATEMENTS = frozenset({duckdb.StatementType.SELECT, duckdb.StatementType.EXPLAIN})
_FIRST_WORD = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/|\()*([A-Za-z]+)", re.S)
_EXPLAIN = re.compile(r"^(?:\s+|--[^\n]*(?:\n|$)|/\*.*?\*/)*explain\s*(?:\([^)]*\)\s*)?(?:analy[sz]e\b)?", re.I | re.S)


class SQLRefused(ValueError):
    """A statement ``query`` does not run (it is not a single read)."""


def connect(store: Store, derived: tuple[str, ...] = DERIVED, options: SummaryOptions = SummaryOptions(),
            read_only: bool = True) -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection with the store's tables as views and the ``derived`` relations.

    ``read_only`` (the default, and what ``bedside sql`` uses): the views are built first, then
    DuckDB's file access is switched off except for the current snapshot's Parquet files
    (``enable_external_access=false`` with ``allowed_paths``), Python variables are no longer
    scanned as tables, and the configuration is locked, so ``read_text('/etc/passwd')``,
    ``ATTACH``, ``INSTALL``/``LOAD`` and ``COPY`` to any other file fail. ``con.register`` of your
    own frames still works. DuckDB itself does not refuse a ``COPY`` onto one of those snapshot
    files, so run SQL you did not write through ``query``, which admits one read statement only.
    ``read_only=False``: the same views on an unrestricted connection (to ``COPY`` results out or
    ``ATTACH`` a database of your own; the views still only read).
    Raises StoreError when a part file is unreadable or the store path is not UTF-8 text.
    """
    _utf8_path(store, store.root)  # before any reader meets it
    con = duckdb.connect(":memory:")
    allowed: list[str] = []
    for name, table in TABLES.items():
        files = [_utf8_path(store, f) for f in store.files(name)]
        if files:
            allowed += files
            paths = ", ".join(_literal(f) for f in files)
            try:
                con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM read_parquet([{paths}], union_by_name = true)')
            except duckdb.Error as error:  # a damaged part file: name it
                raise StoreError(_unreadable(files, error)) from None
        else:
            con.register(f"_empty_{name}", table.schema.empty_table())
            con.execute(f'CREATE VIEW "{name}" AS SELECT * FROM "_empty_{name}"')
    wanted = [d for d in DERIVED if d in derived]
    if wanted:
        frames = derived_frames(store, store.run_ids(), tuple(wanted), options)
        for name in wanted:
            con.register(name, frames[name].to_arrow())
    if read_only:
        con.execute(f"SET allowed_paths = [{', '.join(_literal(f) for f in allowed)}]")
        for setting in ("enable_external_access", "python_enable_replacements", "autoinstall_known_extensions",
                        "autoload_known_extensions", "allow_community_extensions"):
            con.execute(f"SET {setting} = false")
        con.execute("SET lock_configuration = true")
    return con


def query(store: Store, sql: str, options: SummaryOptions = SummaryOptions()) -> pl.DataFrame:
    """Run one read statement (SELECT, WITH, FROM, VALUES, DESCRIBE, SHOW, SUMMARIZE, EXPLAIN) over
    the store on a read-only connection; SQLRefused for anything else (COPY, ATTACH, CREATE, DROP,
    INSERT, SET, PRAGMA, CALL, ... or several statements). duckdb.Error for a failing query."""
    statements = duckdb.connect(":memory:").extract_statements(sql)  # parses only: no store needed yet
    _check_read_only(statements)
    con = connect(store, derived=referenced(sql), options=options, read_only=True)
    try:
        return _interruptible(con, sql)
    finally:
        con.close()


def _interruptible(con: duckdb.DuckDBPyConnection, sql: str) -> pl.DataFrame:
    """Run the query on a worker thread: DuckDB does not look at Python's signals while it runs, so
    the main thread waits, takes Ctrl-C (KeyboardInterrupt) and interrupts the query."""
    outcome: dict[str, object] = {}
    done = threading.Event()

    def work() -> None:
        try:
            outcome["frame"] = con.sql(sql).pl()
        except BaseException as error:  # handed to the main thread
            outcome["error"] = error
        finally:
            done.set()

    threading.Thread(target=work, name="bedside-sql", daemon=True).start()
    try:
        while not done.wait(0.2):  # an Event wait, not Thread.join: Ctrl-C reaches us here
            pass
    except KeyboardInterrupt:
        con.interrupt()
        done.wait(10)
        raise
    if "error" in outcome:
        raise outcome["error"]  # type: ignore[misc]
    return outcome["frame"]  # type: ignore[return-value]


def _check_read_only(statements: list) -> None:
    if not statements:
        raise SQLRefused("empty query: give one SELECT statement")
    if len(statements) > 1:
        raise SQLRefused(f"{len(statements)} statements: `bedside sql` runs one statement at a time")
    statement = statements[0]
    kind = statement.type
    if kind == duckdb.StatementType.EXPLAIN:
        # EXPLAIN ANALYZE runs what it explains: the explained statement must be a read too
        head = _EXPLAIN.match(statement.query)
        inner = duckdb.connect(":memory:").extract_statements(statement.query[head.end():]) if head else []
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


def derived_frames(store: Store, run_ids: list[str], wanted: tuple[str, ...],
                   options: SummaryOptions = SummaryOptions()) -> dict[str, pl.DataFrame]:
    data = read_runs(store, run_ids, texts=False)
    out: dict[str, pl.DataFrame] = {}
    if "pass_scores" in wanted:
        out["pass_scores"] = scored_passes(data, latest_valid_decisions(data.judgments, data.decisions))
    if "case_scores" in wanted:
        out["case_scores"] = per_case(data, options.selection)
    if "benchmark_scores" in wanted or "run_summary" in wanted:
        summaries = summarize_data(data, run_ids, options)
        runs = {r["run_id"]: r for r in data.runs.iter_rows(named=True)}
        out["benchmark_scores"] = pl.DataFrame(
            [{"run_id": rid, "benchmark": name, "n": b["n"], "mean": b["mean"],
              "ci_low": b["ci95"][0], "ci_high": b["ci95"][1]}
             for rid, s in summaries.items() for name, b in s["benchmarks"].items()],
            schema={"run_id": pl.String, "benchmark": pl.String, "n": pl.Int64, "mean": pl.Float64,
                    "ci_low": pl.Float64, "ci_high": pl.Float64})
        out["run_summary"] = pl.DataFrame(
            [{"run_id": rid, "answer_model": s["answer_model"], "judge_model": s["judge_model"],
              "source": runs[rid]["source"], "dataset_sha256": s["dataset_sha256"],
              "completed_cases": s["completed_cases"], "errors": s["errors"],
              "overall_macro_mean": s["overall_macro_mean"], "ci_low": s["overall_ci95"][0],
              "ci_high": s["overall_ci95"][1], "judge_passes_per_answer": s["judge_passes_per_answer"],
              "order": resolve_order(options.order, runs[rid]),
              "started_at": s["started_at"], "finished_at": s["finished_at"]} for rid, s in summaries.items()],
            schema={"run_id": pl.String, "answer_model": pl.String, "judge_model": pl.String, "source": pl.String,
                    "dataset_sha256": pl.String, "completed_cases": pl.Int64, "errors": pl.Int64,
                    "overall_macro_mean": pl.Float64, "ci_low": pl.Float64, "ci_high": pl.Float64,
                    "judge_passes_per_answer": pl.Int64, "order": pl.String, "started_at": pl.String,
                    "finished_at": pl.String})
    return out


def referenced(query: str) -> tuple[str, ...]:
    """Derived relations a query names (so a plain query does not pay for the bootstrap)."""
    lowered = query.lower()
    return tuple(d for d in DERIVED if d in lowered)
