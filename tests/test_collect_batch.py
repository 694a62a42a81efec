"""Batch mode against the simulated provider's Files + Batch API: a crash or kill at any point of
ingesting stores every line once, a batch the provider fails is reported once and replaced, a pending
batch blocks direct runs until it is collected or cancelled, and batch errors name the right model."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import polars as pl
import pytest

from tests.collect_support import Recorder, bedside, completion
from toolkit.collect.api import evaluate
from toolkit.sim import SimConfig, SimServer
from toolkit.store import Store
from toolkit.summary import summarize
from toolkit.tables import TABLES

ROOT = Path(__file__).resolve().parents[1]
CHILD = """
import os, sys
from toolkit.collect import batch
from toolkit.collect.journal import RunJournal
{patch}
from toolkit.collect.api import evaluate
evaluate("sim/strong", "sim/judge", store=sys.argv[1], base_url=sys.argv[2], run_id="r", limit=3, batch=True,
         progress="none", say=lambda line: None)
"""
# Each patch makes the child die as kill -9 would, at one point of collecting a batch.
KILLS = {
    # the answer batch's lines are stored, its state not yet cleared
    "after_answers": """
clear = batch.BatchRun.save_state
def save_state(self, state):
    if state is None:
        os._exit(9)
    clear(self, state)
batch.BatchRun.save_state = save_state
""",
    # the judge batch's lines are stored, its state not yet cleared
    "after_judgments": """
clear, cleared = batch.BatchRun.save_state, []
def save_state(self, state):
    if state is None:
        cleared.append(1)
        if len(cleared) == 2:
            os._exit(9)
    clear(self, state)
batch.BatchRun.save_state = save_state
""",
    # two of three answer lines are in the journal, nothing is checkpointed
    "mid_ingest": """
append, done = RunJournal.append_many, []
def append_many(self, records):
    append(self, records)
    done.append(1)
    if len(done) == 2:
        os._exit(9)
RunJournal.append_many = append_many
""",
}


def child(patch: str, store: Path, sim: SimServer) -> int:
    return subprocess.run([sys.executable, "-c", CHILD.format(patch=patch), str(store), sim.base_url], cwd=ROOT,
                          timeout=60).returncode


def assert_once_each(store: Store, n: int) -> None:
    for table in ("answers", "judgments", "decisions"):
        frame = store.read(table, ["r"])
        assert frame.select(TABLES[table].key).is_unique().all(), f"duplicate keys in {table}"
    assert store.read("answers", ["r"]).height == n
    assert store.read("judgments", ["r"]).filter(pl.col("error").is_null()).height == n
    assert summarize(store, ["r"])["r"]["completed_cases"] == n


@pytest.mark.parametrize("kill", sorted(KILLS))
def test_a_kill_while_ingesting_a_batch_then_resume_stores_every_line_once(tmp_path: Path, kill: str) -> None:
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(batch_delay_s=0.02)) as sim:
        assert child(KILLS[kill], store_dir, sim) == 9
        said: list[str] = []
        report = evaluate("sim/strong", "sim/judge", store=store_dir, base_url=sim.base_url, run_id="r", limit=3,
                          batch=True, progress="none", say=said.append)
        paid = sim.stats()["batches"]["by_model"]
    assert {m: paid[m]["served_ok"] for m in paid} == {"sim/strong": 3, "sim/judge": 3}  # each line paid once
    stored_before = {"after_answers": (3, 0), "after_judgments": (3, 3), "mid_ingest": (2, 0)}[kill]
    assert (report.skipped_answers, report.skipped_judgments) == stored_before
    assert (report.answers_ok, report.judgments_ok) == (3 - stored_before[0], 3 - stored_before[1])
    assert_once_each(Store.open(store_dir), 3)


def test_a_failed_batch_is_reported_once_and_the_rerun_submits_a_new_one(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(batch_failures=1, batch_delay_s=0.02)) as sim:
        args = ("run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url", sim.base_url,
                "--store", store_dir, "--run-id", "r", "--limit", "3", "--batch")
        code, _, failed = bedside(*args)
        assert code == 1 and "answer batch batch_" in failed and "server_error" in failed, failed
        assert not (store_dir / "journal" / "r" / "batch.json").exists()  # forgotten, not polled forever
        code, out, err = bedside(*args)
        batches = sim.stats()["batches"]
    assert code == 0, err
    assert "failed at the provider" in failed and "run the same command again to submit a new batch" in failed
    assert "r: 3 answers, 3 judgments by sim/judge" in out
    assert (batches["failed"], batches["completed"]) == (1, 2)
    assert_once_each(Store.open(store_dir), 3)


def test_a_pending_batch_blocks_a_direct_run_until_cancelled(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(batch_delay_s=1.0)) as sim:
        args = ("run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url", sim.base_url,
                "--store", str(store_dir), "--limit", "3", "--progress", "none")
        proc = subprocess.Popen([sys.executable, "-m", "toolkit", *args, "--batch"], cwd=ROOT,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        state = store_dir / "journal" / "sim%2Fstrong" / "batch.json"
        deadline = time.monotonic() + 30
        while not (state.exists() and json.loads(state.read_text()).get("batch_id")):
            assert time.monotonic() < deadline and proc.poll() is None, "no batch was submitted"
            time.sleep(0.01)
        batch_id = json.loads(state.read_text())["batch_id"]
        proc.kill()
        proc.wait(10)
        code, _, err = bedside(*args)  # a direct run would pay for the batch's calls again
        assert code == 1 and f"has answer batch {batch_id} in flight" in err and "--cancel-batch" in err, err
        assert sim.stats()["chat_completions"]["received"] == 0 and state.exists()
        code, out, err = bedside(*args, "--cancel-batch")
        assert code == 0, err
        assert f"answer batch {batch_id} cancelled" in out and not state.exists()
        code, out, err = bedside(*args)
        assert code == 0, err
        batches, direct = sim.stats()["batches"], sim.stats()["chat_completions"]
    assert batches["cancelled"] == 1 and batches["created"] == 1
    paid = batches["by_model"].get("sim/strong", {}).get("served_ok", 0) + direct["by_model"]["sim/strong"]["served_ok"]
    store = Store.open(store_dir)
    assert paid == 3 == store.read("answers").height  # lines the batch finished were stored, not bought again
    assert store.read("answers").select("case_id", "attempt").is_unique().all()


def test_a_batch_found_after_a_crash_is_collected_not_announced_as_submitted(tmp_path: Path) -> None:
    # died after batches.create, before the batch id was saved: the rerun finds it by its input file
    patch = """
