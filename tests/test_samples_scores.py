"""Answer samples in scoring: a sample's score is the mean over its scored passes, a case's the mean over its
samples; ``sample_scores`` has one row per case and sample in the store, SQL and the Python API; the latest
valid reply is taken per case, sample, judge and pass; one sample scores exactly as before."""

from __future__ import annotations

import json
import math

import polars as pl
import pytest

from tests.samples_support import sample_decisions, write_samples
from toolkit.score_tables import score_tables
from toolkit.selection import JudgeSelection, pass_level_scores, per_case, per_sample, read_runs, selected_passes
from toolkit.sql._query import connect
from toolkit.store import Store
from toolkit.summary import summarize


@pytest.fixture(autouse=True)
def scorer(scoring_commits):
    """Commits in these tests store scores (conftest.scoring_commits)."""


def _hand(store: Store, run_id: str) -> tuple[dict, dict]:
    """(case, sample) -> mean of its pass scores and case -> mean of those, in plain Python from pass_scores."""
    passes: dict[tuple[str, int], list[float]] = {}
    for row in store.read("pass_scores", [run_id]).iter_rows(named=True):
        passes.setdefault((row["case_id"], row["sample"]), []).append(row["score"])
    by_sample = {k: sum(v) / len(v) for k, v in passes.items()}
    by_case: dict[str, list[float]] = {}
    for (case, _), score in by_sample.items():
        by_case.setdefault(case, []).append(score)
    return by_sample, {c: sum(v) / len(v) for c, v in by_case.items()}


def test_sample_scores_are_one_row_per_case_and_sample_and_a_case_is_their_mean(store: Store,
                                                                                  sample_dataset) -> None:
    write_samples(store, sample_dataset, "k3", sample_decisions(sample_dataset, "k3", 3, passes=2))
    cases = sample_dataset.cases.height
    by_sample, by_case = _hand(store, "k3")
    stored = store.read("sample_scores", ["k3"])
    assert stored.height == cases * 3 == len(by_sample)
    assert sorted(set(stored["sample"])) == [0, 1, 2] and set(stored["passes"]) == {2}
    for row in stored.iter_rows(named=True):
        assert row["score"] == pytest.approx(by_sample[(row["case_id"], row["sample"])], abs=1e-15)
    case_rows = store.read("case_scores", ["k3"])
    assert case_rows.height == cases and set(case_rows["passes"]) == {6}
    for row in case_rows.iter_rows(named=True):
        assert row["score"] == pytest.approx(by_case[row["case_id"]], abs=1e-15)
    # The samples really differ, so the mean of sample means is not any one sample's score.
    assert stored.group_by("case_id").agg(pl.col("score").n_unique())["score"].max() > 1
    # Python API and SQL show the same rows.
    data = read_runs(store, ["k3"], texts=False)
    assert per_sample(data).drop("run_id").sort("case_id", "sample").equals(
        stored.drop("run_id").sort("case_id", "sample"))
    with connect(store) as con:
        assert con.execute("SELECT count(*) FROM sample_scores WHERE run_id = 'k3'").fetchone()[0] == cases * 3
    frame = pass_level_scores(data)
    assert frame.columns == ["run_id", "benchmark", "case_id", "sample", "judge_pass", "score"]
    assert frame.height == cases * 3 * 2
    # The summary's benchmark means are fsum / n of the hand-computed case means.
    summary = summarize(store, ["k3"])["k3"]
    bench = dict(zip(sample_dataset.cases["case_id"], sample_dataset.cases["benchmark"]))
    for name, entry in summary["benchmarks"].items():
        values = [s for c, s in by_case.items() if bench[c] == name]
        assert entry["n"] == len(values) and entry["mean"] == pytest.approx(math.fsum(values) / len(values),
                                                                          abs=1e-15)


def test_the_latest_valid_reply_is_taken_per_sample(store: Store, sample_dataset) -> None:
    """A re-judged sample 1 (a second valid reply) leaves sample 0's only reply scored: the winner is chosen
    per case, sample, judge and pass, not per case."""
    first = sample_decisions(sample_dataset, "r", 2)
    again = first.filter(pl.col("sample") == 1).with_columns(
        judgment_attempt=pl.lit(2, pl.Int32), matched=~pl.col("matched"))
    write_samples(store, sample_dataset, "r", pl.concat([first, again]))
    stored = store.read("sample_scores", ["r"])
    assert stored.height == sample_dataset.cases.height * 2
    passes = store.read("pass_scores", ["r"])
    assert passes.height == sample_dataset.cases.height * 2  # one scored reply per sample, none dropped
    assert passes.filter(pl.col("sample") == 1)["n_matched"].sum() == again["matched"].sum()


