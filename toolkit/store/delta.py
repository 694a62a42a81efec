"""The store's tables as Delta Lake tables (delta-rs): physical schemas, commits with retry, live files.

Physical layout per table (``<store>/<table>/``): the columns of ``toolkit.tables`` plus
- ``write_id`` in the run tables (answers, judgments, decisions): the commit that wrote the row;
- ``part``: the path-safe run id (run tables) or the dataset digest (cases, rubric_items), the Delta
  partition column, so a run's or a dataset's files sit in one directory; in ``runs`` it is a plain
  column, because that table is kept as a few small files that every command reads whole.
"""

from __future__ import annotations

import datetime as dt
import os
import random
import threading
import time
from pathlib import Path
from urllib.parse import unquote
from typing import Any, Callable, TypeVar

import polars as pl
import pyarrow as pa

from toolkit.sealed_files import seal_added
from toolkit.store.paths import StoreError
from toolkit.tables import DATASET_TABLES, TABLES

DATA_TABLES = ("answers", "judgments", "decisions")
PART = "part"
WRITE_ID = "write_id"
_RETRIES = 60
T = TypeVar("T")


def physical_schema(table: str) -> pa.Schema:
    fields = [pa.field(f.name, f.type, nullable=True) for f in TABLES[table].schema]
    if table in DATA_TABLES:
        fields.append(pa.field(WRITE_ID, pa.string()))
    fields.append(pa.field(PART, pa.string()))
    return pa.schema(fields)


def empty(table: str, columns: list[str] | None = None) -> pa.Table:
    """No rows of the table (``Schema.empty_table`` would import pandas, half a second of a cold start)."""
    schema = physical_schema(table)
    if columns is not None:
        schema = pa.schema([schema.field(c) for c in columns])
    return pa.Table.from_batches([], schema)


def partition_by(table: str) -> list[str] | None:
    return [PART] if table in DATA_TABLES or table in DATASET_TABLES else None


def is_table(path: Path) -> bool:
    return (path / "_delta_log").is_dir()


def _conflict(error: Exception) -> bool:
    from deltalake.exceptions import CommitFailedError

    if isinstance(error, CommitFailedError):
        return True
    text = str(error).lower()
    return any(w in text for w in ("conflict", "already exists", "concurrent", "transaction failed",
                                   "version mismatch"))


def retry(action: Callable[[], T], what: str) -> T:
    """Run a Delta commit, retrying (with jittered back-off) when a concurrent commit won the race."""
    delay = 0.01
    for attempt in range(_RETRIES):
        try:
            return action()
        except Exception as error:  # delta-rs raises several types for a lost race
            if not _conflict(error) or attempt == _RETRIES - 1:
                raise StoreError(f"{what}: {error}") from error
        time.sleep(delay * (0.5 + random.random()))
        delay = min(0.5, delay * 1.6)
    raise AssertionError("unreachable")


def ensure(path: Path, table: str) -> None:
    from deltalake import DeltaTable

    if is_table(path):
        return
    retry(lambda: DeltaTable.create(str(path), physical_schema(table), mode="ignore",
                                    partition_by=partition_by(table), name=table), f"{path}: create")


def overwrite(path: Path, table: str, data: pa.Table, predicate: str) -> None:
    """One commit replacing the rows that match ``predicate`` by ``data`` (idempotent when replayed)."""
    ensure(path, table)
    data = data.select(physical_schema(table).names).cast(physical_schema(table))
    retry(lambda: _write(path, data, mode="overwrite", predicate=predicate, partition_by=partition_by(table)),
          f"{path}: commit")


def append(path: Path, table: str, data: pa.Table) -> None:
    ensure(path, table)
    data = data.select(physical_schema(table).names).cast(physical_schema(table))
    retry(lambda: _write(path, data, mode="append", partition_by=partition_by(table)), f"{path}: commit")


_WRITERS: dict[str, tuple[Any, tuple]] = {}  # table path -> (DeltaTable kept between writes, its version's key)
_WRITERS_GUARD = threading.Lock()


