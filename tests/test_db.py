"""The derived views (one SQL definition each) give the toolkit's numbers exactly, and ``bedside db`` writes a
DuckDB file that a plain DuckDB in a fresh process opens, that stays current as the store changes, and
that bad input never half-writes."""

from __future__ import annotations

import json
import os
import math
import re
import random
import subprocess
import sys
import time
from pathlib import Path

import duckdb
import polars as pl
import pytest

from tests import analysis_sim, reference_model as rm
from tests.conftest import snapshot
from toolkit.sql import _views as views
from toolkit.cli import main
from toolkit.selection import JudgeSelection, latest_valid_decisions, per_case, read_runs, scored_passes
from toolkit.sql._query import connect
from toolkit.store import Store
from toolkit.store.runs_ops import delete_run
from toolkit.summary import SummaryOptions, summarize_data


def _mixed_store(root: Path, dataset) -> Store:
    """Collected runs with 3 passes, a second judge and failed cases; an imported run with errors and
    repeated successes (its source's reported scores feed its summary)."""
    store = Store.open(root)
    analysis_sim.write_run(store, dataset, "a", 0.4, 11, passes=3, flip=0.2, extra_judges=(("judge-y", 0.3),),
                           failed=frozenset(dataset.cases["case_id"].to_list()[:2]))
    analysis_sim.write_run(store, dataset, "b/odd 'id'", -0.3, 12, passes=2, flip=0.3, created=1)
    from toolkit.reference._read import import_reference

    path = root.parent / "imported.jsonl"
    rm.write_rows(path, rm.make_rows(list(dataset.raw_cases), seed=5, error_rate=0.15))
    import_reference(store, path, dataset, "imp")
    return store


@pytest.fixture(scope="module")
def mixed(tmp_path_factory, sample_dataset) -> Store:
    return _mixed_store(tmp_path_factory.mktemp("mixed") / "st", sample_dataset)


def _same(got: pl.DataFrame, want: pl.DataFrame, key: list[str]) -> None:
    """Equal values, bit for bit, row for row after sorting by the key. NaN equals NaN, and SQL's NULL equals
    the toolkit's NaN of a run without a completed case (``summary --json`` prints null there too)."""
    assert got.height == want.height and got.height > 0
    a, b = got.select(want.columns).sort(key), want.sort(key)
    for column in want.columns:
        for x, y in zip(a[column].to_list(), b[column].to_list()):
            nan_y = isinstance(y, float) and math.isnan(y)
            assert x == y or (nan_y and (x is None or (isinstance(x, float) and math.isnan(x)))), (column, x, y)


@pytest.mark.parametrize("options", [
    SummaryOptions(),
    SummaryOptions(order="dataset", selection=JudgeSelection(passes=(2, 3))),
    SummaryOptions(order="reference", selection=JudgeSelection(judge="judge-y")),
], ids=["default", "passes-2-3-dataset", "judge-y-reference"])
def test_derived_views_equal_the_toolkit_exactly(mixed: Store, options: SummaryOptions) -> None:
    run_ids = mixed.run_ids()
    data = read_runs(mixed, run_ids, texts=False)
    con = connect(mixed, options=options)
    passes = scored_passes(data, latest_valid_decisions(data.judgments, data.decisions))
    _same(con.sql("FROM pass_scores").pl(), passes, ["run_id", "case_id", "judge_model", "judge_pass"])
    cases = per_case(data, options.selection)
    assert cases["passes"].max() >= (1 if options.selection.judge else 2)  # Kahan mean, Welford sd exercised
    _same(con.sql("FROM case_scores").pl(), cases, ["run_id", "case_id"])
    summaries = summarize_data(data, run_ids, options)
    bench = pl.DataFrame([{"run_id": r, "benchmark": n, "n": b["n"], "mean": b["mean"], "ci_low": b["ci95"][0],
                           "ci_high": b["ci95"][1]} for r, s in summaries.items() for n, b in s["benchmarks"].items()])
    _same(con.sql("FROM benchmark_scores").pl(), bench, ["run_id", "benchmark"])
    fields = ("answer_model", "judge_model", "dataset_sha256", "completed_cases", "errors", "overall_macro_mean",
              "judge_passes_per_answer", "started_at", "finished_at")
    runs = pl.DataFrame([{"run_id": r, **{f: s[f] for f in fields}, "ci_low": s["overall_ci95"][0],
                          "ci_high": s["overall_ci95"][1]} for r, s in summaries.items()])
    got = con.sql("FROM run_summary").pl()
    _same(got, runs, ["run_id"])
    assert dict(zip(got["run_id"], got["order"])) == {
        r: ("reference" if r == "imp" else "dataset") if options.order == "auto" else options.order for r in run_ids}
    assert sorted(got.filter(pl.col("errors") > 0)["run_id"]) == ["a", "imp"]


