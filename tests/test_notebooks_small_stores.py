"""On a store with one run or none, every notebook either runs top to bottom or stops in its first code cell
with one RuntimeError that says what is missing, never deep inside with an index error."""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest

from tests.collect_support import bedside
from tests.notebook_support import NOTEBOOKS, run_notebook

NAMES = sorted(p.name for p in NOTEBOOKS.glob("*.ipynb"))


@pytest.fixture(scope="module")
def one_run_store(demo_store: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    store = tmp_path_factory.mktemp("one-run") / "store"
    shutil.copytree(demo_store, store)
    code, _, err = bedside("runs", "rm", "sim/medium", "sim/weak", "sim/skill-0.45", "--yes", "--store", store)
    assert code == 0, err
    return store


def first_code_cell(name: str) -> int:
    import nbformat

    node = nbformat.read(NOTEBOOKS / name, as_version=4)
    return next(i for i, cell in enumerate(node.cells) if cell.cell_type == "code")


def runs_or_stops_at_once(name: str, store: Path, missing: str) -> None:
    try:
        run_notebook(name, store)
    except AssertionError as error:
        line = str(error)
        found = re.match(rf"{re.escape(name)}: cell (\d+) \(.*\) failed: RuntimeError: (.*)$", line)
        assert found, line
        assert int(found.group(1)) == first_code_cell(name), line
        assert missing in found.group(2) and str(store) in found.group(2), line


@pytest.mark.parametrize("name", NAMES)
def test_one_run(name: str, one_run_store: Path) -> None:
    runs_or_stops_at_once(name, one_run_store, "run")


@pytest.mark.parametrize("name", NAMES)
def test_no_store(name: str, tmp_path: Path) -> None:
    runs_or_stops_at_once(name, tmp_path / "nothing-here", "run")


@pytest.fixture(scope="module")
def passes_store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Every run judged twice by its judge, one run also by a second judge (README: `bedside judge --run ID
    --judge-model MODEL --judge-passes 2` on each run, then another judge on one)."""
    from tests.analysis_sim import write_run
    from toolkit.dataset import load_dataset
    from toolkit.store import Store

    root = tmp_path_factory.mktemp("passes") / "store"
    store, dataset = Store.open(root), load_dataset()
    for i, run_id in enumerate(("sim/strong", "sim/medium", "sim/weak")):
        write_run(store, dataset, run_id, skill=1.0 - 0.6 * i, seed=i, created=i, passes=2,
                  extra_judges=(("judge-y", 0.15),) if i == 0 else ())
    return root


def test_judge_reliability_with_two_passes_everywhere_and_one_second_judge(passes_store: Path) -> None:
    shown = run_notebook("05-judge-reliability.ipynb", passes_store)
    text = shown.text("fig-noise")
    assert "pass to pass: the closest adjacent gap" in text
    assert "judge to judge" in text  # said, not drawn: one run has a second judge, so there is no gap to show
