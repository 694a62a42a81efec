"""``bedside db``: a DuckDB database file over the store, for the DuckDB CLI, DBeaver or a BI tool.

The file holds no copy of the data: the tables, and the score tables the store keeps, are views over the
store's current Parquet files (absolute paths), and the derived relations are views over those
(``toolkit.sql._views``, the definitions ``bedside sql`` uses), so any DuckDB >= 1.3 opens it with no
extension to load. A few small tables are real: ``run_intervals`` (the bootstrap intervals, computed at write
time), ``bedside_info`` (the store it mirrors and the store version it reflects), and in ``_bedside`` the
score rows the store does not hold (runs written before it stored scores), computed at write time.

Staying current: the file is registered with the store, and every store write rewrites its base views'
file lists (``toolkit.sql._refresh``, a subscriber of the store's commits); running ``bedside db --out
FILE`` again rebuilds it whole (and recomputes the intervals). A rebuild is written to a temporary file beside FILE and renamed over it, so a
reader never sees half a database, and a failed one leaves FILE as it was.
"""

from __future__ import annotations

import datetime as dt
import os
from dataclasses import dataclass
from pathlib import Path

import duckdb

from toolkit.sql import _refresh as database_refresh
from toolkit.sql._query import build, fill_computed, fill_intervals
from toolkit.store import Store, StoreError
from toolkit.summary import SummaryOptions

STORAGE_VERSION = "v1.3.0"


@dataclass(frozen=True)
class DatabaseInfo:
    path: Path
    store_version: int | None
    runs: int
    interval_rows: int


def write_database(store: Store, path: str | os.PathLike[str],
                   options: SummaryOptions = SummaryOptions()) -> DatabaseInfo:
    """Write (or rebuild in place, atomically) a DuckDB database file of views over ``store``; register it
    with the store so its writes keep the views current (not for a store opened at an old version: that
    file stays a snapshot). StoreError (one line) when the path cannot be
    written or would replace a file that is not such a database, or a part file is damaged."""
    try:  # through a symlink: the file it points at is written (and registered), the link stays
        target = Path(path).resolve()
    except (OSError, RuntimeError) as error:  # a symlink loop
        raise StoreError(f"{Path(path).absolute()}: --out: cannot follow it ({_reason(error)})") from None
    root = store.root.resolve()
    if not store.root.is_dir():
        raise StoreError(f"{store.root}: no store here (give --store DIR or set BEDSIDE_STORE)")
    if not target.parent.is_dir():
        raise StoreError(f"{target}: --out: the directory {target.parent} does not exist")
    if target.is_dir():
        raise StoreError(f"{target}: --out: is a directory; give a file name such as results.duckdb")
    _check_replaceable(target)
    damaged = store.damaged()
    if damaged:
        raise StoreError(next(iter(damaged.values())))
    database_refresh.sweep(target)  # temporary files of killed rebuilds and refreshes
    tmp = database_refresh.temporary(target, "tmp")
    try:
        version = store.version()
        files = database_refresh.current_files(store)
        # the oldest storage format whose DuckDB runs the views' SQL (``lambda`` syntax: 1.3), so the DuckDB
        # CLI or a BI tool's driver a few releases older than this library still opens the file
        con = duckdb.connect(str(tmp), config={"storage_compatibility_version": STORAGE_VERSION})
        try:
            if store.is_remote:
                _read_s3(con, store)
            build(con, files, options)
            fill_computed(con, store, options)
            rows = fill_intervals(con, store, version, options)
            now = dt.datetime.now(dt.timezone.utc).isoformat()
            con.execute(f"CREATE TABLE {database_refresh.INFO} (format VARCHAR, store_path VARCHAR, store_version BIGINT,"
                        " written_at VARCHAR, refreshed_at VARCHAR, intervals_store_version BIGINT,"
                        " bedside_version VARCHAR)")
            con.execute(f"INSERT INTO {database_refresh.INFO} VALUES (?, ?, ?, ?, ?, ?, ?)",
                        [database_refresh.FORMAT, str(root), version, now, now, version, _version()])
            runs = con.execute("SELECT count(*) FROM runs").fetchone()[0]
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, target)
    except (OSError, duckdb.Error) as error:  # a full disk, a read-only directory: FILE stays as it was
        raise StoreError(f"{target}: --out: could not write the database ({_reason(error)})") from None
    finally:
        database_refresh.remove_temporary(tmp)
    if store.pinned is None and not store.is_remote:  # a store read as of an old version stays a snapshot
        # (and so does an object store's: its writers are other machines, which cannot reach this file)
        database_refresh.register(store.root, target)
        database_refresh.refresh(store)  # commits that landed while this one was built: their files too
    return DatabaseInfo(target, version, runs, rows)


