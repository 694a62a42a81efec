"""The store's one write transaction on a run: begin, add rows, commit (or abandon).

Multi-table atomicity: Delta commits are per table, so the ``runs`` table is the commit point. Data rows
carry a ``write_id``; a run's single ``runs`` row lists its live write ids. A transaction commits its data
rows first, in as many data commits as it likes (a streamed import cannot hold a file's rows at once), all
under its one write id and so invisible; then ONE runs commit makes them part of the run (a replace swaps
the live set in that commit, a removal deletes the row, a rename swaps two rows). Abandoned, its rows are
swept; a process killed before either leaves them invisible, and the run's next writer sweeps them.
A transaction holds the run's lock from ``begin`` until it commits or is abandoned.

A given write id (a journal's tag) may be a replay after a crash: its first data commit of each table is an
``overwrite ... where write_id = W``, so replaying never duplicates a row. Several runs' transactions may
share one data commit per table (``add_rows``: a bulk import of small files); each still becomes visible
only through a runs commit: its own, or one that makes several new runs at once (``commit_new_runs``, all or
none). Subscribers (``commits``) are told after each runs commit.

Scores are data too: before its runs commit a transaction asks the registered scorer (``score_with``; the
store itself knows no arithmetic) for the score rows of the whole run as the commit will show it, and adds
them under its write id, so the commit that changes a run's rows changes its scores with them. With no
scorer (or one that cannot score the run) the commit stores none and readers compute them.
"""

from __future__ import annotations

import json
import time
import uuid
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable

import pyarrow as pa

from toolkit.store import commits, delta, live as writes, rows as run_rows
from toolkit.store.delta import PART, RUN_DATA, SCORES, WRITE_ID
from toolkit.store.disk import SLACK, NoSpace, room
from toolkit.store.paths import StoreError, new_run_id, now_iso, part_of, some_of
from toolkit.store.sweep import free_files, remove_tree, sweep
from toolkit.store.rows import Rows
from toolkit.tables import SCORED_RUN_COLUMNS, TABLES, constant, to_arrow

if TYPE_CHECKING:
    import polars as pl

    from toolkit.store.core import Store

# [(transaction, the runs row it commits)] -> each run's score rows by score table (None: none to store), in
# one computation for runs committed together. ``Transaction.read`` gives a run's rows as its commit will show
# them (``read_together``: several runs' in one read). Raising: the runs are scored one by one, and a run
# whose scoring raises is stored unscored.
Scorer = Callable[[list[tuple["Transaction", dict]]], "list[Rows | None]"]
_SCORERS: list[Scorer] = []


def score_with(scorer: Scorer) -> None:
    """The one scorer of this process's commits (a later registration replaces it)."""
    _SCORERS[:] = [scorer]


def scoring() -> bool:
    """Whether this process's commits store scores (a scorer is registered)."""
    return bool(_SCORERS)


