"""The store's read path: every table's files in one polars read, the same frames as the file-by-file
pyarrow reading it falls back to, and read commands that load neither pyarrow.compute nor pyarrow.parquet
(nor the ssl module pyarrow.parquet brings): ~55 ms of every cold command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest
from polars.testing import assert_frame_equal

from tests import reference_model as rm
from tests.conftest import ROOT
from toolkit.reference._read import import_reference
from toolkit.store import Store
from toolkit.tables import TABLES


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory: pytest.TempPathFactory, sample_dataset) -> Store:
    root = tmp_path_factory.mktemp("read-path")
    store = Store.open(root / "store")
    for i in range(2):
        path = root / f"r{i}.jsonl"
        rm.write_rows(path, rm.make_rows(list(sample_dataset.raw_cases), seed=50 + i, error_rate=0.2))
        import_reference(store, path, sample_dataset, f"r{i}")
    return store


def test_one_read_equals_file_by_file(two_runs: Store, monkeypatch: pytest.MonkeyPatch) -> None:
    fast = {t: two_runs.read(t) for t in TABLES}
    fast_some = two_runs.read("decisions", ["r1", "r0"], columns=["run_id", "case_id"])
    assert fast["answers"].height and fast["decisions"].height and fast_some["run_id"][0] == "r1"

    def refuse(*args: object, **kwargs: object) -> pl.DataFrame:
        raise pl.exceptions.ComputeError("refused by the test")

    monkeypatch.setattr(pl, "read_parquet", refuse)
    for table, frame in fast.items():
        assert_frame_equal(two_runs.read(table), frame, check_exact=True)
    assert_frame_equal(two_runs.read("decisions", ["r1", "r0"], columns=["run_id", "case_id"]), fast_some)


_DRIVER = r"""
import json, sys
asked = []

class Watch:
    def find_spec(self, name, path=None, target=None):
        if name in ("pyarrow.compute", "pyarrow.parquet", "ssl"):
            asked.append(name)
        return None

sys.meta_path.insert(0, Watch())
from toolkit.cli import main
code = main(["summary", "--all", "--json", "--store", sys.argv[1]])
print("\n" + json.dumps({"code": code, "asked": asked}))
"""


def test_a_read_command_loads_no_pyarrow_compute_parquet_or_ssl(two_runs: Store) -> None:
    done = subprocess.run([sys.executable, "-c", _DRIVER, str(two_runs.root)], capture_output=True, text=True,
                          env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result == {"code": 0, "asked": []}, done.stderr
    assert set(json.loads(done.stdout.strip().rsplit("\n", 1)[0])) == {"r0", "r1"}


# Each table with commands that read it (compare reads stored scores, not decisions, under the default judge).
_READERS = {"decisions": (["summary", "--all"], ["items", "--all"]),
            **{t: (["compare", "--all"], ["summary", "--all"]) for t in ("case_scores", "runs", "cases")}}


@pytest.mark.parametrize("table", list(_READERS))
def test_a_damaged_transaction_log_is_one_line_naming_it(demo_store: Path, tmp_path: Path, capsys,
                                                          table: str) -> None:
    import shutil

    from toolkit.cli import main

    copy = tmp_path / "store"
    shutil.copytree(demo_store, copy)
    logs = sorted((copy / table / "_delta_log").glob("*.json"))
    logs[-1].write_text("garbage{\n")  # the newest commit of the table is unreadable
    for command in _READERS[table]:
        assert main([*command, "--store", str(copy)]) == 1
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "internal error" not in err, err
        assert f"{copy / table / '_delta_log'}: cannot read the table's log at version" in err
