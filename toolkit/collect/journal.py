"""Crash-safe appends for a run being collected: a write-ahead journal in front of the store.

A completed call is appended to the run's journal as one JSON line with a
single ``write`` (no buffering in this process), so ``kill -9`` cannot lose it.
``checkpoint`` turns the journal into ONE store transaction (``Store.commit_run``
with the journal's id as write id: data commits, then the runs commit that makes
them visible) and then deletes the journal; if a crash interrupts it, ``recover``
finishes the job on the next start, and since a data commit replaces the rows of
its write id, replaying it never writes a row twice. A torn last line (killed mid-write) is ignored: its call had not
completed. Rows are checked against their table's schema before they are
written, and a line that still cannot be stored (written by an older version,
say) is set aside in a ``.bad`` file by ``recover`` instead of blocking the run.
"""

from __future__ import annotations

import json
import os
import re
import threading
import uuid
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa

from toolkit.score_tables import store_scores
from toolkit.sql import follow_commits
from toolkit.store import Store, StoreError
from toolkit.store.runs_ops import compact_run
from toolkit.tables import FILLED, RUN_TABLES, TABLES, to_arrow

follow_commits()  # registered `bedside db` files follow this process's commits
store_scores()  # each commit stores its run's score tables with its rows

_SURROGATE = re.compile("[\ud800-\udfff]")
# A run is compacted when a collection ends only once it holds more writes than this (each checkpoint adds
# one small file per table): a short collection's few files cost a reader less than rewriting them costs it.
COMPACT_WRITES = 8
_INT32 = (-(2 ** 31), 2 ** 31 - 1)


class JournalError(ValueError):
    """A row that does not fit its table's schema: refused before it reaches the journal."""


def _checker(kind: pa.DataType) -> Callable[[Any], bool]:
    if pa.types.is_string(kind):
        return lambda v: isinstance(v, str)
    if pa.types.is_boolean(kind):
        return lambda v: isinstance(v, bool)
    if pa.types.is_int32(kind):
        return lambda v: isinstance(v, int) and not isinstance(v, bool) and _INT32[0] <= v <= _INT32[1]
    if pa.types.is_integer(kind):
        return lambda v: isinstance(v, int) and not isinstance(v, bool) and abs(v) < 2 ** 63
    if pa.types.is_floating(kind):
        return lambda v: isinstance(v, (int, float)) and not isinstance(v, bool)
    raise TypeError(f"no row check for {kind}")  # a new column type needs one here


# Per run table: (column, accepts a value, nullable), from the schema in toolkit.tables.
_CHECKS = {t: [(f.name, _checker(f.type), f.nullable) for f in TABLES[t].schema] for t in RUN_TABLES}


def sampled(table: Any, row: Any) -> Any:
    """A row without a FILLED column (``sample``) has its old value: written before the column existed (a
    journal an older version left behind) or by a caller that asks once."""
    if table not in _CHECKS or not isinstance(row, dict):
        return row
    return {**{c: v for c, v in FILLED.items() if c in TABLES[table].names and c not in row}, **row}


def row_problem(table: str, row: Any) -> str | None:
    """Why ``row`` cannot be stored in ``table`` (a run table), or None when it fits the schema."""
    checks = _CHECKS.get(table)
    if checks is None:
        return f"unknown table {table!r}"
    if not isinstance(row, dict):
        return f"{table} row is not an object"
    for name, fits, nullable in checks:
        value = row.get(name)
        if value is None:
            if not nullable:
                return f"{table}.{name} is missing"
        elif not fits(value):
            kind = TABLES[table].schema.field(name).type
            return f"{table}.{name} is {type(value).__name__} {str(value)[:40]!r}, not of type {kind}"
    return None


def _line_records(line: Any) -> list[tuple[str, dict[str, Any]]] | None:
    """The (table, row) records of one decoded journal line, or None when one of them does not fit."""
    if not isinstance(line, list):
        return None
    records = []
    for record in line:
        if not isinstance(record, dict):
            return None
        row = sampled(record.get("t"), record.get("r"))
        if row_problem(record.get("t"), row) is not None:
            return None
        records.append((record["t"], row))
    return records


def _read_lines(path: Path) -> tuple[list[list[tuple[str, dict[str, Any]]]], list[bytes]]:
    """(good lines, bad raw lines) of a journal file. A torn last line (its writer was killed mid-write)
    is neither: its call had not completed."""
    raw = path.read_bytes().split(b"\n")
    good: list[list[tuple[str, dict[str, Any]]]] = []
    bad: list[bytes] = []
    last = max((i for i, line in enumerate(raw) if line.strip()), default=-1)
    for index, line in enumerate(raw):
        if not line.strip():
            continue
        try:
            records = _line_records(json.loads(line))
        except (json.JSONDecodeError, UnicodeDecodeError, RecursionError):
            if index == last:
                continue  # torn tail
            records = None
        if records is None:
            bad.append(line)
        else:
            good.append(records)
    return good, bad


def pending_rows(store: Store, run_id: str) -> dict[str, list[dict[str, Any]]]:
    """Rows of a run's journals not yet in Parquet, by table; reads only (dry runs, inspections)."""
    folder = store.journal_dir(run_id)
    rows: dict[str, list[dict[str, Any]]] = {}
    for path in sorted(folder.glob("*.jsonl")) if folder.is_dir() else []:
        if store.is_live(run_id, path.stem):
            continue  # committed; the crash came before the journal was removed
        good, _ = _read_lines(path)
        for records in good:
            for table, row in records:
                rows.setdefault(table, []).append(row)
    return rows


