"""Whole-run operations of the store: delete, rename, compact (a mixin of ``Store``, kept apart for size).

Each is one ``runs`` commit under the run's lock, followed by a sweep of rows no run names any more.
"""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path

import pyarrow as pa

from toolkit.store import databases, delta, live as writes
from toolkit.store.delta import DATA_TABLES, PART, WRITE_ID
from toolkit.store.disk import NoSpace
from toolkit.store.locks import store_lock
from toolkit.store.paths import StoreError, new_run_id, now_iso, part_of as _part
from toolkit.tables import TABLES


class RunManagement:
    """Needs of the host class: root, _path, _row, _hold, _writable, _sweep, _commit_row, read, run_ids,
    commit_run, journal_dir."""

    def delete_run(self, run_id: str) -> None:
        """Remove a run: ONE runs commit (it stops being a run), then its data and journal are swept, and its
        files deleted: the space comes back at once (also on a full disk, where it is wanted most), and
        older store versions no longer show the run's rows."""
        self._writable()
        run_id = self._canon(run_id)
        with self._hold(run_id):
            if self._row(run_id) is None:
                raise StoreError(f"{self.root}: no run {run_id!r} (runs: {', '.join(self.run_ids()) or 'none'})")
            try:
                delta.delete(self._path("runs"), f"{PART} = '{_part(run_id)}'")
            except NoSpace:
                raise NoSpace(f"no space left on {self.root}: not even for the small commit that removes run "
                              f"{run_id!r}; free some space outside the store first") from None
            try:
                self._sweep(run_id, set())
            except StoreError:  # a disk too full for the sweep's log entries: the run is gone all the same
                pass
            _remove_tree(self.journal_dir(run_id))
            self._free_files(run_id, None)
        databases.refresh(self)

    def _free_files(self, run_id: str, since: float | None) -> None:
        """Delete the files of the run's partitions that the tables' latest versions do not name (written
        since ``since``, a time; None: all). Under the run's lock: no other writer adds files there."""
        seg = _part(run_id)
        for table in DATA_TABLES:
            path = self._path(table)
            folder = path / f"{PART}={seg}"
            latest = delta.latest_version(path)
            if latest is None or not folder.is_dir():
                continue
            named = {f for f, _, _ in delta.files_of(delta.actions_at(path, latest), path, {seg}, None)}
            for file in folder.iterdir():
                try:
                    if file not in named and file.is_file() and (since is None or file.stat().st_mtime >= since - 1):
                        file.unlink()
                except OSError:  # gone already, say: best effort
                    pass

    def rename_run(self, old: str, new: str) -> None:
        """Give a run another id: its rows are copied under the new id, then ONE runs commit swaps the two
        rows (old gone, new present); the old rows are swept afterwards."""
        self._writable()
        old, new = self._canon(old), new_run_id(new)
        if old == new:
            raise StoreError(f"run {old!r}: the new id is the same")
        with self._hold(old), self._hold(new):
            current = self._row(old)
            if current is None:
                raise StoreError(f"{self.root}: no run {old!r} (runs: {', '.join(self.run_ids()) or 'none'})")
            if self._row(new) is not None:
                raise StoreError(f"{self.root}: run {new!r} exists (remove it first or choose another id)")
            pending = self.journal_dir(old)
            if pending.is_dir() and any(pending.iterdir()):
                raise StoreError(f"run {old!r} has a collection journal or batch in flight ({pending}): "
                                 "finish it with `bedside run`/`bedside judge` first")
            self._sweep(new, set())
            wid = uuid.uuid4().hex
            seg = _part(new)
            copied: dict[str, int] = {}
            for table in DATA_TABLES:
                data = self.read(table, [old]).to_arrow()
                if data.num_rows == 0:
                    continue
                data = data.set_column(data.schema.get_field_index("run_id"), "run_id",
                                       pa.array([new] * data.num_rows, pa.string()))
                data = data.append_column(WRITE_ID, pa.array([wid] * data.num_rows, pa.string()))
                data = data.append_column(PART, pa.array([seg] * data.num_rows, pa.string()))
                delta.overwrite(self._path(table), table, data, f"{PART} = '{seg}' AND {WRITE_ID} = '{wid}'")
                copied[table] = data.num_rows
            step = {"at": now_iso(), "kind": "rename", "from": old}
            live = writes.add({}, wid, copied) if copied else {}
            self._commit_row(new, {**current, "run_id": new}, None, step, live, False, drop=_part(old))
            self._sweep(old, set())
            _remove_tree(pending)
        databases.refresh(self)

    def compact_run(self, run_id: str) -> None:
        """Rewrite a run written in many commits as one write (one file per table), sweep dead rows, and
        keep the runs table to a few files. Readers of the current version are never disturbed: the
        rewrite becomes visible in one runs commit and old files stay on disk (Delta's vacuum
        retention) for readers of older versions."""
        self._writable()
        with self._hold(run_id):
            current = self._row(run_id)
            if current is None:
                return
            live = writes.parse(current["write_ids"])
            if len(live) > 1:
                rows = {t: self.read(t, [run_id]).to_arrow() for t in DATA_TABLES}
                self.commit_run(run_id, rows, replace=True, run_row={c: current[c] for c in TABLES["runs"].names})
            else:
                self._sweep(run_id, set(live))
        self._compact_runs_table()
        databases.refresh(self)

    def _vacuum(self) -> None:
        """Delete files no version within Delta's retention (7 days) names: never a file the current version,
        or a reader of a recent one, needs. Every 25th version of a table, so its listing cost is spread."""
        for table in (*DATA_TABLES, "runs"):
            path = self._path(table)
            latest = delta.latest_version(path)
            if latest is not None and latest % 25 == 0:
                try:
                    delta.load(path).vacuum(dry_run=False)
                except Exception:  # a concurrent commit, say: the next compaction will do it
                    pass

    def _compact_runs_table(self) -> None:
        self._vacuum()
        path = self._path("runs")
        loaded = delta.load(path)
        if loaded is None or len(delta.files_of(loaded, path, None, None)) <= 16:
            return
        with store_lock(self.root / ".locks" / "store.lock"):
            try:
                delta.load(path).optimize.compact()
                delta.seal_added(path, delta.latest_version(path))  # the compacted files: read-only on disk
            except Exception:  # a concurrent runs commit won; compaction can wait for the next time
                pass



def _remove_tree(folder: Path) -> None:
    if folder.exists():
        trash = folder.with_name(f".trash-{uuid.uuid4().hex[:8]}")
        os.replace(folder, trash)
        shutil.rmtree(trash, ignore_errors=True)
