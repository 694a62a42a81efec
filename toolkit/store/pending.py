"""Writes of a run that are built up over several data commits before one runs commit shows them (a mixin
of ``Store``, kept apart for size).

``commit_run`` takes a run's rows in one piece; a streamed import cannot hold them all. Here a caller
(holding the run's lock) begins a write, adds rows in as many data commits as it likes, all under the
write's one write id and so invisible, and finishes it with ONE runs commit; or abandons it, and the rows
are swept (a process killed before either leaves them invisible; the next writer of the run sweeps them).
Several runs' pending rows may go into one data commit per table (a bulk import of small files): each
still becomes visible only through its own runs commit.
"""

from __future__ import annotations

import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from toolkit.store import databases, delta, live as writes
from toolkit.store.delta import DATA_TABLES, PART, WRITE_ID
from toolkit.store.paths import StoreError, new_run_id, part_of


@dataclass
class PendingWrite:
    run_id: str
    write_id: str
    current: dict[str, Any] | None  # the run's runs row when the write began (None: a new run)
    wrote: bool = field(default=False)  # some data commit carried rows of this write
    rows: dict[str, int] = field(default_factory=dict)  # rows committed so far, by table
    began: float = field(default_factory=time.time)  # files of the run's partitions newer than this are its own


class PendingWrites:
    """Needs of the host class: root, _path, _row, _writable, _sweep, _commit_row (and ``_frames`` of core)."""

    def begin_write(self, run_id: str) -> PendingWrite:
        """A fresh, invisible write of ``run_id``; the caller holds the run's lock (``Store.lock``) until it
        finishes or abandons it. ``current`` tells whether the run exists. Rows an interrupted write of a
        run without a runs row left behind are swept first."""
        self._writable()
        run_id = self._canon(run_id)
        current = self._row(run_id)
        if current is None:
            run_id = new_run_id(run_id)
            if self._has_rows(run_id):
                self._sweep(run_id, set())
        return PendingWrite(run_id, uuid.uuid4().hex, current)

    def _has_rows(self, run_id: str) -> bool:
        """Whether any data table holds rows of the run (cheap: cached add actions of the latest versions)."""
        seg = part_of(run_id)
        for table in DATA_TABLES:
            path = self._path(table)
            latest = delta.latest_version(path)
            if latest is not None and delta.files_of(delta.actions_at(path, latest), path, {seg}, None):
                return True
        return False

    def add_rows(self, batch: list[tuple[PendingWrite, dict[str, Any]]]) -> None:
        """Data commits, one per table, of the rows of each pending write (rows: by run table, Arrow tables
        or row dicts); nothing becomes visible. StoreError (one line) for a value that does not fit, before
        any commit."""
        from toolkit.store.core import _frames

        tables: dict[str, list[pa.Table]] = {}
        counted = []
        for pending, rows in batch:
            seg = part_of(pending.run_id)
            frames = _frames(pending.run_id, rows)
            counted.append((pending, writes.counts(frames)))
            for table, frame in frames.items():
                frame = frame.append_column(WRITE_ID, pa.array([pending.write_id] * frame.num_rows, pa.string()))
                frame = frame.append_column(PART, pa.array([seg] * frame.num_rows, pa.string()))
                tables.setdefault(table, []).append(frame)
        if any(frame.num_rows for frames in tables.values() for frame in frames):
            self._writable()  # claims the folder: not for a batch with no row (a file refused at its end)
        for table in DATA_TABLES:
            if table in tables:
                delta.append(self._path(table), table, pa.concat_tables(tables[table]))
        for pending, rows in counted:
            pending.wrote = pending.wrote or bool(rows)
            for table, n in rows.items():
                pending.rows[table] = pending.rows.get(table, 0) + n

    def finish_write(self, pending: PendingWrite, run_row: dict[str, Any] | None, step: dict[str, Any] | None,
                     replace: bool = False) -> None:
        """ONE runs commit making the write's rows part of the run (``replace``: all of the run, the old rows
        swept after). ``run_row``: columns of the runs row (needed for a new run); ``step``: appended to
        its ``steps``."""
        self._writable()
        current = pending.current
        if current is None and run_row is None:
            raise StoreError(f"{self.root}: no run {pending.run_id!r} to add rows to")
        live = {} if replace or current is None else writes.parse(current["write_ids"])
        if pending.wrote:
            live = writes.add(live, pending.write_id, pending.rows)
        self._commit_row(pending.run_id, current, run_row, step, live, replace)
        if replace and current is not None:
            self._sweep(pending.run_id, set(live))
        databases.refresh(self)  # registered `bedside db` files now read the new live files

    def abandon_write(self, pending: PendingWrite) -> None:
        """Sweep the rows a write that will not be finished committed (best effort: they are invisible
        anyway, and the next writer of the run sweeps what is left)."""
        keep = set() if pending.current is None else set(writes.parse(pending.current["write_ids"]))
        if pending.wrote:
            try:
                self._sweep(pending.run_id, keep)
            except Exception:  # a full disk, say: the rows stay invisible
                pass
        # Files this write left that no version names (a data commit that failed, one swept just now) go
        # at once: on a full disk they are the space a failed import took.
        self._free_files(pending.run_id, pending.began)