def _write(path: Path, data: pa.Table, **options: Any) -> None:
    """One write_deltalake commit through a DeltaTable this process keeps between commits and brings up to
    date first (reading the new log entries only): loading the table afresh for every commit replays its
    log, ~15 ms of CPU a commit once a store holds a hundred runs. Reused only while the log file of the
    version it holds is still the same file (a table removed and created again is loaded anew); taken out
    of the cache while in use (threads); dropped on an error (the retry loads it afresh)."""
    from deltalake import DeltaTable, write_deltalake

    with _WRITERS_GUARD:
        cached = _WRITERS.pop(str(path), None)
    table = None
    if cached is not None and version_key(path, cached[0].version()) == cached[1]:
        table = cached[0]
        table.update_incremental()
    if table is None:
        table = DeltaTable(str(path))
    write_deltalake(table, data, **options)
    seal_added(path, table.version())  # the committed files: read-only on disk
    key = version_key(path, table.version())
    with _WRITERS_GUARD:
        if len(_WRITERS) > 64:
            _WRITERS.clear()
        _WRITERS[str(path)] = (table, key)


def delete(path: Path, predicate: str) -> None:
    from deltalake import DeltaTable

    if is_table(path):
        retry(lambda: DeltaTable(str(path)).delete(predicate), f"{path}: delete")
        seal_added(path, latest_version(path))  # files a delete rewrote: read-only on disk


