"""The caches of derived resample draws: in memory (``MemoryCache``, bounded in bytes) and, for whole
index tables, a persistent one in the user's cache directory.

Rebuilding the reference's resample indices is most of a cold ``summary``'s work;
they depend only on (sizes, samples, seed) and on the code that derives them, so a
cold command reads them back instead (tests/perf/summary_speed.py times both).

The cache can never change a result:
* a file is named ``<key digest>-<content digest>.npy``: the key digest covers the
  format, the deriving module's source bytes, seed, samples and sizes; the content
  digest is the SHA-256 of the array's bytes, checked on every read together with
  the shape and dtype the caller expects. Anything else (unreadable, truncated,
  altered, a pickle) is ignored, removed if possible, and the table recomputed;
* files are written to a temporary name and renamed (atomic; concurrent writers
  of one key write the same bytes to the same name), read with ``allow_pickle=False``;
* every error of the cache (unwritable or missing directory, full disk) is swallowed:
  a command never fails or prints because of it;
* the directory is kept under ``MAX_BYTES``: after a write, least recently used
  files (a hit touches its file) are removed.

Where: ``$BEDSIDE_CACHE_DIR`` (empty or ``off`` disables the cache), else
``$XDG_CACHE_HOME/bedside``, else ``~/.cache/bedside``; the tables go in ``indices/``.
"""

from __future__ import annotations

import hashlib
import threading
import os
import stat
import time
from collections import OrderedDict
from functools import lru_cache
from pathlib import Path
from typing import Callable, Final

import numpy as np

ENV: Final = "BEDSIDE_CACHE_DIR"
FORMAT: Final = "bedside-indices-2"
MAX_BYTES: Final = 512 << 20  # all of indices/: a 500-case table at 10k resamples is 5-20 MB, one per run of distinct sizes
MIN_DRAWS: Final = 50_000  # smaller tables are recomputed faster than a file is found and checked
STALE_TEMP_SECONDS: Final = 3600  # a temporary file this old was left by a killed writer


def cache_root() -> Path | None:
    """The bedside cache directory the environment names, or None when the cache is off."""
    named = os.environ.get(ENV)
    try:  # expanduser / home() raise RuntimeError for an unknown user or no home: the cache is then off
        if named is not None:
            return None if named.strip() in ("", "off") else Path(named).expanduser()
        xdg = os.environ.get("XDG_CACHE_HOME", "")
        return (Path(xdg) if os.path.isabs(xdg) else Path.home() / ".cache") / "bedside"
    except RuntimeError:
        return None


@lru_cache(maxsize=None)
def _source_digest(path: str) -> str:
    # The deriving code's bytes: a changed algorithm never reads tables an older one wrote.
    try:
        return hashlib.sha256(Path(path).read_bytes()).hexdigest()
    except OSError:
        return "unknown-source"


def key_digest(source: str, seed: int, samples: int, sizes: tuple[int, ...]) -> str:
    text = f"{FORMAT}|{_source_digest(source)}|{seed}|{samples}|{','.join(map(str, sizes))}"
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def _content_digest(array: np.ndarray) -> str:
    return hashlib.sha256(memoryview(np.ascontiguousarray(array)).cast("B")).hexdigest()[:32]


def _directory() -> Path | None:
    root = cache_root()
    return None if root is None else root / "indices"


def load(key: str, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    """The stored table of ``key`` if one passes every check, else None (bad files are removed)."""
    folder = _directory()
    if folder is None:
        return None
    try:
        candidates = [p for p in folder.iterdir() if p.name.startswith(key + "-") and p.suffix == ".npy"]
    except OSError:
        return None
    for path in candidates:
        array = _read_checked(path, shape, np.dtype(dtype))
        if array is not None:
            try:
                os.utime(path)  # recently used: kept longest by the size bound
            except OSError:
                pass
            return array
        try:
            path.unlink()
        except OSError:
            pass
    return None


def _read_checked(path: Path, shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray | None:
    try:
        # O_NONBLOCK: a FIFO of the same name must not block the command (then fstat refuses it)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_NOFOLLOW", 0))
        with open(fd, "rb") as f:
            if not stat.S_ISREG(os.fstat(f.fileno()).st_mode):
                return None
            array = np.load(f, allow_pickle=False)
            if f.read(1):  # trailing bytes: not a file this module wrote
                return None
    except Exception:  # any unreadable file is a miss: np.load raises ValueError, EOFError, OSError...
        return None
    if not isinstance(array, np.ndarray) or array.shape != shape or array.dtype != dtype:
        return None
    if _content_digest(array) != path.stem.rpartition("-")[2]:
        return None
    return array


def save(key: str, array: np.ndarray) -> None:
    """Stores ``array`` under ``key``; silently does nothing when the cache is off or unwritable."""
    folder = _directory()
    if folder is None:
        return
    temp: Path | None = None
    try:
        folder.mkdir(parents=True, exist_ok=True)
        final = folder / f"{key}-{_content_digest(array)}.npy"
        temp = folder / f".tmp-{os.getpid()}-{threading.get_ident()}-{time.monotonic_ns()}.npy"
        with open(temp, "xb") as f:
            np.save(f, np.ascontiguousarray(array), allow_pickle=False)
        os.replace(temp, final)
        temp = None
        _bound(folder, keep=final)
    except Exception:  # a cache that cannot be written is only slower, never an error
        pass
    finally:
        if temp is not None:
            try:
                temp.unlink()
            except OSError:
                pass


def _bound(folder: Path, keep: Path) -> None:
    """Removes least recently used tables beyond MAX_BYTES (never ``keep``) and stale temporary files."""
    now = time.time()
    entries = []
    for path in folder.iterdir():
        try:
            stat = path.stat()
        except OSError:  # removed meanwhile by another process
            continue
        if path.name.startswith(".tmp-"):
            if now - stat.st_mtime > STALE_TEMP_SECONDS:
                path.unlink(missing_ok=True)
        elif path.suffix == ".npy":
            entries.append((stat.st_mtime, stat.st_size, path))
    total = sum(size for _, size, _ in entries)
    for _, size, path in sorted(entries, key=lambda e: e[0]):
        if total <= MAX_BYTES:
            break
        if path != keep:
            try:
                path.unlink()
                total -= size
            except OSError:
                pass


class MemoryCache:
    """Least recently used tuples of arrays, bounded in bytes, stored read-only."""

    def __init__(self, limit: int, lock: threading.RLock) -> None:
        self._items: OrderedDict[tuple, tuple[np.ndarray, ...]] = OrderedDict()
        self._bytes, self._limit, self._lock = 0, limit, lock

    def get(self, key: tuple, make: Callable[[], tuple[np.ndarray, ...]]) -> tuple[np.ndarray, ...]:
        with self._lock:
            item = self._items.get(key)
            if item is not None:
                self._items.move_to_end(key)
                return item
        # Made outside the lock, so that threads summarising other runs go on meanwhile; two threads may
        # make the same item (the same arrays: made from the seed alone), the first one stored is kept.
        return self.put(key, make())

    def put(self, key: tuple, item: tuple[np.ndarray, ...]) -> tuple[np.ndarray, ...]:
        """Store ``item`` unless the key is there already; the stored item."""
        with self._lock:
            if key in self._items:
                return self._items[key]
            for array in item:
                array.setflags(write=False)  # shared by every caller
            self._items[key] = item
            self._bytes += sum(a.nbytes for a in item)
            while self._bytes > self._limit and len(self._items) > 1:
                _, old = self._items.popitem(last=False)
                self._bytes -= sum(a.nbytes for a in old)
            return item
