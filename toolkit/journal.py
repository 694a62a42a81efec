"""Crash-safe appends for a run being collected: a write-ahead journal in front of the Parquet parts.

A completed call is appended to the run's journal as one JSON line with a
single ``write`` (no buffering in this process), so ``kill -9`` cannot lose it.
``checkpoint`` turns the journal into one Parquet part per table (atomic
renames, tagged with the journal's id) and then deletes the journal; if a crash
interrupts it, ``recover`` finishes the job on the next start without writing
any row twice. A torn last line (killed mid-write) is ignored: its call had not
completed.
"""

from __future__ import annotations

import json
import os
import uuid
from pathlib import Path
from typing import Any

from toolkit.store import Store, safe_segment
from toolkit.tables import RUN_TABLES, to_arrow


class RunJournal:
    """Journal of one run; use under ``Store.lock(run_id)`` (one writer per run)."""

    def __init__(self, store: Store, run_id: str):
        self.store = store
        self.run_id = run_id
        self.folder = store.root / "journal" / safe_segment(run_id)
        self.folder.mkdir(parents=True, exist_ok=True)
        self._fd: int | None = None
        self._path: Path | None = None
        self._lines = 0

    def recover(self) -> int:
        """Materialise journals a crashed writer left behind; returns the rows recovered."""
        rows = 0
        for path in sorted(self.folder.glob("*.jsonl")):
            rows += self._materialise(path)
        return rows

    def append(self, table: str, row: dict[str, Any]) -> None:
        """Append one row of a run table (durable against process death once this returns)."""
        self.append_many([(table, row)])

    def append_many(self, records: list[tuple[str, dict[str, Any]]]) -> None:
        """Several rows in one write: a judgment and its decisions land together or not at all."""
        if self._fd is None:
            self._path = self.folder / f"{uuid.uuid4().hex}.jsonl"
            self._fd = os.open(self._path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        payload = json.dumps([{"t": t, "r": r} for t, r in records], ensure_ascii=False, separators=(",", ":"))
        data = (payload + "\n").encode()
        view = memoryview(data)
        while view:
            written = os.write(self._fd, view)
            view = view[written:]
        self._lines += 1

    def checkpoint(self) -> None:
        """Move what the journal holds into Parquet parts (readers see it from then on)."""
        if self._fd is None:
            return
        os.close(self._fd)
        path, self._fd, self._path, self._lines = self._path, None, None, 0
        assert path is not None
        self._materialise(path)

    def close(self) -> None:
        self.checkpoint()
        for table in RUN_TABLES:
            self.store.compact(table, self.run_id)

    def _materialise(self, path: Path) -> int:
        tag = path.stem
        by_table: dict[str, list[dict[str, Any]]] = {}
        with open(path, "rb") as handle:
            for line in handle:
                try:
                    records = json.loads(line)
                except (json.JSONDecodeError, UnicodeDecodeError):
                    continue  # torn tail of a killed writer
                for record in records:
                    by_table.setdefault(record["t"], []).append(record["r"])
        written = 0
        for table in RUN_TABLES:  # runs last, like every other writer
            rows = by_table.get(table)
            if not rows or self._already_written(table, tag):
                continue
            self.store.write_tagged(table, self.run_id, to_arrow(table, rows), tag)
            written += len(rows)
        path.unlink(missing_ok=True)
        return written

    def _already_written(self, table: str, tag: str) -> bool:
        folder = self.store.partition_dir(table, self.run_id)
        return folder.is_dir() and any(f.name.endswith(f"-{tag}.parquet") for f in folder.iterdir())
