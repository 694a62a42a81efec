"""notebooks/01-quickstart.ipynb shows the user's store: its runs, the leaderboard in the order
``bs.compare`` ranks them with the same numbers, the reference summaries, one figure, and a
"where next" naming every other notebook."""

from __future__ import annotations

from pathlib import Path

import pytest

import toolkit as bs
from tests.notebook_support import ExecutedNotebook, executed, notebook_paths

NAME = "01-quickstart.ipynb"


@pytest.fixture(scope="module")
def shown(demo_store: Path) -> ExecutedNotebook:
    return executed(NAME, demo_store)


@pytest.fixture(scope="module")
def store(demo_store: Path) -> bs.Store:
    return bs.Store.open(demo_store)


def test_it_opens_the_store_bedside_store_names(shown: ExecutedNotebook, demo_store: Path) -> None:
    assert shown.text("store").strip().startswith(f"store: {demo_store} (version ")
    assert shown.text("store").strip().endswith(", 4 runs")


def test_it_lists_the_stores_runs(shown: ExecutedNotebook, store: bs.Store) -> None:
    rows = shown.table("runs")
    assert [r["run_id"] for r in rows] == store.read("runs").sort("created_at")["run_id"].to_list()
    assert sorted(r["run_id"] for r in rows) == sorted(store.run_ids())
    assert {r["source"] for r in rows} == {"collected"}


def test_the_leaderboard_is_compares_in_its_order(shown: ExecutedNotebook, store: bs.Store) -> None:
    expected = bs.compare(store, store.run_ids()).leaderboard
    rows = shown.table("leaderboard")
    assert [r["run_id"] for r in rows] == expected["run_id"].to_list()
    assert len(rows) == 4
    assert [int(r["rank"]) for r in rows] == expected["rank"].to_list()
    for row, want in zip(rows, expected.iter_rows(named=True)):
        for column in ("overall", "ci_low", "ci_high"):
            assert float(row[column]) == pytest.approx(want[column], abs=1e-6), (row["run_id"], column)
        assert int(row["completed"]) == want["completed"] == 30


def test_the_summary_has_the_reference_means(shown: ExecutedNotebook, store: bs.Store) -> None:
    summaries = bs.summarize(store, store.run_ids())
    rows = shown.table("summary")
    assert {r["run_id"] for r in rows} == set(summaries)
    for row in rows:
        s = summaries[row["run_id"]]
        assert float(row["overall"]) == pytest.approx(s["overall_macro_mean"], abs=1e-6)
        assert (float(row["ci_low"]), float(row["ci_high"])) == pytest.approx(s["overall_ci95"], abs=1e-6)
    overall = [float(r["overall"]) for r in rows]
    assert overall == sorted(overall, reverse=True)


def test_the_figure_cell_draws_one_png_and_shows_its_data(shown: ExecutedNotebook, store: bs.Store) -> None:
    assert shown.pngs("figure") == 1
    assert shown.pngs("leaderboard") == 0  # the figure is where the notebook says it is
    from toolkit import figures

    data = figures.leaderboard_data(bs.compare(store, store.run_ids()))
    rows = shown.table("figure-data")
    assert len(rows) == data.height and list(rows[0]) == data.columns


def test_where_next_names_every_other_notebook(shown: ExecutedNotebook) -> None:
    where_next = shown.markdown()[-1]
    assert where_next.startswith("## 5. Where next")
    others = [p.name for p in notebook_paths() if p.name != NAME]
    assert [n for n in others if f"`{n}`" not in where_next] == []
    for command in ("bedside report --all", "bedside sql"):
        assert command in where_next


def test_it_says_which_interval_each_table_shows(shown: ExecutedNotebook) -> None:
    # compare's leaderboard: stratified t (toolkit.analysis.compare); the summary: the reference's bootstrap
    board, summary = (next(m for m in shown.markdown() if m.startswith(head))
                      for head in ("## 3. The leaderboard", "The reference runner's own summary"))
    assert "stratified t interval" in board and "bootstrap resamples" not in board.split("rank")[0]
    assert "percentile bootstrap" in summary and "stratified t" in summary
    assert shown.text("summary").startswith("95% intervals: percentile bootstrap (reference, 10,000 resamples)\n")
