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


_TABLES: dict[str, Any] = {}  # lock table -> a DeltaTable kept between rounds (moved on by new log entries only)
_GUARD = threading.Lock()
_SHOWN = 64  # characters of a text column that Delta's file statistics keep


def _table(path: ObjectPath) -> Any:
    """The lock table at its latest version (taken out of the cache: put it back with ``_keep``); created
    when missing, with a checkpoint every 10 commits so that reading it stays a few requests."""
    from deltalake import DeltaTable
    from deltalake.exceptions import TableNotFoundError

    with _GUARD:
        table = _TABLES.pop(str(path), None)
    if table is not None:
        table.update_incremental()
        return table
    try:
        return DeltaTable(str(path), storage_options=storage_options())
    except TableNotFoundError:
        try:
            DeltaTable.create(str(path), SCHEMA, mode="ignore", storage_options=storage_options(), name="lock",
                              configuration={"delta.checkpointInterval": "10"})
        except Exception:  # noqa: BLE001 - another writer created it first: it is there either way
            pass
        return DeltaTable(str(path), storage_options=storage_options())


def _keep(path: ObjectPath, table: Any) -> None:
    with _GUARD:
        _TABLES[str(path)] = table


def _holder(table: Any) -> dict | None:
    """The lock's row, from its one file's statistics (a one-row file: min is the value; texts cut at 64)."""
    actions = pa.RecordBatchReader.from_stream(table.get_add_actions(flatten=True)).read_all()
    if actions.num_rows == 0:
        return None
    row = actions.to_pylist()[0]
    out = {name: row.get(f"min.{name}") for name in SCHEMA.names}
    if out["command"] and len(out["command"]) >= _SHOWN:
        out["command"] += "..."
    return out


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
        lost = 0
        while (outcome := _round(lease, deadline)) != "ours":
            lost += outcome == "lost"
            if lost >= _TRIES:
                raise StoreError(f"{what}: its lock {path} keeps changing; try again")
    except StoreError:
        raise
    except Exception as error:  # noqa: BLE001 - an object store's failure: one line
        raise StoreError(f"{what}: cannot take its lock {path}: {first_line(error)}") from None
    lease._renewer = threading.Thread(target=_renew, args=(lease,), name="bedside-lease", daemon=True)
    lease._renewer.start()
    return lease


def _round(lease: Lease, deadline: float) -> str:
    """One compare-and-swap: "ours", "lost" (another writer committed first) or "wait" (held; waited a
    moment before the deadline); StoreError naming a holder whose lease runs past the deadline."""
    table = _table(lease.path)
    try:
        held = _holder(table)
        if held is not None and held["token"] != lease.token and held["expires"] > time.time():
            if time.monotonic() < deadline:
                time.sleep(0.05 + 0.1 * (os.getpid() % 7) / 7)
                return "wait"
            raise StoreError(f"{lease.what} is being written by {describe(held)}; try again when it has finished "
                             f"(or after its lease ends, {_when(held['expires'])}, if that process is gone)")
        if held is not None and held["token"] == lease.token:  # our commit went through, its reply did not
            return "ours"
        return "ours" if _swap(table, lease.row(time.time() + lease_seconds())) else "lost"
    finally:
        _keep(lease.path, table)


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
        try:
            held = _holder(table)
            if held is None or held["token"] != lease.token:
                if held is not None and lease.lost is None:
                    lease.lost = (f"{lease.what}: its lock was taken over by {describe(held)} after this "
                                  "process's lease ran out")
                return
            if _swap(table, data):
                return
        finally:
            _keep(lease.path, table)


def check(lease: Lease) -> None:
    """StoreError when the lease was taken over (this process stalled for longer than the lease)."""
    if lease.lost:
        raise StoreError(lease.lost)


def confirm(lease: Lease) -> None:
    """Right before a commit point: StoreError unless the lock is still ours, with at least half a lease left
    (renewed now, by compare-and-swap, when less is). The renewer thread alone cannot promise it: a process
    stalled past its lease wakes with its main thread and renewer at once, and would commit after another
    writer took the run over. What is left is a stall of more than half a lease within the next request."""
    check(lease)
    try:
        for _ in range(_TRIES):
            table = _table(lease.path)
            try:
                held = _holder(table)
                if held is None or held["token"] != lease.token:
                    lease.lost = lease.lost or (f"{lease.what}: its lock was taken over"
                                                + (f" by {describe(held)}" if held else "")
                                                + " after this process's lease ran out; nothing more was written")
                    raise StoreError(lease.lost)
                if held["expires"] - time.time() > lease_seconds() / 2:
                    return
                if _swap(table, lease.row(time.time() + lease_seconds())):
                    return
            finally:
                _keep(lease.path, table)
    except StoreError:
        raise
    except Exception as error:  # noqa: BLE001 - an object store's failure: one line, and no commit
        raise StoreError(f"{lease.what}: cannot confirm its lock {lease.path}: {first_line(error)}") from None
    raise StoreError(f"{lease.what}: its lock {lease.path} keeps changing; try again")


def release(lease: Lease) -> None:
    """Stop renewing and let the lock go (best effort: an unreleased lease expires on its own)."""
    lease._stop.set()
    if lease._renewer is not None:
        lease._renewer.join(timeout=30)
    try:
        _update(lease, SCHEMA.empty_table())
    except Exception:  # noqa: BLE001 - the lease runs out by itself
        pass
