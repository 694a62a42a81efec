"""DuckDB database files that mirror a store (``bedside db``), kept current by every store commit.

A database file written by ``toolkit.sql._database`` holds views over the store's current Parquet files. Each
such file is listed in ``<store>/.databases.json``; this module subscribes to the store's commits
(``Store.subscribe``, when it is imported: the modules that write to a store import it) and, after every
commit that changes which files are live (a run's commit, delete, rename, compaction), rewrites their base
views' file lists (in a copy renamed over it, so readers never see half a database), under a store-wide lock.
The score tables come with the files (each commit stores its run's); only the rows the store does not hold
(runs written before scores were stored, a selection other than the stored one) are computed again
(``_query.fill_computed``). The bootstrap intervals stay as computed, stamped with each run's
``updated_at``, so a changed run shows none.

A refresh never fails a write: a database another process holds for writing (DuckDB's file lock) or a
damaged one gets ONE warning line on stderr (once per process) and is refreshed by a later write or
``bedside db --out FILE``. Readers that opened it read-only do not block a refresh. A registered file that is
not such a database (e.g. a text file) is dropped from the registry with one warning. The registry itself is
read tolerantly: entries that are not absolute paths are ignored (one warning); one that is not a JSON list,
or is over 1 MiB, refreshes nothing (one warning) and is left as it is until ``bedside db`` replaces it. A
refresh or rebuild first sweeps the temporary files beside its database that killed processes left.

Where writes repeat, a refresh (a DuckDB file rewritten) is paid once, not per commit: inside ``store.batch()`` (a bulk
import) the store tells its subscribers once, when the block ends, also when it ends with an error;
``store.batch(every_s)`` (a collection, which commits every few seconds) at most every ``every_s`` seconds
while it runs and once at its end, so the file shows the finished run.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import shutil
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.store import Store
from toolkit.store.locks import store_lock

if TYPE_CHECKING:
    import duckdb

REGISTRY = ".databases.json"
INFO = "bedside_info"
# 2: score views over stored and computed score tables, which an earlier bedside's refresh (format 1)
# would never fill: it takes a file of another format for not its own and leaves it alone.
FORMAT = "bedside-db 2"
EARLIER_FORMATS = ("bedside-db 1",)  # files this version still refreshes (their views are SQL alone)


MAX_REGISTRY_BYTES = 1 << 20  # a registry lists a few files; a larger one is not ours to read
_TEMP_KINDS = ("tmp", "refresh")  # a rebuild by ``bedside db``, a refresh here


def _registry(root: Path) -> Path:
    return root / REGISTRY


def registered(root: Path) -> list[Path]:
    """The registered database files ([] when none, or when the registry cannot be read: warned once)."""
    return _read(root) or []


def _read(root: Path, warn: bool = True) -> list[Path] | None:
    """The registry's absolute paths; entries of any other kind are ignored, with one warning per process.
    None (warned once) when it cannot be read as a JSON list: then it is left as it is for its user."""
    path = _registry(root)
    replace = "not read, no database refreshed (run `bedside db --out FILE` to replace it)"

    def say(message: str) -> None:  # once per process and registry
        if warn:
            _warn_once(path, f"{path}: registry: {message}")

    try:
        size = path.stat().st_size
        if size > MAX_REGISTRY_BYTES:
            say(f"{size} bytes, more than {MAX_REGISTRY_BYTES}; {replace}")
            return None
        entries = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return []
    except (OSError, ValueError) as error:  # UnicodeDecodeError and JSONDecodeError are ValueErrors
        say(f"{error.strerror if isinstance(error, OSError) else f'not valid JSON ({_first_line(error)})'}; {replace}")
        return None
    if not isinstance(entries, list):
        say(f"a JSON {type(entries).__name__}, not a list of paths; {replace}")
        return None
    paths = [Path(e) for e in entries if isinstance(e, str) and "\0" not in e and os.path.isabs(e)]
    if len(paths) < len(entries):
        bad = len(entries) - len(paths)
        say(f"{bad} entries are not absolute paths, ignored" if bad > 1 else "1 entry is not an absolute path, ignored")
    return paths


def _save(root: Path, paths: list[Path]) -> None:
    path = _registry(root)
    tmp = path.with_name(f"{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(sorted({str(p) for p in paths}), indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def register(root: Path, database: Path) -> None:
    """Remember ``database`` (absolute) as a file to refresh after the store's writes. A registry that cannot
    be read is replaced by one that lists ``database`` (said on stderr: the files it listed are forgotten)."""
    with store_lock(root / ".locks" / "databases.lock"):
        known = _read(root, warn=False)
        if known is None:
            _warn(f"{_registry(root)}: registry: could not be read; replaced with a new one that lists "
                  f"{database.resolve()} only")
        _save(root, [*(known or []), database.resolve()])


def is_duckdb_file(path: Path) -> bool:
    """Whether the file begins as a DuckDB database does (b"DUCK" at bytes 8..12); OSError if unreadable."""
    with open(path, "rb") as handle:
        return handle.read(12)[8:] == b"DUCK"


def temporary(database: Path, kind: str) -> Path:
    """This process's temporary file beside ``database``: ``kind`` "tmp" (a rebuild) or "refresh"."""
    return database.with_name(f".{database.name}.{os.getpid()}.{kind}")


