"""The store's tables as Delta Lake tables (delta-rs): physical schemas, commits with retry, live files.

Physical layout per table (``<store>/<table>/``): the columns of ``toolkit.tables`` plus
- ``write_id`` in the run tables (answers, judgments, decisions, and the score tables): the commit that wrote
  the row;
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

import pyarrow as pa

from toolkit.store import location, parquet
from toolkit.store.disk import SLACK, is_no_space, no_space, quiet_panics, room
from toolkit.store.location import ObjectPath
from toolkit.store.layout import DATA_TABLES, PART, RUN_DATA, SCORES, WRITE_ID, empty, physical_schema  # noqa: F401
from toolkit.store.sealed import seal_added
from toolkit.store.paths import StoreError
from toolkit.tables import DATASET_TABLES, FILLED, LABEL_TABLES

_RETRIES = 60
T = TypeVar("T")


def partition_by(table: str) -> list[str] | None:
    return [PART] if table in RUN_DATA or table in DATASET_TABLES or table in LABEL_TABLES else None


_REMOTE_TABLES: set[str] = set()  # object-store tables seen (a request each to find out otherwise)


def is_table(path: Path) -> bool:
    if isinstance(path, ObjectPath):
        if str(path) not in _REMOTE_TABLES and (path / "_delta_log").is_dir():
            _REMOTE_TABLES.add(str(path))
        return str(path) in _REMOTE_TABLES
    return (path / "_delta_log").is_dir()


def _open(path: Path) -> Any:
    """The table's DeltaTable (an object store's with the environment's ``storage_options``)."""
    from deltalake import DeltaTable

    if isinstance(path, ObjectPath):
        return DeltaTable(str(path), storage_options=location.storage_options())
    return DeltaTable(str(path))


def _failed(path: Path, what: str, error: Exception) -> StoreError:
    shown = location.first_line(error) if isinstance(path, ObjectPath) else error
    return StoreError(f"{path}: {what}: {shown}")


def _conflict(error: Exception) -> bool:
    from deltalake.exceptions import CommitFailedError

    if isinstance(error, CommitFailedError):
        return True
    text = str(error).lower()
    return any(w in text for w in ("conflict", "already exists", "concurrent", "transaction failed",
                                   "version mismatch"))


def retry(action: Callable[[], T], path: Path, what: str, need: int = 0) -> T:
    """Run a Delta commit of table ``path``, retrying (with jittered back-off) when a concurrent commit won
    the race. ``need``: bytes it writes, checked against the free space first (see ``_room``)."""
    room(path, need)
    delay = 0.01
    for attempt in range(_RETRIES):
        try:
            with quiet_panics():
                return action()
        except Exception as error:  # delta-rs raises several types for a lost race
            if is_no_space(error):
                raise no_space(path) from None
            if not _conflict(error) or attempt == _RETRIES - 1:
                raise _failed(path, what, error) from error
        time.sleep(delay * (0.5 + random.random()))
        delay = min(0.5, delay * 1.6)
    raise AssertionError("unreachable")


def ensure(path: Path, table: str) -> None:
    from deltalake import DeltaTable

    if is_table(path):
        return
    # On an object store a checkpoint every 10 commits keeps a fresh process's first read to a few requests.
    remote = {"storage_options": location.storage_options(), "configuration": {"delta.checkpointInterval": "10"}
              } if isinstance(path, ObjectPath) else {}
    retry(lambda: DeltaTable.create(str(path), physical_schema(table), mode="ignore",
                                    partition_by=partition_by(table), name=table, **remote), path, "create", SLACK)


def overwrite(path: Path, table: str, data: pa.Table, predicate: str) -> None:
    """One commit replacing the rows that match ``predicate`` by ``data`` (idempotent when replayed)."""
    ensure(path, table)
    data = data.select(physical_schema(table).names).cast(physical_schema(table))
    retry(lambda: _write(path, data, mode="overwrite", predicate=predicate, partition_by=partition_by(table)),
          path, "commit", data.nbytes)


def append(path: Path, table: str, data: pa.Table) -> None:
    ensure(path, table)
    data = data.select(physical_schema(table).names).cast(physical_schema(table))
    retry(lambda: _write(path, data, mode="append", partition_by=partition_by(table)), path, "commit", data.nbytes)


_WRITERS: dict[str, tuple[Any, tuple]] = {}  # table path -> (DeltaTable kept between writes, its version's key)
_WRITERS_GUARD = threading.Lock()


