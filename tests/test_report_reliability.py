"""The report's Reliability section: shown when a compared run has K > 1 answers per case (the variance budget,
worst-at-k and pass^k with their CSV twins, the worst-at-k figure), escaped like every section, reproducible;
absent, with no trace, for runs asked once."""

from __future__ import annotations

import csv
from pathlib import Path

import polars as pl
import pytest
from markupsafe import escape

from tests.analysis_sim import write_run
from tests.report_store import EVIL_RUN
from tests.samples_support import sample_decisions, write_samples
from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.variance import VarianceOptions, variance_components
from toolkit.report import ReportOptions, write_report
from toolkit.report.build import GENERATED_PREFIX
from toolkit.store import Store

OPTIONS = ReportOptions(samples=200, seed=7)


@pytest.fixture(scope="module")
def store(tmp_path_factory, sample_dataset) -> Store:
    store = Store.open(tmp_path_factory.mktemp("reliability") / "store")
    write_samples(store, sample_dataset, "k3", sample_decisions(sample_dataset, "k3", 3, passes=2, seed=1))
    write_samples(store, sample_dataset, EVIL_RUN, sample_decisions(sample_dataset, EVIL_RUN, 3, passes=2, seed=2))
    write_run(store, sample_dataset, "once", 0.3, 4)
    return store


def _rows(path: Path) -> list[dict]:
    with path.open(newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_the_section_shows_the_budget_and_worst_at_k_of_multi_sample_runs(store, tmp_path) -> None:
    report = write_report(store, None, tmp_path / "r", OPTIONS)
    page = report.html.read_text(encoding="utf-8")
    markdown = report.markdown.read_text(encoding="utf-8")
    assert 'id="reliability"' in page and "## Reliability" in markdown
    tables = report.directory / "tables"
    for key in ("reliability_components", "reliability_intervals", "reliability_at_k", "figure_worst_at_k"):
        assert (tables / f"{key}.csv").is_file(), key
    assert (report.directory / "figures" / "worst_at_k.png").is_file()
    assert "](figures/worst_at_k.png)" in markdown
    # the numbers are `bedside variance`'s for each run (same resamples)
    budget = variance_components(store, ["k3"], VarianceOptions(resamples=ResampleSettings(samples=200, seed=7)))
    at_k = [r for r in _rows(tables / "reliability_at_k.csv") if r["run_id"] == "k3"]
    expected = budget.worst_at_k.join(budget.pass_k, on=["run_id", "benchmark", "k"], suffix="_pass")
    assert len(at_k) == expected.height
    for row, want in zip(at_k, expected.iter_rows(named=True)):
        assert (row["benchmark"], int(row["k"])) == (want["benchmark"], want["k"])
        assert abs(float(row["worst_at_k"]) - want["value"]) <= 1e-11
        assert abs(float(row["pass_k"]) - want["value_pass"]) <= 1e-11
    components = pl.read_csv(tables / "reliability_components.csv").filter(pl.col("run_id") == "k3")
    assert set(components.filter(pl.col("benchmark") == "overall")["component"]) >= {"case", "answer", "judge"}
    # every compared run in leaderboard order, the run asked once among them
    board = [r["run_id"] for r in _rows(tables / "leaderboard.csv")]
    design = [r["run_id"] for r in _rows(tables / "reliability_components.csv")]
    assert list(dict.fromkeys(design)) == [r for r in board if r in set(design)] and "once" in design
    # hostile run id: escaped in the section like everywhere else
    body = page.split("</style>", 1)[1]
    assert "<img src=x" not in body and str(escape(EVIL_RUN)) in body.split('id="reliability"', 1)[1]
    # rebuilt, the same bytes but the generated line
    again = write_report(store, None, tmp_path / "again", OPTIONS)
    for name in ("index.html", "report.md", "tables/reliability_at_k.csv", "figures/worst_at_k.png"):
        one, two = ((d / name).read_bytes().split(b"\n") for d in (report.directory, again.directory))
        assert [x for x in one if GENERATED_PREFIX.encode() not in x] == \
            [x for x in two if GENERATED_PREFIX.encode() not in x], name


def test_runs_asked_once_have_no_reliability_section(store, tmp_path) -> None:
    report = write_report(store, ["once"], tmp_path / "r", OPTIONS)
    assert 'id="reliability"' not in report.html.read_text(encoding="utf-8")
    assert "Reliability" not in report.markdown.read_text(encoding="utf-8")
    assert not [p for p in report.directory.rglob("*") if "reliability" in p.name or "worst_at_k" in p.name]


def test_a_judge_with_two_passes_in_the_store_is_named_with_the_command_that_uses_it(demo_store: Path,
                                                                                      capsys) -> None:
    """Issue 29, item 12: the default judge grades each answer once, so the judge component cannot be estimated;
    the section names the store's other judge (2 passes per answer) and a command line that splits it."""
    import json
    import shlex

    from toolkit.analysis import ResampleSettings as Settings
    from toolkit.cli import main
    from toolkit.report.analyses import Timings, analyse
    from toolkit.selection import JudgeSelection

    runs = ["sim/strong", "sim/weak"]
    a = analyse(Store.open(demo_store), runs, Settings(200, 1), JudgeSelection(), None, False, Timings())
    assert any("(J = 1)" in n for n in a.variance.notes)
    hint = next(n for n in a.variance.notes if n.startswith("judge sim/judge-noisy graded every answer"))
    command = shlex.split(hint.split("`")[1])
    assert command[:2] == ["bedside", "variance"] and "--judge" in command
    assert main([*command[1:], "--store", str(demo_store), "--samples", "200", "--format", "json"]) == 0
    components = json.loads(capsys.readouterr().out)["components"]
    judge = [r for r in components if r["component"] == "judge" and r["benchmark"] == "overall"]
    assert {r["run_id"] for r in judge} == set(runs) and all(r["variance"] is not None for r in judge)
    # With that judge selected there is nothing to point to.
    other = analyse(Store.open(demo_store), runs, Settings(200, 1), JudgeSelection(judge="sim/judge-noisy"), None,
                    False, Timings())
    assert not any(n.startswith("judge sim/judge") for n in other.variance.notes)
