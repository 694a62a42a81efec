"""A registered `bedside db` file stays current as runs land, but repeated writes pay its refresh once: a bulk
import refreshes it once at the end (also when a file fails), a collection at its end (and at most every
``db_refresh_s`` seconds while it runs), and a store with no database registered pays one stat."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests import reference_model as rm
from toolkit.cli import main
from toolkit.collect.judge import case_to_judge
from toolkit.collect.plan import ensure_run
from toolkit.collect.runner import CollectJob, collect
from toolkit.collect.settings import CollectSettings, Endpoint
from toolkit.dataset import load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.sql import _refresh as databases
from toolkit.store import Store


def _query(database: Path, queries: dict[str, str]) -> dict[str, list]:
    """Answers of a plain DuckDB in a fresh process that opens the file read-only."""
    code = ("import duckdb, json, sys\ncon = duckdb.connect(sys.argv[1], read_only=True)\n"
            "print(json.dumps({k: con.execute(q).fetchall() for k, q in json.loads(sys.argv[2]).items()}))")
    done = subprocess.run([sys.executable, "-c", code, str(database), json.dumps(queries)], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@contextmanager
def _warm_store_with_database(tmp_path: Path, seed: int, n_cases: int, warm_cases: int, **warm_options: Any):
    """A store with a small collected run ``warm`` and a registered database ``c.duckdb``, while a simulated
    provider runs: yields (store, database, endpoint, the sample's first ``n_cases`` cases, a ``prepare``)."""
    dataset = load_dataset(None)
    store = Store.open(tmp_path / "store")
    store.write_dataset(dataset)
    out = tmp_path / "c.duckdb"

    def prepare(s, job):
        return ensure_run(s, job.settings, dataset.sha256)

    with SimServer(SimConfig(latency_ms=40, seed=seed)) as sim:
        endpoint = Endpoint("sim", sim.base_url, ())
        cases = tuple(case_to_judge(c) for c in dataset.raw_cases[:n_cases])
        first = CollectSettings("warm", "sim/strong", "sim/judge", endpoint, endpoint, **warm_options)
        collect(store, [CollectJob(first, cases[:warm_cases])], prepare=prepare)
        assert main(["db", "--out", str(out), "--store", str(store.root)]) == 0
        yield store, out, endpoint, cases, prepare


@pytest.fixture
def refreshes(monkeypatch) -> list[Path]:
    """The databases refreshed in this process, one entry per refresh of one file."""
    seen: list[Path] = []
    real = databases._refresh_one

    def counted(store, database, files, version):
        seen.append(database)
        return real(store, database, files, version)

    monkeypatch.setattr(databases, "_refresh_one", counted)
    return seen


def _result_file(path: Path, sample_dataset, seed: int, rows: int) -> None:
    data = rm.make_rows(list(sample_dataset.raw_cases), seed=seed, error_rate=0.1)[:rows]
    path.write_text("".join(json.dumps(r) + "\n" for r in data))


def test_bulk_import_refreshes_the_database_once_also_when_a_file_fails(tmp_path: Path, sample_dataset,
                                                                        refreshes, capsys) -> None:
    store = tmp_path / "store"
    _result_file(tmp_path / "first.jsonl", sample_dataset, 9, 4)
    assert main(["import", str(tmp_path / "first.jsonl"), "--store", str(store)]) == 0
    out = tmp_path / "r.duckdb"
    assert main(["db", "--out", str(out), "--store", str(store)]) == 0
    results = tmp_path / "results"
    results.mkdir()
    for seed, name in enumerate(["alpha", "beta", "gamma"], start=1):
        _result_file(results / f"{name}.jsonl", sample_dataset, seed, 3 + seed)
    (results / "broken.jsonl").write_text('{"case_id": "x"}\nnot json\n')  # fails after alpha and beta
    capsys.readouterr()
    refreshes.clear()
    assert main(["import", str(results), "--store", str(store)]) == 1
    assert "broken.jsonl" in capsys.readouterr().err
    assert refreshes == [out.resolve()]  # once, at the end of the command, not once per file
    got = _query(out, {"runs": "SELECT run_id FROM run_summary ORDER BY run_id",
                       "version": "SELECT store_version FROM bedside_info"})
    assert got["runs"] == [["alpha"], ["beta"], ["first"], ["gamma"]]
    assert got["version"] == [[Store.open(store).version()]]


def test_collection_refreshes_the_database_at_its_end_not_at_every_checkpoint(tmp_path: Path, refreshes) -> None:
    with _warm_store_with_database(tmp_path, seed=3, n_cases=12, warm_cases=2, concurrency=4) as (
            store, out, endpoint, cases, prepare):
        refreshes.clear()
        # Two calls in flight, 24 calls of >= 40 ms: ~0.5 s of collection, a checkpoint every 20 ms.
        settings = CollectSettings("r", "sim/strong", "sim/judge", endpoint, endpoint, concurrency=2,
                                   checkpoint_s=0.02)
        journal_commits = []
        real_commit = Store.commit_run

        def counted_commit(self, run_id, *args, **kwargs):
            journal_commits.append(run_id)
            return real_commit(self, run_id, *args, **kwargs)

        Store.commit_run = counted_commit
        try:
            [report] = collect(store, [CollectJob(settings, cases)], prepare=prepare)
        finally:
            Store.commit_run = real_commit
    assert report.answers_ok == 12 and report.judgments_ok == 12
    assert journal_commits.count("r") >= 4  # many commits ...
    assert refreshes == [out.resolve()]  # ... one refresh, after the last of them
    got = _query(out, {"answers": "SELECT count(*) FROM answers WHERE run_id = 'r'",
                       "runs": "SELECT run_id FROM run_summary ORDER BY run_id",
                       "version": "SELECT store_version FROM bedside_info"})
    assert got == {"answers": [[12]], "runs": [["r"], ["warm"]], "version": [[store.version()]]}


def test_a_short_refresh_interval_refreshes_while_the_collection_runs(tmp_path: Path, refreshes) -> None:
    with _warm_store_with_database(tmp_path, seed=5, n_cases=8, warm_cases=1) as (store, out, endpoint, cases, prepare):
        refreshes.clear()
        settings = CollectSettings("r", "sim/strong", "sim/judge", endpoint, endpoint, concurrency=1,
                                   checkpoint_s=0.05, db_refresh_s=0.0)
        collect(store, [CollectJob(settings, cases)], prepare=prepare)
    assert len(refreshes) >= 3  # every commit refreshed: the setting is what holds them back
    assert _query(out, {"answers": "SELECT count(*) FROM answers WHERE run_id = 'r'"}) == {"answers": [[8]]}


def test_no_registered_database_costs_one_stat(tmp_path: Path, sample_dataset, refreshes, monkeypatch) -> None:
    store = Store.open(tmp_path / "store")
    store.write_dataset(sample_dataset)
    called = []
    monkeypatch.setattr(databases, "_refresh_now", lambda s: called.append(s))
    started = time.perf_counter()
    for _ in range(2000):
        databases.refresh(store)
    with store.batch():
        databases.refresh(store)
    assert called == [] and refreshes == []
    assert time.perf_counter() - started < 1.0  # ~5 us each: a stat, nothing else


def _dead_pid() -> int:
    """The id of a process that has ended and been reaped (ids are reused only after a wrap-around)."""
    done = subprocess.Popen(["true"])
    done.wait()
    return done.pid


def _registered_database(tmp_path: Path, sample_dataset) -> tuple[Store, Path]:
    from tests import analysis_sim

    store = Store.open(tmp_path / "store")
    analysis_sim.write_run(store, sample_dataset, "first", 0.2, 1)
    out = tmp_path / "r.duckdb"
    assert main(["db", "--out", str(out), "--store", str(store.root)]) == 0
    return store, out


def _write(store: Store, sample_dataset, run_id: str) -> None:
    from tests import analysis_sim

    analysis_sim.write_run(store, sample_dataset, run_id, 0.3, len(run_id), created=len(run_id))


def test_a_refresh_sweeps_temporary_files_of_killed_processes_and_nothing_else(tmp_path: Path, sample_dataset,
                                                                               refreshes) -> None:
    store, out = _registered_database(tmp_path, sample_dataset)
    dead, live = _dead_pid(), os.getppid()
    leftovers = [f".r.duckdb.{dead}.refresh", f".r.duckdb.{dead}.refresh.wal", f".r.duckdb.{dead}.tmp",
                 f".r.duckdb.{dead}.tmp.wal"]
    kept = [f".r.duckdb.{live}.refresh", f".r.duckdb.{live}.tmp", f".r.duckdb.{dead}.refresh.bak",
            f".other.duckdb.{dead}.tmp", f".r.duckdb.x{dead}.tmp", f"r.duckdb.{dead}.tmp", f".r.duckdb.{dead}.log",
            f".r.duckdb.5.{dead}.tmp"]
    for name in leftovers + kept:
        (tmp_path / name).write_text("left behind\n")
    _write(store, sample_dataset, "second")
    assert refreshes and set(refreshes) == {out.resolve()}  # a write commits each table: a refresh each
    assert sorted(p.name for p in tmp_path.iterdir() if p.name not in ("store", "r.duckdb")) == sorted(kept)


@pytest.mark.parametrize("content, ignored", [
    ("not json {", None), ('"/tmp/r.duckdb"', None), ('{"a": 1}', None),
    ("[1, 2, null]", 3), ('[["a"]]', 1), ('[""]', 1), ('["r.duckdb"]', 1), ("[GOOD, 5]", 1), ('[GOOD, "x"]', 1),
], ids=["garbage", "bare-string", "object", "numbers", "nested", "empty-string", "relative", "good-and-number",
        "good-and-relative"])
def test_a_damaged_registry_is_read_tolerantly_and_loudly(tmp_path: Path, sample_dataset, refreshes, capfd,
                                                          content: str, ignored: int | None) -> None:
    store, out = _registered_database(tmp_path, sample_dataset)
    registry = store.root / ".databases.json"
    registry.write_text(content.replace("GOOD", json.dumps(str(out.resolve()))))
    before = registry.read_text()
    capfd.readouterr()
    refreshes.clear()
    _write(store, sample_dataset, "second")
    _write(store, sample_dataset, "third")
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"bedside: warning: {registry}: registry: "), err
    good = "GOOD" in content
    assert set(refreshes) == ({out.resolve()} if good else set())
    if ignored is None:  # unreadable: left for its user, nothing refreshed
        assert "not read" in err[0] and registry.read_text() == before
        done = subprocess.run([sys.executable, "-m", "toolkit", "db", "--out", str(out), "--store", str(store.root)],
                              capture_output=True, text=True, timeout=120)  # a fresh process: nothing warned yet
        err = done.stderr.strip().splitlines()
        assert done.returncode == 0 and len(err) == 1 and "replaced" in err[0] and str(registry) in err[0], err
    else:
        assert f"{ignored} entr" in err[0] and "absolute path" in err[0] and err[0].endswith(", ignored")
    assert databases.registered(store.root) == ([out.resolve()] if good or ignored is None else [])