def s3_statements() -> list[str]:
    """The DuckDB statements that let a connection read this environment's S3 store (``toolkit.store.location``):
    httpfs loaded, never installed (no download at run time), and a temporary secret of the AWS settings (not
    written into the file: whoever opens it brings their own, ``CREATE SECRET (TYPE s3, ...)``)."""
    from toolkit.store.location import credentials, endpoint, storage_options

    settings = {"TYPE": "s3"}
    keys = {**{n: os.environ[n] for n in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")
               if os.environ.get(n)}, **credentials()}
    for key, name in (("KEY_ID", "AWS_ACCESS_KEY_ID"), ("SECRET", "AWS_SECRET_ACCESS_KEY"),
                      ("SESSION_TOKEN", "AWS_SESSION_TOKEN")):
        if keys.get(name):
            settings[key] = keys[name]
    if "KEY_ID" not in settings:
        settings["PROVIDER"] = "credential_chain"
    region = storage_options().get("AWS_REGION")
    if region:
        settings["REGION"] = region
    point = endpoint()
    if point:
        scheme, _, host = point.partition("://")
        settings.update(ENDPOINT=host.rstrip("/"), URL_STYLE="path", USE_SSL="false" if scheme == "http" else "true")
    body = ", ".join(f"{k} {v}" if k in ("TYPE", "PROVIDER") or v in ("true", "false") else f"{k} {_literal(v)}"
                     for k, v in settings.items())
    return ["SET autoinstall_known_extensions = false", "LOAD httpfs", f"CREATE TEMPORARY SECRET bedside_s3 ({body})"]


def _read_s3(con: "duckdb.DuckDBPyConnection", store: Store) -> None:
    """Make ``con`` read the store's ``s3://`` files; StoreError (one line) when DuckDB's httpfs is not installed."""
    for statement in s3_statements():
        try:
            con.execute(statement)
        except duckdb.Error as error:
            if statement == "LOAD httpfs":
                raise StoreError(f"{store.root}: a database file's views read the store's s3:// files, which needs "
                                 "DuckDB's httpfs extension; it is not installed here (bedside never downloads it): "
                                 "install it once with duckdb -c 'INSTALL httpfs', or query with `bedside sql`, "
                                 "which needs none") from None
            raise StoreError(f"{store.root}: {str(error).splitlines()[0][:200]}") from None


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def _check_replaceable(target: Path) -> None:
    """An existing file is replaced only when it is a database ``bedside db`` wrote."""
    if not target.exists():
        return
    try:
        duck = database_refresh.is_duckdb_file(target)
    except OSError as error:
        raise StoreError(f"{target}: --out: cannot read it ({error.strerror})") from None
    if not duck:
        raise StoreError(f"{target}: --out: exists and is not a DuckDB database; refusing to replace it "
                         "(give a new file name)")
    try:
        con = duckdb.connect(str(target), read_only=True)
    except duckdb.Error as error:
        raise StoreError(f"{target}: --out: cannot open it ({str(error).splitlines()[0][:160]})") from None
    try:
        ours = database_refresh.is_ours(con)
    finally:
        con.close()
    if not ours:
        raise StoreError(f"{target}: --out: a DuckDB database that `bedside db` did not write; refusing to "
                         "replace it (give a new file name)")


def _reason(error: BaseException) -> str:
    """The short reason, without the temporary file's name (the user never named it)."""
    if isinstance(error, OSError) and error.strerror:
        return error.strerror
    text = (str(error).splitlines() or [type(error).__name__])[0]
    for known in ("No space left on device", "Read-only file system", "Disk quota exceeded", "Permission denied"):
        if known in text:
            return known
    return text[:160]


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("bedside")
    except PackageNotFoundError:
        return "unknown"