@dataclass
class Transaction:
    store: "Store"
    run_id: str
    write_id: str
    current: dict[str, Any] | None  # the runs row the commit builds on (None: a new run)
    replay: bool = False  # a given write id: its first data commit of each table replaces its rows
    renaming: str | None = None  # the run this one takes over: its row goes in the commit, its rows after
    wrote: bool = field(default=False)  # some data commit carried rows of this transaction
    rows: dict[str, int] = field(default_factory=dict)  # rows committed so far, by table
    began: float = field(default_factory=time.time)  # files of the run's partitions newer than this are its own
    lock: ExitStack = field(default_factory=ExitStack, repr=False)
    done: bool = field(default=False)  # committed or abandoned: nothing more to do
    showing: set[str] = field(default_factory=set)  # while scoring: the write ids the commit will show

    def read(self, table: str, columns: list[str] | None = None) -> "pl.DataFrame":
        """The run's rows of a data table (or ``columns`` of it) as this commit will show them (for the scorer)."""
        return read_together([self], table, columns)

    def add(self, rows: Rows) -> None:
        """Data commits, one per table, of ``rows``; nothing becomes visible."""
        self.store.add_rows([(self, rows)])

    def commit(self, run_row: dict[str, Any] | None = None, step: dict[str, Any] | None = None,
               replace: bool = False, same_rows: bool = False) -> str:
        """ONE runs commit making the rows part of the run (``replace``: all of it, the old rows swept after).
        ``run_row``: columns of the runs row to set (needed for a new run); ``step``: appended to its
        ``steps``; ``same_rows``: the rows are the run's own, rewritten (a compaction), so its ``updated_at``
        stays. Returns the write id. On an error the transaction stays open (abandon it)."""
        self._open()
        if self.current is None and run_row is None:
            raise StoreError(f"{self.store.root}: no run {self.run_id!r} to add rows to")
        keep = self.current is not None and not replace and self.renaming is None
        live = writes.parse(self.current["write_ids"]) if keep else {}
        row = _next_row(self.current, run_row, replace)
        _score([(self, row, live)])
        if self.wrote:
            live = writes.add({k: v for k, v in live.items() if k != self.write_id}, self.write_id, self.rows)
        live = {**writes.without_scores({k: v for k, v in live.items() if k != self.write_id}),
                **({self.write_id: live[self.write_id]} if self.write_id in live else {})}
        drop = None if self.renaming is None else part_of(self.renaming)
        self._confirm()
        _commit_row(self.store, self.run_id, self.current, row, step, live, drop, same_rows)
        self.done = True
        try:
            try:  # the rows no run names now: invisible already, so a failed sweep leaves them to the next one
                if replace and self.current is not None:
                    sweep(self.store, self.run_id, set(live), writes.scores_write(live))
                if self.renaming is not None:
                    sweep(self.store, self.renaming, set())
            except StoreError:  # a full disk, say: the commit stands, and saying it failed would be untrue
                pass
            if self.renaming is not None:
                remove_tree(self.store.journal_dir(self.renaming))
        finally:
            self.lock.close()
            commits.committed(self.store)
        return self.write_id

    def remove(self) -> None:
        """ONE runs commit removing the run (it stops being one), then its rows are swept and their files
        deleted: the space comes back at once, also on a full disk, where it is wanted most."""
        self._open()
        self._confirm()
        try:
            delta.delete(self.store._path("runs"), f"{PART} = '{part_of(self.run_id)}'")
        except NoSpace:
            raise NoSpace(f"no space left on {self.store.root}: not even for the small commit that removes run "
                          f"{self.run_id!r}; free some space outside the store first") from None
        self.done = True
        try:
            try:
                sweep(self.store, self.run_id, set())
            except StoreError:  # a disk too full for the sweep's log entries: the run is gone all the same
                pass
            remove_tree(self.store.journal_dir(self.run_id))
            free_files(self.store, self.run_id, None)
        finally:
            self.lock.close()
            commits.committed(self.store)

    def abandon(self) -> None:
        """Sweep the rows this transaction committed (best effort: they are invisible anyway, and the run's
        next writer sweeps what is left), and let the run's lock go. Nothing once committed."""
        if self.done:
            self.lock.close()
            return
        self.done = True
        try:
            try:
                self._confirm()
            except StoreError:  # another writer took the run over: the rows there may be its own now
                return
            live = {} if self.current is None else writes.parse(self.current["write_ids"])
            if self.wrote:
                try:
                    sweep(self.store, self.run_id, set(live), writes.scores_write(live))
                except Exception:  # a full disk, say: the rows stay invisible
                    pass
            # Files this write left that no version names (a data commit that failed, one swept just now) go
            # at once: on a full disk they are the space a failed import took.
            free_files(self.store, self.run_id, self.began)
        finally:
            self.lock.close()

    def _confirm(self) -> None:
        """The run's lock (and a renamed run's) still ours, right before the commit point: a writer stalled
        past its lease must not commit over, or sweep, the run another writer took over meanwhile."""
        for run_id in (self.run_id, self.renaming):
            if run_id is not None:
                self.store._confirm(run_id)

    def _open(self) -> None:
        if self.done:
            raise StoreError(f"run {self.run_id!r}: this write was committed or abandoned already")


def begin(store: "Store", run_id: str, write_id: str | None = None, *, missing: str | None = None,
          renaming: str | None = None) -> Transaction:
    """A transaction on ``run_id`` under the run's lock (joined when this process holds it: ``Store.lock``).
    ``write_id``: replay-safe id (a journal's tag); ``missing``: a run not there yet is a StoreError ("no run
    'ID'" and this text, or the store's runs when it is empty), else a new run may begin;
    ``renaming``: the existing run whose rows the new run ``run_id`` takes over (its row goes in the same runs
    commit). Rows that an interrupted write of a run without a runs row left behind are swept first."""
    store._writable()
    lock = ExitStack()
    try:
        if renaming is not None:
            lock.enter_context(store._hold(renaming))
        else:
            run_id = store._canon(run_id)
        lock.enter_context(store._hold(run_id))
        current = store._row(run_id)
        if renaming is not None:
            old = store._row(renaming)
            if old is None:
                raise StoreError(f"{store.root}: no run {renaming!r} {_known(store)}")
            if current is not None:
                raise StoreError(f"{store.root}: run {run_id!r} exists (remove it first or choose another id)")
        elif current is None and missing is not None:
            raise StoreError(f"{store.root}: no run {run_id!r} {missing or _known(store)}")
        if current is None:
            run_id = new_run_id(run_id)
            if _has_rows(store, run_id):
                sweep(store, run_id, set())  # rows an interrupted write left: never seen, now gone
        if renaming is not None:
            current = {**old, "run_id": run_id}
    except BaseException:
        lock.close()
        raise
    return Transaction(store, run_id, write_id or uuid.uuid4().hex, current, replay=write_id is not None,
                       renaming=renaming, lock=lock)


