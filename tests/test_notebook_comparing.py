"""notebooks/02-comparing-models.ipynb shows every pair of runs with the numbers ``bs.compare`` gives
(interval, p, Holm), the pairs that survive Holm, the rank intervals, the benchmarks, the top pair per
benchmark, and one PNG per figure of the report's comparison sections."""

from __future__ import annotations

from itertools import combinations
from pathlib import Path

import polars as pl
import pytest

import toolkit as bs
from tests.notebook_support import ExecutedNotebook, executed

NAME = "02-comparing-models.ipynb"
FIGURE_CELLS = ("leaderboard", "benchmark_heatmap", "score_distributions", "pairwise_forest", "win_delta_matrix",
                "pair_scatter")


@pytest.fixture(scope="module")
def shown(demo_store: Path) -> ExecutedNotebook:
    return executed(NAME, demo_store)


@pytest.fixture(scope="module")
def expected(demo_store: Path):
    store = bs.Store.open(demo_store)
    return store, bs.compare(store, store.run_ids())


def close(shown: str, value: float | None) -> bool:
    return value is None and shown == "null" or value is not None and float(shown) == pytest.approx(value, abs=2e-6)


def test_every_pair_with_its_interval_and_holm_p(shown: ExecutedNotebook, expected) -> None:
    store, cmp = expected
    rows = shown.table("pairs")
    every_pair = {frozenset(p) for p in combinations(store.run_ids(), 2)}
    assert {frozenset((r["run_a"], r["run_b"])) for r in rows} == every_pair
    assert len(rows) == 6
    want = {(r["run_a"], r["run_b"]): r for r in cmp.pairwise.iter_rows(named=True)}
    for row in rows:
        truth = want[(row["run_a"], row["run_b"])]
        for column in ("delta", "ci_low", "ci_high", "p_value", "p_holm", "p_bh"):
            assert close(row[column], truth[column]), (row["run_a"], row["run_b"], column, row[column])
        assert [int(row[c]) for c in ("wins", "ties", "losses")] == [truth[c] for c in ("wins", "ties", "losses")]


def test_the_holm_survivors_are_those_below_five_percent(shown: ExecutedNotebook, expected) -> None:
    _, cmp = expected
    survivors = cmp.pairwise.filter(pl.col("p_holm") < 0.05)
    rows = shown.table("significant")
    assert [(r["run_a"], r["run_b"]) for r in rows] == list(zip(survivors["run_a"], survivors["run_b"]))
    assert 0 < len(rows) < 6  # on the demo: some pairs are apart, sim/medium vs sim/skill-0.45 is not


def test_the_rank_intervals(shown: ExecutedNotebook, expected) -> None:
    _, cmp = expected
    rows = shown.table("ranks")
    assert [r["run_id"] for r in rows] == cmp.ranks["run_id"].to_list()
    for row, truth in zip(rows, cmp.ranks.iter_rows(named=True)):
        assert (int(row["rank_low"]), int(row["rank_high"])) == (truth["rank_low"], truth["rank_high"])
        assert close(row["share_first"], truth["share_first"])


def test_benchmarks_by_run_best_first(shown: ExecutedNotebook, expected) -> None:
    _, cmp = expected
    rows = shown.table("benchmarks")
    order = cmp.leaderboard["run_id"].to_list()
    assert list(rows[0]) == ["benchmark", *order]
    assert [r["benchmark"] for r in rows] == sorted(cmp.benchmarks["benchmark"].unique().to_list())
    means = {(r["run_id"], r["benchmark"]): r["mean"] for r in cmp.benchmarks.iter_rows(named=True)}
    assert all(close(row[run], means[(run, row["benchmark"])]) for row in rows for run in order)


def test_the_top_pair_per_benchmark(shown: ExecutedNotebook, expected) -> None:
    store, cmp = expected
    top = set(cmp.leaderboard["run_id"].to_list()[:2])
    detail = bs.compare(store, store.run_ids(), bs.CompareOptions(per_benchmark=True)).pairwise
    truth = (detail.filter(pl.col("run_a").is_in(top), pl.col("run_b").is_in(top), pl.col("benchmark") != "overall")
             .sort("benchmark"))
    rows = shown.table("per-benchmark")
    assert [r["benchmark"] for r in rows] == truth["benchmark"].to_list() and len(rows) == 10
    for row, want in zip(rows, truth.iter_rows(named=True)):
        assert {row["run_a"], row["run_b"]} == top
        assert close(row["delta"], want["delta"]) and close(row["p_holm"], want["p_holm"])


def test_notes_are_printed(shown: ExecutedNotebook, expected) -> None:
    _, cmp = expected
    text = shown.text("notes")
    assert all(f"- {note}" in text for note in cmp.notes) and cmp.notes
    assert "0 run(s) excluded" in text


@pytest.mark.parametrize("figure", FIGURE_CELLS)
def test_each_report_figure_is_drawn(shown: ExecutedNotebook, figure: str) -> None:
    assert shown.pngs(f"fig-{figure}") == 1


def test_length_and_cost_are_drawn_or_say_why(shown: ExecutedNotebook) -> None:
    # simulated runs record token usage and answer texts: both apply to the demo store
    assert shown.pngs("fig-length-cost") == 2, shown.text("fig-length-cost")
