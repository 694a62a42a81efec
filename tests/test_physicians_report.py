"""The report's "Judge vs physicians" section: there with the numbers of ``calibrate`` when the runs have
physician labels, absent (and the report unchanged) when they have none. The labels are in the store, added
as ``bedside labels import`` adds them."""

from __future__ import annotations

import shutil
from pathlib import Path

import polars as pl
import pytest

import toolkit as bs
from tests.analysis_sim import write_run
from tests.test_physicians_cli import physician_labels, store_labels
from toolkit.report import ReportOptions, write_report

OPTIONS = ReportOptions(samples=200, figures=False)


@pytest.fixture(scope="module")
def runs(tmp_path_factory, sample_dataset) -> tuple[Path, pl.DataFrame, Path]:
    """A store whose two runs have labels, and one of the same runs without."""
    bare = tmp_path_factory.mktemp("physicians-report") / "store"
    store = bs.Store.open(bare)
    write_run(store, sample_dataset, "strong", 0.8, 1, passes=2)
    write_run(store, sample_dataset, "weak", -0.4, 2)
    root = bare.parent / "labelled"
    shutil.copytree(bare, root, symlinks=True)
    store = bs.Store.open(root)
    return root, store_labels(store, physician_labels(store.read("decisions", ["strong", "weak"]), 4)), bare


def test_labelled_runs_get_the_section_with_calibrates_numbers(runs, tmp_path) -> None:
    root, labels, _ = runs
    paths = write_report(bs.Store.open(root), None, tmp_path / "r", OPTIONS)
    html = Path(paths.html).read_text()
    markdown = Path(paths.markdown).read_text().replace("\\[", "[").replace("\\]", "]")
    assert "Judge vs physicians" in html and "## Judge vs physicians" in markdown
    check = bs.calibrate(bs.Store.open(root), ["strong", "weak"], labels=labels,
                         options=bs.PhysicianOptions(resamples=bs.analysis.ResampleSettings(samples=200)))
    for row in check.corrected.filter(pl.col("benchmark") == "overall").iter_rows(named=True):
        assert f"{row['mean']:.3f} [{row['ci_low']:.3f}, {row['ci_high']:.3f}]" in markdown
    sens = check.agreement.row(0, named=True)
    assert f"{sens['sensitivity']:.3f} [{sens['sensitivity_low']:.3f}, {sens['sensitivity_high']:.3f}]" in markdown
    tables = {p.name for p in (tmp_path / "r" / "tables").iterdir()}
    assert {"physicians_accuracy.csv", "physicians_leaderboard.csv", "physicians_errors.csv"} <= tables


def test_without_labels_the_report_has_no_such_section(runs, tmp_path) -> None:
    _, _, bare = runs
    paths = write_report(bs.Store.open(bare), None, tmp_path / "r", OPTIONS)
    assert "Judge vs physicians" not in Path(paths.markdown).read_text()
    assert not [p for p in (tmp_path / "r" / "tables").iterdir() if p.name.startswith("physicians")]
