"""Whole-run operations on a store: remove, rename, compact (and the vacuum compaction runs).

Each is one store transaction (``toolkit.store.transaction``): one ``runs`` commit under the run's lock,
followed by a sweep of the rows no run names any more. A rename and a compaction copy the run's data and
have its scores computed again in their commit (as every commit does), rather than copying them. A rename
moves the run's human labels and its answers' rows of review keys to the new id; a removal removes them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import polars as pl
import pyarrow as pa

from toolkit.store import commits, delta, live as writes, transaction
from toolkit.store.delta import DATA_TABLES, PART, RUN_DATA
from toolkit.store.locks import confirm, store_lock
from toolkit.store.paths import StoreError, new_run_id, now_iso, part_of
from toolkit.store.sweep import sweep
from toolkit.tables import SCORED_RUN_COLUMNS, TABLES, constant, to_arrow

if TYPE_CHECKING:
    from toolkit.store.core import Store


def delete_run(store: "Store", run_id: str) -> None:
    """Remove a run: ONE runs commit (it stops being a run), then its data and journal are swept, and its
    files deleted: the space comes back at once, and older store versions no longer show the run's rows.
    Then its human labels and its answers' rows of review keys are deleted (``label_rows`` counts them):
    about answers no longer held, they would attach to a run collected again under the id."""
    txn = transaction.begin(store, run_id, missing="")
    try:
        # Label imports and reviews check under this lock that their runs exist: none adds rows of the run
        # after its removal, nor of a run made again under its id before its labels are gone.
        with store_lock(_store_lock(store)):
            txn.remove()
            changed = _drop_labels(store, txn.run_id) | _rekey_reviews(store, txn.run_id, None)
    finally:
        txn.lock.close()
    if changed:
        commits.committed(store)


def label_rows(store: "Store", run_id: str) -> tuple[int, int, int]:
    """What of the run the label tables hold: (human labels, answers in review keys, reviews showing it)."""
    run_id = store._canon(run_id)
    keys = store.read("reviews", columns=["review_id", "run_id"]).filter(pl.col("run_id") == run_id)
    return store.read("human_labels", keys=[run_id]).height, keys.height, keys["review_id"].n_unique()


def _store_lock(store: "Store"):
    return store.root / ".locks" / "store.lock"  # the lock of every store-wide commit (Store.append_rows)


def _drop_labels(store: "Store", run_id: str) -> bool:
    """Delete the run's ``human_labels`` partition (under the store's lock); whether it held any."""
    path = store._path("human_labels")
    if not store.read("human_labels", keys=[run_id], columns=["run_id"]).height:
        return False
    confirm(_store_lock(store))  # stalled past its lease, another writer may hold the store lock now
    delta.delete(path, f"{PART} = '{part_of(run_id)}'")
    return True


def _rekey_reviews(store: "Store", old: str, new: str | None, drop: str | None = None) -> bool:
    """Rewrite the review keys that show run ``old`` (under the store's lock) in ONE commit: its rows name
    ``new`` (None: they are deleted); rows naming ``drop`` go. Whether any review changed."""
    reviews = store.read("reviews")
    gone = {old, drop} - {None}
    shown = reviews.filter(pl.col("run_id").is_in(list(gone)))["review_id"].unique().to_list()
    touched = reviews.filter(pl.col("review_id").is_in(shown))
    if touched.height == 0:
        return False
    kept = touched.filter(pl.col("run_id") != drop) if drop is not None else touched
    kept = kept.filter(pl.col("run_id") != old) if new is None else kept.with_columns(
        run_id=pl.when(pl.col("run_id") == old).then(pl.lit(new)).otherwise(pl.col("run_id")))
    parts = sorted({part_of(r) for r in touched["review_id"].to_list()})  # safe segments: no user text quoted
    where = f"{PART} IN ({', '.join(repr(p) for p in parts)})"
    path = store._path("reviews")
    confirm(_store_lock(store))
    if kept.height == 0:
        delta.delete(path, where)
    else:
        data = to_arrow("reviews", kept.to_dicts())
        delta.overwrite(path, "reviews", data.append_column(
            PART, pa.array([part_of(r) for r in kept["review_id"].to_list()], pa.string())), where)
    return True


def rename_run(store: "Store", old: str, new: str) -> None:
    """Give a run another id: its rows are copied under the new id, then ONE runs commit swaps the two
    rows (old gone, new present); the old rows are swept afterwards."""
    store._writable()
    old, new = store._canon(old), new_run_id(new)
    if old == new:
        raise StoreError(f"run {old!r}: the new id is the same")
    txn = transaction.begin(store, new, renaming=old)
    try:
        pending = store.journal_dir(old)
        if pending.is_dir() and any(pending.iterdir()):
            raise StoreError(f"run {old!r} has a collection journal or batch in flight ({pending}): "
                             "finish it with `bedside run`/`bedside judge` first")
        copied = {}
        for table in DATA_TABLES:
            data = store.read(table, [old]).to_arrow()
            if data.num_rows:
                copied[table] = data.set_column(data.schema.get_field_index("run_id"), "run_id",
                                                constant(new, data.num_rows, pa.string()))
        if copied:
            txn.add(copied)
        # Held from the labels' copy to their move: no label import or review of the old id lands between.
        with store_lock(_store_lock(store)):
            _drop_labels(store, new)  # a run removed under this id by an earlier bedside left them
            labels = store.read("human_labels", keys=[old])
            if labels.height:  # about the answers, whose text the new id keeps; unseen until the runs commit
                data = to_arrow("human_labels", labels.with_columns(run_id=pl.lit(new)).to_dicts())
                confirm(_store_lock(store))
                delta.append(store._path("human_labels"), "human_labels",
                             data.append_column(PART, constant(part_of(new), data.num_rows, pa.string())))
            try:
                txn.commit(None, {"at": now_iso(), "kind": "rename", "from": old})
            except BaseException:
                if labels.height and not txn.done:
                    _drop_labels(store, new)
                raise
            moved = _drop_labels(store, old) | _rekey_reviews(store, old, new, drop=new)
    except BaseException:
        txn.abandon()
        raise
    if moved:  # the runs commit told already; registered databases also follow the label tables
        commits.committed(store)


def compact_run(store: "Store", run_id: str, rescore: bool = False) -> bool:
    """Rewrite a run written in many commits (with ``rescore``, also a run whose scores or listing facts are not
    stored, so that the commit stores them) as one write (one file per table), sweep dead rows, and keep the
    runs table to a few files; whether the run was rewritten (decided under its lock). Readers of the current
    version are never disturbed: the rewrite becomes visible in one runs commit and old files stay on disk
    (Delta's vacuum retention) for readers of older versions."""
    txn = transaction.begin(store, run_id)
    try:
        current = txn.current
        if current is None:
            return False
        live = writes.parse(current["write_ids"])
        rewrite = len(live) > 1 or (rescore and not scores_stored(current))
        if rewrite:
            txn.add({t: store.read(t, [txn.run_id]).to_arrow() for t in DATA_TABLES})
            txn.commit({c: current[c] for c in TABLES["runs"].names}, replace=True, same_rows=True)
        else:
            sweep(store, txn.run_id, set(live), writes.scores_write(live))
    finally:
        txn.lock.close()
    if _compact_runs_table(store):
        commits.committed(store)  # the runs table's files changed: readers of its file list follow
    return rewrite


def scores_stored(row: dict) -> bool:
    """Whether a runs row's commit stored the run's scores and the columns its scorer sets."""
    return (writes.scores_write(writes.parse(row["write_ids"])) is not None
            and all(row.get(c) is not None for c in SCORED_RUN_COLUMNS))


def _vacuum(store: "Store") -> None:
    """Delete files no version within Delta's retention (7 days) names: never a file the current version,
    or a reader of a recent one, needs. Every 25th version of a table, so its listing cost is spread."""
    for table in (*RUN_DATA, "runs"):
        path = store._path(table)
        latest = delta.latest_version(path)
        if latest is not None and latest % 25 == 0:
            try:
                delta.load(path).vacuum(dry_run=False)
            except Exception:  # a concurrent commit, say: the next compaction will do it
                pass


def _compact_runs_table(store: "Store") -> bool:
    """Whether the runs table's files were compacted."""
    _vacuum(store)
    path = store._path("runs")
    loaded = delta.load(path)
    if loaded is None or len(delta.files_of(loaded, path, None, None)) <= 16:
        return False
    with store_lock(store.root / ".locks" / "store.lock"):
        try:
            delta.load(path).optimize.compact()
            delta.seal_added(path, delta.latest_version(path))  # the compacted files: read-only on disk
        except Exception:  # a concurrent runs commit won; compaction can wait for the next time
            return False
    return True