def _write(path: Path, data: pa.Table, **options: Any) -> None:
    """One write_deltalake commit through a DeltaTable this process keeps between commits and brings up to
    date first (reading the new log entries only): loading the table afresh for every commit would replay its
    whole log, a cost that grows with the store. Reused only while the log file of the
    version it holds is still the same file (a table removed and created again is loaded anew); taken out
    of the cache while in use (threads); dropped on an error (the retry loads it afresh)."""
    from deltalake import write_deltalake

    table = _writer(path)
    _widen(table, data.schema)
    write_deltalake(table, data, **options)
    seal_added(path, table.version())  # the committed files: read-only on disk
    _keep(path, table)


def _writer(path: Path) -> Any:
    """The table's kept DeltaTable brought up to date (taken out of the cache while in use), else a fresh one."""
    with _WRITERS_GUARD:
        cached = _WRITERS.pop(str(path), None)
    if cached is not None and version_key(path, cached[0].version()) == cached[1]:
        cached[0].update_incremental()
        return cached[0]
    return _open(path)


def _keep(path: Path, table: Any) -> None:
    key = version_key(path, table.version())
    with _WRITERS_GUARD:
        if len(_WRITERS) > 64:
            _WRITERS.clear()
        _WRITERS[str(path)] = (table, key)


def _widen(table: Any, schema: pa.Schema) -> None:
    """Add to a table written before them the ``FILLED`` columns ``schema`` has (one metadata commit; its
    files stay as they are and read with the columns' old value)."""
    from deltalake import Field
    from deltalake.schema import PrimitiveType

    have = {f.name for f in table.schema().fields}
    new = [f for f in schema if f.name in FILLED and f.name not in have]
    if new:
        kinds = {pa.int32(): "integer", pa.int64(): "long", pa.string(): "string"}
        table.alter.add_columns([Field(f.name, PrimitiveType(kinds[f.type]), nullable=True) for f in new])


def delete(path: Path, predicate: str) -> None:
    if is_table(path):
        retry(lambda: _delete(path, predicate), path, "delete")
        seal_added(path, latest_version(path))  # files a delete rewrote: read-only on disk


def _delete(path: Path, predicate: str) -> None:
    table = _writer(path)
    table.delete(predicate)
    _keep(path, table)


