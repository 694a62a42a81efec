"""Freeing what a run's commits left behind: rows no live write names (``sweep``), files the latest table
versions no longer name (``free_files``), a folder removed whole (``remove_tree``). Readers never see these
rows already; this only gives the space back, under the run's lock."""

from __future__ import annotations

import os
import shutil
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

from toolkit.store import delta
from toolkit.store.delta import PART, RUN_DATA, SCORES, WRITE_ID
from toolkit.store.paths import part_of

if TYPE_CHECKING:
    from toolkit.store.core import Store


def sweep(store: "Store", run_id: str, keep: set[str], scores: str | None = None) -> None:
    """Delete the run's data rows whose write id is not in ``keep``, and its score rows but those of the write
    ``scores`` (under the run's lock). They are invisible already; this only frees the space (Delta keeps the
    files for older versions)."""
    seg = part_of(run_id)
    for table in RUN_DATA:
        kept = ({scores} if scores else set()) if table in SCORES else keep
        path = store._path(table)
        loaded = delta.actions_as_of(path)
        if loaded is None:
            continue
        present = delta.files_of(loaded, path, {seg}, None)
        if not present:
            continue
        visible = delta.files_of(loaded, path, {seg}, {seg: kept})
        if len(visible) == len(present):
            continue
        where = f"{PART} = '{seg}'"
        if kept:
            where += f" AND {WRITE_ID} NOT IN ({', '.join(repr(k) for k in sorted(kept))})"
        delta.delete(path, where)


def free_files(store: "Store", run_id: str, since: float | None) -> None:
    """Delete the files of the run's partitions that the tables' latest versions do not name (written
    since ``since``, a time; None: all). Under the run's lock: no other writer adds files there."""
    seg = part_of(run_id)
    for table in RUN_DATA:
        path = store._path(table)
        folder = path / f"{PART}={seg}"
        latest = delta.latest_version(path)
        if latest is None or not folder.is_dir():
            continue
        named = {f for f, _, _ in delta.files_of(delta.actions_at(path, latest), path, {seg}, None)}
        for file in folder.iterdir():
            try:
                if file not in named and file.is_file() and (since is None or file.stat().st_mtime >= since - 1):
                    file.unlink()
            except OSError:  # gone already, say: best effort
                pass


def remove_tree(folder: Path) -> None:
    if folder.exists():
        trash = folder.with_name(f".trash-{uuid.uuid4().hex[:8]}")
        os.replace(folder, trash)
        shutil.rmtree(trash, ignore_errors=True)
