"""Writer locks: one per run, one for the whole store (dataset registration, runs-table compaction).

A run lock is an ``flock`` on ``.locks/<run>.lock``; the holder writes its pid, command line and
start time into the file so a second writer can say who holds it. Locks are re-entrant within a
process (the collector holds a run's lock while its journal commits through the same store).
"""

from __future__ import annotations

import datetime as dt
import fcntl
import json
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Iterator

from toolkit.store.paths import StoreError

_HELD: dict[str, int] = {}  # lock file -> re-entry depth in this process
_GUARD = threading.Lock()


def _holder() -> str:
    argv = [os.path.basename(sys.argv[0]) if sys.argv else "python", *sys.argv[1:]]
    command = " ".join(argv)
    return json.dumps({"pid": os.getpid(), "command": command[:300],
                       "since": dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")})


def _describe(raw: bytes) -> str:
    try:
        info = json.loads(raw)
        return f"pid {info['pid']} ({info['command']}) since {info['since']}"
    except (ValueError, KeyError, TypeError):
        return "another process"


@contextmanager
def run_lock(path: Path, what: str, join: bool = False) -> Iterator[None]:
    """Exclusive, non-blocking: StoreError naming the holder when another process (or, unless ``join``,
    another holder in this process) has it. ``join``: the store's own writes inside a held lock."""
    key = str(path)
    with _GUARD:
        if key in _HELD and not join:
            raise StoreError(f"{what} is being written by this process (pid {os.getpid()}) already")
        if key in _HELD:
            _HELD[key] += 1
            reentered = True
        else:
            reentered = False
    if reentered:
        try:
            yield
        finally:
            with _GUARD:
                _HELD[key] -= 1
        return
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        raw = os.pread(fd, 4096, 0)
        os.close(fd)
        raise StoreError(f"{what} is being written by {_describe(raw)}; try again when it has finished") from None
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, _holder().encode(), 0)
        with _GUARD:
            _HELD[key] = 1
        yield
    finally:
        with _GUARD:
            _HELD.pop(key, None)
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


@contextmanager
def store_lock(path: Path) -> Iterator[None]:
    """Exclusive and blocking (held for a few commits at most): check-then-write sections across processes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
