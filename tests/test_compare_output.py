"""What `bedside compare` prints (issue 29, items 8 and 10; issue 28, item 8): it leads with the report summary's
verdict (which names the judge), keeps a pair's wins, ties and losses together, shows only the sections asked for
with their own notes, the per-benchmark "versus" table only with --benchmarks and without a family cell repeated
on every row, and names each interval's method in its header and in the JSON."""

from __future__ import annotations

import json

import polars as pl
import pytest

from tests.analysis_sim import write_run
from toolkit.analysis.compare import CompareOptions, compare
from toolkit.analysis.paired import ResampleSettings
from toolkit.cli import main
from toolkit.dataset import load_dataset
from toolkit.store import Store

RUNS = ["r0", "r1", "r2"]


@pytest.fixture(scope="module")
def three_runs(tmp_path_factory: pytest.TempPathFactory) -> Store:
    dataset = load_dataset()
    store = Store.open(tmp_path_factory.mktemp("compare-output") / "store")
    for i, run in enumerate(RUNS):
        write_run(store, dataset, run, skill=0.5 * i, seed=10 + i, created=i)
    return store


def _run(capsys, store: Store, *argv: str) -> tuple[str, str]:
    assert main(["compare", "--all", "--store", str(store.root), "--samples", "200", *argv]) == 0
    captured = capsys.readouterr()
    return captured.out, captured.err


def test_compare_leads_with_the_report_verdict_naming_the_judge(three_runs: Store, capsys, monkeypatch) -> None:
    from toolkit.report.words import verdict  # the report summary's sentence builder

    monkeypatch.setenv("COLUMNS", "120")
    out, _ = _run(capsys, three_runs)
    lead = verdict(compare(three_runs, RUNS, CompareOptions(resamples=ResampleSettings(200, 42))))
    assert out.splitlines()[:len(lead)] == lead
    assert "scored by judge-x" in lead[0] and "ranks first with" in lead[1]
    # A section other than the leaderboard is printed alone, without the verdict.
    out, _ = _run(capsys, three_runs, "--section", "ranks")
    assert lead[0] not in out and out.lstrip().startswith("ranks")


def _caption(out: str, title: str) -> str:
    """The 'not shown' caption under the table titled ``title`` (its lines joined), or ''."""
    text = " " + " ".join(out.split())
    start = text.find(f" {title} ")
    if start < 0:
        return ""
    end = text.find("(--wide shows every column)", start)
    return text[text.rfind("not shown:", start, end):end] if end > 0 and "not shown:" in text[start:end] else ""


def test_wins_ties_and_losses_are_shown_or_left_out_together(three_runs: Store, capsys, monkeypatch) -> None:
    seen = set()
    for width in range(80, 240, 4):
        monkeypatch.setenv("COLUMNS", str(width))
        out, _ = _run(capsys, three_runs, "--section", "pairwise")
        hidden = _caption(out, "pairwise")
        said = tuple(word in hidden for word in ("wins", "ties", "losses"))
        assert said in ((True, True, True), (False, False, False)), (width, hidden)
        seen.add(said[0])
    assert seen == {True, False}  # some widths leave them out, wider ones show them


def test_versus_only_with_benchmarks_and_without_a_repeated_family_cell(three_runs: Store, capsys,
                                                                        monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    out, _ = _run(capsys, three_runs)
    assert "versus" not in out
    assert "versus" not in json.loads(_run(capsys, three_runs, "--format", "json")[0])
    out, _ = _run(capsys, three_runs, "--benchmarks")
    assert "versus: each run - r2 per benchmark" in out
    assert "per benchmark  " not in out.split("versus: each run")[1].split("ranks")[0].replace("│", " ")
    assert "versus r2, per benchmark" not in out  # the family is the title's, not a cell on every row
    rows = json.loads(_run(capsys, three_runs, "--benchmarks", "--format", "json")[0])["versus"]
    assert len(rows) == 2 * 10 and {r["family"] for r in rows} == {"versus r2, per benchmark"}


def test_a_section_prints_its_own_notes_only(three_runs: Store, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "120")
    _, every = _run(capsys, three_runs)
    assert "pairwise: delta" in every and "paired resamples" in every and "cost (prices" in every
    _, board = _run(capsys, three_runs, "--section", "leaderboard")
    assert "pairwise: delta" not in board and "paired resamples" not in board
    assert "leaderboard and benchmark intervals: stratified t" in board and "cost (prices" in board
    _, pairs = _run(capsys, three_runs, "--section", "pairwise")
    assert "pairwise: delta" in pairs and "cost (prices" not in pairs and "leaderboard and benchmark" not in pairs
    notes = json.loads(_run(capsys, three_runs, "--section", "ranks", "--format", "json")[0])["notes"]
    assert any("paired resamples" in n for n in notes) and not any("pairwise: delta" in n for n in notes)


def test_every_interval_names_its_method(three_runs: Store, capsys, monkeypatch) -> None:
    monkeypatch.setenv("COLUMNS", "200")
    out, _ = _run(capsys, three_runs, "--benchmarks")
    assert "overall [95% stratified t]" in out and "delta [95% paired stratified t]" in out
    assert "benchmarks (mean [95% stratified t])" in out
    assert "[95% ci]" not in out
    result = json.loads(_run(capsys, three_runs, "--benchmarks", "--format", "json")[0])
    methods = {name: {r["ci_method"] for r in result[name]} for name in ("leaderboard", "benchmarks", "pairwise",
                                                                         "versus")}
    assert methods == {"leaderboard": {"stratified t"}, "benchmarks": {"stratified t"},
                       "pairwise": {"paired stratified t"}, "versus": {"paired stratified t"}}
    board = pl.DataFrame(result["leaderboard"])
    assert board.columns.index("ci_method") == board.columns.index("ci_note") + 1


def test_severity_classes_are_named_in_words(three_runs: Store, capsys, monkeypatch) -> None:
    """Issue 28, item 8: a severity class is printed with its points and meaning, from toolkit.protocol."""
    from toolkit.protocol import POINTS_TO_CLASS, severity_label
    from toolkit.report.physicians import class_words

    assert severity_label(9) == "class 9 = +3 points, essential"
    assert severity_label(1) == "class 1 = -3 points, severely harmful"
    assert {severity_label(c).split(", ")[0] for c in POINTS_TO_CLASS.values()} == {
        f"class {c} = {p:+d} point{'' if abs(p) == 1 else 's'}" for p, c in POINTS_TO_CLASS.items()}
    assert class_words("class 8") == "class 8 = +2 points, important" and class_words("negative") == "negative"
    monkeypatch.setenv("COLUMNS", "200")
    assert main(["items", "--all", "--store", str(three_runs.root), "--section", "by_points", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "class 9 = +3 points, essential" in out and "class 7 = +1 point, helpful" in out
    assert main(["items", "--all", "--store", str(three_runs.root), "--section", "by_points", "--format",
                 "json"]) == 0
    rows = json.loads(capsys.readouterr().out)["by_points"]
    assert {r["severity_class"] for r in rows} >= {9, 1}  # the data stay numbers
