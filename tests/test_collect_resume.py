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
from toolkit.sim import SimConfig, SimServer
from toolkit.dataset import load_dataset
from toolkit.collect.api import plan_evaluation
from toolkit.collect.journal import pending_rows
from toolkit.store import Store
from toolkit.summary import summarize
from toolkit.tables import TABLES

ROOT = Path(__file__).resolve().parents[1]
RUN = "sim/strong"


def command(sim: SimServer, store: Path, *extra: str) -> list[str]:
    defaults = [(flag, value) for flag, value in (("--concurrency", "4"), ("--progress", "plain")) if flag not in extra]
    return [sys.executable, "-m", "toolkit", "run", "--answer-model", RUN, "--judge-model", "sim/judge",
            "--base-url", sim.base_url, "--store", str(store), *(x for pair in defaults for x in pair), *extra]


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
    """Successful answers and judgments a killed run left, in Parquet and in its journal, read without
    recovering anything (the resumed process must do the recovery itself). A journal whose rows of a
    table were already committed under its name (its write id) is not counted twice."""
    ok = {t: store.read(t, [RUN]).filter(pl.col("error").is_null()).height for t in ("answers", "judgments")}
    for table, rows in pending_rows(store, RUN).items():  # journal rows not committed yet
        if table in ok:
            ok[table] += sum(1 for r in rows if r.get("error") is None)
    return ok["answers"], ok["judgments"]


def journal_lines(store_dir: Path) -> int:
    """Lines in the journals under a store (0 while it has none); a journal checkpointed away meanwhile counts 0."""
    total = 0
    for path in (store_dir / "journal").rglob("*.jsonl") if (store_dir / "journal").is_dir() else ():
        try:
            total += len(path.read_bytes().splitlines())
        except FileNotFoundError:
            pass
    return total


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
        assert journal_lines(store_dir) > 0  # completed calls the killed process never checkpointed
        answered, judged = stored_successes(store)
        assert 0 < answered < n or 0 < judged < n
        due = plan_evaluation(RUN, "sim/judge", store=store_dir, base_url=sim.base_url).dry_run()
        expected = [(kind, calls) for kind, calls in (("answer", n - answered), ("judge", n - judged)) if calls]
        assert [(e.kind, e.calls) for e in due.estimates] == expected
        assert journal_lines(store_dir) > 0  # the dry run read the journal and left it alone
        before = sim.stats()["chat_completions"]
        resumed = subprocess.run(command(sim, store_dir), cwd=ROOT, capture_output=True, text=True, timeout=60)
        after = sim.stats()["chat_completions"]
    assert resumed.returncode == 0, resumed.stderr
    assert f"({answered} answers and {judged} judgments already stored)" in resumed.stdout
    paid = {m: after["by_model"][m]["served_ok"] - before["by_model"][m]["served_ok"] for m in (RUN, "sim/judge")}
    assert paid == {RUN: n - answered, "sim/judge": n - judged}  # only the work that had not completed
    assert after["duplicates_ok"] <= 4  # at most the calls in flight when the process died
    assert_complete(store, n)


def test_ctrl_c_while_calls_wait_on_a_rate_limit_stops_cleanly_and_the_rerun_finishes(tmp_path: Path) -> None:
    # Half the calls get a 429 with a Retry-After: the adaptive limit shrinks far below the 32 workers, so
    # Ctrl-C cancels calls in flight, calls sleeping on the rate limit and calls queued for a slot at once.
    n = len(load_dataset(None).raw_cases)
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(latency_ms=40, seed=6, rate_429=0.5, retry_after_s=0.05)) as sim:
        rate_limited = command(sim, store_dir, "--concurrency", "32", "--max-retries", "50")
        proc = subprocess.Popen(rate_limited, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        stats = lambda: sim.stats()["chat_completions"]  # noqa: E731
        wait_for(lambda: stats()["faults"]["429"] >= 12 and stats()["served_ok"] >= 4)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=20)
        assert proc.returncode == 130, err
        assert "interrupted" in err and "Traceback" not in err and "Error" not in err, err
        store = Store.open(store_dir)
        assert not list((store_dir / "journal").rglob("*.jsonl"))  # checkpointed on the way out
        answered = store.read("answers").filter(pl.col("error").is_null()).height
        assert 0 < answered < n
        before = sim.stats()["chat_completions"]["by_model"][RUN]["served_ok"]
        resumed = subprocess.run(rate_limited, cwd=ROOT, capture_output=True, text=True, timeout=90)
        paid = sim.stats()["chat_completions"]["by_model"][RUN]["served_ok"] - before
    assert resumed.returncode == 0, resumed.stderr
    assert paid == n - answered
    assert_complete(store, n)


def test_ctrl_c_during_the_demo_exits_130_without_a_leaderboard(tmp_path: Path) -> None:
    # Four models share one endpoint's 16 slots: most of the 64 workers are queued for a slot when Ctrl-C lands.
    store_dir = tmp_path / "demo"
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", "demo", "--store", str(store_dir), "--progress", "none"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    wait_for(lambda: journal_lines(store_dir) > 0)
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, (out, err)
    assert "interrupted" in err and "Traceback" not in err, err
    assert "Leaderboard" not in out and "│" not in out  # no ranking of partly collected runs
    assert "sim/strong: " in out  # what each run collected before the stop


def test_a_second_writer_on_the_same_run_is_refused(tmp_path: Path) -> None:
    store = Store.open(tmp_path / "store")
    with SimServer(SimConfig()) as sim, store.lock(RUN):  # another collector holds the run
        code, _, err = bedside("run", "--answer-model", RUN, "--judge-model", "sim/judge", "--base-url",
                               sim.base_url, "--store", store.root, "--limit", "1", "--progress", "none")
        received = sim.stats()["chat_completions"]["received"]
    assert code == 1 and "is being written by" in err and received == 0


def test_resume_refuses_another_model_or_dataset(tmp_path: Path) -> None:
    with SimServer(SimConfig()) as sim:
        args = ("run", "--judge-model", "sim/judge", "--base-url", sim.base_url, "--store", tmp_path / "s",
                "--run-id", "r", "--progress", "none")
        assert bedside(*args, "--answer-model", "sim/weak", "--limit", "1")[0] == 0
        code, _, err = bedside(*args, "--answer-model", "sim/strong", "--limit", "1")
        assert code == 1 and "holds answers of 'sim/weak'" in err
        code, _, err = bedside(*args, "--answer-model", "sim/weak", "--limit", "1", "--reasoning-effort", "high")
        assert code == 1 and "was answered with --reasoning-effort (none), not 'high'" in err, err
        other = tmp_path / "one.jsonl"
        case = load_dataset(None).raw_cases[0]
        other.write_text(json.dumps(case) + "\n")
        code, _, err = bedside(*args, "--answer-model", "sim/weak", "--dataset", other)
        assert code == 1 and "different --dataset" in err