def latest_version(path: Path) -> int | None:
    """The table's newest version from its log's file names (one directory listing; None: no table). A commit
    appears as ``<version>.json`` atomically, so the highest name is the latest committed version."""
    if isinstance(path, ObjectPath):
        return _remote_latest(path)
    try:
        names = os.listdir(path / "_delta_log")
    except FileNotFoundError:
        return None
    versions = [int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(versions, default=None)


def _remote_latest(path: ObjectPath) -> int | None:
    """As ``latest_version``, from one listing of the log's keys."""
    names = [entry.name for entry in (path / "_delta_log").listing()]
    versions = [int(n[:20]) for n in names if len(n) == 25 and n.endswith(".json") and n[:20].isdigit()]
    return max(versions, default=None)


def version_key(path: Path, version: int) -> tuple:
    """A cache key of one committed version: the table, the version and its log file's identity (a store
    deleted and written again in this process reuses version numbers, not log files)."""
    if isinstance(path, ObjectPath):  # a store removed and written again under the same URL: a new process
        return (str(path), version)
    try:
        info = os.stat(path / "_delta_log" / f"{version:020d}.json")
        return (str(path), version, info.st_ino, info.st_mtime_ns)
    except FileNotFoundError:  # cleaned up after a checkpoint: the version is old and settled
        return (str(path), version)


_ACTIONS: dict[tuple, pa.Table] = {}  # (table path, version) -> its add actions (immutable once committed)


def actions_as_of(path: Path, as_of: Any = None) -> Any:
    """The table's live actions as of ``as_of`` (a pinned store's time), else at its latest version; None
    when the table was never written."""
    if as_of is not None:
        return load(path, as_of=as_of)
    latest = latest_version(path)
    return None if latest is None else actions_at(path, latest)


def actions_at(path: Path, version: int) -> pa.Table:
    """The add actions of a committed version, cached in this process (versions never change)."""
    key = version_key(path, version)
    if key not in _ACTIONS:
        if len(_ACTIONS) > 256:
            _ACTIONS.clear()
        try:
            actions = _remote_at(path, version) if isinstance(path, ObjectPath) else \
                add_actions(load(path, version=version))
        except UnicodeEncodeError:  # a path that is not UTF-8: the CLI names it as such
            raise
        except Exception as error:  # noqa: BLE001 - delta-rs raises its own types for a log it cannot read
            first = (str(error).splitlines() or [""])[0][:200]
            raise StoreError(f"{path / '_delta_log'}: cannot read the table's log at version {version} "
                             f"({type(error).__name__}: {first})") from error
        _ACTIONS[key] = actions
    return _ACTIONS[key]


def _remote_at(path: ObjectPath, version: int) -> pa.Table:
    """The add actions of an object-store table's ``version`` through the DeltaTable this process keeps for it
    (``_writer``): moving it forward reads the new log entries only, where a fresh load lists and reads the
    log from its checkpoint."""
    from deltalake import DeltaTable

    with _WRITERS_GUARD:
        cached = _WRITERS.pop(str(path), None)
    table = cached[0] if cached is not None else None
    if table is None or table.version() > version:
        table = DeltaTable(str(path), version=version, storage_options=location.storage_options())
    elif table.version() != version:
        table.load_as_version(version)
    actions = add_actions(table)
    _keep(path, table)
    return actions


def prefetch(paths: list[Path]) -> None:
    """Load the add actions of these tables' latest versions into this process's cache, for a command about
    to read them all. Best effort: a table that fails here is loaded again (and its error raised) by the
    read that needs it."""
    for path in paths:
        version = latest_version(path)
        if version is None or version_key(path, version) in _ACTIONS:
            continue
        try:
            actions_at(path, version)
        except Exception:  # noqa: BLE001 - the read that needs this table reports it
            pass


def load(path: Path, version: int | None = None, as_of: dt.datetime | None = None) -> Any:
    """The table's DeltaTable at its latest version (or ``version``, or the last commit at ``as_of``); None
    when the table was never written."""
    if not is_table(path):
        return None
    table = _open(path)
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
    for entry in _open(path).history():
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

    def stats(name: str) -> list | None:  # absent when no file has statistics
        return None if live is None else actions.column(name).to_pylist() if name in names else [None] * len(paths)

    lows, highs = stats(f"min.{WRITE_ID}"), stats(f"max.{WRITE_ID}")
    out = []
    for i, (rel, part, size) in enumerate(zip(paths, file_parts, sizes)):
        if parts is not None and part not in parts:
            continue
        if live is not None:
            ids = live.get(part, set())
            low, high = lows[i], highs[i]
            if low is None or high is None:  # an add action without statistics (the protocol allows it)
                low, high, _ = parquet.file_write_ids(root / unquote(rel)) or (next(iter(ids), None),) * 2 + (0,)
            if low not in ids or high not in ids:
                continue
        out.append((root / unquote(rel), part, size))
    out.sort(key=lambda f: str(f[0]))
    return out


def write_rows(table: Any, root: Path, parts: set[str] | None) -> dict[tuple[str, str], int]:
    """(part, write id) -> rows the table's loaded version holds of that write, in ``parts`` (all when None).
    A file holding two writes' rows counts its rows for both (so none is ever taken for lost)."""
    actions = table if isinstance(table, pa.Table) else add_actions(table)
    if actions.num_rows == 0:
        return {}
    names = actions.column_names
    paths = actions.column("path").to_pylist()
    file_parts = (actions.column(f"partition.{PART}").to_pylist() if f"partition.{PART}" in names
                  else [None] * len(paths))
    lows = actions.column(f"min.{WRITE_ID}").to_pylist() if f"min.{WRITE_ID}" in names else [None] * len(paths)
    highs = actions.column(f"max.{WRITE_ID}").to_pylist() if f"max.{WRITE_ID}" in names else [None] * len(paths)
    counts = actions.column("num_records").to_pylist() if "num_records" in names else [None] * len(paths)
    out: dict[tuple[str, str], int] = {}
    for rel, part, low, high, rows in zip(paths, file_parts, lows, highs, counts):
        if parts is not None and part not in parts:
            continue
        if low is None or high is None or rows is None:
            found = parquet.file_write_ids(root / unquote(rel))
            if found is None:
                continue
            low, high, rows = (low or found[0]), (high or found[1]), found[2] if rows is None else rows
        for wid in {low, high}:
            out[(part, wid)] = out.get((part, wid), 0) + rows
    return out