def _known(store: "Store") -> str:
    return f"(runs: {some_of(store.run_ids())})"


def add_rows(batch: list[tuple[Transaction, Rows]]) -> None:
    """Data commits, one per table, of the rows of each transaction (rows: by run table, Arrow tables or
    row dicts); nothing becomes visible. StoreError (one line) for a value that does not fit, before any
    commit."""
    untagged: dict[str, list[tuple[pa.Table, str, str]]] = {}  # table -> (rows, write id, part) of each run
    replays: list[tuple[Transaction, str, pa.Table]] = []
    counted = []
    for txn, rows in batch:
        txn._open()
        seg = part_of(txn.run_id)
        frames = run_rows.frames(txn.run_id, rows)
        counted.append((txn, writes.counts(frames)))
        for table, frame in frames.items():
            if txn.replay and table not in txn.rows:  # a replay's rows replace those it committed before
                replays.append((txn, table, run_rows.tagged([(frame, txn.write_id, seg)])))
            else:
                untagged.setdefault(table, []).append((frame, txn.write_id, seg))
    tables = {table: run_rows.tagged(parts) for table, parts in untagged.items()}
    if any(frame.num_rows for frame in tables.values()) or replays:
        store = batch[0][0].store
        store._writable()  # claims the folder: not for a batch with no row (a file refused at its end)
        # Every table's commit checked at once, with a commit's slack for each score table and the runs row
        # after them: none may land (invisible, but on disk) when a later one cannot fit. Arrow sizes bound Parquet.
        need = sum(f.nbytes for f in tables.values()) + sum(f.nbytes for _, _, f in replays)
        room(store.root, need + SLACK * (len(tables) + len(replays) + len(SCORES) + 1))
    for txn, table, frame in replays:
        delta.overwrite(txn.store._path(table), table, frame,
                        f"{PART} = '{part_of(txn.run_id)}' AND {WRITE_ID} = '{txn.write_id}'")
    if tables:
        store = batch[0][0].store
        for table in RUN_DATA:
            if table in tables:
                delta.append(store._path(table), table, tables[table])
    for txn, rows in counted:
        txn.wrote = txn.wrote or bool(rows)
        for table, n in rows.items():
            txn.rows[table] = txn.rows.get(table, 0) + n


def commit_run(store: "Store", run_id: str, rows: Rows | None = None, run_row: dict[str, Any] | None = None, *,
               step: dict[str, Any] | None = None, write_id: str | None = None, replace: bool = False) -> str:
    """A whole transaction in one call (see ``Store.commit_run``). Returns the write id."""
    txn = begin(store, run_id, write_id, missing="to add rows to" if run_row is None else None)
    try:
        if rows:
            txn.add(rows)  # every row converted before anything is committed
        return txn.commit(run_row, step, replace)
    finally:
        txn.lock.close()  # a failed one leaves its rows invisible: the run's next replace or compaction sweeps them


def commit_new_runs(batch: list[tuple[Transaction, dict[str, Any], dict[str, Any] | None]]) -> None:
    """ONE runs commit making several new runs part of the store, each from its own transaction (begun on a
    run that does not exist, its rows added): ``(transaction, its runs row, its step)``. Their scores are
    computed together and stored in one data commit per score table. All or none: on an error no run is
    made and the transactions stay open (abandon them)."""
    if not batch:
        return
    store = batch[0][0].store
    for txn, _, _ in batch:
        txn._open()
        if txn.current is not None or txn.renaming is not None or txn.store is not store:
            raise StoreError(f"run {txn.run_id!r}: commit_new_runs makes new runs of one store only")
    rows = [_next_row(None, run_row, False) for _, run_row, _ in batch]
    _score([(txn, row, {}) for (txn, _, _), row in zip(batch, rows)])
    data = [_runs_row(txn.run_id, None, row, step, writes.add({}, txn.write_id, txn.rows) if txn.wrote else {})
            for (txn, _, step), row in zip(batch, rows)]
    for txn, _, _ in batch:
        txn._confirm()
    delta.append(store._path("runs"), "runs", pa.concat_tables(data))  # new runs under their locks: no scan
    for txn, _, _ in batch:
        txn.done = True
        txn.lock.close()
    commits.committed(store)