def test_the_views_hold_no_arithmetic_of_their_own() -> None:
    """The scores are the toolkit's, stored: no SQL re-derives a rounding, a sum or a mean."""
    for options in (SummaryOptions(), SummaryOptions(order="dataset", selection=JudgeSelection("j", (1, 2)))):
        sql = " ".join(views.statements({}, options)).lower()
        assert not re.search(r"\b(round|round_even|sum|avg|mean|stddev|list_reduce|fsum)\s*\(", sql), sql
        assert " macro " not in sql


def test_views_hide_storage_columns_and_keep_the_store_types(mixed: Store, tmp_path: Path) -> None:
    from toolkit.tables import TABLES

    con = connect(mixed, derived=())
    out = tmp_path / "x.duckdb"
    assert main(["db", "--out", str(out), "--store", str(mixed.root)]) == 0
    filed = duckdb.connect(str(out), read_only=True)
    for name, table in TABLES.items():
        want = [(c, views.duck_type(name, c)) for c in views.columns(name)]
        assert "write_id" not in dict(want) and "part" not in dict(want)
        for c in (con, filed):
            assert [(r[0], r[1]) for r in c.execute(f'DESCRIBE "{name}"').fetchall()] == want
    for view in views.DERIVED:  # the dictionary's types are the views' types
        assert [(r[0], r[1]) for r in filed.execute(f"DESCRIBE {view.name}").fetchall()] == \
            [(n, t) for n, t, _ in view.columns]
    assert filed.execute("SELECT count(*) FROM runs").fetchone()[0] == 3


def _readme_queries() -> dict[str, str]:
    """The README's three example queries, read from its ```sql block (so the README cannot drift from what
    is tested), named in the order they appear."""
    readme = (Path(__file__).resolve().parents[1] / "README.md").read_text(encoding="utf-8")
    blocks = re.findall(r"```sql\n(.*?)```", readme, re.S)
    assert len(blocks) == 1, "README.md: expected one ```sql block with the bedside db example queries"
    statements = [s.strip() for s in blocks[0].split(";") if s.strip()]
    names = ("leaderboard", "worst_benchmark", "missed_by_all")
    assert len(statements) == len(names), f"README.md: {len(statements)} example queries, expected 3"
    return {name: "\n".join(line for line in sql.splitlines() if not line.startswith("--"))
            for name, sql in zip(names, statements)}


README_QUERIES = _readme_queries()


