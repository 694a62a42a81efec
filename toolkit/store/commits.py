"""Who is told of the store's commits: callbacks subscribed in this process, called after each successful
commit that changes what a store shows (a run's commit, removal, rename, compaction), with the store and its
new version. The store knows nothing of its subscribers: they subscribe themselves (``subscribe``).

Commits that repeat (a bulk import, a collection's checkpoints) are told in batches: inside ``batch(store,
every_s)`` subscribers are told at most every ``every_s`` seconds (None: not while the batch runs) and once
when it ends, however it ends, if a commit came after they were last told. Nested batches: the outermost
decides. A batch belongs to the store's root, not to a thread: collections commit on worker threads.
"""

from __future__ import annotations

import os
import threading
import time
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Iterator

if TYPE_CHECKING:
    from toolkit.store.core import Store

Subscriber = Callable[["Store", "int | None"], None]  # (store, its version); must not raise: the commit stands

_SUBSCRIBERS: list[Subscriber] = []


@dataclass
class _Batch:
    every_s: float | None  # None: only when the batch ends
    last: float  # monotonic time subscribers were last told (or the batch's start)
    due: bool = False  # a commit since then was not told


_BATCHES: dict[str, _Batch] = {}  # store root -> its open batch in this process
_GUARD = threading.Lock()


def subscribe(callback: Subscriber) -> None:
    """Call ``callback(store, version)`` after the commits of every store of this process (once, however
    often it subscribes)."""
    with _GUARD:
        if callback not in _SUBSCRIBERS:
            _SUBSCRIBERS.append(callback)


def unsubscribe(callback: Subscriber) -> None:
    with _GUARD:
        if callback in _SUBSCRIBERS:
            _SUBSCRIBERS.remove(callback)


def _key(store: "Store") -> str:
    root = store.root
    return os.path.abspath(root) if isinstance(root, os.PathLike) else str(root)  # no system call


@contextmanager
def batch(store: "Store", every_s: float | None = None) -> Iterator[None]:
    """Within: the store's commits are told at most every ``every_s`` seconds (None: not at all), and once
    when the block ends if one came after the last telling."""
    key = _key(store)
    with _GUARD:
        outer = key in _BATCHES
        if not outer:
            _BATCHES[key] = _Batch(every_s, time.monotonic())
    if outer:
        yield
        return
    try:
        yield
    finally:
        with _GUARD:
            open_batch = _BATCHES.pop(key)
        if open_batch.due:
            _tell(store)


def committed(store: "Store") -> None:
    """After a successful commit of ``store``: tell the subscribers now, or (inside a batch) when it is time."""
    with _GUARD:
        if not _SUBSCRIBERS:
            return
        open_batch = _BATCHES.get(_key(store))
        if open_batch is not None:
            now = time.monotonic()
            if open_batch.every_s is None or now - open_batch.last < open_batch.every_s:
                open_batch.due = True
                return
            open_batch.last, open_batch.due = now, False
    _tell(store)


def _tell(store: "Store") -> None:
    with _GUARD:
        callbacks = list(_SUBSCRIBERS)
    if callbacks:
        version = store.version()
        for callback in callbacks:
            callback(store, version)
