"""The store: Delta Lake tables behind one small interface (see ``toolkit.store.delta`` for the layout).

Reads see whole commits only: a run's ``runs`` row lists its live write ids, and data rows of any other
write are invisible. Writes are transactions (``toolkit.store.transaction``): data commits first, then
ONE runs commit, the commit point; whole-run operations are in ``toolkit.store.runs_ops``. After each
commit the store tells whoever subscribed (``Store.subscribe``, ``toolkit.store.commits``).
"""

from __future__ import annotations

import datetime as dt
import os
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator

import polars as pl
import pyarrow as pa

from toolkit.store import commits, delta, live as writes, location, locks, parquet, transaction
from toolkit.store.delta import PART
from toolkit.store.location import ObjectPath
from toolkit.store.locks import run_lock, store_lock
from toolkit.store.paths import (StoreError, check_store_folder, claim_store_folder, default_store_path, new_run_id,
                                 MARKER, normal_run_id, part_of as _part, safe_segment, some_of)
from toolkit.tables import (DATASET_TABLES, LABEL_TABLES, RUN_TABLES, STORED, TABLES, constant, polars_schema,
                            to_arrow)

_SNAPSHOT_TRIES = writes.TRIES
_RUNS: dict[tuple, pa.Table] = {}  # (runs table, version) -> its rows: a committed version never changes


@dataclass(frozen=True)
class _Snapshot:
    version: int | None  # runs table version (None: no run was ever written)
    runs: pa.Table  # physical runs rows (with part)
    as_of: dt.datetime | None  # data tables are read as of this time (pinned stores), else latest

    def live(self, table: str | None = None) -> dict[str, set[str]]:
        """part -> the write ids whose rows of ``table`` are visible (a score table: the scores write only)."""
        return {p: writes.visible(w, table) for p, w in self.live_writes().items()}

    def live_writes(self) -> dict[str, writes.Writes]:
        """part -> the run's live writes with the rows each committed (where recorded)."""
        return {p: writes.parse(w) for p, w in zip(self.runs.column(PART).to_pylist(),
                                                    self.runs.column("write_ids").to_pylist())}


