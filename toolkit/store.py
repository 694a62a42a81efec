"""The store: a directory of Parquet tables, written atomically.

Layout: ``<root>/<table>/<partition>/<file>.parquet`` where the partition is
the path-safe encoding of the run id (run tables) or the dataset digest
(``cases``, ``rubric_items``). Each write adds one immutable part file
(``part-<seq>-<random>.parquet``), written under a temporary name, synced and
renamed into place, so readers never see half a file. ``compact`` merges a
partition's parts into ``compact-<seq>.parquet``, which supersedes every part
with a sequence number up to its own; superseded files are removed afterwards,
and readers ignore them if a crash left them behind.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import uuid
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from toolkit.tables import DATASET_TABLES, RUN_TABLES, TABLES, to_arrow

_PART = re.compile(r"^(part|compact)-(\d{12})(?:-[0-9a-f]+)?\.parquet$")
_SAFE = re.compile(r"[A-Za-z0-9_\-]")
_MAX_SEGMENT = 120


def default_store_path() -> Path:
    """Where a command without ``--store`` reads and writes: ``$BEDSIDE_STORE``, else ``./data/results``
    relative to the current directory (never inside the installed package)."""
    chosen = os.environ.get("BEDSIDE_STORE")
    return Path(chosen) if chosen else Path.cwd() / "data" / "results"


def __getattr__(name: str) -> Path:
    # Kept for callers written before default_store_path(): resolved when asked, from the current directory.
    if name == "DEFAULT_STORE":
        return default_store_path()
    raise AttributeError(name)


class StoreError(RuntimeError):
    """A store operation that cannot proceed (missing run, run exists, locked run, ...)."""


def safe_segment(run_id: str) -> str:
    """A run id as one path segment: only [A-Za-z0-9_-] and %XX escapes; never '.', '..' or a slash.

    Distinct ids give distinct segments (the encoding is injective); very long ids are cut and
    suffixed with a digest of the whole id.
    """
    if not run_id:
        raise StoreError("run id must not be empty")
    encoded = "".join(ch if _SAFE.match(ch) else "".join(f"%{b:02X}" for b in ch.encode()) for ch in run_id)
    if len(encoded) > _MAX_SEGMENT:
        import hashlib

        encoded = f"{encoded[:80]}~{hashlib.sha256(run_id.encode()).hexdigest()[:32]}"
    return encoded


@dataclass(frozen=True)
class Store:
    root: Path

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None) -> "Store":
        """The store at ``root``, else ``default_store_path()`` ($BEDSIDE_STORE, else ./data/results)."""
        return cls(Path(root) if root is not None else default_store_path())

    # -- files -------------------------------------------------------------

    def partition_dir(self, table: str, key: str) -> Path:
        segment = safe_segment(key) if table in RUN_TABLES else key
        if table in DATASET_TABLES and not re.fullmatch(r"[0-9a-f]{64}", key):
            raise StoreError(f"dataset partition must be a sha256 digest, got {key!r}")
        return self.root / table / segment

    def files(self, table: str, key: str | None = None) -> list[Path]:
        """The visible Parquet files of a table (one partition, or all)."""
        base = self.root / table
        if key is not None:
            dirs = [self.partition_dir(table, key)]
        else:
            dirs = sorted(p for p in base.iterdir() if p.is_dir()) if base.is_dir() else []
        return [f for d in dirs for f in _visible(d)]

    def write(self, table: str, key: str, rows: pa.Table | list[dict]) -> Path | None:
        """Append rows to a partition as one new part file (atomic); None when there are no rows."""
        return self.write_tagged(table, key, rows, uuid.uuid4().hex[:8])

    def write_tagged(self, table: str, key: str, rows: pa.Table | list[dict], tag: str) -> Path | None:
        """``write`` with a caller-chosen hex tag in the file name (journals use it to stay idempotent)."""
        data = rows if isinstance(rows, pa.Table) else to_arrow(table, rows)
        if data.num_rows == 0:
            return None
        data = data.select(TABLES[table].schema.names).cast(TABLES[table].schema)
        folder = self.partition_dir(table, key)
        folder.mkdir(parents=True, exist_ok=True)
        seq = _next_seq(folder)
        return _atomic_write(data, folder / f"part-{seq:012d}-{tag}.parquet")

    def compact(self, table: str, key: str) -> None:
        """Merge a partition's visible files into one; safe against a crash at any point."""
        folder = self.partition_dir(table, key)
        visible = _visible(folder)
        if len(visible) <= 1:
            return
        merged = pa.concat_tables([pq.read_table(f) for f in visible], promote_options="default")
        last = max(_seq_of(f) for f in visible)
        _atomic_write(merged.cast(TABLES[table].schema), folder / f"compact-{last:012d}.parquet")
        for f in visible:
            if _seq_of(f) <= last and f.name != f"compact-{last:012d}.parquet":
                f.unlink(missing_ok=True)

    def compact_run(self, run_id: str) -> None:
        for table in RUN_TABLES:
            self.compact(table, run_id)

    # -- reading -----------------------------------------------------------

    def read(self, table: str, run_ids: list[str] | None = None, columns: list[str] | None = None,
             keys: list[str] | None = None) -> pl.DataFrame:
        """A table (or the partitions of the given runs, or of other partition ``keys``) as a polars frame
        of the table's schema, or of just ``columns`` of it."""
        keys = run_ids if keys is None else keys
        paths = [f for k in keys for f in self.files(table, k)] if keys is not None else self.files(table)
        schema = TABLES[table].schema
        if columns is not None:
            schema = pa.schema([schema.field(c) for c in columns])
        if not paths:
            return pl.from_arrow(schema.empty_table())
        return pl.from_arrow(pa.concat_tables([pq.read_table(p, columns=schema.names).cast(schema) for p in paths]))

    def run_ids(self) -> list[str]:
        """Ids of the runs that have a ``runs`` row, in the order they were created."""
        runs = self.read("runs")
        return runs.sort("created_at")["run_id"].unique(maintain_order=True).to_list()

    def has_run(self, run_id: str) -> bool:
        return bool(self.files("runs", run_id))

    def run(self, run_id: str) -> dict:
        """The ``runs`` row of a run (the latest if it was rewritten)."""
        rows = self.read("runs", [run_id])
        if rows.is_empty():
            known = ", ".join(self.run_ids()) or "none"
            raise StoreError(f"{self.root}: no run {run_id!r} (runs: {known})")
        return rows.row(-1, named=True)

    def has_dataset(self, sha256: str) -> bool:
        return all(self.files(t, sha256) for t in DATASET_TABLES)

    # -- whole runs and datasets -------------------------------------------

    def write_dataset(self, dataset) -> None:  # dataset: toolkit.dataset.Dataset (kept untyped: no upward import)
        """Store a dataset's cases and rubric items once per digest."""
        if self.has_dataset(dataset.sha256):
            return
        for table in DATASET_TABLES:
            folder = self.partition_dir(table, dataset.sha256)
            if folder.exists():
                shutil.rmtree(folder)
            self.write(table, dataset.sha256, getattr(dataset, table).to_arrow())

    def delete_run(self, run_id: str) -> None:
        """Remove a run: its ``runs`` row first (so it stops being a run), then its data."""
        for table in (*RUN_TABLES[::-1], "journal"):
            folder = self.root / table / safe_segment(run_id) if table == "journal" else self.partition_dir(table, run_id)
            if folder.exists():
                trash = folder.with_name(f".trash-{uuid.uuid4().hex[:8]}")
                os.replace(folder, trash)
                shutil.rmtree(trash, ignore_errors=True)

    @contextmanager
    def lock(self, run_id: str) -> Iterator[None]:
        """Exclusive writer lock for a run (a second collector on the same run fails fast)."""
        folder = self.root / ".locks"
        folder.mkdir(parents=True, exist_ok=True)
        with open(folder / f"{safe_segment(run_id)}.lock", "w") as handle:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                raise StoreError(f"run {run_id!r} is being written by another process") from None
            try:
                yield
            finally:
                fcntl.flock(handle, fcntl.LOCK_UN)


def _seq_of(path: Path) -> int:
    match = _PART.match(path.name)
    return int(match.group(2)) if match else -1


def _visible(folder: Path) -> list[Path]:
    if not folder.is_dir():
        return []
    files = [f for f in folder.iterdir() if _PART.match(f.name)]
    compacts = [f for f in files if f.name.startswith("compact-")]
    floor = max((_seq_of(f) for f in compacts), default=-1)
    keep = [f for f in files if _seq_of(f) > floor]
    if compacts:
        keep.append(max(compacts, key=_seq_of))
    return sorted(keep, key=_seq_of)


def _next_seq(folder: Path) -> int:
    return max((_seq_of(f) for f in folder.iterdir()), default=-1) + 1


def _atomic_write(data: pa.Table, target: Path) -> Path:
    tmp = target.with_name(f".tmp-{uuid.uuid4().hex}.parquet")
    try:
        with open(tmp, "wb") as handle:
            pq.write_table(data, handle, compression="zstd")
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, target)
    finally:
        tmp.unlink(missing_ok=True)
    dir_fd = os.open(target.parent, os.O_RDONLY)
    try:
        os.fsync(dir_fd)
    finally:
        os.close(dir_fd)
    return target
