"""tests/slow_tests.txt names only tests that exist: a renamed slow test would otherwise enter `make test-fast`
without a word. The conftest fails the collection on an id that names no test."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

from tests.conftest import _SLOW, ROOT, stale_slow_ids


def test_every_slow_id_names_a_test() -> None:
    assert stale_slow_ids(_SLOW, ROOT) == []


def test_a_stale_id_fails_the_collection(tmp_path: Path) -> None:
    tests = tmp_path / "tests"
    tests.mkdir()
    shutil.copy(ROOT / "tests" / "conftest.py", tests / "conftest.py")
    (tests / "__init__.py").write_text("")
    (tests / "test_a.py").write_text("def test_kept():\n    pass\n\n\nclass TestB:\n    def test_in_class(self):\n"
                                     "        pass\n")
    slow = tests / "slow_tests.txt"

    def collect() -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q", "-p", "no:cacheprovider",
                               "tests/test_a.py::test_kept"], cwd=tmp_path, capture_output=True, text=True, timeout=120)

    slow.write_text("# comment\ntests/test_a.py::test_kept\ntests/test_a.py::TestB::test_in_class\n")
    assert collect().returncode == 0
    slow.write_text("tests/test_a.py::test_kept\ntests/test_a.py::test_renamed\ntests/test_gone.py::test_x\n")
    done = collect()
    assert done.returncode != 0
    assert ("slow_tests.txt: 2 id(s) name no test (renamed or removed? fix the file): "
            "tests/test_a.py::test_renamed, tests/test_gone.py::test_x") in done.stdout + done.stderr