class RunJournal:
    """Journal of one run; use under ``Store.lock(run_id)`` (one writer per run)."""

    def __init__(self, store: Store, run_id: str):
        self.store = store
        self.run_id = run_id
        self.folder = store.journal_dir(run_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = None
        self._path: Path | None = None
        self._lines = 0
        self.quarantined: dict[Path, int] = {}  # .bad file -> lines moved there by recover()
        self._mutex = threading.Lock()
        # The records appended to the open file, and those of rotated files not yet committed: a checkpoint
        # of this process commits them as they are (checked when appended) instead of reading the file back.
        self._records: list[tuple[str, dict[str, Any]]] = []
        self._held: dict[Path, list[tuple[str, dict[str, Any]]]] = {}

    def recover(self) -> int:
        """Materialise journals a crashed writer left behind; returns the rows recovered.

        A line that cannot be stored (it does not fit its table) is moved to ``<journal>.bad`` beside
        it and counted in ``quarantined``, so one bad line never blocks the run or the good lines.
        """
        rows = 0
        for path in sorted(self.folder.glob("*.jsonl")):
            rows += self.materialise(path)
        return rows

    def append(self, table: str, row: dict[str, Any]) -> None:
        """Append one row of a run table (durable against process death once this returns)."""
        self.append_many([(table, row)])

    def append_many(self, records: list[tuple[str, dict[str, Any]]]) -> None:
        """Several rows in one write: a judgment and its decisions land together or not at all.

        JournalError, with nothing written, when a row does not fit its table's schema.
        """
        records = [(table, sampled(table, row)) for table, row in records]
        for table, row in records:
            problem = row_problem(table, row)
            if problem is not None:
                raise JournalError(f"run {self.run_id!r}: {problem}")
        if self._fd is None:
            self._path = self.folder / f"{uuid.uuid4().hex}.jsonl"
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        payload = json.dumps([{"t": t, "r": r} for t, r in records], ensure_ascii=False, separators=(",", ":"))
        try:
            data = (payload + "\n").encode()
        except UnicodeEncodeError:  # a lone surrogate in some text: UTF-8 cannot hold it, U+FFFD can
            payload = _SURROGATE.sub("\ufffd", payload)
            data = (payload + "\n").encode()
            records = [(record["t"], record["r"]) for record in json.loads(payload)]  # as the file has them
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._lines += 1
        self._records += records

    def checkpoint(self) -> None:
        """Commit what the journal holds to the store (readers see it from then on)."""
        self.rotate()
        self.commit_rotated()

    def commit_rotated(self) -> int:
        """Commit every file ``rotate`` closed that is not committed yet, oldest first: one whose commit
        failed stays pending and is tried again here (by the next checkpoint), never left behind unseen."""
        with self._mutex:
            written = 0
            for path in list(self._held):
                written += self._materialise(path, self._held[path])
                del self._held[path]
            return written

    def rotate(self) -> Path | None:
        """Close the journal file being appended to (later appends start a new one); its path, to be
        committed by ``commit_rotated``, possibly on another thread while the collector keeps appending."""
        if self._fd is None:
            return None
        os.close(self._fd)
        path, self._fd, self._path, self._lines = self._path, None, None, 0
        assert path is not None
        self._held[path], self._records = self._records, []
        return path

    def materialise(self, path: Path) -> int:
        """Commit a closed journal file as one store transaction and remove it. One at a time per journal:
        two commits of one run racing each other would each drop the other's write id from the run."""
        with self._mutex:
            written = self._materialise(path, self._held.get(path))
            self._held.pop(path, None)  # only once committed: a failed commit stays pending
            return written

    def close(self) -> None:
        """Checkpoint, then compact the run (one file per table, dead rows swept) once it holds more than
        ``COMPACT_WRITES`` writes. StoreError (one line) when the journal cannot be committed: its rows
        stay in the journal, and the run's next start stores them."""
        try:
            self.checkpoint()
        except StoreError as error:
            raise StoreError(f"run {self.run_id!r}: completed calls could not be stored ({error}); they are kept "
                             f"in {self.folder}: run the same command again to store them") from None
        with self._mutex:  # after a checkpoint still committing on another thread
            if (self.store.has_run(self.run_id)
                    and len(json.loads(self.store.run(self.run_id)["write_ids"] or "[]")) > COMPACT_WRITES):
                compact_run(self.store, self.run_id)

    def _materialise(self, path: Path, held: list[tuple[str, dict[str, Any]]] | None = None) -> int:
        """Commit a journal file: ``held``, its records as this process appended them, or else (a journal
        left by another process) the file's lines, read back and checked."""
        tag = path.stem
        good, bad = ([held], []) if held is not None else _read_lines(path)
        by_table: dict[str, list[dict[str, Any]]] = {}
        for records in good:
            for table, row in records:
                if table != "runs":  # the runs row is the store's to write
                    by_table.setdefault(table, []).append(row)
        written = 0
        if by_table and not self.store.is_live(self.run_id, tag):
            try:
                self.store.commit_run(self.run_id, {t: to_arrow(t, rows) for t, rows in by_table.items()},
                                      write_id=tag)
            except StoreError:
                if self.store.has_run(self.run_id):
                    raise
                return 0  # no run to add them to (yet): the journal stays for the run's next start
            written = sum(len(rows) for rows in by_table.values())
        if bad:  # kept for inspection, never silently dropped
            target = path.with_suffix(".bad")
            target.write_bytes(b"".join(line + b"\n" for line in bad))
            self.quarantined[target] = len(bad)
        path.unlink(missing_ok=True)
        return written