def _fresh_process(database: Path, queries: dict[str, str]) -> dict[str, list]:
    """The queries run by a new Python process with a plain, read-only DuckDB (no extension loaded)."""
    code = ("import duckdb, json, sys\n"
            "con = duckdb.connect(sys.argv[1], read_only=True, config={'autoinstall_known_extensions': False,"
            " 'autoload_known_extensions': False})\n"
            "queries = json.loads(sys.argv[2])\n"
            "print(json.dumps({k: [list(r) for r in con.execute(q).fetchall()] for k, q in queries.items()}))\n")
    done = subprocess.run([sys.executable, "-c", code, str(database), json.dumps(queries)], capture_output=True,
                          text=True, timeout=120, cwd=database.parent)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_readme_queries_on_the_demo_database(demo_store: Path, tmp_path: Path, capsys) -> None:
    out = tmp_path / "results.duckdb"
    assert main(["db", "--out", str(out), "--store", str(demo_store)]) == 0
    assert capsys.readouterr().out.startswith(f"wrote {out}: 4 runs")
    got = _fresh_process(out, README_QUERIES)
    store = Store.open(demo_store)
    data = read_runs(store, store.run_ids(), texts=False)
    summaries = summarize_data(data, store.run_ids(), SummaryOptions())
    ranked = sorted(summaries, key=lambda r: -summaries[r]["overall_macro_mean"])
    assert [row[0] for row in got["leaderboard"]] == ranked == ["sim/strong", "sim/medium", "sim/skill-0.45", "sim/weak"]
    assert [row[1:] for row in got["leaderboard"]] == [
        [round(summaries[r]["overall_macro_mean"], 4), round(summaries[r]["overall_ci95"][0], 4),
         round(summaries[r]["overall_ci95"][1], 4)] for r in ranked]
    worst = {r: min(s["benchmarks"].items(), key=lambda kv: kv[1]["mean"]) for r, s in summaries.items()}
    assert got["worst_benchmark"] == [[r, worst[r][0], round(worst[r][1]["mean"], 4)] for r in sorted(worst)]
    decisions = data.decisions.join(data.rubric_items, on=["case_id", "item_id"]).filter(pl.col("points") > 0)
    missed = decisions.group_by("item_id").agg((~pl.col("matched")).all().alias("all_missed")).filter("all_missed")
    assert sorted(row[1] for row in got["missed_by_all"]) == sorted(missed["item_id"].to_list())
    assert got["missed_by_all"]  # the demo's weak models leave some items missed by everyone


def _duckdb_shell() -> str:
    """The DuckDB command-line shell (the test extra's duckdb-cli): skipped without it, failed in CI."""
    import os
    import shutil

    found = shutil.which("duckdb", path=f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}")
    if found is None:
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail("the duckdb shell (pip package duckdb-cli, in the test extra) is missing; CI must have it")
        pytest.skip("the duckdb shell is not installed (pip install duckdb-cli)")
    return found


def test_the_duckdb_shell_opens_the_file_and_answers_the_readme_queries(demo_store: Path, tmp_path: Path) -> None:
    shell = _duckdb_shell()
    out = tmp_path / "results.duckdb"
    assert main(["db", "--out", str(out), "--store", str(demo_store)]) == 0
    want = _fresh_process(out, README_QUERIES)
    for name, sql in README_QUERIES.items():
        done = subprocess.run([shell, "-readonly", "-json", str(out), "-c", sql], capture_output=True, text=True,
                              timeout=120, cwd=tmp_path)
        assert done.returncode == 0 and not done.stderr, done.stderr
        rows = json.loads(done.stdout or "[]")
        assert [list(r.values()) for r in rows] == want[name], name


def test_database_stays_current_as_runs_land_and_leave(tmp_path: Path, sample_dataset) -> None:
    store = Store.open(tmp_path / "st")
    analysis_sim.write_run(store, sample_dataset, "first", 0.2, 1)
    out = tmp_path / "db" / "r.duckdb"
    out.parent.mkdir()
    assert main(["db", "--out", str(out), "--store", str(store.root)]) == 0
    query = {"runs": "SELECT run_id, ci_low IS NOT NULL FROM run_summary ORDER BY run_id",
             "info": "SELECT store_version, intervals_store_version FROM bedside_info"}
    before = _fresh_process(out, query)
    assert before["runs"] == [["first", True]]
    analysis_sim.write_run(store, sample_dataset, "second", 0.9, 2, created=1)  # the hook refreshes the file
    after = _fresh_process(out, query)
    assert after["runs"] == [["first", True], ["second", False]]  # no interval computed for it yet
    assert after["info"] == [[store.version(), before["info"][0][0]]]
    delete_run(store, "first")
    assert _fresh_process(out, query)["runs"] == [["second", False]]
    assert main(["db", "--out", str(out), "--store", str(store.root)]) == 0  # rebuilt in place: intervals too
    assert _fresh_process(out, query)["runs"] == [["second", True]]
    assert sorted(p.name for p in out.parent.iterdir()) == ["r.duckdb"]  # no temporary file left