@dataclass(frozen=True)
class Store:
    root: Path | ObjectPath  # a folder, or an ``s3://`` prefix (``toolkit.store.location``)
    pinned: int | None = field(default=None)  # read the store as of this runs-table version

    def __post_init__(self) -> None:
        # ``Store("results")`` or ``Store("s3://bucket/store")`` as well as a Path
        root = location.parse(self.root)
        if isinstance(root, ObjectPath):
            location.check_settings(str(root))
        object.__setattr__(self, "root", root)

    @classmethod
    def open(cls, root: str | os.PathLike[str] | ObjectPath | None = None, version: int | None = None) -> "Store":
        """The store at ``root`` (a folder or an ``s3://bucket/prefix`` URL), else ``default_store_path()``
        ($BEDSIDE_STORE, else ./data/results); ``version``: read it as it was at that store version (time
        travel; writes are refused)."""
        return cls(root if root is not None else default_store_path(), version)

    @property
    def is_remote(self) -> bool:
        """Whether the store lies in an object store (an ``s3://`` URL) rather than a local folder."""
        return isinstance(self.root, ObjectPath)

    def _path(self, table: str) -> Path:
        return self.root / table

    # -- snapshots -----------------------------------------------------------

    def _check_layout(self) -> None:
        check_store_folder(self.root)  # a folder that is not a store: one line, before anything is read
        if self.is_remote:  # object stores hold stores of this layout only
            return
        runs = self._path("runs")
        # A marked store is never of the old layout: its runs table may be in its first commit (another writer).
        if runs.is_dir() and not delta.is_table(runs) and not (self.root / MARKER).exists() \
                and any(p.is_dir() for p in runs.iterdir()):
            raise StoreError(f"{self.root}: written by an older bedside (plain Parquet parts, no Delta log); "
                             "import its runs again into a new store")

    def _snapshot(self) -> _Snapshot:
        self._check_layout()
        path = self._path("runs")
        version = self.pinned if self.pinned is not None else delta.latest_version(path)
        if version is None:
            return _Snapshot(None, delta.empty("runs"), None)
        key = delta.version_key(path, version)
        if key not in _RUNS:
            try:
                actions = delta.actions_at(path, version)
            except Exception as error:  # a version that was never written (or whose files were vacuumed)
                if self.pinned is None:
                    raise
                raise StoreError(f"{self.root}: no store version {version} to read ({str(error)[:120]})") from None
            files = [f for f, _, _ in delta.files_of(actions, path, None, None)]
            if len(_RUNS) > 64:
                _RUNS.clear()
            _RUNS[key] = parquet.read_files(files, "runs", delta.physical_schema("runs").names).to_arrow()
        as_of = delta.commit_time(path, version) if self.pinned is not None else None
        return _Snapshot(version, _RUNS[key], as_of)

    def _canon(self, run_id: str, snap: _Snapshot | None = None) -> str:
        """The id a run is stored under: NFC (an NFD spelling finds the NFC run), or the id as given when an
        earlier store holds a run under exactly that spelling: also beside an NFC twin, else that run could
        be neither read (its rows would be looked up under the twin's id) nor removed."""
        nfc = normal_run_id(run_id)
        if nfc == run_id:
            return run_id
        parts = set((snap or self._snapshot()).runs.column(PART).to_pylist())
        return run_id if _part(run_id) in parts else nfc

    def stored_id(self, run_id: str) -> str:
        """The id a lookup of ``run_id`` finds a run by: its NFC form (see ``_canon``)."""
        return self._canon(run_id)

    def run_id_for(self, run_id: str, what: str = "run id") -> str:
        """The id ``run_id`` names in this store: an existing run's (``_canon``), else the NFC form of an id a
        new run may take (StoreError, one line, when it may not: ``paths.new_run_id``)."""
        canon = self._canon(run_id) if run_id else run_id
        return canon if canon and self._row(canon) is not None else new_run_id(run_id, what)

    def _latest_version(self) -> int | None:
        return delta.latest_version(self._path("runs"))

    def version(self) -> int | None:
        """The store version this Store reads: the ``runs`` table's Delta version (None: nothing written)."""
        return self.pinned if self.pinned is not None else self._latest_version()

    # -- reading -----------------------------------------------------------

    def _data_files(self, snap: _Snapshot, table: str, keys: list[str] | None) -> list[tuple[Path, str, int]]:
        path = self._path(table)
        loaded = delta.actions_as_of(path, snap.as_of)
        if loaded is None:
            return []
        if table in DATASET_TABLES or table in LABEL_TABLES:  # no write ids: every committed row is visible
            wanted = None if keys is None else set(keys) if table in DATASET_TABLES else {_part(k) for k in keys}
            return delta.files_of(loaded, path, wanted, None)
        live = snap.live(table)
        parts = None if keys is None else {_part(k) for k in keys}
        return delta.files_of(loaded, path, parts, live)

    def files(self, table: str, key: str | None = None) -> list[Path]:
        """Absolute paths of the Parquet files holding the table's visible rows (one run or dataset digest,
        or all), for readers such as DuckDB's ``read_parquet``. Run-table files also hold ``write_id``."""
        snap = self._snapshot()
        if table == "runs":
            files = delta.files_of(delta.actions_at(self._path("runs"), snap.version), self._path("runs"),
                                   None, None) if snap.version is not None else []
            return [f for f, _, _ in files]
        return [f for f, _, _ in self._data_files(snap, table, None if key is None else [key])]

    def arrow_dataset(self, table: str) -> Any:
        """The table's visible rows as a lazy pyarrow dataset of its current files (the schema's columns; a run
        table's also ``write_id``), local or on an object store: what ``bedside sql`` reads an ``s3://`` store
        through, with no DuckDB extension; ``pl.scan_pyarrow_dataset`` reads it too."""
        return parquet.arrow_dataset(self.files(table), table)

    def read(self, table: str, run_ids: list[str] | None = None, columns: list[str] | None = None,
             keys: list[str] | None = None) -> pl.DataFrame:
        """A table (or the rows of the given runs, or of other partition ``keys``: dataset digests) as a
        polars frame of the table's schema, or of just ``columns`` of it. Only rows of whole commits."""
        keys = run_ids if keys is None else keys
        if keys is not None and table not in DATASET_TABLES:
            keys = [self._canon(k) for k in keys]
        schema = STORED[table].schema
        wanted = columns if columns is not None else schema.names
        # Types set in polars: an Arrow cast would import pyarrow.compute, which read commands otherwise never load.
        out_types = polars_schema(table, list(wanted))
        for attempt in range(_SNAPSHOT_TRIES):
            snap = self._snapshot()
            if attempt and snap.as_of is None and snap.version is not None:
                # The store moved while the last attempt read: read the data as of this snapshot's commit
                # instead (Delta time travel), which no later commit can change.
                snap = _Snapshot(snap.version, snap.runs, delta.commit_time(self._path("runs"), snap.version))
            if table == "runs":
                data = pl.from_arrow(snap.runs)
                if keys is not None:  # in the order of the keys given (polars: pa.array() would import pandas)
                    order = pl.DataFrame({PART: list(dict.fromkeys(map(_part, keys)))}, schema={PART: pl.String})
                    data = order.join(data, on=PART, how="inner", maintain_order="left")
                break
            found = self._data_files(snap, table, keys)
            lost = writes.lost_in(self, snap, (table,), keys) if table in delta.RUN_DATA else {}
            if keys is not None:  # in the order of the keys given, as callers expect
                order = {(_part(k) if table not in DATASET_TABLES else k): i for i, k in enumerate(keys)}
                found.sort(key=lambda f: order.get(f[1], 0))
            data = parquet.read_files([f for f, _, _ in found], table, list(wanted))
            # A data table read while a runs commit (and the sweep after it) went by may miss rows the
            # snapshot's live set names: read again from a newer snapshot (pinned stores never move).
            if snap.as_of is not None or self._latest_version() == snap.version:
                if lost:  # rows a live write committed are not in the table: no partial run passes for whole
                    run_id, problem = next(iter(lost.items()))
                    raise StoreError(f"run {run_id!r}: {problem}")
                break
        else:
            raise StoreError(f"{self.root}: the store kept changing while {table} was read; try again")
        return data.select(wanted).cast(out_types)

    def read_writes(self, table: str, writes_of: dict[str, set[str]],
                    columns: list[str] | None = None) -> pl.DataFrame:
        """The rows of ``table`` (or ``columns`` of it) of each run written by its write ids (``writes_of``: run
        id -> write ids) at the table's latest version, visible or not yet: what commits in progress will
        show (``Transaction.read``), in one read for several runs."""
        path = self._path(table)
        loaded = delta.actions_as_of(path, None)
        live = {_part(run_id): set(ids) for run_id, ids in writes_of.items()}
        found = [] if loaded is None else delta.files_of(loaded, path, set(live), live)
        return parquet.read_files([f for f, _, _ in found], table, columns or STORED[table].names)

    def unscored(self, run_ids: list[str] | None = None, table: str | None = None) -> list[str]:
        """Runs (all, or of ``run_ids``) with no scores stored (written before scores were, or by a process
        that stores none): readers compute theirs. ``table``: also those whose stored scores hold no rows of
        that score table (stored before it existed, or none to hold)."""
        runs = self.read("runs", run_ids, columns=["run_id", "write_ids"])
        out = []
        for run_id, text in zip(runs["run_id"], runs["write_ids"]):
            live = writes.parse(text)
            wid = writes.scores_write(live)
            if wid is None or (table is not None and table not in (live[wid] or {})):
                out.append(run_id)
        return out

    # score_with(scorer): have ``scorer`` compute the score rows of every commit of this process
    # (``transaction.Scorer``): the layer that knows the arithmetic registers it; the store stores what it returns.
    score_with = staticmethod(transaction.score_with)

    def prefetch(self, tables: tuple[str, ...] = tuple(TABLES)) -> None:
        """Read the transaction logs of these tables (default: all) now, so that the reads that follow in
        this process find them cached: for a command about to read every table. A pinned
        store reads older versions, which this does not fetch."""
        if self.pinned is None:
            delta.prefetch([self._path(t) for t in tables])

    def run_ids(self) -> list[str]:
        """Ids of the runs that have a ``runs`` row, in the order they were created."""
        runs = self.read("runs", columns=["run_id", "created_at"])
        return runs.sort("created_at", maintain_order=True)["run_id"].to_list()

    def has_run(self, run_id: str) -> bool:
        return self._row(run_id) is not None

    def _row(self, run_id: str, snap: _Snapshot | None = None) -> dict[str, Any] | None:
        snap = snap or self._snapshot()
        runs = snap.runs
        # One row per run: found in Python, so read commands need not import pyarrow.compute.
        part = _part(self._canon(run_id, snap))
        at = [i for i, p in enumerate(runs.column(PART).to_pylist()) if p == part]
        return runs.slice(at[-1], 1).to_pylist()[0] if at else None

    def run(self, run_id: str) -> dict:
        """The ``runs`` row of a run."""
        row = self._row(run_id)
        if row is None:
            raise StoreError(f"{self.root}: no run {run_id!r} (runs: {some_of(self.run_ids())})")
        return {c: row[c] for c in TABLES["runs"].names}

    def has_dataset(self, sha256: str) -> bool:
        snap = _Snapshot(None, delta.empty("runs"),
                         self._snapshot().as_of if self.pinned is not None else None)
        return all(self._data_files(snap, t, [sha256]) for t in DATASET_TABLES)

    # -- writing -------------------------------------------------------------

    def _writable(self) -> None:
        if self.pinned is not None:
            raise StoreError(f"{self.root}: opened at version {self.pinned} for reading; open it without a version to write")
        unsafe = location.unsafe_to_write() if self.is_remote else None
        if unsafe:
            raise StoreError(f"{self.root}: refusing to write: {unsafe}")
        claim_store_folder(self.root)  # a new store gets its marker; a folder that is not one is refused

    @contextmanager
    def lock(self, run_id: str) -> Iterator[None]:
        """Exclusive writer lock of a run (re-entrant in this process); a second writer gets StoreError
        naming the holder (pid, command line, since when)."""
        self._writable()
        run_id = self._canon(run_id)
        with run_lock(self._lock_file(run_id), f"run {run_id!r}"):
            yield

    def _hold(self, run_id: str):
        """The run's lock for one of the store's own writes: joins the lock when this process holds it."""
        run_id = self._canon(run_id)
        return run_lock(self._lock_file(run_id), f"run {run_id!r}", join=True)

    def _confirm(self, run_id: str) -> None:
        """Before a commit point: StoreError when the run's lock (an object store's lease) is no longer ours."""
        locks.confirm(self._lock_file(self._canon(run_id)))

    def _lock_file(self, run_id: str) -> Path:  # an object store's lock is a table delta-rs URL-decodes: no '%'
        return self.root / ".locks" / f"{_part(run_id) if self.is_remote else safe_segment(run_id)}.lock"

    # subscribe(callback): call ``callback(store, version)`` after each successful commit of any store of this
    # process (a run's commit, removal, rename, compaction); the store knows nothing of what it does.
    subscribe = staticmethod(commits.subscribe)

    def batch(self, every_s: float | None = None):
        """A block of many commits: subscribers are told at most every ``every_s`` seconds (None: not while
        it runs) and once when it ends, however it ends (``commits.batch``)."""
        return commits.batch(self, every_s)

    def journal_dir(self, run_id: str) -> Path:
        """Where the write-ahead journal of a run being collected lives (created by the journal): in the store,
        or for an object store on this machine (``location.journal_root``): a journal is appended line by line,
        which objects are not, and it is the collecting machine's (resume a run where it was collected)."""
        root = location.journal_root(self.root) if self.is_remote else self.root / "journal"
        return root / safe_segment(self._canon(run_id))

    def write_dataset(self, dataset) -> None:  # dataset: toolkit.dataset.Dataset (untyped: no upward import)
        """Store a dataset's cases and rubric items once per digest (idempotent across processes)."""
        self._writable()
        if self.has_dataset(dataset.sha256):  # stored already: no lock to take (a round trip on an object store)
            return
        lock = self.root / ".locks" / "store.lock"
        with store_lock(lock):
            for table in DATASET_TABLES:
                path = self._path(table)
                loaded = delta.actions_as_of(path)
                if loaded is not None and delta.files_of(loaded, path, {dataset.sha256}, None):
                    continue
                rows = getattr(dataset, table).to_arrow()
                data = to_arrow(table, rows.to_pylist()) if not isinstance(rows, pa.Table) else rows
                data = data.append_column(PART, constant(dataset.sha256, data.num_rows, pa.string()))
                locks.confirm(lock)  # stalled past its lease, another writer may have stored them meanwhile
                delta.append(path, table, data)

    def begin(self, run_id: str, write_id: str | None = None) -> transaction.Transaction:
        """A write transaction on a run, holding the run's lock: ``add`` rows (any number of data commits, all
        invisible), then ``commit`` (ONE runs commit) or ``abandon`` (``toolkit.store.transaction``)."""
        return transaction.begin(self, run_id, write_id)

    # Several runs at once (a bulk import): their rows in one data commit per table, nothing visible; then
    # new runs in ONE runs commit, all or none (``toolkit.store.transaction``).
    add_rows = staticmethod(transaction.add_rows)
    commit_new_runs = staticmethod(transaction.commit_new_runs)

    def commit_run(self, run_id: str, rows: dict[str, pa.Table | list[dict]] | None = None,
                   run_row: dict[str, Any] | None = None, *, step: dict[str, Any] | None = None,
                   write_id: str | None = None, replace: bool = False) -> str:
        """One transaction on a run in one call: data commits of ``rows`` (by run table) with one write id,
        then ONE ``runs`` commit that makes them part of the run. ``run_row``: columns of the runs row to
        set (needed for a new run); ``step``: appended to the row's ``steps``; ``replace``: the new rows
        replace all the run's data (swapped in that one commit); ``write_id``: replay-safe id (a journal's
        tag). Returns the write id."""
        return transaction.commit_run(self, run_id, rows, run_row, step=step, write_id=write_id, replace=replace)

    def write(self, table: str, key: str, rows: pa.Table | list[dict]) -> str | None:
        """Add rows to a run as one transaction (a ``runs`` row is set, creating the run; data rows
        need the run to exist). None when there are no rows. Dataset tables: use ``write_dataset``."""
        data = rows if isinstance(rows, pa.Table) else to_arrow(table, rows)
        if data.num_rows == 0:
            return None
        if table == "runs":
            row = data.to_pylist()[-1]
            return self.commit_run(key, None, {c: row.get(c) for c in TABLES["runs"].names
                                              if c not in ("steps", "updated_at", "write_ids")})
        if table not in RUN_TABLES:
            raise StoreError(f"write {table} through write_dataset")
        return self.commit_run(key, {table: data})

    def append_rows(self, table: str, rows: list[dict], keys: list[str], check: Callable[[], None] | None = None
                    ) -> None:
        """Rows of a table of the whole store (``LABEL_TABLES``; ``keys``: each row's partition value) in ONE
        commit under the store's lock, visible once it lands; ``check()`` runs first under that lock, so what
        it reads stays true until the commit (it raises to refuse: nothing is written)."""
        if table not in LABEL_TABLES:
            raise StoreError(f"append_rows writes {', '.join(LABEL_TABLES)}, not {table}")
        self._writable()
        data = to_arrow(table, rows)
        lock = self.root / ".locks" / "store.lock"
        with store_lock(lock):
            if check is not None:
                check()
            if data.num_rows:
                parts = pl.Series(PART, [_part(k) for k in keys], dtype=pl.String).to_arrow()
                locks.confirm(lock)  # what ``check`` read holds only while the lock is still ours
                delta.append(self._path(table), table, data.append_column(PART, parts))
        if data.num_rows:
            commits.committed(self)

    def is_live(self, run_id: str, write_id: str) -> bool:
        row = self._row(run_id)
        return row is not None and write_id in writes.parse(row["write_ids"])

    def damaged(self, run_ids: list[str] | None = None, tables: tuple[str, ...] | None = None) -> dict[str, str]:
        """Runs (all, or ``run_ids``) whose rows cannot all be read (of ``tables``, default every run table):
        run id -> one line (``live.damaged``)."""
        return writes.damaged(self, run_ids, tables)
