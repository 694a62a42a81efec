"""What ``bedside runs`` lists of a run is stored in its ``runs`` row by the commit that writes it
(``toolkit.listing``): equal to what the rows give, kept right by every later commit, hidden from SQL, and a run
stored before (no facts) is listed from its rows as before."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest

from tests import analysis_sim
from tests.test_cli_process import bedside_process
from toolkit import score_tables
from toolkit.listing.run_list import computed_facts
from toolkit.listing import load_facts
from toolkit.sql._query import connect
from toolkit.store import Store, transaction
from toolkit.store.runs_ops import compact_run, delete_run, rename_run


@pytest.fixture(autouse=True)
def scorer(scoring_commits):
    """Commits in these tests store scores and facts (conftest.scoring_commits)."""


def _stored_facts(store: Store) -> dict[str, dict | None]:
    return {r["run_id"]: None if r["listing"] is None else load_facts(r["listing"])
            for r in store.read("runs").iter_rows(named=True)}


def _check_facts(store: Store) -> None:
    """Every run's stored facts equal those computed now from its rows."""
    stored = _stored_facts(store)
    assert stored and None not in stored.values()
    assert stored == computed_facts(store, list(stored))


def _run(store: Store, dataset, run_id: str, seed: int, **kwargs) -> None:
    analysis_sim.write_run(store, dataset, run_id, 0.3, seed, **kwargs)


def test_rejudge_replace_rename_compaction_and_removal_keep_the_stored_facts_right(store: Store,
                                                                                  sample_dataset) -> None:
    _run(store, sample_dataset, "a", 1, passes=2, failed=frozenset(sample_dataset.cases["case_id"][:2]))
    _run(store, sample_dataset, "b", 2)
    _check_facts(store)
    a = _stored_facts(store)["a"]
    assert a["failed"] == 2 and a["failure_causes"] and a["judge_passes"] and a["calls"]

    # A re-judge: a new pass of every case.
    decisions = store.read("decisions", ["b"]).with_columns(judge_pass=pl.lit(2, pl.Int32), matched=~pl.col("matched"))
    judgments = store.read("judgments", ["b"]).with_columns(judge_pass=pl.lit(2, pl.Int32))
    store.commit_run("b", {"judgments": judgments.to_arrow(), "decisions": decisions.to_arrow()})
    assert list(_stored_facts(store)["b"]["judge_passes"].values()) == [[1, 2]]
    _check_facts(store)

    rows = {t: store.read(t, ["b"]).with_columns(run_id=pl.lit("a")).to_arrow()
            for t in ("answers", "judgments", "decisions")}
    store.commit_run("a", rows, {}, replace=True)  # run a now holds b's rows: a's failures are gone
    assert _stored_facts(store)["a"] == _stored_facts(store)["b"]
    _check_facts(store)

    rename_run(store, "b", "c")
    assert set(_stored_facts(store)) == {"a", "c"}
    _check_facts(store)
    for k in range(2):
        store.commit_run("a", None, {"settings": json.dumps({"k": k})})
    compact_run(store, "a")
    _check_facts(store)
    delete_run(store, "a")
    assert set(_stored_facts(store)) == {"c"}
    _check_facts(store)


def test_a_commit_without_a_scorer_leaves_no_stale_facts(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, "a", 1)
    assert _stored_facts(store)["a"] is not None
    transaction._SCORERS.clear()
    judgments = store.read("judgments", ["a"]).with_columns(attempt=pl.lit(2, pl.Int32), error=pl.lit("Boom: x"))
    store.commit_run("a", {"judgments": judgments.to_arrow()})
    assert _stored_facts(store)["a"] is None  # the listing computes them from the rows now


def test_sql_shows_no_listing_column(store: Store, sample_dataset) -> None:
    _run(store, sample_dataset, "a", 1)
    con = connect(store)
    assert "listing" not in con.sql("SELECT * FROM runs").columns
    con.close()


def _import(tmp_path: Path, store: Path, run_id: str, seed: int, dataset, sample: Path) -> None:
    from tests import reference_model as rm
    from toolkit.cli import main

    path = tmp_path / f"{run_id}.jsonl"
    rm.write_rows(path, rm.make_rows(list(dataset.raw_cases[:8]), seed=seed, error_rate=0.3))
    assert main(["import", str(path), "--run-id", run_id, "--store", str(store), "--dataset", str(sample)]) == 0


