"""Committed Parquet files are made read-only on disk (mode 0444) as soon as a commit lists them.

A Delta commit never changes a data file it has written: a later commit adds new files and removes
old ones from the log. Making the files read-only keeps a stray ``COPY ... TO``, a tool or a typo from
overwriting a run in place (the owner can still delete them, so vacuum and removal work). Not on
Windows, where a read-only file cannot be deleted.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from urllib.parse import unquote

READ_ONLY = stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH


def seal_added(table: Path, version: int | None) -> None:
    """Make the data files that ``version`` of the Delta table at ``table`` added read-only. Best effort:
    a file system without permissions, or a log line it cannot read, leaves the files as they are. Not on an
    object store (no local path), whose objects no local tool opens for writing."""
    if version is None or os.name == "nt" or not isinstance(table, Path):
        return
    try:
        lines = (table / "_delta_log" / f"{version:020d}.json").read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError):
        return
    for line in lines:
        try:
            added = json.loads(line).get("add")
        except (ValueError, AttributeError):
            continue
        relative = added.get("path") if isinstance(added, dict) else None
        if not isinstance(relative, str) or "://" in relative:
            continue
        try:
            os.chmod(table / unquote(relative), READ_ONLY)
        except OSError:
            pass
