"""Shared fixtures. Tests that need the real public split use ``shared_bench``: it skips on a
developer machine without ../shared/bedside-bench, and fails in CI (CI=true), where it must exist."""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHARED_BENCH = Path(os.environ.get("BEDSIDE_SHARED_BENCH", ROOT.parent / "shared" / "bedside-bench"))
SAMPLE = ROOT / "data" / "sample"
# Never the user's ~/.cache: the suite (and the commands it starts) caches resample indices in a
# directory of its own, fresh per session (tests of the cache itself point it elsewhere).
os.environ["BEDSIDE_CACHE_DIR"] = tempfile.mkdtemp(prefix="bedside-test-cache-")
atexit.register(shutil.rmtree, os.environ["BEDSIDE_CACHE_DIR"], True)


@pytest.fixture(scope="session")
def shared_bench() -> Path:
    if not (SHARED_BENCH / "registry.json").is_file():
        message = f"the public split is missing at {SHARED_BENCH}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{message}; CI must have it")
        pytest.skip(message)
    return SHARED_BENCH


@pytest.fixture(scope="session")
def public_dataset(shared_bench: Path):
    from toolkit.dataset import load_dataset

    return load_dataset(shared_bench)


@pytest.fixture(scope="session")
def sample_dataset():
    from toolkit.dataset import load_dataset

    return load_dataset(SAMPLE)


@pytest.fixture(scope="session")
def demo_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store the real `bedside demo` filled, built once per session (~7 s): read it, never write to it."""
    from tests.notebook_support import build_demo_store

    return build_demo_store(tmp_path_factory.mktemp("demo-store"))


@pytest.fixture
def store(tmp_path: Path):
    from toolkit.store import Store

    return Store.open(tmp_path / "store")


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under root with its bytes (to prove a failed command left a store untouched)."""
    if not root.exists():
        return {}
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


SLOW_TESTS = Path(__file__).with_name("slow_tests.txt")
_SLOW = frozenset(line.strip() for line in SLOW_TESTS.read_text().splitlines()
                  if line.strip() and not line.startswith("#"))


def stale_slow_ids(ids: frozenset[str] | set[str], root: Path) -> list[str]:
    """The ids of slow_tests.txt that name no test function (its file gone, or the function renamed): such a
    test would silently enter ``make test-fast``. Read from the files' source, whichever tests are collected."""
    import ast

    functions: dict[str, set[str]] = {}
    stale = []
    for test_id in sorted(ids):
        path, _, name = test_id.partition("::")
        if path not in functions:
            file = root / path
            tree = ast.parse(file.read_text(encoding="utf-8")) if file.is_file() else None
            functions[path] = set() if tree is None else {
                node.name for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))}
        if name.rsplit("::", 1)[-1] not in functions[path]:
            stale.append(test_id)
    return stale


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Marks ``slow`` (``make test-fast`` leaves them out) the tests named in tests/slow_tests.txt, those that
    run a notebook, and those that need the demo store (built once, by the real `bedside demo`: ~15 s). An id
    of tests/slow_tests.txt that names no test fails the collection."""
    stale = stale_slow_ids(_SLOW, Path(__file__).resolve().parents[1])
    if stale:
        raise pytest.UsageError(f"{SLOW_TESTS.name}: {len(stale)} id(s) name no test (renamed or removed? "
                                f"fix the file): {', '.join(stale)}")
    for item in items:
        if item.nodeid.split("[", 1)[0] in _SLOW or item.nodeid.startswith("tests/test_notebook") \
                or "demo_store" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.slow)


@pytest.fixture
def scoring_commits():
    """This process's commits store scores (as the writers' processes do); the scorers restored afterwards."""
    from toolkit.score_tables import store_scores
    from toolkit.store import transaction

    before = list(transaction._SCORERS)
    store_scores()
    yield
    transaction._SCORERS[:] = before


@pytest.fixture(scope="module")
def chromium() -> None:
    """Debian's Chromium for the browser tests: they skip without it here, and fail in CI (CI=true)."""
    from tests.report_browser import CHROMIUM, INSTALL_HINT

    if not CHROMIUM.is_file():
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"{CHROMIUM} is missing in CI. {INSTALL_HINT}")
        pytest.skip(f"{CHROMIUM} is missing. {INSTALL_HINT}")