def test_a_store_mixing_runs_with_and_without_stored_facts_lists_as_one_without(
        tmp_path: Path, sample_dataset, monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    from tests.conftest import SAMPLE

    mixed, before = tmp_path / "mixed", tmp_path / "older"  # names of one length: the same layout
    with monkeypatch.context() as m:  # as the previous version stored them: scores, no facts
        m.setattr(score_tables, "listing_facts", lambda data, cases: {})
        _import(tmp_path, mixed, "old", 41, sample_dataset, SAMPLE)
        for run_id, seed in (("old", 41), ("new", 42)):
            _import(tmp_path, before, run_id, seed, sample_dataset, SAMPLE)
    _import(tmp_path, mixed, "new", 42, sample_dataset, SAMPLE)
    capsys.readouterr()
    facts = _stored_facts(Store.open(mixed))
    assert facts["old"] is None and facts["new"] is not None
    assert set(_stored_facts(Store.open(before)).values()) == {None}
    for args in ([], ["--json"], ["--wide"]):
        got, want = (bedside_process(["runs", "--store", str(s), *args])
                     for s in (mixed, before))
        assert got.returncode == want.returncode == 0
        strip = (lambda text: text.replace(str(mixed), "STORE").replace(str(before), "STORE"))
        assert _without_times(strip(got.stdout), args) == _without_times(strip(want.stdout), args)
        assert "old" in got.stdout and "new" in got.stdout


def _without_times(text: str, args: list[str]) -> object:
    """The two stores were written at other times: their listings differ there alone."""
    if args == ["--json"]:
        return [{k: v for k, v in r.items() if k not in ("created", "updated", "created_at", "updated_at")}
                for r in json.loads(text)]
    import re
    return re.sub(r"\d{4}-\d\d-\d\d \d\d:\d\d", "TIME", text)


def test_the_listing_still_names_a_damaged_run_whose_facts_are_stored(store: Store, sample_dataset) -> None:
    for run_id, seed in (("a", 1), ("b", 2), ("c", 3)):
        _run(store, sample_dataset, run_id, seed)
    assert None not in _stored_facts(store).values()
    for entry in sorted((store.root / "decisions" / "_delta_log").glob("*.json")):  # a's decisions leave the log
        actions = [json.loads(line) for line in entry.read_text().splitlines() if line.strip()]
        entry.write_text("".join(json.dumps(a) + "\n" for a in actions
                                 if not ("add" in a and "part=a" in a["add"]["path"])))
    truncated = next((store.root / "case_scores").glob("part=b/*.parquet"))
    truncated.chmod(0o644)
    truncated.write_bytes(truncated.read_bytes()[:50])
    done = bedside_process(["runs", "--store", str(store.root)])
    assert done.returncode == 0, done.stderr
    lines = [line for line in done.stdout.splitlines() if ": damaged: " in line]
    damaged = dict(line.split(": damaged: ", 1) for line in lines)
    assert set(damaged) == {"a", "b"} and "decisions" in damaged["a"] and "cannot be found" in damaged["a"]
    assert "case_scores" in damaged["b"] and "50 bytes" in damaged["b"]
    listed = json.loads(bedside_process(["runs", "--store", str(store.root), "--json"]).stdout)
    assert {r["run_id"]: r["completed"] is None for r in listed} == {"a": True, "b": True, "c": False}


def test_runs_compact_stores_the_facts_and_scores_of_runs_written_without_them(
        tmp_path: Path, sample_dataset, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.conftest import SAMPLE

    import toolkit.reference  # noqa: F401 - registers its scorer on import: before it is replaced here

    older = tmp_path / "older"
    with monkeypatch.context() as m:  # as an earlier version stored them: no scores, no facts
        m.setattr(transaction, "_SCORERS", [lambda batch: [None] * len(batch)])
        for run_id, seed in (("a", 41), ("b", 42)):
            _import(tmp_path, older, run_id, seed, sample_dataset, SAMPLE)
    store = Store.open(older)
    assert sorted(store.unscored()) == ["a", "b"] and set(_stored_facts(store).values()) == {None}
    listed = bedside_process(["runs", "--store", str(older), "--json"])
    summary = bedside_process(["summary", "--all", "--store", str(older), "--json"])
    db = tmp_path / "older.duckdb"
    assert bedside_process(["db", "--out", str(db), "--store", str(older)]).returncode == 0
    done = bedside_process(["runs", "compact", "--store", str(older)])
    assert done.returncode == 0, done.stderr
    assert "stored the scores and listing of 2 run(s) written without them" in done.stdout
    store = Store.open(older)
    assert store.unscored() == [] and None not in _stored_facts(store).values()
    _check_facts(store)
    assert bedside_process(["summary", "--all", "--store", str(older), "--json"]).stdout == summary.stdout
    after = bedside_process(["runs", "--store", str(older), "--json"])
    assert after.stdout == listed.stdout  # the rows are the same: so is the time they last changed
    import duckdb

    con = duckdb.connect(str(db), read_only=True)  # its intervals, of unchanged runs, still shown
    assert con.execute("SELECT count(*) FROM run_summary WHERE ci_low IS NOT NULL").fetchall() == [(2,)]
    con.close()
    again = bedside_process(["runs", "compact", "--store", str(older)])
    assert again.stdout.startswith("compacted 0 run(s)") and "written without" not in again.stdout, again.stdout


def test_a_run_without_a_completed_case_is_not_rewritten_by_every_compaction(tmp_path: Path, sample_dataset) -> None:
    from tests import reference_model as rm
    from tests.conftest import SAMPLE

    rows = [{k: v for k, v in r.items() if k not in ("score", "score_components", "decisions")} | {"error": "boom"}
            for r in rm.make_rows(list(sample_dataset.raw_cases[:6]), seed=3, error_rate=0.0)]
    path = tmp_path / "failed.jsonl"
    rm.write_rows(path, rows)
    store = tmp_path / "store"
    done = bedside_process(["import", str(path), "--store", str(store), "--dataset", str(SAMPLE)])
    assert done.returncode == 0 and "0 completed cases" in done.stdout, done.stdout + done.stderr
    for _ in range(2):
        again = bedside_process(["runs", "compact", "--store", str(store)])
        assert again.stdout.startswith("compacted 0 run(s)"), again.stdout + again.stderr
