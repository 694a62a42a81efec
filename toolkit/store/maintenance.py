"""Store-wide upkeep: compaction (``bedside runs compact``) and vacuum (``--vacuum --retention HOURS``).

A store grows a data file per run, table and write, and a log entry per commit of each table. Compaction
keeps both bounded: every run written in several writes (a collection's checkpoints, a re-judge), or with
rows no write names any more, is rewritten as one write (``runs_ops.compact_run``: one file per table,
under the run's lock, so a run being written is left for the next time); the runs table is kept to a few
files; and each table whose log grew by ``CHECKPOINT_EVERY`` entries or more since its last checkpoint gets
one, so that a reader replays at most that many entries, and the entries the table's log retention (Delta's
30 days) no longer needs are deleted. Vacuum deletes the data files that no table version younger than the
retention names: older store versions can then no longer be read (``--version``), which is what the user
asks for by giving a retention.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from toolkit.store import commits, delta, live as writes, transaction
from toolkit.store.delta import DATASET_TABLES, PART, RUN_DATA
from toolkit.store.location import ObjectPath
from toolkit.store.paths import StoreError
from toolkit.store.runs_ops import _compact_runs_table, compact_run, scores_stored
from toolkit.tables import SCORED_RUN_COLUMNS

if TYPE_CHECKING:
    from toolkit.store.core import Store

CHECKPOINT_EVERY = 10  # log entries since the last checkpoint that make a table worth one
TABLES = ("runs", *RUN_DATA, *DATASET_TABLES)


@dataclass(frozen=True)
class Upkeep:
    """What a compaction (and vacuum) did."""

    compacted: list[str] = field(default_factory=list)  # runs rewritten as one write (by this compaction)
    rescored: list[str] = field(default_factory=list)  # of those, runs whose scores and listing were not stored
    skipped: dict[str, str] = field(default_factory=dict)  # run -> why it was left (held by another writer)
    checkpointed: list[str] = field(default_factory=list)  # tables given a checkpoint
    vacuumed: dict[str, int] = field(default_factory=dict)  # table -> data files deleted


def runs_to_compact(store: "Store") -> list[str]:
    """Runs whose rows lie in more than one file of a table, or that have more than one live write: from the
    tables' logs alone (no data file is read)."""
    snap = store._snapshot()
    by_part = dict(zip(snap.runs.column(PART).to_pylist(), snap.runs.column("run_id").to_pylist()))
    live = snap.live_writes()
    chosen = {part for part, w in live.items() if len(writes.without_scores(w)) > 1}
    for table in RUN_DATA:
        loaded = delta.actions_as_of(store._path(table), None)
        if loaded is None or loaded.num_rows == 0:
            continue
        seen: set[str] = set()
        for part in loaded.column(f"partition.{PART}").to_pylist():
            if part in seen:
                chosen.add(part)
            seen.add(part)
    return [run for part, run in by_part.items() if part in chosen]


def runs_to_rescore(store: "Store", run_ids: list[str] | None = None) -> list[str]:
    """Runs whose latest commit stored no scores, or not the runs row's ``SCORED_RUN_COLUMNS`` (written by an
    earlier version, or by a process without a scorer): readers compute those at every read until a commit
    stores them. None when this process stores no scores; ``run_ids``: of those runs only."""
    if not transaction.scoring():
        return []
    runs = store.read("runs", run_ids, columns=["run_id", "dataset_sha256", "write_ids", *SCORED_RUN_COLUMNS])
    # A run whose dataset the store lacks cannot be scored: rewriting it would store nothing, every time.
    known = {sha: store.has_dataset(sha) for sha in set(runs["dataset_sha256"].to_list())}
    return [row["run_id"] for row in runs.iter_rows(named=True)
            if known[row["dataset_sha256"]] and not scores_stored(row)]


def compact_runs_table(store: "Store") -> None:
    """Keep the runs table to a few files (it gains one a runs commit): every commit, and every reader, reads
    all of its files. For writers of many runs in one process (a bulk import)."""
    if _compact_runs_table(store):
        commits.committed(store)  # the runs table's files changed: readers of its file list follow


def compact_store(store: "Store", vacuum_hours: int | None = None) -> Upkeep:
    """Compact every run that needs it (and rewrite those whose scores are not stored, so that the commit
    stores them: ``runs_to_rescore``), checkpoint the tables' logs and clean expired entries; with
    ``vacuum_hours``, then delete the data files no version younger than that many hours needs."""
    store._writable()
    done = Upkeep()
    rescore = runs_to_rescore(store)
    for run_id in dict.fromkeys([*runs_to_compact(store), *rescore]):
        try:
            if compact_run(store, run_id, rescore=run_id in rescore):
                done.compacted.append(run_id)  # (not: done by another compaction meanwhile, removed, only swept)
        except StoreError as error:  # a writer holds the run: it is compacted the next time
            done.skipped[run_id] = str(error)
    if rescore:  # those of them whose rewrite stored the scores (one read of the runs table for all)
        unscored = set(runs_to_rescore(store, rescore))
        done.rescored.extend(r for r in done.compacted if r in rescore and r not in unscored)
    compact_runs_table(store)
    for table in TABLES:
        path = store._path(table)
        latest = delta.latest_version(path)
        if latest is None:
            continue
        if latest - _last_checkpoint(path) >= CHECKPOINT_EVERY:
            loaded = delta.load(path)
            loaded.create_checkpoint()
            loaded.cleanup_metadata()
            done.checkpointed.append(table)
        if vacuum_hours is not None:
            try:
                removed = delta.load(path).vacuum(retention_hours=vacuum_hours, dry_run=False,
                                                  enforce_retention_duration=False)
            except Exception as error:  # noqa: BLE001 - delta-rs's own types; its local messages name no cause
                raise StoreError(f"{path}: vacuum: {_cause(path, error)}") from None
            done.vacuumed[table] = len(removed)
    return done


def _cause(path: Any, error: Exception) -> str:
    """Why a table's files could not be deleted: a local folder this user may not write says so."""
    if not isinstance(path, ObjectPath) and not os.access(path, os.W_OK | os.X_OK):
        return f"permission denied (this user cannot delete files in {path})"
    return (str(error).splitlines() or [type(error).__name__])[0][:200]


def _last_checkpoint(path: Any) -> int:
    """The version of the table's last checkpoint (-1: none), from its checkpoint files' names (a local folder
    or an object store's prefix alike)."""
    log = path / "_delta_log"
    if not log.is_dir():
        return -1
    names = [p.name for p in log.iterdir()]
    found = [int(n[:20]) for n in names if n.endswith(".checkpoint.parquet") and n[:20].isdigit()]
    return max(found, default=-1)
