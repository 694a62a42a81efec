"""What the analysis commands check before reading: only the tables they read. A run whose damaged file is in
a table ``compare`` never reads is still compared (its decisions too, when its scores are stored: compare
reads those); one whose case scores are damaged is left out, with one line. Real processes against real Delta
tables."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import reference_model as rm
from toolkit.dataset import load_dataset

ROOT = Path(__file__).resolve().parents[1]


def bedside(*args: object) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "toolkit", *map(str, args)], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ), timeout=120)


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory) -> Path:
    folder = tmp_path_factory.mktemp("reads")
    cases = list(load_dataset(None).raw_cases)
    store = folder / "store"
    for i in range(2):
        source = folder / f"r{i}.jsonl"
        source.write_text("".join(json.dumps(r) + "\n" for r in rm.make_rows(cases, seed=i)), encoding="utf-8")
        assert bedside("import", source, "--store", store).returncode == 0
    return store


def _truncate_run_file(store: Path, table: str, run: str, tmp_path: Path) -> Path:
    copy = tmp_path / "store"
    subprocess.run(["cp", "-a", str(store), str(copy)], check=True)
    part = next((copy / table).glob(f"part={run}/*.parquet"))
    part.chmod(0o644)
    part.write_bytes(part.read_bytes()[:100])
    return copy


def _leaderboard(done: subprocess.CompletedProcess) -> list[str]:
    assert done.returncode == 0, done.stderr
    return [row["run_id"] for row in json.loads(done.stdout)["leaderboard"]]


def test_a_damaged_table_compare_never_reads_costs_no_run(two_runs: Path, tmp_path: Path) -> None:
    store = _truncate_run_file(two_runs, "benchmark_scores", "r1", tmp_path)
    done = bedside("compare", "--all", "--store", store, "--format", "json", "--samples", "200")
    assert sorted(_leaderboard(done)) == ["r0", "r1"]
    assert "warning" not in done.stderr, done.stderr


def test_a_damaged_table_compare_reads_leaves_its_run_out(two_runs: Path, tmp_path: Path) -> None:
    store = _truncate_run_file(two_runs, "case_scores", "r1", tmp_path)
    done = bedside("compare", "--all", "--store", store, "--format", "json", "--samples", "200")
    assert _leaderboard(done) == ["r0"]
    lines = done.stderr.strip().splitlines()
    assert lines[0].startswith("bedside: warning: run 'r1' left out: ") and "case_scores" in lines[0], done.stderr