def test_one_sample_scores_exactly_as_a_run_without_samples(store: Store, sample_dataset) -> None:
    """The same decisions stored with sample 0 and with no sample column at all give the same bits."""
    decisions = sample_decisions(sample_dataset, "a", 1, passes=3)
    write_samples(store, sample_dataset, "a", decisions)
    write_samples(store, sample_dataset, "b", decisions.drop("sample").with_columns(run_id=pl.lit("b")))
    data = read_runs(store, ["a", "b"], texts=False)
    tables = score_tables(data)
    for name, frame in tables.items():
        a = frame.filter(pl.col("run_id") == "a").drop("run_id")
        b = frame.filter(pl.col("run_id") == "b").drop("run_id")
        if name in ("run_summary", "run_summary_by_judge"):
            a, b = a.drop("answer_model"), b.drop("answer_model")
        assert a.equals(b), name
    summaries = summarize(store, ["a", "b"])
    for s in summaries.values():
        s.pop("answer_model")
    assert json.dumps(summaries["a"]) == json.dumps(summaries["b"])
    # A case's score is the mean over its passes, bit for bit as before samples existed.
    before = selected_passes(data, JudgeSelection()).group_by("run_id", "case_id", maintain_order=True).agg(
        pl.col("score").mean())
    assert per_case(data).select("run_id", "case_id", "score").sort("run_id", "case_id").equals(
        before.sort("run_id", "case_id"))


def test_the_db_file_shows_sample_scores_and_follows_a_new_sample(store: Store, sample_dataset, tmp_path) -> None:
    import duckdb

    from toolkit import sample_scores, write_database

    decisions = sample_decisions(sample_dataset, "k", 3)
    write_samples(store, sample_dataset, "k", decisions.filter(pl.col("sample") < 2))
    path = tmp_path / "bench.duckdb"
    write_database(store, path)
    cases = sample_dataset.cases.height

    def count() -> int:
        with duckdb.connect(str(path), read_only=True) as con:
            return con.execute("SELECT count(*) FROM sample_scores WHERE run_id = 'k'").fetchone()[0]

    assert count() == cases * 2
    # A later commit adding sample 2 (as a resume adds samples) refreshes the registered file.
    third = decisions.filter(pl.col("sample") == 2)
    store.commit_run("k", {"answers": [{"run_id": "k", "case_id": c, "sample": 2, "attempt": 1, "seq": 10_000 + i,
                                        "answer": "a", "error": None}
                                       for i, c in enumerate(third["case_id"].unique(maintain_order=True))],
                           "judgments": [{"run_id": "k", "case_id": c, "sample": 2, "judge_model": "judge-x",
                                          "judge_pass": 1, "attempt": 1, "answer_attempt": 1, "seq": 20_000 + i,
                                          "error": None}
                                         for i, c in enumerate(third["case_id"].unique(maintain_order=True))],
                           "decisions": third.to_arrow()})
    assert count() == cases * 3
    # bs.sample_scores: the same per-sample means from a frame of pass scores.
    stored = store.read("sample_scores", ["k"]).sort("case_id", "sample")
    mine = sample_scores(store.read("pass_scores", ["k"])).select(stored.columns).sort("case_id", "sample")
    assert mine.select("case_id", "sample", "passes").equals(stored.select("case_id", "sample", "passes"))


def test_compare_says_its_intervals_include_answer_and_judge_variance(store: Store, sample_dataset) -> None:
    # A case's score averages its answers and passes, so intervals over cases carry that noise: the note must
    # not tell a reader of a K > 1 comparison that answer variance is left out (toolkit.analysis.variance).
    from toolkit.analysis import CompareOptions, ResampleSettings, compare
    for run_id, seed in (("k2a", 1), ("k2b", 2)):
        write_samples(store, sample_dataset, run_id, sample_decisions(sample_dataset, run_id, 2, seed=seed))
    notes = " ".join(compare(store, ["k2a", "k2b"], CompareOptions(resamples=ResampleSettings(200, 1))).notes)
    assert "not answer or judge variance" not in notes
    assert "answer and judge variance are inside the spread of case scores" in notes