def remove_temporary(tmp: Path) -> None:
    """Remove a temporary file of this process and its DuckDB ``.wal``, if there (on a read-only file system
    even removing a missing file fails: nothing to remove then)."""
    for leftover in (tmp, tmp.with_name(tmp.name + ".wal")):
        try:
            leftover.unlink(missing_ok=True)
        except OSError:
            pass


def sweep(database: Path) -> None:
    """Remove the temporary files beside ``database`` (``temporary`` and their DuckDB ``.wal``) of processes
    that no longer run: a killed ``bedside db`` or refresh leaves them. Only that exact name pattern, and
    never a live process's (nor this one's)."""
    pattern = re.compile(re.escape(f".{database.name}.") + r"([0-9]+)\.(?:" + "|".join(_TEMP_KINDS) + r")(?:\.wal)?")
    try:
        names = os.listdir(database.parent)
    except OSError:
        return
    for name in names:
        match = pattern.fullmatch(name)
        if match is None or not _dead(int(match[1])):
            continue
        try:
            (database.parent / name).unlink()
        except OSError:  # gone already (another sweep), or not ours to remove: leave it
            pass


def _dead(pid: int) -> bool:
    if pid <= 0 or pid == os.getpid():
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except (OSError, OverflowError):  # PermissionError: alive, another user's
        return False
    return False


def current_files(store: Store) -> dict[str, list[str]]:
    from toolkit.tables import STORED

    return {t: [str(f) for f in store.files(t)] for t in STORED}


def is_ours(con, root: Path | None = None) -> bool:
    """The open database was written by ``bedside db`` (for the store at ``root``, when given)."""
    try:
        row = con.execute(f"SELECT format, store_path FROM {INFO}").fetchone()
    except Exception:  # no such table: not ours
        return False
    return row is not None and row[0] in (FORMAT, *EARLIER_FORMATS) and (root is None or row[1] == str(root.resolve()))


def rewrite(con: "duckdb.DuckDBPyConnection", store: Store, files: dict[str, list[str]], version: int | None) -> None:
    """Point the base views of an open database at ``files``, compute the score rows they do not hold, and
    record ``version``, in one transaction."""
    import duckdb

    from toolkit.sql._query import fill_computed
    from toolkit.sql._views import base_view, read_options
    from toolkit.tables import TABLES

    try:
        options = read_options(con)
    except duckdb.CatalogException:  # a file of an earlier version: its views are SQL over the tables alone
        options = None
    con.execute("BEGIN TRANSACTION")
    try:
        if options is not None and _outdated(con):
            _rebuild(con, files, options)
        for table, paths in files.items():
            if options is not None or table in TABLES:
                con.execute(base_view(table, paths))
        if options is not None:
            fill_computed(con, store, options)
        con.execute(f"UPDATE {INFO} SET store_version = ?, refreshed_at = ?",
                    [version, dt.datetime.now(dt.timezone.utc).isoformat()])
        con.execute("COMMIT")
    except BaseException:
        con.execute("ROLLBACK")
        raise


def _outdated(con: "duckdb.DuckDBPyConnection") -> bool:
    """Whether a file's computed score tables are not of this version's columns (written before answer
    samples: no ``sample_scores``, pass scores without ``sample``)."""
    from toolkit.sql._views import INTERNAL, columns
    from toolkit.tables import SCORE_TABLES

    found: dict[str, list[str]] = {}
    for table, column in con.execute(
            "SELECT table_name, column_name FROM information_schema.columns WHERE table_schema = ? "
            "ORDER BY table_name, ordinal_position", [INTERNAL]).fetchall():
        found.setdefault(table, []).append(column)
    return any(found.get(f"computed_{t}") != columns(t) for t in SCORE_TABLES) or not _intervals_named(con)


def _intervals_named(con: "duckdb.DuckDBPyConnection") -> bool:
    """Whether the file's ``run_intervals`` names each interval's method (written since ``ci_method``)."""
    return con.execute("SELECT count(*) FROM information_schema.columns WHERE table_schema = 'main' AND "
                       "table_name = 'run_intervals' AND column_name = 'ci_method'").fetchone()[0] > 0


