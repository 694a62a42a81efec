"""Durability: `bedside run` killed with SIGKILL or stopped with Ctrl-C mid-run, then resumed, pays for no
completed call twice and ends with a complete store without duplicate keys."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import polars as pl

from tests.collect_support import bedside
from toolkit.collect.sim import SimConfig, SimServer
from toolkit.dataset import load_dataset
from toolkit.journal import RunJournal
from toolkit.store import Store
from toolkit.summary import summarize
from toolkit.tables import TABLES

ROOT = Path(__file__).resolve().parents[1]
RUN = "sim/strong"


def command(sim: SimServer, store: Path, *extra: str) -> list[str]:
    return [sys.executable, "-m", "toolkit", "run", "--answer-model", RUN, "--judge-model", "sim/judge",
            "--base-url", sim.base_url, "--store", str(store), "--concurrency", "4", "--progress", "plain", *extra]


def wait_for(predicate, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError("timed out")
        time.sleep(0.005)


def assert_complete(store: Store, n: int) -> None:
    for table in ("answers", "judgments", "decisions"):
        frame = store.read(table, [RUN])
        assert frame.select(TABLES[table].key).is_unique().all(), f"duplicate keys in {table}"
    answers, judgments = store.read("answers", [RUN]), store.read("judgments", [RUN])
    assert answers.filter(pl.col("error").is_null())["case_id"].n_unique() == n == answers.height
    assert judgments.filter(pl.col("error").is_null()).height == n
    seqs = pl.concat([answers["seq"], judgments["seq"]])
    assert seqs.is_unique().all()
    assert summarize(store, [RUN])[RUN]["completed_cases"] == n
    assert not list((store.root / "journal").rglob("*.jsonl"))  # everything checkpointed at the end


def stored_successes(store: Store) -> tuple[int, int]:
    with store.lock(RUN):
        RunJournal(store, RUN).recover()  # what a resume sees first
    answers, judgments = store.read("answers", [RUN]), store.read("judgments", [RUN])
    return (answers.filter(pl.col("error").is_null()).height, judgments.filter(pl.col("error").is_null()).height)


def test_sigkill_mid_run_then_resume_pays_nothing_twice(tmp_path: Path) -> None:
    n = len(load_dataset(None).raw_cases)
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(latency_ms=40, seed=5)) as sim:
        proc = subprocess.Popen(command(sim, store_dir), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        wait_for(lambda: sim.stats()["chat_completions"]["served_ok"] >= 25)
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        store = Store.open(store_dir)
        store.read("answers")  # readable as the kill left it
        answered, judged = stored_successes(store)
        assert 0 < answered < n or 0 < judged < n
        before = sim.stats()["chat_completions"]
        resumed = subprocess.run(command(sim, store_dir), cwd=ROOT, capture_output=True, text=True, timeout=60)
        after = sim.stats()["chat_completions"]
    assert resumed.returncode == 0, resumed.stderr
    assert f"({answered} answers and {judged} judgments already stored)" in resumed.stdout
    paid = {m: after["by_model"][m]["served_ok"] - before["by_model"][m]["served_ok"] for m in (RUN, "sim/judge")}
    assert paid == {RUN: n - answered, "sim/judge": n - judged}  # only the work that had not completed
    assert after["duplicates_ok"] <= 4  # at most the calls in flight when the process died
    assert_complete(store, n)


def test_ctrl_c_stops_cleanly_and_the_rerun_finishes(tmp_path: Path) -> None:
    n = len(load_dataset(None).raw_cases)
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(latency_ms=40, seed=6)) as sim:
        proc = subprocess.Popen(command(sim, store_dir), cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        wait_for(lambda: sim.stats()["chat_completions"]["served_ok"] >= 10)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err
        store = Store.open(store_dir)
        assert not list((store_dir / "journal").rglob("*.jsonl"))  # checkpointed on the way out
        answered = store.read("answers").filter(pl.col("error").is_null()).height
        assert 0 < answered < n
        before = sim.stats()["chat_completions"]["by_model"][RUN]["served_ok"]
        resumed = subprocess.run(command(sim, store_dir), cwd=ROOT, capture_output=True, text=True, timeout=60)
        paid = sim.stats()["chat_completions"]["by_model"][RUN]["served_ok"] - before
    assert resumed.returncode == 0, resumed.stderr
    assert paid == n - answered
    assert_complete(store, n)


def test_a_second_writer_on_the_same_run_is_refused(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    with SimServer(SimConfig()) as sim, store.lock(RUN):  # another collector holds the run
        code, _, err = bedside("run", "--answer-model", RUN, "--judge-model", "sim/judge", "--base-url",
                               sim.base_url, "--store", store.root, "--limit", "1", "--progress", "none")
        received = sim.stats()["chat_completions"]["received"]
    assert code == 1 and "being written by another process" in err and received == 0


def test_resume_refuses_another_model_or_dataset(tmp_path: Path) -> None:
    with SimServer(SimConfig()) as sim:
        args = ("run", "--judge-model", "sim/judge", "--base-url", sim.base_url, "--store", tmp_path / "s",
                "--run-id", "r", "--progress", "none")
        assert bedside(*args, "--answer-model", "sim/weak", "--limit", "1")[0] == 0
        code, _, err = bedside(*args, "--answer-model", "sim/strong", "--limit", "1")
        assert code == 1 and "holds answers of 'sim/weak'" in err
        other = tmp_path / "one.jsonl"
        case = load_dataset(None).raw_cases[0]
        other.write_text(json.dumps(case) + "\n")
        code, _, err = bedside(*args, "--answer-model", "sim/weak", "--dataset", other)
        assert code == 1 and "different --dataset" in err
