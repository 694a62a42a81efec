"""Where a store lies and how a run id becomes one safe path segment."""

from __future__ import annotations

import datetime as dt
import hashlib
import os
import re
from pathlib import Path

_SAFE = re.compile(r"[A-Za-z0-9_\-]")
_MAX_SEGMENT = 120


class StoreError(RuntimeError):
    """A store operation that cannot proceed (missing run, run exists, locked run, damaged file, ...)."""


def default_store_path() -> Path:
    """Where a command without ``--store`` reads and writes: ``$BEDSIDE_STORE``, else ``./data/results``
    relative to the current directory (never inside the installed package)."""
    chosen = os.environ.get("BEDSIDE_STORE")
    return Path(chosen) if chosen else Path.cwd() / "data" / "results"


def safe_segment(run_id: str) -> str:
    """A run id as one path segment: only [A-Za-z0-9_-] and %XX escapes; never '.', '..' or a slash.

    Distinct ids give distinct segments (the encoding is injective); very long ids are cut and
    suffixed with a digest of the whole id. The segment is also what the store's SQL predicates
    name a run by, so they never quote user text.
    """
    if not run_id:
        raise StoreError("run id must not be empty")
    encoded = "".join(ch if _SAFE.match(ch) else "".join(f"%{b:02X}" for b in ch.encode("utf-8", "surrogatepass"))
                      for ch in run_id)
    if len(encoded) > _MAX_SEGMENT:
        encoded = f"{encoded[:80]}~{hashlib.sha256(run_id.encode('utf-8', 'surrogatepass')).hexdigest()[:32]}"
    return encoded


def part_of(run_id: str) -> str:
    """A run's partition value: its safe segment with '.' for '%' (injective still: segments hold no '.'),
    so Delta's own escaping of '%' does not double up in the directory names."""
    return safe_segment(run_id).replace("%", ".")


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()