find = batch.BatchRun._find_batch
async def find_then_die(self, state):
    await find(self, state)
    await self.client(state["kind"]).sdk.batches.create(input_file_id=state["input_file_id"],
                                                         endpoint="/v1/chat/completions", completion_window="24h")
    os._exit(9)
batch.BatchRun._find_batch = find_then_die
"""
    with SimServer(SimConfig(batch_delay_s=0.02)) as sim:
        assert child(patch, tmp_path / "store", sim) == 9
        said: list[str] = []
        evaluate("sim/strong", "sim/judge", store=tmp_path / "store", base_url=sim.base_url, run_id="r", limit=3,
                 batch=True, progress="none", say=said.append)
        batches = sim.stats()["batches"]
    assert any("answer batch batch_" in line and "was already submitted; collecting it" in line for line in said)
    assert not any("answer batch" in line and "submitted (" in line for line in said), said
    assert any("judge batch batch_" in line and "submitted (3 requests)" in line for line in said)
    assert batches["created"] == 2 and batches["served_ok"] == 6
    assert_once_each(Store.open(tmp_path / "store"), 3)


def test_batch_errors_name_the_answer_model_and_a_missing_batch_api(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SIM_BATCH_KEY", "sk-wrong-0000000000000000")
    with SimServer(SimConfig(api_key="sk-right-1111111111111111")) as sim:
        code, _, err = bedside("run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url",
                               sim.base_url, "--api-key-env", "SIM_BATCH_KEY", "--store", tmp_path / "a", "--limit",
                               "1", "--batch")
    assert code == 1 and "HTTP 401, answer model 'sim/strong'" in err and "$SIM_BATCH_KEY" in err, err
    assert "judge" not in err
    with Recorder(lambda body: completion("x")) as rec:  # a chat-only endpoint: no /files, no /batches
        code, _, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                               "--judge-base-url", rec.base_url, "--store", tmp_path / "b", "--limit", "1", "--batch")
    assert code == 1 and "has no Batch API (HTTP 404 on POST /files); run without --batch" in err, err
    assert "not found" not in err.split("HTTP 404")[0]
