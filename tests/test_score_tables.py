"""The score tables are data: every commit stores its run's scores (computed by the toolkit's own scoring) in
the same runs commit as the rows they come from; re-judging, replacing, removing, renaming and compacting a
run keep them right; a kill between the data commits and the runs commit leaves neither visible; and runs
stored with no scores (earlier versions) read right through every surface with no step by the user."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests import analysis_sim
from toolkit.score_tables import LEVELS, score_tables, store_scores
from toolkit.selection import read_runs
from toolkit.sql._query import connect
from toolkit.store import Store
from toolkit.store import transaction
from toolkit.store.runs_ops import compact_run, delete_run, rename_run

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(autouse=True)
def scorer(scoring_commits):
    """Commits in these tests store scores (conftest.scoring_commits)."""


def _equal(got: pl.DataFrame, want: pl.DataFrame) -> None:
    """Same rows, bit for bit (NaN equals NaN), whatever their order."""
    assert got.columns == want.columns and got.height == want.height
    a, b = got.sort(got.columns, nulls_last=True), want.sort(want.columns, nulls_last=True)
    for column in want.columns:
        for x, y in zip(a[column].to_list(), b[column].to_list()):
            assert x == y or (isinstance(x, float) and isinstance(y, float) and math.isnan(x) and math.isnan(y)), \
                (column, x, y)


def _check_stored(store: Store, run_ids: list[str] | None = None) -> None:
    """The stored score tables equal the scores computed now from the stored rows."""
    run_ids = store.run_ids() if run_ids is None else run_ids
    want = score_tables(read_runs(store, run_ids, texts=False))
    for table in LEVELS:
        _equal(store.read(table, run_ids), want[table])
        assert want[table].height > 0


def _run(store: Store, dataset, run_id: str, seed: int, **kwargs) -> None:
    analysis_sim.write_run(store, dataset, run_id, 0.3, seed, **kwargs)


def test_each_commit_stores_the_scores_of_its_rows_in_the_same_runs_commit(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, "a", 1, passes=2, failed=frozenset(sample_dataset.cases["case_id"][:2]))
    _run(store, sample_dataset, "b", 2)
    assert store.unscored() == []
    _check_stored(store)
    # Every store version: a run's decisions are never visible without their scores, nor scores without them.
    for version in range(store.version() + 1):
        old = Store.open(store.root, version=version)
        for run_id in old.run_ids():
            decided = old.read("decisions", [run_id]).height
            passes = old.read("pass_scores", [run_id])
            assert passes["n_decided"].sum() == decided
            assert old.read("run_summary", [run_id]).height == 1


def test_a_new_pass_of_an_existing_run_rescores_it(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, "a", 1)
    before = store.read("case_scores", ["a"])
    assert set(before["passes"]) == {1}
    decisions = store.read("decisions", ["a"]).with_columns(judge_pass=pl.lit(2, pl.Int32),
                                                            matched=~pl.col("matched"))
    judgments = store.read("judgments", ["a"]).with_columns(judge_pass=pl.lit(2, pl.Int32))
    store.commit_run("a", {"judgments": judgments.to_arrow(), "decisions": decisions.to_arrow()})
    assert set(store.read("case_scores", ["a"])["passes"]) == {2}
    _check_stored(store)
    live = json.loads(store.run("a")["write_ids"])
    assert [w for w, rows in live.items() if "pass_scores" in rows] == [list(live)[-1]]  # one scores write


def test_replace_delete_rename_and_compaction_keep_the_scores_right(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, "a", 1)
    _run(store, sample_dataset, "b", 2)
    rows = {t: store.read(t, ["b"]).with_columns(run_id=pl.lit("a")).to_arrow()
            for t in ("answers", "judgments", "decisions")}
    store.commit_run("a", rows, {}, replace=True)  # run a now holds b's rows
    _check_stored(store)
    _equal(store.read("case_scores", ["a"]).drop("run_id"), store.read("case_scores", ["b"]).drop("run_id"))

    rename_run(store, "b", "c")
    assert store.read("pass_scores", ["c"]).height and not store.read("pass_scores").filter(
        pl.col("run_id") == "b").height
    _check_stored(store)

    for k in range(3):  # several writes, then one
        store.commit_run("a", None, {"settings": json.dumps({"k": k})})
    compact_run(store, "a")
    assert len(json.loads(store.run("a")["write_ids"])) == 1
    _check_stored(store)

    delete_run(store, "a")
    assert set(store.read("run_summary")["run_id"]) == {"c"}
    assert not list((store.root / "pass_scores").glob("part=a/*.parquet"))  # its files went with it
    _check_stored(store)


_KILLED = """
import os, sys
import polars as pl
from toolkit.store import Store, transaction
from toolkit.score_tables import store_scores
store_scores()
store = Store.open(sys.argv[1])
transaction._commit_row = lambda *a, **k: os._exit(9)  # killed after the data commits, before the runs commit
rows = {t: store.read(t, ["a"]).with_columns(judge_pass=pl.lit(2, pl.Int32)).to_arrow()
        for t in ("judgments", "decisions")}