def _rebuild(con: "duckdb.DuckDBPyConnection", files: dict[str, list[str]], options) -> None:
    """Every view and computed table of a file written by an earlier version, as this version defines them
    (the computed rows are filled again next; ``run_intervals`` stays, its method named where an earlier release
    did not)."""
    from toolkit.sql._views import INTERNAL, statements
    from toolkit.tables import SCORE_TABLES

    for table in SCORE_TABLES:
        con.execute(f'DROP VIEW IF EXISTS "{table}"')
        con.execute(f"DROP TABLE IF EXISTS {INTERNAL}.computed_{table}")
    renamed = not _intervals_named(con)
    if renamed:  # every interval an earlier release stored was the reference bootstrap's: kept, its method named
        from toolkit.summary import ci_method

        con.execute("CREATE TEMP TABLE _kept AS SELECT run_id, benchmark, ci_low, ci_high, CASE WHEN ci_low IS "
                    "NULL THEN NULL ELSE ? END AS ci_method, run_updated_at, store_version FROM run_intervals",
                    [ci_method(options.bootstrap)])
        con.execute("DROP TABLE run_intervals")
    for statement in statements(files, options):
        con.execute(statement)
    if renamed:
        con.execute("INSERT INTO run_intervals SELECT * FROM _kept")
        con.execute("DROP TABLE _kept")


def refresh(store: Store, version: int | None = None) -> None:
    """After a store commit (the subscriber of ``Store.subscribe``): refresh every registered database of
    this store. ``version`` is not used: a refresh reads the version its files belong to. Never raises.
    An object store keeps no registry: its writers are on other machines than the files (``write_database``)."""
    if store.is_remote or not _registry(store.root).exists():  # the common case: one stat
        return
    _refresh_now(store)


def _refresh_now(store: Store) -> None:
    if not _registry(store.root).exists():
        return
    try:
        with store_lock(store.root / ".locks" / "databases.lock"):
            keep = []
            files = None
            version = store.version()
            known = _read(store.root)
            if known is None:  # cannot be read (warned): left as it is for its user
                return
            for database in known:
                if not database.is_file():
                    continue  # removed by its user: forget it
                if files is None:
                    files = current_files(store)
                if _refresh_one(store, database, files, version):
                    keep.append(database)
            _save(store.root, keep)
    except Exception as error:  # the write itself succeeded: say so and go on
        _warn(f"{store.root}: databases not refreshed ({_first_line(error)})")


def _refresh_one(store: Store, database: Path, files: dict[str, list[str]], version: int | None) -> bool:
    """True to keep the file registered. A copy is refreshed and renamed over the file, so readers that have
    it open (read-only: DuckDB lets several processes share it) keep their snapshot and never block this; a
    process holding it for writing does block it (its changes would be lost): warned once per process."""
    import duckdb

    try:
        duck = is_duckdb_file(database)
    except OSError as error:
        _warn_once(database, f"{database}: not refreshed ({error.strerror or error})")
        return True
    if not duck:
        _drop(store, database, "not a DuckDB database")
        return False
    try:
        con = duckdb.connect(str(database), read_only=True)
    except duckdb.Error as error:
        _warn_once(database, f"{database}: not refreshed ({_first_line(error)}); run `bedside db --out "
                             f"{database}` when it is closed (open it with `duckdb -readonly` to keep it current)")
        return True
    try:
        ours = is_ours(con, store.root)
    finally:
        con.close()
    if not ours:  # now another store's, or not a bedside database at all
        _drop(store, database, "not a database `bedside db` wrote for this store")
        return False
    sweep(database)
    tmp = temporary(database, "refresh")
    try:
        shutil.copyfile(database, tmp)
        con = duckdb.connect(str(tmp))
        try:
            rewrite(con, store, files, version)
            con.execute("CHECKPOINT")
        finally:
            con.close()
        os.replace(tmp, database)
    except (duckdb.Error, OSError) as error:
        _warn_once(database, f"{database}: not refreshed ({_first_line(error)}); run `bedside db --out {database}`")
    finally:
        remove_temporary(tmp)
    return True


def _drop(store: Store, database: Path, why: str) -> None:
    _warn_once(database, f"{database}: {why}; not refreshed, dropped from {_registry(store.root)}")


_WARNED: set[str] = set()  # one warning per database and process: a collection commits every few seconds


def _warn_once(database: Path, message: str) -> None:
    if str(database) not in _WARNED:
        _WARNED.add(str(database))
        _warn(message)


def _first_line(error: BaseException) -> str:
    return (str(error).splitlines() or [type(error).__name__])[0][:200]


def _warn(message: str) -> None:
    print(f"bedside: warning: {message}", file=sys.stderr)


Store.subscribe(refresh)
