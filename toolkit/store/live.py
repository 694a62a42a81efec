"""A run's live writes, as its ``runs`` row lists them, and the check that their rows can all be found.

``write_ids`` holds a JSON object: write id -> rows that write committed, by run table (``{"answers": 30,
...}``); stores of earlier versions hold a plain list of ids (rows unknown). A run's scores (the score tables)
are those of ONE write, its scores write: the commit that wrote them names them in its entry, and every commit
drops them from the older entries (``without_scores``), so older score rows are invisible from that commit on. A live write whose rows a table
no longer has (its add action gone from the log, say) makes the run damaged: read, it would show fewer
rows, and so wrong numbers, without a word.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from toolkit.store import delta
from toolkit.store.delta import DATA_TABLES, PART, RUN_DATA, SCORES
from toolkit.store.location import ObjectPath
from toolkit.store.paths import part_of as _part

TRIES = 8  # snapshots a check takes while concurrent commits keep moving the store
Writes = dict[str, "dict[str, int] | None"]  # write id -> rows by table (None: not recorded)


def parse(text: str | None) -> Writes:
    """The live writes of a ``write_ids`` value (either form)."""
    value = json.loads(text or "[]")
    return {w: None for w in value} if isinstance(value, list) else dict(value)


def dump(writes: Writes) -> str:
    return json.dumps(writes, sort_keys=False, separators=(",", ":"))


def scores_write(writes: Writes) -> str | None:
    """The write whose score rows are the run's (None: the run has none stored, e.g. written by an earlier
    version: readers compute its scores)."""
    found = [w for w, rows in writes.items() if rows and SCORES[-1] in rows]
    return found[-1] if found else None


def visible(writes: Writes, table: str | None) -> set[str]:
    """The write ids whose rows of ``table`` are visible: a score table's, the scores write's alone."""
    if table in SCORES:
        found = scores_write(writes)
        return {found} if found else set()
    return set(writes)


def without_scores(writes: Writes) -> Writes:
    """``writes`` naming no score rows: what a commit keeps of the older writes. A write that held only score
    rows is dropped (its rows are swept)."""
    out: Writes = {}
    for wid, rows in writes.items():
        if rows is None:
            out[wid] = None
            continue
        kept = {t: n for t, n in rows.items() if t not in SCORES}
        if kept or not rows:
            out[wid] = kept
    return out


def counts(frames: dict[str, Any]) -> dict[str, int]:
    """Rows by table of one write's frames (Arrow tables)."""
    return {t: f.num_rows for t, f in frames.items() if f.num_rows}


def add(writes: Writes, write_id: str, rows: dict[str, int]) -> Writes:
    """``writes`` with ``rows`` more of ``write_id`` (a write committed in several data commits)."""
    out = dict(writes)
    known = dict(out.get(write_id) or {})
    for table, n in rows.items():
        known[table] = known.get(table, 0) + n
    out[write_id] = known
    return out


def lost(tables: dict[str, tuple[Any, Path]], by_part: dict[str, str], writes_of: dict[str, Writes],
         parts: set[str] | None) -> dict[str, str]:
    """Run id -> one line naming the table and the rows of a live write it does not hold, for the runs
    (``parts``; all when None) whose live writes' rows cannot all be found. ``tables``: run table ->
    (its loaded add actions or None, its path); ``writes_of``: part -> its run's live writes."""
    found = {t: delta.write_rows(loaded, path, parts) if loaded is not None else {}
             for t, (loaded, path) in tables.items()}
    out: dict[str, str] = {}
    for part, writes in writes_of.items():
        if parts is not None and part not in parts:
            continue
        for wid, rows in writes.items():
            if rows is None:  # an earlier store's write: lost only if no table holds any of its rows
                if set(DATA_TABLES) <= tables.keys() and all(found[t].get((part, wid), 0) == 0 for t in DATA_TABLES):
                    out[by_part[part]] = f"{tables[DATA_TABLES[0]][1].parent}: no table holds the rows of write " \
                                         f"{wid} (damaged Delta log)"
                continue
            for table, expected in rows.items():
                if table not in tables:
                    continue
                have = found[table].get((part, wid), 0)
                if have < expected:
                    out[by_part[part]] = (f"{tables[table][1]}: {expected - have} of the {expected} rows of write "
                                          f"{wid} cannot be found (damaged Delta log)")
                    break
            if by_part[part] in out:
                break
    return out


def damaged(store: Any, run_ids: list[str] | None = None, tables: tuple[str, ...] | None = None) -> dict[str, str]:
    """Runs whose visible files are missing or not the size their commit recorded (truncated, say), or
    whose live writes' rows a table does not hold (its log damaged): run id -> one line naming the file
    or table. Cheap (no file is read, but those whose add actions lack statistics)."""
    for _ in range(TRIES):
        snap = store._snapshot()
        out = _damaged(store, snap, run_ids, RUN_DATA if tables is None else tables)
        # Rows a concurrent replace swept after this snapshot was taken are not lost: look again.
        if not out or store._latest_version() == snap.version:
            return out
    return out


def lost_in(store: Any, snap: Any, tables: tuple[str, ...], run_ids: list[str] | None,
            writes_of: dict[str, Writes] | None = None) -> dict[str, str]:
    """Run id -> the line naming a table of ``store`` that lacks rows of one of its live writes in the
    snapshot ``snap`` (``lost``; ``writes_of``: its ``live_writes`` when parsed already)."""
    loaded = {}
    for table in tables:
        path = store._path(table)
        found = delta.actions_as_of(path, snap.as_of)
        loaded[table] = (found, path)
    by_part = dict(zip(snap.runs.column(PART).to_pylist(), snap.runs.column("run_id").to_pylist()))
    parts = None if run_ids is None else {_part(r) for r in run_ids}
    return lost(loaded, by_part, snap.live_writes() if writes_of is None else writes_of, parts)


def _damaged(store: Any, snap: Any, run_ids: list[str] | None, tables: tuple[str, ...]) -> dict[str, str]:
    by_part = dict(zip(snap.runs.column(PART).to_pylist(), snap.runs.column("run_id").to_pylist()))
    run_ids = None if run_ids is None else [store._canon(r, snap) for r in run_ids]
    wanted = None if run_ids is None else {_part(r) for r in run_ids}
    writes_of = snap.live_writes()  # parsed once for every table (a store of many runs has many rows)
    out: dict[str, str] = {}
    for table in tables:
        path = store._path(table)
        actions = delta.actions_as_of(path, snap.as_of)
        if actions is None:
            continue
        listed = _sizes(path) if isinstance(store.root, ObjectPath) else None
        live = {p: visible(w, table) for p, w in writes_of.items()}
        for file, part, size in delta.files_of(actions, path, wanted, live):
            if by_part.get(part) in out:
                continue
            if listed is not None:
                actual = listed.get(str(file))
            else:
                try:
                    actual = os.stat(file).st_size
                except (FileNotFoundError, NotADirectoryError):  # as Path.exists says so
                    actual = None
            if actual != size:
                what = "missing" if actual is None else f"{actual} bytes, its commit recorded {size}"
                out[by_part[part]] = f"{file}: damaged part file ({what})"
    for run_id, problem in lost_in(store, snap, tables, run_ids, writes_of).items():
        out.setdefault(run_id, problem)
    return out


def _sizes(table: ObjectPath) -> dict[str, int]:
    """An object-store table's objects and their sizes, in one listing (a request per file otherwise)."""
    return {str(p): p.stat().st_size for p in table.listing(recursive=True)}