store.commit_run("a", rows)
"""


def test_a_kill_before_the_runs_commit_leaves_neither_rows_nor_scores_visible(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, "a", 1)
    before = {t: store.read(t) for t in ("decisions", *LEVELS)}
    done = subprocess.run([sys.executable, "-c", _KILLED, str(store.root)], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 9, done.stderr
    assert list((store.root / "pass_scores").glob("part=a/*.parquet"))[1:]  # the scores were written ...
    for table, frame in before.items():  # ... and are not seen, nor the rows they came from
        _equal(Store.open(store.root).read(table), frame)


def test_runs_stored_without_scores_read_right_and_get_them_on_their_next_commit(store: Store, sample_dataset,
                                                                                   ) -> None:
    transaction._SCORERS.clear()  # the old code path: the base tables only
    _run(store, sample_dataset, "old", 1, passes=2)
    store_scores()
    _run(store, sample_dataset, "new", 2)
    assert store.unscored() == ["old"] and store.read("pass_scores", ["old"]).height == 0
    want = score_tables(read_runs(store, store.run_ids(), texts=False))
    con = connect(store)
    for table in LEVELS:
        got = con.sql(f"SELECT * FROM {table}").pl()
        _equal(got.select(want[table].columns), want[table])
    con.close()
    store.commit_run("old", None, {"settings": "{}"})  # any commit stores them
    assert store.unscored() == []
    _check_stored(store)


def test_a_commit_made_without_a_scorer_hides_the_older_scores(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, "a", 1)
    transaction._SCORERS.clear()
    decisions = store.read("decisions", ["a"]).with_columns(matched=~pl.col("matched"),
                                                            judgment_attempt=pl.lit(2, pl.Int32))
    judgments = store.read("judgments", ["a"]).with_columns(attempt=pl.lit(2, pl.Int32))
    store.commit_run("a", {"judgments": judgments.to_arrow(), "decisions": decisions.to_arrow()})
    assert store.unscored() == ["a"] and store.read("case_scores", ["a"]).height == 0  # never stale scores
    want = score_tables(read_runs(store, ["a"], texts=False))
    con = connect(store)
    _equal(con.sql("SELECT * EXCLUDE (judge_model, primary_judge) FROM case_scores").pl(), want["case_scores"])
    con.close()


def test_rows_the_scorer_cannot_score_are_stored_unscored_and_readers_refuse_them(store: Store,
                                                                                    sample_dataset) -> None:
    from toolkit.summary import summarize

    _run(store, sample_dataset, "a", 1)
    bad = store.read("decisions", ["a"]).head(1).with_columns(item_id=pl.lit("not-an-item"),
                                                              judgment_attempt=pl.lit(2, pl.Int32))
    judgments = store.read("judgments", ["a"]).head(1).with_columns(attempt=pl.lit(2, pl.Int32))
    store.commit_run("a", {"judgments": judgments.to_arrow(), "decisions": bad.to_arrow()})  # the commit stands
    assert store.unscored() == ["a"] and store.read("decisions", ["a"]).filter(
        pl.col("item_id") == "not-an-item").height == 1
    with pytest.raises(ValueError, match="not-an-item"):
        summarize(store, ["a"])


def test_a_store_holding_score_tables_is_marked_so_an_older_bedside_refuses_it(tmp_path, sample_dataset) -> None:
    """bedside before stored scores reads a marker of format 1 and refuses a newer format in one line. A
    store it could still write would get runs whose stored scores no longer match their rows (its commits
    keep the scores write live), and db files whose score views it never fills: a store this version has
    written is format 3 (answer samples, see tests/test_samples_store.py). A format-1 store is upgraded on its
    first write, not on a read."""
    old = tmp_path / "old"
    store = Store.open(old)
    _run(store, sample_dataset, "a", 1)
    (old / ".bedside-store").write_text("bedside-store 1\n", encoding="utf-8")  # as an earlier version left it
    from toolkit.store import paths
    paths._CHECKED.clear()
    Store.open(old).read("runs")
    assert (old / ".bedside-store").read_text() == "bedside-store 1\n"  # reading changes nothing
    _run(Store.open(old), sample_dataset, "b", 2)
    assert (old / ".bedside-store").read_text() == "bedside-store 3\n"
    new = tmp_path / "new"
    _run(Store.open(new), sample_dataset, "a", 1)
    assert (new / ".bedside-store").read_text() == "bedside-store 3\n"
    # the rule an earlier bedside applies to the marker (toolkit/store/paths.py at format 1): a newer format
    kind, _, version = (new / ".bedside-store").read_text().strip().partition(" ")
    assert kind == "bedside-store" and int(version) > 1


def test_a_run_without_a_completed_case_is_null_in_sql_and_last_on_the_leaderboard(store: Store,
                                                                                   sample_dataset) -> None:
    """SQL sorts NaN above every number: a run whose every case failed would lead the README's leaderboard
    query. Its mean and interval are NULL, as ``summary --json`` says null."""
    _run(store, sample_dataset, "good", 1)
    _run(store, sample_dataset, "all-failed", 2, failed=frozenset(sample_dataset.cases["case_id"].to_list()))
    con = connect(store)
    rows = con.sql("SELECT run_id, overall_macro_mean, ci_low, ci_high FROM run_summary "
                   "ORDER BY overall_macro_mean DESC").fetchall()
    assert [r[0] for r in rows] == ["good", "all-failed"] and rows[1][1:] == (None, None, None)
    assert rows[0][1] is not None and not math.isnan(rows[0][1])


def test_readers_take_the_stored_case_scores_under_the_default_selection_only(store: Store, sample_dataset) -> None:
    """``per_case`` returns the case scores the commits stored (what it computed then) for the default
    selection, computes any other, and computes for every run when one of them has none stored."""
    from dataclasses import replace

    from toolkit.selection import JudgeSelection, per_case

    _run(store, sample_dataset, "a", 1, passes=2)
    _run(store, sample_dataset, "b", 2, passes=2)
    data = read_runs(store, ["a", "b"], texts=False)
    assert data.stored_cases is not None and per_case(data).equals(data.stored_cases)
    narrowed = replace(data, runs=data.runs.filter(pl.col("run_id") == "a"))  # narrowed without RunData.of
    assert per_case(narrowed)["run_id"].unique().to_list() == ["a"]
    _equal(per_case(data), per_case(replace(data, stored_cases=None)))
    first = per_case(data, JudgeSelection(passes=(1,)))
    assert first["passes"].unique().to_list() == [1]
    assert per_case(data.of(["b"]))["run_id"].unique().to_list() == ["b"]
    transaction._SCORERS.clear()
    _run(store, sample_dataset, "old", 3)
    assert read_runs(store, ["a", "old"], texts=False).stored_cases is None
