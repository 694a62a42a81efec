"""Writer locks: one per run, one for the whole store (dataset registration, runs-table compaction).

A run lock is an ``flock`` on ``.locks/<run>.lock``. The file is made whole before it is there: the
holder's pid, command line and start time go into a temporary file, which is flocked and then hard-linked
into place (a link never replaces a file), so a second writer that finds the lock always reads who holds
it. The holder unlinks the file before it lets go; a file left by a killed holder is unlocked and is
removed by the next writer under its flock. Locks are re-entrant within a process (the collector holds a
run's lock while its journal commits through the same store). On an object store, where no process of
another machine sees a flock, the same locks are leases (``toolkit.store.leases``).
"""

from __future__ import annotations

import datetime as dt
import errno
import fcntl
import json
import os
import sys
import threading
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Iterator

from toolkit.store.disk import check_space
from toolkit.store.location import ObjectPath
from toolkit.store.paths import StoreError

if TYPE_CHECKING:
    from toolkit.store import leases

_HELD: dict[str, int] = {}  # lock file -> re-entry depth in this process
_LEASES: dict[str, "leases.Lease"] = {}  # object-store lock -> the lease this process holds
_GUARD = threading.Lock()
_TRIES = 100  # lock files removed under our feet (released or stale) before we give up


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


def _same_file(fd: int, path: Path) -> bool:
    try:
        there = os.stat(path)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)


def _acquire(path: Path, what: str) -> int:
    """The flocked descriptor of the lock file now at ``path`` (ours, whole); StoreError naming the holder."""
    for _ in range(_TRIES):
        temp = path.with_name(f".{path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}")
        fd = os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o644)
        try:
            try:
                os.write(fd, _holder().encode())
            except OSError as error:  # a full disk: the lock still works, it just cannot say who holds it
                if error.errno not in (errno.ENOSPC, errno.EDQUOT):
                    raise
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            try:
                os.link(temp, path)
                return fd
            except FileExistsError:
                pass
        except BaseException:
            os.close(fd)
            raise
        finally:
            try:
                os.unlink(temp)
            except FileNotFoundError:
                pass
        os.close(fd)
        _clear_stale(path, what)
    raise StoreError(f"{what}: its lock file {path} keeps changing; try again")


def _clear_stale(path: Path, what: str) -> None:
    """A lock file is there: StoreError naming its holder if it is held; removed if a killed holder left it."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
    except FileNotFoundError:  # released meanwhile
        return
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise StoreError(f"{what} is being written by {_describe(os.pread(fd, 4096, 0))}; "
                             "try again when it has finished") from None
        if _same_file(fd, path):  # nobody holds it: its holder died; removed under its flock
            os.unlink(path)
    finally:
        os.close(fd)


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
        if key in _LEASES:  # a write inside a lock whose lease another writer took over after it ran out
            from toolkit.store import leases

            leases.check(_LEASES[key])
        try:
            yield
        finally:
            with _GUARD:
                if key in _HELD:  # not when the holder let go first (its generator collected, say)
                    _HELD[key] -= 1
        return
    if isinstance(path, ObjectPath):
        yield from _leased(path, what, key)
        return
    with check_space(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = _acquire(path, what)
    try:
        with _GUARD:
            _HELD[key] = 1
        yield
    finally:
        with _GUARD:
            _HELD.pop(key, None)
        try:
            os.unlink(path)  # before letting go: a waiter that gets the old file sees it is no longer the lock
        except FileNotFoundError:
            pass
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _leased(path: ObjectPath, what: str, key: str) -> Iterator[None]:
    from toolkit.store import leases  # object stores only: local stores never load it

    lease = leases.acquire(path, what)
    try:
        with _GUARD:
            _HELD[key] = 1
            _LEASES[key] = lease
        yield
    finally:
        with _GUARD:
            _HELD.pop(key, None)
            _LEASES.pop(key, None)
        leases.release(lease)


def confirm(path: Path) -> None:
    """Before a commit point under a run's lock or the store lock: StoreError when this process's lease of it
    (an object store) was taken over (``leases.confirm``). A local flock cannot be taken from a live holder:
    nothing to do."""
    with _GUARD:
        lease = _LEASES.get(str(path))
    if lease is not None:
        from toolkit.store import leases

        leases.confirm(lease)


@contextmanager
def store_lock(path: Path) -> Iterator[None]:
    """Exclusive and blocking (held for a few commits at most): check-then-write sections across processes."""
    if isinstance(path, ObjectPath):
        from toolkit.store import leases

        lease = leases.acquire(path, f"{path.parent.parent}: store lock", wait_s=3 * leases.lease_seconds())
        with _GUARD:
            _LEASES[str(path)] = lease  # its commits confirm it (``confirm``), as a run's do
        try:
            yield
        finally:
            with _GUARD:
                _LEASES.pop(str(path), None)
            leases.release(lease)
        return
    with check_space(path.parent):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
