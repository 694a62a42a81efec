"""The store played against: concurrent writers, kill -9 at random points, replaces that fail late, damaged
files. Every case ends with a readable store, no duplicate key in any table, no lost run, and the same
``bedside summary --json`` as a clean store given the same inputs. Real processes (``python -m toolkit``)
against real Delta tables; collection against the simulated provider on loopback."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests import reference_model as rm
from tests.collect_support import bedside
from toolkit.dataset import load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.sql._query import connect
from toolkit.store import Store
from toolkit.tables import TABLES

ROOT = Path(__file__).resolve().parents[1]
EXE = [sys.executable, "-m", "toolkit"]
SIM_RUN = "sim/strong"
VOLATILE = ("started_at", "finished_at")  # collection times differ between a clean and a resumed run


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    """Result files of the bundled sample: f0..f4 (different seeds) and a file that fails late."""
    folder = tmp_path_factory.mktemp("inputs")
    cases = list(load_dataset(None).raw_cases)
    files = {f"f{i}": _write(folder / f"f{i}.jsonl", rm.make_rows(cases, seed=i, answer_model=f"model-{i}"))
             for i in range(5)}
    late = rm.make_rows(cases, seed=7)
    last = max(i for i, r in enumerate(late) if "score" in r)
    late[last]["answer"] = "fine until here \ud800"  # valid JSON text, but UTF-8 cannot hold it: fails while storing
    files["late"] = folder / "late.jsonl"
    files["late"].write_text("".join(json.dumps(r) + "\n" for r in late), encoding="utf-8")
    return files


def summary(store_dir: Path, run_ids: list[str]) -> dict:
    args = [a for r in run_ids for a in ("--run", r)]
    code, out, err = bedside("summary", *args, "--store", store_dir, "--json", "--samples", "300")
    assert code == 0, err
    found = json.loads(out)
    for item in found.values():
        for key in VOLATILE:
            item.pop(key, None)
    return found


@pytest.fixture(scope="module")
def clean(inputs, tmp_path_factory) -> dict[str, dict]:
    """Summaries of every input imported alone into a clean store, in this process: what each case must give."""
    st = tmp_path_factory.mktemp("clean") / "store"
    for name in ("f0", "f1", "f2", "f3", "f4"):
        assert bedside("import", inputs[name], "--run-id", name, "--store", st)[0] == 0
    return summary(st, ["f0", "f1", "f2", "f3", "f4"])


def check_store(store_dir: Path, expected: dict[str, dict]) -> None:
    """Readable, no duplicate key, exactly the expected runs, their clean summaries; SQL sees the same rows."""
    store = Store.open(store_dir)
    con = connect(store, derived=())
    for name, table in TABLES.items():
        frame = store.read(name)
        assert frame.select(table.key).is_unique().all(), f"duplicate key in {name}"
        assert con.execute(f"select count(*) from {name}").fetchone()[0] == frame.height, name
    assert sorted(store.run_ids()) == sorted(expected)
    assert store.read("runs").height == len(expected)  # exactly one runs row per run
    cases = store.read("cases")
    assert cases.height == cases["case_id"].n_unique() * cases["dataset_sha256"].n_unique()
    if expected:
        assert summary(store_dir, sorted(expected)) == expected


def wait_for(predicate, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.002)


def log_entries(store_dir: Path, table: str) -> int:
    folder = store_dir / table / "_delta_log"
    return len(list(folder.glob("*.json"))) if folder.is_dir() else 0


def spawn(*args: object) -> subprocess.Popen:
    return subprocess.Popen([*EXE, *map(str, args)], cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)


def test_concurrent_imports_of_different_runs_into_new_stores(inputs, clean, tmp_path: Path) -> None:
    # 20 imports: five new stores, four processes racing into each (dataset registration, table creation
    # and runs commits all contend).
    stores = [tmp_path / f"s{i}" for i in range(5)]
    procs = [(st, spawn("import", inputs[f"f{k}"], "--run-id", f"f{k}", "--store", st))
             for st in stores for k in range(4)]
    for _, proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
    for st in stores:
        check_store(st, {f"f{k}": clean[f"f{k}"] for k in range(4)})


def test_same_run_imports_exactly_one_wins(inputs, clean, tmp_path: Path) -> None:
    st = tmp_path / "store"
    procs = [spawn("import", inputs["f0"], "--run-id", "f0", "--store", st) for _ in range(5)]
    results = [(p.wait(120), p.communicate()[1]) for p in procs]
    assert sorted(code for code, _ in results) == [0, 1, 1, 1, 1], results
    for code, err in results:
        if code:
            lines = err.strip().splitlines()
            assert len(lines) == 1 and lines[0].startswith("bedside: error:"), err
            assert "is being written by pid" in lines[0] or "exists" in lines[0], err
    check_store(st, {"f0": clean["f0"]})


def _kill_at_random(proc: subprocess.Popen, started, rng: random.Random, spread: float) -> None:
    wait_for(lambda: started() or proc.poll() is not None)
    time.sleep(rng.uniform(0, spread))
    proc.send_signal(signal.SIGKILL)
    proc.wait(30)


def test_kill_9_during_import_and_replace(inputs, clean, tmp_path: Path) -> None:
    rng = random.Random(11)
    # Six imports killed while writing (from the first commit on), three at a time.
    stores = [tmp_path / f"i{i}" for i in range(6)]
    for batch in (stores[:3], stores[3:]):
        victims = [(st, spawn("import", inputs["f1"], "--run-id", "f1", "--store", st)) for st in batch]
        for st, proc in victims:
            _kill_at_random(proc, lambda st=st: log_entries(st, "cases") > 0, rng, 0.25)
        for st, _ in victims:
            done = Store.open(st).has_run("f1")  # killed after its runs commit: the import is whole
            check_store(st, {"f1": clean["f1"]} if done else {})
            if not done:
                code, _, err = bedside("import", inputs["f1"], "--run-id", "f1", "--store", st)
                assert code == 0, err  # the killed import left nothing that blocks (or duplicates) the next one
            check_store(st, {"f1": clean["f1"]})
    # Six replaces killed while writing: the run is the old one or the new one, whole, never neither.
    stores = [tmp_path / f"r{i}" for i in range(6)]
    for st in stores:
        assert bedside("import", inputs["f2"], "--run-id", "x", "--store", st)[0] == 0
    old, new = _as("x", clean["f2"]), _as("x", clean["f3"])
    for batch in (stores[:3], stores[3:]):
        before = {st: log_entries(st, "answers") for st in batch}
        victims = [(st, spawn("import", inputs["f3"], "--run-id", "x", "--replace", "--store", st)) for st in batch]
        for st, proc in victims:
            _kill_at_random(proc, lambda st=st: log_entries(st, "answers") > before[st], rng, 0.15)
        for st, _ in victims:
            state = summary(st, ["x"])
            assert state in (old, new), "a killed replace left a mixed or empty run"
            check_store(st, state)
            assert bedside("import", inputs["f3"], "--run-id", "x", "--replace", "--store", st)[0] == 0
            check_store(st, new)


def _as(run_id: str, item: dict) -> dict:
    return {run_id: item}


@pytest.mark.parametrize("failing_commit", [1, 3, 4])  # answers, decisions, the runs commit
def test_a_replace_that_fails_late_keeps_the_old_run(inputs, clean, tmp_path: Path, monkeypatch,
                                                     failing_commit: int) -> None:
    import deltalake

    st = tmp_path / "store"
    assert bedside("import", inputs["f0"], "--run-id", "f0", "--store", st)[0] == 0
    version = Store.open(st).version()
    # A file whose last row cannot be stored (a lone surrogate in an answer): refused with one line.
    code, _, err = bedside("import", inputs["late"], "--run-id", "f0", "--replace", "--store", st)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and lines[0].startswith("bedside: error:") and "Traceback" not in err, err
    # A disk that fills up at a data commit or at the runs commit of a valid replace: one line too.
    real, calls = deltalake.write_deltalake, []

    def full_disk(*args, **kwargs):
        calls.append(args[0])
        if len(calls) == failing_commit:
            raise OSError(28, "No space left on device")
        return real(*args, **kwargs)

    monkeypatch.setattr(deltalake, "write_deltalake", full_disk)
    code, _, err = bedside("import", inputs["f1"], "--run-id", "f0", "--replace", "--store", st)
    monkeypatch.setattr(deltalake, "write_deltalake", real)
    lines = err.strip().splitlines()
    assert code == 1 and len(lines) == 1 and "no space left on " in lines[0] and "Traceback" not in err, err
    assert Store.open(st).version() == version  # no runs commit: the old run stands as it was
    check_store(st, {"f0": clean["f0"]})
    assert bedside("import", inputs["f1"], "--run-id", "f0", "--replace", "--store", st)[0] == 0
    check_store(st, _as("f0", clean["f1"]))


@pytest.fixture(scope="module")
def sim():
    with SimServer(SimConfig(latency_ms=15, seed=3)) as server:
        yield server


def _collect_args(sim: SimServer, st: Path) -> list[str]:
    return ["run", "--answer-model", SIM_RUN, "--judge-model", "sim/judge", "--base-url", sim.base_url,
            "--store", str(st), "--concurrency", "4", "--progress", "none"]


def _judge_args(sim: SimServer, st: Path) -> list[str]:
    return ["judge", "--run", SIM_RUN, "--judge-model", "sim/judge", "--pass", "2", "--judge-base-url",
            sim.base_url, "--store", str(st), "--concurrency", "4", "--progress", "none"]


def journal_lines(st: Path) -> int:
    total = 0
    for path in (st / "journal").rglob("*.jsonl") if (st / "journal").is_dir() else ():
        try:
            total += len(path.read_bytes().splitlines())
        except FileNotFoundError:
            pass
    return total


def test_kill_9_during_run_and_judge(sim, tmp_path: Path) -> None:
    rng = random.Random(5)
    reference = tmp_path / "clean"
    assert bedside(*_collect_args(sim, reference))[0] == 0
    collected = summary(reference, [SIM_RUN])
    assert bedside(*_judge_args(sim, reference))[0] == 0
    judged = summary(reference, [SIM_RUN])
    # Four runs killed after a random number of completed calls (inside checkpoints or between them).
    for i in range(4):
        st = tmp_path / f"run{i}"
        proc = subprocess.Popen([*EXE, *_collect_args(sim, st)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        threshold = rng.randint(1, 40)
        _kill_at_random(proc, lambda st=st, n=threshold: journal_lines(st) >= n or log_entries(st, "answers") > 1,
                        rng, 0.3)
        Store.open(st).read("answers")  # readable as the kill left it
        assert bedside(*_collect_args(sim, st))[0] == 0
        check_store(st, collected)
        assert not journal_lines(st)
        # ... then a judge pass killed the same way, and finished.
        proc = subprocess.Popen([*EXE, *_judge_args(sim, st)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        _kill_at_random(proc, lambda st=st: journal_lines(st) >= rng.randint(1, 20), rng, 0.3)
        assert bedside(*_judge_args(sim, st))[0] == 0
        check_store(st, judged)
        steps = json.loads(Store.open(st).run(SIM_RUN)["steps"])
        assert {s["kind"] for s in steps} == {"run", "judge"}  # every step kept, in the one runs row


def test_replace_during_a_collection_is_refused_and_keeps_its_journal(inputs, tmp_path: Path) -> None:
    st = tmp_path / "store"
    with SimServer(SimConfig(latency_ms=150, seed=3)) as server:
        proc = subprocess.Popen([*EXE, *_collect_args(server, st)], cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE)
        try:
            wait_for(lambda: journal_lines(st) > 0)
            code, _, err = bedside("import", inputs["f0"], "--run-id", SIM_RUN, "--replace", "--store", st)
            assert code == 1 and f"is being written by pid {proc.pid}" in err, err
            assert len(err.strip().splitlines()) == 1
        finally:
            proc.send_signal(signal.SIGKILL)
            proc.wait(30)
        assert journal_lines(st) > 0  # the collector's paid calls are still there, to be recovered
        served = server.stats()["chat_completions"]["served_ok"]
        assert bedside(*_collect_args(server, st))[0] == 0
    store = Store.open(st)
    assert store.run(SIM_RUN)["source"] == "collected" and store.read("runs").height == 1
    answers = store.read("answers").filter(pl.col("error").is_null())
    assert answers.height == answers["case_id"].n_unique() == len(load_dataset(None).raw_cases)
    assert served > 0


def test_a_truncated_part_file_costs_its_run_not_the_store(inputs, clean, tmp_path: Path) -> None:
    st = tmp_path / "store"
    for name in ("f0", "f1", "f2"):
        assert bedside("import", inputs[name], "--run-id", name, "--store", st)[0] == 0
    victim = Store.open(st).files("decisions", "f1")[0]
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])
    code, out, err = bedside("summary", "--all", "--store", st, "--json", "--samples", "300")
    assert code == 0 and str(victim) in err and len(err.strip().splitlines()) == 1, err
    found = json.loads(out)
    for item in found.values():
        for key in VOLATILE:
            item.pop(key, None)
    assert found == {"f0": clean["f0"], "f2": clean["f2"]}
    code, _, err = bedside("export", "--run", "f0", "--out", tmp_path / "f0.jsonl", "--store", st)
    assert code == 0, err
    code, _, err = bedside("summary", "--run", "f1", "--store", st, "--json")
    assert code == 1 and str(victim) in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err
    # compare reads the stored case scores (not decisions) under the default judge: damage one of those.
    scores = Store.open(st).files("case_scores", "f1")[0]
    scores.write_bytes(scores.read_bytes()[: scores.stat().st_size // 2])
    code, out, err = bedside("compare", "--all", "--store", st, "--format", "json", "--samples", "200")
    assert code == 0 and str(scores) in err, err
    assert {r["run_id"] for r in json.loads(out)["leaderboard"]} == {"f0", "f2"}


def test_a_new_store_whose_marker_another_creator_is_writing_is_one(tmp_path: Path) -> None:
    """Two imports create one new store: the first writes its marker beside the folder's other entries as
    ``.bedside-store.<pid>.tmp``; the second, checking the folder meanwhile, must not call it foreign."""
    from toolkit.store.paths import MARKER, check_store_folder, claim_store_folder

    root = tmp_path / "new"
    (root / ".locks").mkdir(parents=True)
    (root / f".{MARKER}.4242.tmp").write_text("bedside-store 3\n")
    check_store_folder(root)
    claim_store_folder(root)
    assert (root / MARKER).is_file()