def _holder(database: Path, read_only: bool) -> subprocess.Popen:
    """Another process with the database open (DuckDB's file lock: shared read-only, exclusive read-write)."""
    holder = subprocess.Popen([sys.executable, "-c", "import duckdb, sys, time\n"
                               f"con = duckdb.connect(sys.argv[1], read_only={read_only})\n"
                               "print(con.execute('SELECT count(*) FROM runs').fetchone()[0], flush=True)\n"
                               "time.sleep(60)", str(database)], stdout=subprocess.PIPE, text=True)
    holder.first_line = holder.stdout.readline().strip()
    return holder


def test_readers_do_not_block_a_refresh_and_a_writer_gets_one_warning(tmp_path: Path, sample_dataset, capfd) -> None:
    store = Store.open(tmp_path / "st")
    for k, run in enumerate(("kept", "gone", "also gone")):
        analysis_sim.write_run(store, sample_dataset, run, 0.2, k, created=k)
    out = tmp_path / "r.duckdb"
    assert main(["db", "--out", str(out), "--store", str(store.root)]) == 0
    capfd.readouterr()
    reader = _holder(out, read_only=True)
    try:
        assert reader.first_line == "3"
        delete_run(store, "also gone")  # refreshed in a copy renamed over the file: the reader keeps its snapshot
        assert capfd.readouterr().err == ""
        assert _fresh_process(out, {"runs": "SELECT run_id FROM runs ORDER BY run_id"})["runs"] == [["gone"], ["kept"]]
    finally:
        reader.kill()
        reader.wait()
    writer = _holder(out, read_only=False)
    try:
        assert writer.first_line == "2"
        delete_run(store, "gone")  # the file is locked for writing elsewhere: one warning, the delete stands
        analysis_sim.write_run(store, sample_dataset, "later", 0.5, 9, created=9)  # ... and no second warning
        err = capfd.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith(f"bedside: warning: {out}: not refreshed"), err
        assert store.run_ids() == ["kept", "later"]
    finally:
        writer.kill()
        writer.wait()
    stale = _fresh_process(out, {"runs": "SELECT run_id FROM runs ORDER BY run_id"})
    assert stale["runs"] == [["gone"], ["kept"]]  # the deleted run's dead files, until a refresh
    assert main(["db", "--out", str(out), "--store", str(store.root)]) == 0
    assert _fresh_process(out, {"runs": "SELECT run_id FROM run_summary ORDER BY run_id"})["runs"] == [["kept"], ["later"]]
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def _one_line(capsys, argv: list[str]) -> str:
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_bad_outputs_are_one_line_and_leave_files_alone(tmp_path: Path, sample_dataset, capsys) -> None:
    store = Store.open(tmp_path / "st")
    analysis_sim.write_run(store, sample_dataset, "r", 0.2, 1)
    line = _one_line(capsys, ["db", "--out", str(tmp_path / "missing" / "x.duckdb"), "--store", str(store.root)])
    assert "does not exist" in line and not (tmp_path / "missing").exists()
    notes = tmp_path / "notes.duckdb"
    notes.write_text("my notes\n" * 10)
    assert "not a DuckDB database" in _one_line(capsys, ["db", "--out", str(notes), "--store", str(store.root)])
    assert notes.read_text() == "my notes\n" * 10
    theirs = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(theirs))
    con.execute("CREATE TABLE t AS SELECT 42 AS answer")
    con.close()
    before = theirs.read_bytes()
    assert "did not write" in _one_line(capsys, ["db", "--out", str(theirs), "--store", str(store.root)])
    assert theirs.read_bytes() == before
    assert "no store here" in _one_line(capsys, ["db", "--out", str(tmp_path / "y.duckdb"),
                                                 "--store", str(tmp_path / "nope")])
    assert not (tmp_path / "y.duckdb").exists()
    good = tmp_path / "good.duckdb"
    assert main(["db", "--out", str(good), "--store", str(store.root)]) == 0
    kept = good.read_bytes()
    part = store.files("judgments")[0]
    part.chmod(0o644)  # committed files are read-only on disk
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    state = snapshot(store.root)
    line = _one_line(capsys, ["db", "--out", str(good), "--store", str(store.root)])
    assert str(part) in line and "damaged" in line
    assert good.read_bytes() == kept and snapshot(store.root) == state
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_store_with_no_runs_gives_empty_views_of_the_right_types(tmp_path: Path, sample_dataset) -> None:
    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    out = tmp_path / "e.duckdb"
    assert main(["db", "--out", str(out), "--store", str(store.root)]) == 0
    names = [v.name for v in views.DERIVED] + ["runs", "answers", "judgments", "decisions", "run_intervals"]
    got = _fresh_process(out, {n: f"SELECT count(*) FROM {n}" for n in names} |
                         {"types": "SELECT column_name, data_type FROM information_schema.columns "
                                   "WHERE table_name = 'run_summary' ORDER BY ordinal_position",
                          "items": "SELECT count(*) FROM rubric_items", "info": "SELECT store_version FROM bedside_info"})
    assert all(got[n] == [[0]] for n in names)
    assert [tuple(r) for r in got["types"]] == [(n, t) for n, t, _ in views.DERIVED[-1].columns]
    assert got["items"] == [[sample_dataset.rubric_items.height]] and got["info"] == [[None]]