def test_a_huge_registry_is_not_read(tmp_path: Path, sample_dataset, refreshes, capfd) -> None:
    store, out = _registered_database(tmp_path, sample_dataset)
    registry = store.root / ".databases.json"
    registry.write_text(json.dumps([str(out.resolve())] + [f"/x/{i:07d}.duckdb" for i in range(80_000)]))
    size = registry.stat().st_size
    capfd.readouterr()
    refreshes.clear()
    _write(store, sample_dataset, "second")
    err = capfd.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(registry) in err[0] and "not read" in err[0], err
    assert refreshes == [] and registry.stat().st_size == size


def test_a_registered_file_that_is_not_ours_is_dropped_with_one_warning(tmp_path: Path, sample_dataset,
                                                                        refreshes, capfd) -> None:
    import duckdb

    store, out = _registered_database(tmp_path, sample_dataset)
    text = tmp_path / "passwd"
    text.write_text("root:x:0:0:root:/root:/bin/bash\n")
    theirs = tmp_path / "theirs.duckdb"
    con = duckdb.connect(str(theirs))
    con.execute("CREATE TABLE t AS SELECT 1 AS one")
    con.close()
    registry = store.root / ".databases.json"
    registry.write_text(json.dumps([str(out.resolve()), str(text), str(theirs)]))
    capfd.readouterr()
    _write(store, sample_dataset, "second")
    _write(store, sample_dataset, "third")
    err = capfd.readouterr().err.strip().splitlines()
    assert sorted(line.split(":")[2].strip() for line in err) == [str(text), str(theirs)], err
    assert all("dropped" in line and "bedside db --out" not in line for line in err), err
    assert databases.registered(store.root) == [out.resolve()]
    assert text.read_text().startswith("root:")


def test_a_database_file_of_this_layout_is_one_an_earlier_refresh_leaves_alone(tmp_path: Path, sample_dataset,
                                                                              refreshes) -> None:
    """Its score views read tables a refresh must fill, which an earlier bedside's refresh would not: the
    file says format 2, which that refresh (format 1 only) takes for not its own and leaves alone. This
    version still refreshes a format-1 file (views of SQL alone)."""
    import duckdb

    store, out = _registered_database(tmp_path, sample_dataset)
    con = duckdb.connect(str(out), read_only=True)
    assert con.execute("SELECT format FROM bedside_info").fetchone()[0] == "bedside-db 2"
    assert databases.is_ours(con, store.root)
    con.close()
    con = duckdb.connect(str(out))
    con.execute("UPDATE bedside_info SET format = 'bedside-db 1'")
    assert databases.is_ours(con, store.root)
    con.execute("UPDATE bedside_info SET format = 'bedside-db 3'")
    assert not databases.is_ours(con, store.root)
    con.close()
