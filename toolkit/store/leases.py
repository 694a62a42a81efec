"""Writer locks on an object store, where there are no pid files to flock: leases held in tiny Delta tables.

A lock is the Delta table ``<store>/.locks/<name>.lock``, holding at most one row: the holder (host, pid,
command line, since when), a random token and when its lease expires. It is taken by a compare-and-swap:
read the table at version V, and if it is free, released or expired, commit the new holder's row as
version V+1 with delta-rs's commit retries off. Delta's commit on S3 is a conditional put of that log
entry (``toolkit.store.location``), so of two machines that read V exactly one writes V+1; the other re-reads
and finds the lock held. The holder renews the lease every third of it from a thread and writes the table
empty to release it. A holder killed or cut off stops renewing: once its lease has expired the next writer
takes the lock over. Expiry compares the holder's clock with the taker's: machines' clocks must agree to
well within the lease (``BEDSIDE_LOCK_LEASE_S``, 60 s by default).
"""

from __future__ import annotations

import datetime as dt
import os
import socket
import sys
import threading
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from toolkit.store.errors import StoreError
from toolkit.store.location import ObjectPath, first_line, storage_options

SCHEMA = pa.schema([("host", pa.string()), ("pid", pa.int64()), ("command", pa.string()),
                    ("since", pa.string()), ("expires", pa.float64()), ("token", pa.string())])
_TRIES = 200  # compare-and-swap rounds lost to other writers before giving up


def lease_seconds() -> float:
    try:
        return max(0.5, float(os.environ.get("BEDSIDE_LOCK_LEASE_S", "60")))
    except ValueError:
        return 60.0


@dataclass
class Lease:
    path: ObjectPath
    what: str
    token: str = field(default_factory=lambda: uuid.uuid4().hex)
    since: str = field(default_factory=lambda: dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ"))
    lost: str | None = None  # why the lease is no longer ours (taken over after it expired)
    _stop: threading.Event = field(default_factory=threading.Event)
    _renewer: threading.Thread | None = None

    def row(self, expires: float) -> pa.Table:
        argv = [os.path.basename(sys.argv[0]) if sys.argv else "python", *sys.argv[1:]]
        return pa.table({"host": [socket.gethostname()], "pid": [os.getpid()], "command": [" ".join(argv)[:300]],
                         "since": [self.since], "expires": [expires], "token": [self.token]}, schema=SCHEMA)


def _table(path: ObjectPath) -> Any:
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    try:
        return DeltaTable(str(path), storage_options=storage_options())
    except TableNotFoundError:
        try:
            DeltaTable.create(str(path), SCHEMA, mode="ignore", storage_options=storage_options(), name="lock")
        except Exception:  # noqa: BLE001 - another writer created it first: it is there either way
            pass
        return DeltaTable(str(path), storage_options=storage_options())


def _holder(table: Any) -> dict | None:
    rows = table.to_pyarrow_table().to_pylist()
    return rows[0] if rows else None


def _swap(table: Any, data: pa.Table) -> bool:
    """Commit ``data`` as the table's one row(s) at exactly the version after the one ``table`` read."""
    from deltalake import CommitProperties, write_deltalake
    from deltalake.exceptions import CommitFailedError

    try:
        write_deltalake(table, data, mode="overwrite", commit_properties=CommitProperties(max_commit_retries=0))
        return True
    except CommitFailedError:
        return False


def describe(row: dict) -> str:
    return f"pid {row['pid']} on {row['host']} ({row['command']}) since {row['since']}"


def acquire(path: ObjectPath, what: str, wait_s: float = 0.0) -> Lease:
    """The lease of ``path``, renewed until ``release``; StoreError naming the holder when another process
    holds an unexpired lease (after waiting up to ``wait_s`` seconds for it to be let go)."""
    lease = Lease(path, what)
    deadline = time.monotonic() + wait_s
    try:
        for _ in range(_TRIES):
            table = _table(path)
            held = _holder(table)
            if held is not None and held["token"] != lease.token and held["expires"] > time.time():
                if time.monotonic() < deadline:
                    time.sleep(0.05 + 0.1 * (os.getpid() % 7) / 7)
                    continue
                raise StoreError(f"{what} is being written by {describe(held)}; try again when it has finished "
                                 f"(or after its lease ends, {_when(held['expires'])}, if that process is gone)")
            if held is not None and held["token"] == lease.token:  # our commit went through, its reply did not
                break
            if _swap(table, lease.row(time.time() + lease_seconds())):
                break
        else:
            raise StoreError(f"{what}: its lock {path} keeps changing; try again")
    except StoreError:
        raise
    except Exception as error:  # noqa: BLE001 - an object store's failure: one line
        raise StoreError(f"{what}: cannot take its lock {path}: {first_line(error)}") from None
    lease._renewer = threading.Thread(target=_renew, args=(lease,), name="bedside-lease", daemon=True)
    lease._renewer.start()
    return lease


def _when(epoch: float) -> str:
    return dt.datetime.fromtimestamp(epoch, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _renew(lease: Lease) -> None:
    every = lease_seconds() / 3
    while not lease._stop.wait(every):
        try:
            _update(lease, lease.row(time.time() + lease_seconds()))
        except Exception:  # noqa: BLE001 - a failed renewal is tried again; the lease runs out if they all fail
            pass


def _update(lease: Lease, data: pa.Table) -> None:
    """Replace our row (renewal) or remove it (``data`` empty: release), while it is ours."""
    for _ in range(_TRIES):
        table = _table(lease.path)
        held = _holder(table)
        if held is None or held["token"] != lease.token:
            if held is not None and lease.lost is None:
                lease.lost = f"{lease.what}: its lock was taken over by {describe(held)} after this process's lease ran out"
            return
        if _swap(table, data):
            return


def check(lease: Lease) -> None:
    """StoreError when the lease was taken over (this process stalled for longer than the lease)."""
    if lease.lost:
        raise StoreError(lease.lost)


def release(lease: Lease) -> None:
    """Stop renewing and let the lock go (best effort: an unreleased lease expires on its own)."""
    lease._stop.set()
    if lease._renewer is not None:
        lease._renewer.join(timeout=30)
    try:
        _update(lease, SCHEMA.empty_table())
    except Exception:  # noqa: BLE001 - the lease runs out by itself
        pass