def test_db_command_is_quick_on_the_demo_store(demo_store: Path, tmp_path: Path) -> None:
    start = time.monotonic()
    assert main(["db", "--out", str(tmp_path / "d.duckdb"), "--store", str(demo_store)]) == 0
    assert time.monotonic() - start < 20  # ~1 s here: the bootstrap of four runs dominates


def test_a_store_read_at_an_old_version_gives_a_snapshot_database(tmp_path: Path, sample_dataset) -> None:
    from toolkit.sql._database import write_database
    from toolkit.sql._refresh import registered

    store = Store.open(tmp_path / "st")
    analysis_sim.write_run(store, sample_dataset, "old", 0.2, 1)
    version = store.version()
    analysis_sim.write_run(store, sample_dataset, "new", 0.4, 2, created=1)
    info = write_database(Store.open(store.root, version=version), tmp_path / "then.duckdb")
    assert info.store_version == version and info.runs == 1 and registered(store.root) == []
    analysis_sim.write_run(store, sample_dataset, "newer", 0.6, 3, created=2)
    got = _fresh_process(info.path, {"runs": "SELECT run_id FROM run_summary", "v": "SELECT store_version FROM bedside_info"})
    assert got == {"runs": [["old"]], "v": [[version]]}


def test_out_through_a_symlink_writes_where_it_points(tmp_path: Path, sample_dataset, capsys) -> None:
    from toolkit.sql._refresh import registered

    store = Store.open(tmp_path / "st")
    analysis_sim.write_run(store, sample_dataset, "r", 0.2, 1)
    (tmp_path / "real").mkdir()
    link = tmp_path / "link.duckdb"
    link.symlink_to(tmp_path / "real" / "r.duckdb")
    for _ in range(2):  # written, then rebuilt in place: the link stays a link
        assert main(["db", "--out", str(link), "--store", str(store.root)]) == 0
        assert link.is_symlink() and (tmp_path / "real" / "r.duckdb").is_file()
    assert f"wrote {tmp_path / 'real' / 'r.duckdb'}:" in capsys.readouterr().out
    assert registered(store.root) == [(tmp_path / "real" / "r.duckdb").resolve()]
    dangling = tmp_path / "dangling.duckdb"
    dangling.symlink_to(tmp_path / "nowhere" / "d.duckdb")
    line = _one_line(capsys, ["db", "--out", str(dangling), "--store", str(store.root)])
    assert line.startswith("bedside: error: ") and "--out: the directory" in line and "does not exist" in line
    assert dangling.is_symlink() and not (tmp_path / "nowhere").exists()


