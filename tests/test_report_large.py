"""A report of many runs stays legible (issue 21): past ``sections.LARGE`` ranked runs the leaderboard shows its
top rows and the rest in a compact table, the pairwise page the pairs against the leader and within the top tie
group (every pair still in tables/pairwise_all.csv), the per-run tables their top columns, and scatter plots that
label every run are left out with a note. The thresholds are lowered here so that a small synthetic store of six
runs takes the large report's shape through the real ``write_report``."""

from __future__ import annotations

import csv

import pytest

from tests.analysis_sim import write_run
from toolkit.report import ReportOptions, sections, figs, write_report
from toolkit.store import Store

RUNS = 6


@pytest.fixture(scope="module")
def store(tmp_path_factory, sample_dataset) -> Store:
    store = Store.open(tmp_path_factory.mktemp("large") / "store")
    for i in range(RUNS):
        write_run(store, sample_dataset, f"run-{i}", skill=0.15 * i, seed=i)
    return store


def _rows(path) -> list[dict]:
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.DictReader(f))


def test_a_large_report_has_the_promised_shape(store: Store, tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(sections, "LARGE", 3)
    monkeypatch.setattr(sections, "TOP_ROWS", 2)
    monkeypatch.setattr(sections, "CASE_RUNS", 2)
    monkeypatch.setattr(figs, "LABELLED_RUNS", 3)
    out = write_report(store, None, tmp_path / "r", ReportOptions(samples=200, seed=1))
    tables = out.directory / "tables"
    board = _rows(tables / "leaderboard.csv")
    assert len(board) == RUNS  # the CSV keeps every ranked run
    rest = _rows(tables / "leaderboard_rest.csv")
    assert [r["run_id"] for r in rest] == [r["run_id"] for r in board[2:]]
    page = out.html.read_text(encoding="utf-8")
    assert "the top 2 of 6 ranked runs" in page and "The other 4 ranked runs" in page

    every = [r for r in _rows(tables / "pairwise_all.csv") if r["benchmark"] == "overall"]
    shown = _rows(tables / "pairwise.csv")
    leader = board[0]["run_id"]
    top = {r["run_id"] for r in board[:2] if r["tie_group"] == board[0]["tie_group"]}
    expected = {(r["run_a"], r["run_b"]) for r in every
                if leader in (r["run_a"], r["run_b"]) or {r["run_a"], r["run_b"]} <= top}
    assert len(every) == RUNS * (RUNS - 1) // 2 and {(r["run_a"], r["run_b"]) for r in shown} == expected
    assert f"{len(shown)} of the {len(every)} pairs" in page

    assert "the top 2 of 6 runs (every run in tables/cases.csv)" in page
    assert len(_rows(tables / "cases.csv")[0]) == 2 + RUNS  # benchmark, case_id and every run
    assert not (out.directory / "figures" / "precision_recall.png").exists()
    assert "figure precision_recall not drawn" in page


def test_a_report_of_few_runs_keeps_every_row(store: Store, tmp_path) -> None:
    out = write_report(store, None, tmp_path / "r", ReportOptions(samples=200, seed=1))
    tables = out.directory / "tables"
    assert not (tables / "leaderboard_rest.csv").exists()
    assert len(_rows(tables / "pairwise.csv")) == RUNS * (RUNS - 1) // 2
