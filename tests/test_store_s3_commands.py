"""Every command against an ``s3://`` store on a real S3 API on loopback (moto, ``tests/s3_support.py``), as
real processes: collect (run, judge against the simulated provider), import, read (runs, summary, compare,
items, harms, agreement, report, sql, export, then audit of the export), manage (rename, rm), and ``db``,
whose views name the store's s3:// files for a DuckDB with httpfs (never downloaded here)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import duckdb
import pytest

from tests.s3_support import s3_env, s3_server, s3_store  # noqa: F401 - fixtures
from tests.test_store_s3 import _command, _results, bedside
from toolkit.sim import SimConfig, SimServer
from toolkit.store import Store


def _ok(args: list[str]) -> str:
    done = bedside(args)
    assert done.returncode == 0, (args, done.stderr)
    return done.stdout


def test_every_command_runs_on_an_s3_store(s3_env, s3_store: str, tmp_path: Path, sample_dataset,
                                          monkeypatch) -> None:
    store = ["--store", s3_store]
    files = _results(tmp_path / "results", sample_dataset, ["alpha"], rows=12)
    with SimServer(SimConfig()) as sim:
        _ok(["run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url", sim.base_url,
             "--limit", "4", "--progress", "none", "--run-id", "collected", *store])
        _ok(["judge", "--run", "collected", "--judge-model", "sim/judge", "--pass", "2", "--judge-base-url",
             sim.base_url, "--progress", "none", *store])
    _ok(["import", str(files["alpha"]), *store])
    reads = {  # read commands at once (they only read): each as its own process
        "runs": ["runs", "--json", *store],
        "summary": ["summary", "--all", "--json", "--samples", "200", *store],
        "compare": ["compare", "--all", "--samples", "200", *store],
        "items": ["items", "--all", *store],
        "harms": ["harms", "--all", "--samples", "200", *store],
        "agreement": ["agreement", "--run", "collected", *store],
        "report": ["report", "--all", "--samples", "200", "--out", str(tmp_path / "report"), *store],
        "sql": ["sql", "SELECT run_id, count(*) AS n FROM answers GROUP BY run_id ORDER BY run_id", *store],
        "refused": ["sql", "SELECT * FROM read_text('/etc/passwd')", *store],
        "export": ["export", "--run", "alpha", "--out", str(tmp_path / "alpha.jsonl"), *store],
    }
    started = {name: subprocess.Popen(_command(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
               for name, args in reads.items()}
    done = {name: (proc.wait(300), *proc.communicate()) for name, proc in started.items()}
    for name, (code, _, err) in done.items():
        assert (code != 0 and err.count("\n") == 1) if name == "refused" else code == 0, (name, err)
    assert sorted(r["run_id"] for r in json.loads(done["runs"][1])) == ["alpha", "collected"]
    assert set(json.loads(done["summary"][1])) == {"alpha", "collected"}
    assert (tmp_path / "report" / "index.html").is_file()
    assert s3_store in (tmp_path / "report" / "report.md").read_text()
    assert "alpha" in done["sql"][1] and "collected" in done["sql"][1]
    audit = bedside(["audit", str(tmp_path / "alpha.jsonl"), "--dataset", "data/sample"])
    assert audit.returncode in (0, 1) and audit.stderr.count("\n") <= 1, audit.stderr
    _ok(["runs", "rename", "alpha", "beta", *store])
    _ok(["runs", "rm", "beta", "--yes", *store])
    assert Store.open(s3_store).run_ids() == ["collected"]
    assert not Path("s3:").exists()


def test_sql_reads_an_s3_store_like_the_same_local_store(s3_env, s3_store: str, tmp_path: Path,
                                                         sample_dataset) -> None:
    """``bs.connect`` over an s3 store (Arrow datasets of its visible files: no DuckDB extension) gives the
    rows the local store gives, derived views included."""
    from toolkit.cli import main
    from toolkit.sql import connect

    files = _results(tmp_path / "results", sample_dataset, ["alpha", "beta"], rows=10)
    local = tmp_path / "local"
    for path in files.values():
        assert main(["import", str(path), "--store", s3_store]) == 0
        assert main(["import", str(path), "--store", str(local)]) == 0
    query = ("SELECT run_id, benchmark, mean, n FROM benchmark_scores ORDER BY ALL")
    with connect(Store.open(s3_store), derived=("benchmark_scores",)) as remote, \
            connect(Store.open(local), derived=("benchmark_scores",)) as here:
        assert remote.sql(query).fetchall() == here.sql(query).fetchall()
        count = "SELECT count(*) FROM decisions"
        assert remote.sql(count).fetchall() == here.sql(count).fetchall()
        with pytest.raises(duckdb.Error):
            remote.sql("SELECT * FROM read_text('/etc/passwd')").fetchall()
    dataset = Store.open(s3_store).arrow_dataset("answers")
    assert dataset.count_rows() == Store.open(local).arrow_dataset("answers").count_rows()
    rows = dataset.to_table()  # the partition column lives in the paths: not a column of null values
    assert "part" not in rows.column_names and rows.column("write_id").null_count == 0


def test_db_on_an_s3_store_names_its_s3_files_for_duckdb_with_httpfs(s3_env, s3_store: str, tmp_path: Path,
                                                                      sample_dataset) -> None:
    """The views of ``bedside db`` over an s3 store read exactly the store's visible s3:// files, after httpfs is
    loaded (never installed) and a temporary secret of the AWS environment is made; without httpfs the command
    says so in one line and writes nothing."""
    from toolkit.sql._database import s3_statements
    from toolkit.sql._refresh import current_files
    from toolkit.sql._views import statements

    files = _results(tmp_path / "results", sample_dataset, ["alpha"], rows=6)
    _ok(["import", str(files["alpha"]), "--store", s3_store])
    store = Store.open(s3_store)
    listed = current_files(store)
    assert listed["answers"] and all(f.startswith(f"{s3_store}/answers/part=alpha/") for f in listed["answers"])
    text = "\n".join(statements(listed))
    for table, paths in listed.items():
        for path in paths:
            assert f"'{path}'" in text
    assert "read_parquet(['s3://" in text and "delta_scan" not in text
    setup = s3_statements()
    host = s3_env.endpoint.split("://", 1)[1]
    assert setup[:2] == ["SET autoinstall_known_extensions = false", "LOAD httpfs"]
    assert setup[2] == ("CREATE TEMPORARY SECRET bedside_s3 (TYPE s3, KEY_ID 'testing', SECRET 'testing', "
                        f"REGION 'us-east-1', ENDPOINT '{host}', URL_STYLE 'path', USE_SSL false)")
    assert duckdb.connect().extract_statements(setup[2])  # the secret's SQL parses (it needs httpfs to run)
    out = tmp_path / "store.duckdb"
    done = bedside(["db", "--out", str(out), "--store", s3_store])
    try:
        duckdb.connect().execute("LOAD httpfs")
        has_httpfs = True
    except duckdb.Error:
        has_httpfs = False
    if has_httpfs:
        assert done.returncode == 0, done.stderr
    else:
        assert done.returncode == 1 and done.stderr.count("\n") == 1 and "httpfs" in done.stderr, done.stderr
        assert not out.exists() and list(tmp_path.glob("store.duckdb*")) == []