@pytest.mark.parametrize("where", ["build", "rename", "read-only"])
def test_a_full_disk_or_read_only_directory_is_one_line_and_leaves_no_temporary_file(
        tmp_path: Path, sample_dataset, capsys, monkeypatch, where: str) -> None:
    import errno

    import toolkit.sql._database as database

    store = Store.open(tmp_path / "st")
    analysis_sim.write_run(store, sample_dataset, "r", 0.2, 1)
    out = tmp_path / "r.duckdb"
    assert main(["db", "--out", str(out), "--store", str(store.root)]) == 0
    kept, registry = out.read_bytes(), (store.root / ".databases.json").read_text()
    if where == "build":  # DuckDB's own words when its file cannot grow
        real_build = database.build

        def full(con, files, options):
            real_build(con, files, options)
            raise duckdb.IOException('Could not write file ".r.duckdb.1.tmp": No space left on device')

        monkeypatch.setattr(database, "build", full)
    elif where == "rename":
        def read_only(src, dst):
            raise OSError(errno.EROFS, "Read-only file system", str(src))

        monkeypatch.setattr(database.os, "replace", read_only)
    else:  # the whole directory: DuckDB cannot create the file, and even removing a missing file fails
        real_connect = duckdb.connect

        def no_file(name, **kwargs):
            if kwargs.get("read_only"):  # reading the existing file works on a read-only file system
                return real_connect(name, **kwargs)
            raise duckdb.IOException(f'Cannot open file "{name}": Read-only file system')

        real_unlink = Path.unlink

        def no_unlink(self, missing_ok=False):
            if self.parent == tmp_path:
                raise OSError(errno.EROFS, "Read-only file system", str(self))
            real_unlink(self, missing_ok=missing_ok)

        monkeypatch.setattr(database.duckdb, "connect", no_file)
        monkeypatch.setattr(Path, "unlink", no_unlink)
    line = _one_line(capsys, ["db", "--out", str(out), "--store", str(store.root)])
    reason = "No space left on device" if where == "build" else "Read-only file system"
    assert line.startswith(f"bedside: error: {out}: --out: could not write the database (") and reason in line, line
    assert ".tmp" not in line
    assert out.read_bytes() == kept and (store.root / ".databases.json").read_text() == registry
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.duckdb", "st"]


def test_db_sweeps_temporary_files_of_killed_processes(tmp_path: Path, sample_dataset) -> None:
    store = Store.open(tmp_path / "st")
    analysis_sim.write_run(store, sample_dataset, "r", 0.2, 1)
    done = subprocess.Popen(["true"])
    done.wait()
    dead, live = done.pid, os.getppid()
    leftovers = [f".r.duckdb.{dead}.tmp", f".r.duckdb.{dead}.tmp.wal", f".r.duckdb.{dead}.refresh"]
    kept = [f".r.duckdb.{live}.tmp", f".r.duckdb.{dead}.tmp.old", f".s.duckdb.{dead}.tmp"]
    for name in leftovers + kept:
        (tmp_path / name).write_text("left behind\n")
    assert main(["db", "--out", str(tmp_path / "r.duckdb"), "--store", str(store.root)]) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(kept + ["r.duckdb", "st"])


# -- every score view says whose scores it holds and which interval it shows ---------------------------------

REFERENCE_CI = "percentile bootstrap (reference, 10,000 resamples)"


def test_every_score_view_names_its_judge_and_marks_the_primary(mixed: Store) -> None:
    con = connect(mixed)
    primary = dict(con.execute("SELECT run_id, judge_model FROM runs").fetchall())
    for view in ("sample_scores", "case_scores", "benchmark_scores", "reliability_scores", "run_summary"):
        rows = con.execute(f"SELECT DISTINCT run_id, judge_model, primary_judge FROM {view}").fetchall()
        assert sorted(r for r, _, _ in rows) == sorted(primary), view
        assert all(judge == primary[run] and is_primary for run, judge, is_primary in rows), (view, rows)
    passes = con.execute("SELECT DISTINCT run_id, judge_model, primary_judge FROM pass_scores").fetchall()
    assert {(r, j) for r, j, p in passes if not p} == {("a", "judge-y")}
    assert all(p == (j == primary[r]) for r, j, p in passes)
    other = connect(mixed, options=SummaryOptions(selection=JudgeSelection(judge="judge-y")))
    assert other.execute("SELECT DISTINCT run_id, judge_model, primary_judge FROM case_scores").fetchall() == \
        [("a", "judge-y", False)]