def latest_version(path: Path) -> int | None:
    """The table's newest version from its log's file names (one directory listing; None: no table). A commit
    appears as ``<version>.json`` atomically, so the highest name is the latest committed version."""
    try:
        names = os.listdir(path / "_delta_log")
    except FileNotFoundError:
        return None
    versions = [int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(versions, default=None)


def version_key(path: Path, version: int) -> tuple:
    """A cache key of one committed version: the table, the version and its log file's identity (a store
    deleted and written again in this process reuses version numbers, not log files)."""
    try:
        info = os.stat(path / "_delta_log" / f"{version:020d}.json")
        return (str(path), version, info.st_ino, info.st_mtime_ns)
    except FileNotFoundError:  # cleaned up after a checkpoint: the version is old and settled
        return (str(path), version)


_ACTIONS: dict[tuple, pa.Table] = {}  # (table path, version) -> its add actions (immutable once committed)


def actions_at(path: Path, version: int) -> pa.Table:
    """The add actions of a committed version, cached in this process (versions never change)."""
    key = version_key(path, version)
    if key not in _ACTIONS:
        if len(_ACTIONS) > 256:
            _ACTIONS.clear()
        try:
            actions = add_actions(load(path, version=version))
        except UnicodeEncodeError:  # a path that is not UTF-8: the CLI names it as such
            raise
        except Exception as error:  # noqa: BLE001 - delta-rs raises its own types for a log it cannot read
            first = (str(error).splitlines() or [""])[0][:200]
            raise StoreError(f"{path / '_delta_log'}: cannot read the table's log at version {version} "
                             f"({type(error).__name__}: {first})") from error
        _ACTIONS[key] = actions
    return _ACTIONS[key]


def prefetch(paths: list[Path]) -> None:
    """Load the add actions of these tables' latest versions into this process's cache, one thread a table:
    delta-rs replays a log without holding the GIL, and a cold command reading six tables one after the
    other spends ~0.1 s there. Best effort: a table that fails here is loaded again (and its error raised)
    by the read that needs it."""
    todo = []
    for path in paths:
        version = latest_version(path)
        if version is not None and version_key(path, version) not in _ACTIONS:
            todo.append((path, version))

    def load_one(path: Path, version: int) -> None:
        try:
            actions_at(path, version)
        except Exception:  # noqa: BLE001 - the read that needs this table reports it
            pass

    if len(todo) < 2:
        return
    threads = [threading.Thread(target=load_one, args=item, daemon=True) for item in todo]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def load(path: Path, version: int | None = None, as_of: dt.datetime | None = None) -> Any:
    """The table's DeltaTable at its latest version (or ``version``, or the last commit at ``as_of``); None
    when the table was never written."""
    from deltalake import DeltaTable

    if not is_table(path):
        return None
    table = DeltaTable(str(path))
    if version is not None:
        table.load_as_version(version)
    elif as_of is not None:
        try:
            table.load_as_version(as_of)
        except Exception:  # no commit that early: the table did not exist yet
            return None
    return table


def commit_time(path: Path, version: int) -> dt.datetime:
    """When ``version`` of a table was committed (the time delta-rs itself travels by)."""
    from deltalake import DeltaTable

    for entry in DeltaTable(str(path)).history():
        if entry.get("version") == version and entry.get("timestamp") is not None:
            return dt.datetime.fromtimestamp(entry["timestamp"] / 1000, tz=dt.timezone.utc)
    log = path / "_delta_log" / f"{version:020d}.json"
    return dt.datetime.fromtimestamp(log.stat().st_mtime, tz=dt.timezone.utc)


def add_actions(table: Any) -> pa.Table:
    # Through the C stream interface: pa.table() would import pandas (half a second of every cold command).
    return pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()


def files_of(table: Any, root: Path, parts: set[str] | None, live: dict[str, set[str]] | None
             ) -> list[tuple[Path, str, int]]:
    """(absolute path, part, recorded size) of the files of the table's loaded version that hold visible
    rows: in ``parts`` (all when None) and, for run tables (``live`` given), written by a live write id of
    their run. A file holds the rows of one write (min = max write_id); a file whose write ids differ
    counts only when both ends are live."""
    actions = table if isinstance(table, pa.Table) else add_actions(table)
    if actions.num_rows == 0:
        return []
    paths = actions.column("path").to_pylist()
    sizes = actions.column("size_bytes").to_pylist()
    names = actions.column_names
    part_col = f"partition.{PART}" if f"partition.{PART}" in names else None
    file_parts = actions.column(part_col).to_pylist() if part_col else [None] * len(paths)
    lows = actions.column(f"min.{WRITE_ID}").to_pylist() if live is not None else None
    highs = actions.column(f"max.{WRITE_ID}").to_pylist() if live is not None else None
    out = []
    for i, (rel, part, size) in enumerate(zip(paths, file_parts, sizes)):
        if parts is not None and part not in parts:
            continue
        if live is not None:
            ids = live.get(part, set())
            if lows[i] not in ids or highs[i] not in ids:
                continue
        out.append((root / unquote(rel), part, size))
    out.sort(key=lambda f: str(f[0]))
    return out


def polars_schema(table: str, columns: list[str]) -> pl.Schema:
    """The polars types of ``columns`` of the table's physical schema."""
    return pl.from_arrow(empty(table, columns)).schema


def read_files(files: list[Path], table: str, columns: list[str]) -> pl.DataFrame:
    """The given files' rows (``columns`` of the physical schema, its types), in file order; StoreError
    naming the first file that cannot be read.

    All files in one polars read (parallel, no Python per file, no Arrow casts: pyarrow.compute,
    pyarrow.parquet and the ssl it loads cost ~55 ms of every cold command; pyarrow.dataset would import
    pandas). Should that fail, file by file with ``pyarrow.parquet``, which names a damaged file (or reads
    what polars refused)."""
    types = polars_schema(table, columns)
    if files:
        try:
            frame = pl.read_parquet([str(f) for f in files], columns=columns, hive_partitioning=False,
                                    glob=False, missing_columns="raise")
            return frame.cast(types)
        except Exception:  # noqa: BLE001 - polars' errors have no common base; the slow path explains
            pass
    import pyarrow.parquet as pq

    schema = pa.schema([physical_schema(table).field(c) for c in columns])
    parts = []
    for f in files:
        try:
            parts.append(pq.ParquetFile(f).read(columns=columns).cast(schema))
        except (OSError, pa.ArrowException) as error:
            raise StoreError(f"{f}: damaged part file: {str(error).splitlines()[0][:200]}") from None
    return pl.from_arrow(pa.concat_tables(parts) if parts else empty(table, columns)).cast(types)


def keep_write_ids(data: pa.Table, ids: set[str]) -> pa.Table:
    import pyarrow.compute as pc  # not at import: read commands never need it

    return data.filter(pc.is_in(data.column(WRITE_ID), value_set=pa.array(sorted(ids), pa.string())))
