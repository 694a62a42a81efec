"""``bedside sql``: derived relations always exist; bad SQL and a missing store are one-line errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from toolkit.cli import main
from toolkit.store import Store


def test_derived_relations_exist_in_an_empty_store(tmp_path: Path, capsys, sample_dataset) -> None:
    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    for name in ("case_scores", "pass_scores", "benchmark_scores", "run_summary"):
        assert main(["sql", f"select count(*) as n from {name}", "--store", str(store.root), "--format", "json"]) == 0
        assert json.loads(capsys.readouterr().out) == [{"n": 0}]
    assert main(["sql", "select count(*) as n from rubric_items", "--store", str(store.root), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": sample_dataset.rubric_items.height}]


def test_bad_sql_and_missing_store(tmp_path: Path, capsys, sample_dataset) -> None:
    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    assert main(["sql", "selec 1", "--store", str(store.root)]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("bedside: error: SQL: Parser Error")
    assert main(["sql", "select * from nope", "--store", str(store.root)]) == 1
    assert "Table with name nope does not exist" in capsys.readouterr().err
    assert main(["sql", "select 1", "--store", str(tmp_path / "missing")]) == 1
    assert "no store here" in capsys.readouterr().err
    assert not (tmp_path / "missing").exists()


def test_pass_scores_use_the_latest_valid_reply(tmp_path: Path, capsys, sample_dataset) -> None:
    # A reference file can hold two successful rows for a case: the last one wins everywhere.
    from tests import reference_model as rm
    from toolkit.reference._read import import_reference

    rows = [r for r in rm.make_rows(list(sample_dataset.raw_cases), seed=3, error_rate=0) if "score" in r]
    assert len({r["case_id"] for r in rows}) < len(rows)  # make_rows repeats a few successes
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store.open(tmp_path / "st")
    import_reference(store, path, sample_dataset, "r")
    last = {r["case_id"]: r["score"] for r in rows}
    assert main(["sql", "select case_id, score from pass_scores", "--store", str(store.root), "--format", "json"]) == 0
    got = {r["case_id"]: r["score"] for r in json.loads(capsys.readouterr().out)}
    assert got == last


# -- the adversary: `bedside sql` reads the store's current files and nothing else ---------------

def _filled_store(tmp_path: Path, sample_dataset) -> Store:
    from tests import reference_model as rm
    from toolkit.reference._read import import_reference

    rows = rm.make_rows(list(sample_dataset.raw_cases), seed=4, error_rate=0.1)
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    store = Store.open(tmp_path / "st")
    import_reference(store, path, sample_dataset, "r")
    return store


def _one_line(capsys, argv: list[str], code: int = 1) -> str:
    assert main(argv) == code
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_statements_that_write_or_reach_outside_are_refused(tmp_path: Path, capsys, sample_dataset) -> None:
    from tests.conftest import snapshot

    store = _filled_store(tmp_path, sample_dataset)
    part = str(store.files("decisions")[0]).replace("'", "''")
    outside = tmp_path / "outside"
    outside.mkdir()
    refused = {
        f"COPY (SELECT * FROM decisions WHERE false) TO '{part}' (FORMAT parquet, USE_TMP_FILE false)": "COPY statements",
        f"COPY decisions TO '{outside}/x.csv'": "COPY statements",
        f"ATTACH '{outside}/x.duckdb' AS x": "ATTACH statements",
        "INSTALL httpfs": "INSTALL statements",
        "/* hidden */ -- comment\n  attach ':memory:' AS m": "ATTACH statements",
        "LOAD httpfs": "LOAD statements",
        "SET enable_external_access = true": "SET statements",
        "RESET lock_configuration": "RESET statements",
        "PRAGMA enable_profiling": "PRAGMA statements",
        "CALL pragma_version()": "CALL statements",
        "CHECKPOINT": "CHECKPOINT statements",
        "DROP VIEW runs": "DROP statements",
        "CREATE TABLE t AS SELECT 1": "CREATE statements",
        "CREATE OR REPLACE VIEW runs AS SELECT 1 AS run_id": "CREATE statements",
        "INSERT INTO runs (run_id) VALUES ('x')": "INSERT statements",
        "UPDATE runs SET run_id = 'x'": "UPDATE statements",
        "DELETE FROM runs": "DELETE statements",
        f"EXPORT DATABASE '{outside}/db'": "EXPORT statements",
        f"EXPLAIN ANALYZE COPY runs TO '{outside}/y.csv'": "EXPLAIN of a statement that is not a SELECT",
        "SELECT 1; DROP VIEW runs": "2 statements",
        "PIVOT runs ON source USING count(*)": "PIVOT needs its values listed",
        "  ;  ": "empty query",
    }
    reads_outside = ["SELECT * FROM read_text('/etc/passwd')", "SELECT * FROM read_csv('/etc/hostname')",
                     "SELECT * FROM glob('/etc/*')", f"SELECT * FROM read_parquet('{outside}/*.parquet')",
                     "SELECT * FROM query('DROP VIEW runs')"]
    before = snapshot(store.root)
    for statement, why in refused.items():
        line = _one_line(capsys, ["sql", statement, "--store", str(store.root)])
        assert line.startswith("bedside: error: SQL: refused: ") and why in line, (statement, line)
    for statement in reads_outside:
        line = _one_line(capsys, ["sql", statement, "--store", str(store.root)])
        assert line.startswith("bedside: error: SQL: ") and ("Permission Error" in line or "Parser Error" in line), line
    assert snapshot(store.root) == before and list(outside.iterdir()) == []
    # the views are all still there, and reads work
    assert main(["sql", "SELECT count(*) AS n FROM runs", "--store", str(store.root), "--format", "json"]) == 0
    assert json.loads(capsys.readouterr().out) == [{"n": 1}]
    for statement in ("DESCRIBE runs", "SHOW TABLES", "EXPLAIN SELECT * FROM decisions", "FROM runs SELECT run_id",
                      "WITH x AS (SELECT 1 AS a) SELECT * FROM x", "SUMMARIZE SELECT 1 AS a",
                      "PIVOT runs ON source IN ('imported') USING count(*)"):
        assert main(["sql", statement, "--store", str(store.root), "--format", "csv"]) == 0, capsys.readouterr().err
    capsys.readouterr()


def test_python_connection_is_locked_by_default(tmp_path: Path, sample_dataset) -> None:
    import duckdb
    import polars as pl

    from toolkit.sql._query import connect

    store = _filled_store(tmp_path, sample_dataset)
    con = connect(store, derived=())
    assert con.sql("SELECT count(*) FROM decisions").fetchall()[0][0] > 0
    con.register("mine", pl.DataFrame({"a": [1, 2]}).to_arrow())  # notebooks still register their frames
    assert con.sql("SELECT sum(a) FROM mine").fetchall()[0][0] == 3
    for statement in ("SELECT * FROM read_text('/etc/passwd')", f"COPY runs TO '{tmp_path}/x.csv'",
                      f"ATTACH '{tmp_path}/x.duckdb'", "SET enable_external_access = true", "LOAD httpfs"):
        with pytest.raises(duckdb.Error):
            con.execute(statement)
    assert not (tmp_path / "x.csv").exists() and not (tmp_path / "x.duckdb").exists()
    writable = connect(store, derived=(), read_only=False)
    writable.execute(f"COPY runs TO '{tmp_path}/x.csv'")
    assert (tmp_path / "x.csv").exists()


def test_csv_lists_become_json_text_and_json_has_no_nan(tmp_path: Path, capsys, sample_dataset) -> None:
    store = _filled_store(tmp_path, sample_dataset)
    query = ("SELECT [1.5, 2] AS l, {'a': 1, 'b': [true]} AS s, 'nan'::double AS f, 'inf'::double AS g, "
             "[['x'], []] AS nested")
    assert main(["sql", query, "--store", str(store.root), "--format", "csv"]) == 0
    import csv
    import io

    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert json.loads(rows[0]["l"]) == [1.5, 2.0] and json.loads(rows[0]["s"]) == {"a": 1, "b": [True]}
    assert json.loads(rows[0]["nested"]) == [["x"], []]
    assert main(["sql", query + ", ['nan'::double] AS fl", "--store", str(store.root), "--format", "json"]) == 0

    def refuse(name: str):
        raise AssertionError(f"bare {name} in JSON output")
    got = json.loads(capsys.readouterr().out, parse_constant=refuse)
    assert got[0]["f"] is None and got[0]["g"] is None and got[0]["fl"] == [None] and got[0]["l"] == [1.5, 2.0]



def test_a_column_csv_cannot_hold_is_one_line(tmp_path: Path, capsys, sample_dataset) -> None:
    """DuckDB's VARIANT reaches polars as an Arrow extension type of binary fields: CSV gets one line
    saying how to select it (as text), not an internal error; as text it prints."""
    store = _filled_store(tmp_path, sample_dataset)
    query = "SELECT name, typed_value FROM duckdb_settings() WHERE name = 'threads'"
    line = _one_line(capsys, ["sql", query, "--store", str(store.root), "--format", "csv"])
    assert line == ("bedside: error: SQL: column typed_value: its type (arrow.parquet.variant) has no CSV form; "
                    "select it as text (typed_value::VARCHAR)")
    as_text = "SELECT name, typed_value::VARCHAR AS v FROM duckdb_settings() WHERE name = 'threads'"
    assert main(["sql", as_text, "--store", str(store.root), "--format", "csv"]) == 0
    assert capsys.readouterr().out.startswith("name,v\nthreads,")

def test_truncated_part_file_is_one_line(tmp_path: Path, capsys, sample_dataset) -> None:
    store = _filled_store(tmp_path, sample_dataset)
    part = store.files("answers")[0]
    part.chmod(0o644)  # committed files are read-only on disk
    part.write_bytes(part.read_bytes()[: part.stat().st_size // 2])
    line = _one_line(capsys, ["sql", "SELECT count(*) FROM answers", "--store", str(store.root)])
    assert line.startswith("bedside: error: ") and part.name in line


def test_store_path_that_is_not_utf8_is_one_line(tmp_path: Path, capsys, sample_dataset) -> None:
    import os

    store = _filled_store(tmp_path, sample_dataset)
    odd = os.path.join(os.fsencode(tmp_path), b"st\xff")
    os.rename(os.fsencode(store.root), odd)
    line = _one_line(capsys, ["sql", "SELECT count(*) FROM runs", "--store", os.fsdecode(odd)])
    assert line.startswith("bedside: error: ") and "UTF-8" in line


def test_ctrl_c_in_sql_exits_130_with_one_line(tmp_path: Path, sample_dataset) -> None:
    import signal
    import subprocess
    import sys
    import time

    store = _filled_store(tmp_path, sample_dataset)
    command = [sys.executable, "-m", "toolkit", "sql", "SELECT 1", "--store", str(store.root)]
    start = time.monotonic()
    subprocess.run(command, capture_output=True, check=True)
    ready = time.monotonic() - start  # start-up and a trivial query, on this machine under its load now
    command[4] = "SELECT count(*) FROM range(100000000000) a WHERE a.range % 7 = 3"  # runs for hours
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    time.sleep(1.5 * ready + 0.5)
    proc.send_signal(signal.SIGINT)
    try:
        out, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    assert proc.returncode == 130, (out, err)
    assert err.splitlines() == ["bedside: interrupted"], err


# -- a long result in table format: the first rows, and how many more --------------------------------

_PEAK = ("import atexit, resource\n"
         "atexit.register(lambda: sys.stderr.write("
         "f'peak_rss_kb={resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}\\n'))")


def _peak_kb(stderr: str) -> int:
    return int(next(line for line in stderr.splitlines() if line.startswith("peak_rss_kb=")).split("=")[1])


def test_a_long_table_shows_its_first_rows_in_bounded_memory(tmp_path: Path, sample_dataset) -> None:
    from tests.test_cli_process import bedside_process

    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    small = bedside_process(["sql", "SELECT 1 AS one", "--store", str(store.root)], prelude=_PEAK)
    assert small.returncode == 0, small.stderr
    assert [line for line in small.stderr.splitlines() if not line.startswith("peak_rss_kb=")] == []
    big = bedside_process(["sql", "SELECT * FROM range(5000000)", "--store", str(store.root)], prelude=_PEAK)
    assert big.returncode == 0, big.stderr
    # 1,000 rows of the table (and its 4 lines of frame), then one line saying what was left out
    rows = [line for line in big.stdout.splitlines() if line.startswith("│")]
    assert len(rows) == 1000 and rows[0].split()[1] == "0" and rows[-1].split()[1] == "999"
    notes = [line for line in big.stderr.splitlines() if not line.startswith("peak_rss_kb=")]
    assert notes == ["sql: 4,999,000 more rows not shown (the first 1,000 of 5,000,000); --max-rows N shows more, "
                     "--format csv or json prints every row"]
    # Holding 5 million rows took ~3.5 GB; streamed, the process stays near the size of a one-row query.
    assert _peak_kb(big.stderr) - _peak_kb(small.stderr) < 150_000, (_peak_kb(small.stderr), _peak_kb(big.stderr))
    few = bedside_process(["sql", "SELECT * FROM range(5)", "--store", str(store.root), "--max-rows", "5"])
    assert few.returncode == 0 and few.stderr == "" and few.stdout.count("│") == 5 * 2
    one_more = bedside_process(["sql", "SELECT * FROM range(6)", "--store", str(store.root), "--max-rows", "5"])
    assert one_more.stderr.splitlines() == ["sql: 1 more row not shown (the first 5 of 6); --max-rows N shows more, "
                                            "--format csv or json prints every row"]
    wrong = bedside_process(["sql", "SELECT 1", "--store", str(store.root), "--max-rows", "5", "--format", "csv"])
    assert wrong.returncode == 1 and wrong.stderr.startswith("bedside: error: --max-rows: only for the table format")


def test_a_query_that_starts_with_a_comment_says_how_to_pass_it(tmp_path: Path, sample_dataset) -> None:
    from tests.test_cli_process import bedside_process

    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    query = "-- my query\nSELECT 42 AS answer"
    done = bedside_process(["sql", query, "--store", str(store.root)])
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr == ('bedside: error: sql: a query that starts with "--" must follow a "--" separator, after '
                           'the options: bedside sql [OPTIONS] -- "-- my query ..."\n')
    passed = bedside_process(["sql", "--store", str(store.root), "--format", "json", "--", query])
    assert passed.returncode == 0 and json.loads(passed.stdout) == [{"answer": 42}], passed.stderr
    usage = bedside_process(["sql", "SELECT 1", "--no-such-option"])  # other mistakes: click's usage error, as before
    assert usage.returncode == 2 and "No such option" in usage.stderr


# -- summary: which interval is which -------------------------------------------------------------

def test_summary_table_says_whose_intervals_it_shows(tmp_path: Path, sample_dataset) -> None:
    from tests.test_cli_process import bedside_process

    store = _filled_store(tmp_path, sample_dataset)
    table = bedside_process(["summary", "--run", "r", "--store", str(store.root)])
    assert table.returncode == 0, table.stderr
    assert table.stderr.splitlines() == [
        "note: ci95 is the reference runner's percentile bootstrap interval over cases (bit-exact; answer and "
        "judge variance are inside it, a judge's systematic bias is not); `bedside compare` computes its own "
        "intervals",
        # this store has 2 cases in its smallest benchmark, where the percentile bootstrap under-covers
        "note: bootstrap intervals are optimistic below ~25 cases per benchmark (smallest here: 2): percentile "
        "intervals under-cover there (the reference's interval covers 87.5 % at 3 cases, 93.5 % at 10: "
        "docs/methods.md)"]
    assert "note" not in table.stdout and "OVERALL (macro)" in table.stdout
    as_json = bedside_process(["summary", "--run", "r", "--store", str(store.root), "--json"])
    assert as_json.returncode == 0 and as_json.stderr == "" and json.loads(as_json.stdout)["r"]["overall_ci95"]


def test_counting_the_rows_not_shown_stops_in_time(tmp_path: Path, capsys, sample_dataset, monkeypatch) -> None:
    import toolkit.sql._query

    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    monkeypatch.setattr(toolkit.sql._query, "COUNT_SECONDS", 0.0)  # a result too long to count: say "at least"
    assert main(["sql", "SELECT * FROM range(1000000)", "--store", str(store.root), "--max-rows", "3"]) == 0
    out, err = capsys.readouterr()
    assert out.count("│") == 3 * 2
    line, = err.splitlines()
    assert line.startswith("sql: at least ") and "more rows not shown (counting stopped after a few seconds)" in line
    assert 65_536 <= int(line.split()[3].replace(",", "")) < 999_997


def test_summary_names_its_interval_method_and_export_stays_the_reference(tmp_path: Path, sample_dataset) -> None:
    from tests.test_cli_process import bedside_process

    store = _filled_store(tmp_path, sample_dataset)
    table = bedside_process(["summary", "--run", "r", "--store", str(store.root), "--samples", "300"])
    assert table.returncode == 0, table.stderr
    assert "95% intervals: percentile bootstrap (reference, 300 resamples)" in table.stdout
    as_json = json.loads(bedside_process(["summary", "--run", "r", "--store", str(store.root), "--json"]).stdout)
    assert as_json["r"]["ci_method"] == "percentile bootstrap (reference, 10,000 resamples)"
    exported = bedside_process(["export", "--run", "r", "--out", str(tmp_path / "r.jsonl"), "--store",
                                str(store.root)])
    assert exported.returncode == 0, exported.stderr
    reference = json.loads((tmp_path / "r.summary.json").read_text())
    assert "ci_method" not in reference and reference == {k: v for k, v in as_json["r"].items() if k != "ci_method"}


def test_sql_help_lists_every_table_and_view_a_query_can_name(tmp_path: Path, sample_dataset) -> None:
    import re

    from tests.test_cli_process import bedside_process
    from toolkit.sql import connect

    store = Store.open(tmp_path / "st")
    store.write_dataset(sample_dataset)
    con = connect(store)
    names = [r[0] for r in con.execute("SELECT table_name FROM information_schema.tables "
                                       "WHERE table_schema = 'main'").fetchall()]
    assert {"reviews", "human_labels", "run_summary_by_judge", "run_intervals"} <= set(names)
    shown = bedside_process(["sql", "--help"])
    assert shown.returncode == 0
    assert [n for n in names if not re.search(rf"(?<![\w-]){n}(?![\w-])", shown.stdout)] == []
