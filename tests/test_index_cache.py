"""The persistent resample-index cache (toolkit/bootstrap/_cache.py) never changes a number: `bedside summary
--json` gives the same bytes with the cache off, cold and warm, after its files are truncated, altered or
replaced, and when its directory cannot be written (then silently). Writes are atomic and bounded."""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

from tests import reference_model as rm
from tests.collect_support import bedside
from toolkit.bootstrap import _cache as index_cache
from toolkit.bootstrap._draws import cached_indices
from toolkit.reference._read import import_reference
from toolkit.store import Store


@pytest.fixture(scope="module")
def summary_store(tmp_path_factory: pytest.TempPathFactory, public_dataset) -> Path:
    root = tmp_path_factory.mktemp("index-cache")
    store = Store.open(root / "store")
    for i, error_rate in enumerate((0.0, 0.1)):  # equal sizes (one fast path) and mixed sizes (the scan)
        path = root / f"m{i}.jsonl"
        rm.write_rows(path, rm.make_rows(list(public_dataset.raw_cases), seed=30 + i, error_rate=error_rate))
        import_reference(store, path, public_dataset, f"m{i}")
    return root / "store"


def summary_json(store: Path, monkeypatch: pytest.MonkeyPatch, cache: str) -> str:
    """A cold command's output as far as the indices go: the in-process cache is emptied first."""
    monkeypatch.setenv(index_cache.ENV, cache)
    cached_indices.cache_clear()
    code, out, err = bedside("summary", "--all", "--order", "reference", "--json", "--store", str(store))
    assert (code, err) == (0, "")
    return out


def tables(folder: Path) -> list[Path]:
    return sorted((folder / "indices").glob("*.npy"))


def test_off_cold_and_warm_give_the_same_bytes(summary_store: Path, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    off = summary_json(summary_store, monkeypatch, "off")
    assert summary_json(summary_store, monkeypatch, "") == off  # empty: off too
    assert not list(tmp_path.iterdir())
    cold = summary_json(summary_store, monkeypatch, str(tmp_path))
    written = tables(tmp_path)
    assert len(written) == 2  # one table per distinct size tuple
    loads = []
    real_load = index_cache.load
    monkeypatch.setattr(index_cache, "load", lambda *a: loads.append(real_load(*a)) or loads[-1])
    warm = summary_json(summary_store, monkeypatch, str(tmp_path))
    assert cold == warm == off
    assert len(loads) == 2 and all(a is not None for a in loads)  # really served from the files
    assert tables(tmp_path) == written


@pytest.mark.parametrize("damage", ["truncated", "same_size_other_bytes", "empty", "pickled", "wrong_shape", "fifo"])
def test_a_damaged_file_is_recomputed_and_rewritten(summary_store: Path, tmp_path: Path, damage: str,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    expected = summary_json(summary_store, monkeypatch, str(tmp_path))
    good = {p.name: p.read_bytes() for p in tables(tmp_path)}
    victim = tables(tmp_path)[0]
    data = victim.read_bytes()
    if damage == "truncated":
        victim.write_bytes(data[:len(data) // 2])
    elif damage == "same_size_other_bytes":
        victim.write_bytes(data[:-4000] + bytes(4000))  # header intact, shape and dtype right
    elif damage == "empty":
        victim.write_bytes(b"")
    elif damage == "fifo":  # opening a FIFO for reading blocks until a writer comes: it must not be opened so
        victim.unlink()
        os.mkfifo(victim)
    elif damage == "pickled":
        with open(victim, "wb") as f:
            np.save(f, np.array([{"x": 1}], dtype=object), allow_pickle=True)
    else:  # a valid table whose name matches its content, but of another shape
        wrong = np.zeros((2, 3, 4), dtype=np.uint8)
        victim.unlink()
        victim = victim.with_name(f"{victim.name.split('-')[0]}-{index_cache._content_digest(wrong)}.npy")
        np.save(victim, wrong)
    assert summary_json(summary_store, monkeypatch, str(tmp_path)) == expected
    assert {p.name: p.read_bytes() for p in tables(tmp_path)} == good  # the bad file replaced by a good one


def test_an_unwritable_cache_directory_is_silent(summary_store: Path, tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    expected = summary_json(summary_store, monkeypatch, "off")
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    # Below a regular file nothing can be created, whoever runs the test (root ignores permission bits).
    assert summary_json(summary_store, monkeypatch, str(blocker / "cache")) == expected
    # a home directory that cannot be found (an unknown user's ~): the cache is off, not an error
    assert summary_json(summary_store, monkeypatch, "~no-such-user-of-bedside/cache") == expected
    monkeypatch.setenv(index_cache.ENV, str(blocker))
    assert index_cache.load("0" * 32, (2, 1, 1), np.dtype(np.uint8)) is None


def test_default_location_follows_xdg(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(index_cache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert index_cache.cache_root() == tmp_path / "bedside"
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/ignored")  # the XDG spec: relative paths are invalid
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert index_cache.cache_root() == tmp_path / "home" / ".cache" / "bedside"
    monkeypatch.setenv(index_cache.ENV, " off ")
    assert index_cache.cache_root() is None


def test_size_bound_evicts_least_recently_used(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(index_cache.ENV, str(tmp_path))
    monkeypatch.setattr(index_cache, "MAX_BYTES", 3 * 1200)
    arrays = {f"{k:032x}": np.full((2, 10, 50), k, dtype=np.uint8) for k in range(5)}  # ~1128 bytes a file
    for i, (key, array) in enumerate(arrays.items()):
        index_cache.save(key, array)
        if i < 3:  # clear ages (file times can tie within a clock tick)
            (path,) = (tmp_path / "indices").glob(f"{key}-*.npy")
            os.utime(path, (1000 + i, 1000 + i))
        if i == 2:
            assert index_cache.load(f"{0:032x}", array.shape, array.dtype) is not None  # touched: kept
    kept = {p.name.split("-")[0] for p in tables(tmp_path)}
    assert kept == {f"{k:032x}" for k in (0, 3, 4)}
    assert not list((tmp_path / "indices").glob(".tmp-*"))


def test_concurrent_writers_and_readers_see_whole_tables(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(index_cache.ENV, str(tmp_path))
    array = np.arange(2 * 400 * 500, dtype=np.uint16).reshape(2, 400, 500)
    seen: list[bool] = []
    errors: list[BaseException] = []

    writing = threading.Event()
    writing.set()

    def write() -> None:
        for _ in range(15):
            index_cache.save("k" * 32, array)

    def read() -> None:
        try:
            # Reads for as long as the writers write (a fixed count could all come before the first save).
            while writing.is_set() or len(seen) < 120:
                got = index_cache.load("k" * 32, array.shape, array.dtype)
                seen.append(got is not None)
                assert got is None or np.array_equal(got, array)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    writers = [threading.Thread(target=write) for _ in range(2)]
    readers = [threading.Thread(target=read) for _ in range(2)]
    for t in writers + readers:
        t.start()
    for t in writers:
        t.join()
    writing.clear()
    for t in readers:
        t.join()
    seen.append(index_cache.load("k" * 32, array.shape, array.dtype) is not None)  # the writers' table stands
    assert not errors and any(seen)
    assert len(tables(tmp_path)) == 1 and not list((tmp_path / "indices").glob(".tmp-*"))