def read_together(txns: list[Transaction], table: str, columns: list[str] | None = None) -> "pl.DataFrame":
    """The rows of a data table (or ``columns`` of it) of several runs as their commits will show them, in one
    read (for the scorer)."""
    return txns[0].store.read_writes(table, {t.run_id: t.showing for t in txns}, columns)


def _score(items: list[tuple[Transaction, dict[str, Any], writes.Writes]]) -> None:
    """Add the score rows of each run as its commit will show it (``Scorer``: one computation for all, one data
    commit per score table), if a scorer is registered, and set the runs row's ``SCORED_RUN_COLUMNS`` it gives
    (under "runs"; null otherwise). ``items``: (transaction, its runs row, the live writes the commit keeps)."""
    for _, row, _ in items:  # set anew by each commit: a value an older commit set would not fit its rows
        row.update(dict.fromkeys(SCORED_RUN_COLUMNS))
    if not _SCORERS:
        return
    for txn, _, live in items:
        txn.showing = set(live) | ({txn.write_id} if txn.wrote else set())
    try:
        scored = _scores([(txn, row) for txn, row, _ in items])
    finally:
        for txn, _, _ in items:
            txn.showing = set()
    adding = []
    for (txn, row, _), rows in zip(items, scored):
        rows = dict(rows or {})
        # The runs row's columns the scorer sets: stored as given, in this commit's runs row.
        row.update({c: v for c, v in rows.pop("runs", {}).items() if c in SCORED_RUN_COLUMNS})
        if rows:
            adding.append((txn, rows))
    if adding:
        add_rows(adding)


def _scores(pairs: list[tuple[Transaction, dict[str, Any]]]) -> list["Rows | None"]:
    try:
        return _SCORERS[0](pairs)
    except StoreError:  # the store itself failed (a damaged file, a full disk): so does the commit
        raise
    except Exception:  # noqa: BLE001 - a run it cannot score (decisions outside the rubric) is stored
        if len(pairs) == 1:  # unscored: readers compute its scores and say what is wrong
            return [None]
        return [rows for pair in pairs for rows in _scores([pair])]


def _next_row(current: dict[str, Any] | None, run_row: dict[str, Any] | None, replace: bool) -> dict[str, Any]:
    """The runs row's columns as a commit sets them (before its steps, time and write ids)."""
    base = {} if current is None else {c: current[c] for c in TABLES["runs"].names}
    row = {**base, **(run_row or {})} if not replace else {**(run_row or base)}
    if current is not None and not replace:
        row["created_at"] = current["created_at"]
    return row


def _runs_row(run_id: str, current: dict[str, Any] | None, row: dict[str, Any], step: dict[str, Any] | None,
              live: writes.Writes, same_rows: bool = False) -> pa.Table:
    """The run's ``runs`` row as a commit writes it: ``row`` with its steps, time (``same_rows``: the time the
    rows last changed, kept), live writes and part."""
    row = dict(row)
    steps = json.loads((current or {}).get("steps") or "[]")
    if step is not None:
        steps.append(step)
    kept = (current or {}).get("updated_at") if same_rows else None
    row.update(run_id=run_id, steps=json.dumps(steps), updated_at=kept or now_iso(), write_ids=writes.dump(live))
    row.setdefault("created_at", row["updated_at"])
    data = to_arrow("runs", [row])
    return data.append_column(PART, constant(part_of(run_id), 1, pa.string()))


def _commit_row(store: "Store", run_id: str, current: dict[str, Any] | None, row: dict[str, Any],
                step: dict[str, Any] | None, live: writes.Writes, drop: str | None, same_rows: bool = False) -> None:
    data = _runs_row(run_id, current, row, step, live, same_rows)
    seg = part_of(run_id)
    if current is None and drop is None:  # a new run, under its lock: no row to replace, no predicate scan
        delta.append(store._path("runs"), "runs", data)
        return
    where = f"{PART} = '{seg}'" if drop is None else f"{PART} IN ('{seg}', '{drop}')"
    delta.overwrite(store._path("runs"), "runs", data, where)


def _has_rows(store: "Store", run_id: str) -> bool:
    """Whether any data table holds rows of the run (cheap: cached add actions of the latest versions)."""
    seg = part_of(run_id)
    for table in RUN_DATA:
        path = store._path(table)
        latest = delta.latest_version(path)
        if latest is not None and delta.files_of(delta.actions_at(path, latest), path, {seg}, None):
            return True
    return False
