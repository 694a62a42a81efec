"""A full disk: one line ``no space left on <path>``, and no write begun that cannot fit.

delta-rs writing into a full disk errs, and its Parquet writer then panics in a tokio worker thread
(object_store's buffered writer is written on after its failed flush: "Already shut down"); tokio catches
the panic, so the call returns its error, but Rust's panic hook has printed the report on stderr. So a
write that cannot fit is not begun (``room``), and delta-rs runs with stderr filtered (``quiet_panics``).
"""

from __future__ import annotations

import errno
import os
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterator

from toolkit.store.errors import StoreError

_NO_SPACE_ERRNOS = (errno.ENOSPC, errno.EDQUOT)
_NO_SPACE_TEXTS = ("no space left on device", "disk quota exceeded", "os error 28)", "os error 122)")


def is_no_space(error: BaseException) -> bool:
    """Whether an error (Python's OSError or a delta-rs error's text) means the disk (or quota) is full."""
    if isinstance(error, OSError) and error.errno in _NO_SPACE_ERRNOS:
        return True
    text = str(error).lower()
    return any(t in text for t in _NO_SPACE_TEXTS)


class NoSpace(StoreError):
    """A write refused or failed for want of disk space."""


def no_space(where: Path) -> StoreError:
    return NoSpace(f"no space left on {where} (free some space; `bedside runs rm` frees a run's files)")


@contextmanager
def check_space(where: Path) -> Iterator[None]:
    """A full disk inside the block becomes the one line ``no space left on <where>``."""
    try:
        yield
    except OSError as error:
        if is_no_space(error):
            raise no_space(where) from None
        raise


SLACK = 16 << 10  # bytes a commit writes besides its rows: its log entry, a Parquet footer


def room(path: Path, need: int) -> None:
    """No space (``no_space``) when the disk has less than ``need`` bytes and a log entry free: delta-rs
    writing into a full disk errs, and its Parquet writer then panics in a worker thread (printed on
    stderr), so a write that cannot fit is not begun. An object store (no local path) has no such limit here."""
    if not isinstance(path, Path):
        return
    where = path
    while not where.exists() and where != where.parent:
        where = where.parent
    try:
        info = os.statvfs(where)
    except OSError:
        return
    if info.f_bavail * info.f_frsize < need + SLACK:
        raise no_space(path)


_FILTER = threading.Lock()
_filtering: list[Any] = []  # [depth, saved fd 2, reader thread, pipe's read end, chunks] while a filter is up


@contextmanager
def quiet_panics() -> Iterator[None]:
    """Run delta-rs with the process's stderr (fd 2) read through a pipe, and write back all of it but a
    Rust panic's report. Threads share one filter (fd 2 is the process's): the last to leave restores it."""
    with _FILTER:
        if _filtering:
            _filtering[0] += 1
        else:
            _start_filter()
    try:
        yield
    finally:
        with _FILTER:
            if _filtering:
                _filtering[0] -= 1
                if not _filtering[0]:
                    _stop_filter()


def _start_filter() -> None:
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError, AttributeError):  # no stderr (closed): nothing to filter
        return
    read_end, write_end = os.pipe()
    chunks: list[bytes] = []

    def drain() -> None:
        while chunk := os.read(read_end, 65536):
            chunks.append(chunk)

    reader = threading.Thread(target=drain, daemon=True)
    reader.start()
    os.dup2(write_end, 2)
    os.close(write_end)
    _filtering[:] = [1, saved, reader, read_end, chunks]


def _stop_filter() -> None:
    _, saved, reader, read_end, chunks = _filtering
    _filtering.clear()
    try:
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
    os.dup2(saved, 2)  # the pipe's last writer gone: the reader sees its end
    os.close(saved)
    reader.join()
    os.close(read_end)
    kept = _without_panics(b"".join(chunks))
    if kept:
        os.write(2, kept)


def _without_panics(text: bytes) -> bytes:
    """Stderr output less the reports of Rust panics: the ``thread '...' panicked at`` line (and a blank line
    before it), its message line, and the ``stack backtrace:``, frame and ``note:`` lines after it."""
    out: list[bytes] = []
    state = None  # None: keeping; "message": the next line is the panic's message; "tail": its backtrace
    for line in text.splitlines(keepends=True):
        if line.startswith(b"thread '") and b"panicked at" in line:
            if out and not out[-1].strip():
                out.pop()
            state = "message"
        elif state == "message":
            state = "tail"
        elif state == "tail" and (line.startswith((b"note:", b"stack backtrace:", b" ", b"\t"))):
            pass
        else:
            state = None
            out.append(line)
    return b"".join(out)