def test_by_judge_views_hold_every_judges_scores_as_the_toolkit_computes_them(mixed: Store) -> None:
    con = connect(mixed)
    data = read_runs(mixed, mixed.run_ids(), texts=False)
    judges = sorted(con.execute("SELECT DISTINCT run_id, judge_model FROM pass_scores").fetchall())
    assert ("a", "judge-y") in judges and len(judges) == 4
    got = con.sql("FROM run_summary_by_judge").pl()
    assert sorted(zip(got["run_id"], got["judge_model"])) == judges
    for run_id, judge in judges:
        s = summarize_data(data, [run_id], SummaryOptions(selection=JudgeSelection(judge=judge)))[run_id]
        row = got.filter((pl.col("run_id") == run_id) & (pl.col("judge_model") == judge)).row(0, named=True)
        assert (row["overall_macro_mean"], row["completed_cases"], row["errors"]) == \
            (s["overall_macro_mean"], s["completed_cases"], s["errors"]), (run_id, judge)
        assert row["primary_judge"] == (judge == mixed.run(run_id)["judge_model"])
        bench = con.execute("SELECT benchmark, n, mean, primary_judge FROM benchmark_scores_by_judge "
                            "WHERE run_id = ? AND judge_model = ?", [run_id, judge]).fetchall()
        assert sorted(bench) == sorted((n, b["n"], b["mean"], row["primary_judge"])
                                       for n, b in s["benchmarks"].items())
    # the primary judge's rows are those of run_summary and benchmark_scores (which stay one judge a run)
    shown = 'run_id, judge_model, completed_cases, errors, overall_macro_mean, "order"'
    assert con.execute(f"SELECT {shown} FROM run_summary_by_judge WHERE primary_judge ORDER BY run_id").fetchall() \
        == con.execute(f"SELECT {shown} FROM run_summary ORDER BY run_id").fetchall()
    bench = "run_id, judge_model, benchmark, n, mean"
    assert con.execute(f"SELECT {bench} FROM benchmark_scores_by_judge WHERE primary_judge ORDER BY ALL").fetchall() \
        == con.execute(f"SELECT {bench} FROM benchmark_scores ORDER BY ALL").fetchall()


def test_intervals_in_sql_and_the_db_file_name_their_method(mixed: Store, tmp_path: Path) -> None:
    from toolkit.bootstrap import BootstrapSettings

    out = tmp_path / "m.duckdb"
    assert main(["db", "--out", str(out), "--store", str(mixed.root)]) == 0
    filed = duckdb.connect(str(out), read_only=True)
    fewer = connect(mixed, options=SummaryOptions(bootstrap=BootstrapSettings(samples=200)))
    for con, method in ((connect(mixed), REFERENCE_CI), (filed, REFERENCE_CI),
                        (fewer, "percentile bootstrap (reference, 200 resamples)")):
        for view in ("run_summary", "benchmark_scores"):
            rows = con.execute(f"SELECT ci_low, ci_method FROM {view}").fetchall()
            assert rows and {m for _, m in rows} == {method}, (view, rows[:3])
        assert {m for (m,) in con.execute("SELECT ci_method FROM run_intervals").fetchall()} == {method}


def test_a_db_file_written_before_ci_method_keeps_its_intervals_and_names_them(mixed: Store, tmp_path: Path) -> None:
    """A file written by the release before `ci_method`: its intervals (all of the reference bootstrap) are kept
    and named on its next refresh, not dropped until `bedside db --out` runs again."""
    out = tmp_path / "old.duckdb"
    assert main(["db", "--out", str(out), "--store", str(mixed.root)]) == 0
    con = duckdb.connect(str(out))
    before = con.execute("SELECT run_id, benchmark, ci_low, ci_high FROM run_intervals ORDER BY ALL").fetchall()
    con.execute("ALTER TABLE run_intervals DROP COLUMN ci_method")  # as the earlier release wrote it
    con.close()
    from toolkit.sql._refresh import refresh

    refresh(mixed)
    con = duckdb.connect(str(out), read_only=True)
    after = con.execute("SELECT run_id, benchmark, ci_low, ci_high FROM run_intervals ORDER BY ALL").fetchall()
    assert before and after == before
    named = con.execute("SELECT ci_low IS NULL, ci_method FROM run_summary").fetchall()
    assert named and {m for null, m in named if not null} == {REFERENCE_CI}
