"""Provider faults: retries with back-off and Retry-After, adaptive concurrency, fail-fast on wrong keys
and unknown models, and a fault-injected run against the simulated provider that completes every case."""

from __future__ import annotations

import asyncio
import random
import threading
import time
from pathlib import Path
from typing import Any, Callable

import polars as pl
import pytest

from tests.collect_support import Recorder, bedside, completion, error, judge_reply
from toolkit.collect import limit as limit_module
from toolkit.collect.client import retry_after, scrub
from toolkit.collect.limit import LIMITED, OK, AdaptiveLimit, Slot
from toolkit.sim import SimConfig, SimServer
from toolkit.dataset import load_dataset
from toolkit.store import Store, StoreError
from toolkit.summary import summarize


def sim_run(sim: SimServer, store: Path, *extra: str) -> tuple[int, str, str]:
    progress = () if "--progress" in extra else ("--progress", "plain")  # an option is given once
    return bedside("run", "--answer-model", "sim/strong", "--judge-model", "sim/judge", "--base-url", sim.base_url,
                   "--store", store, *progress, *extra)


def test_fault_injected_run_completes_every_case(tmp_path: Path) -> None:
    config = SimConfig(rate_429=0.2, rate_5xx=0.05, rate_bad_json=0.05, rate_timeout=0.02, seed=1,
                       timeout_hold_s=5, retry_after_s=0.05)
    # 5 % of judge replies are broken: with the default 2 re-asks some judgment of the 60 runs out of replies in
    # ~1 % of runs (0.05^3 each); 6 re-asks make that ~5e-8, and the broken replies are still counted below.
    with SimServer(config) as sim:
        code, out, err = sim_run(sim, tmp_path / "s", "--timeout", "0.5", "--concurrency", "8",
                                 "--judge-passes", "2", "--max-retries", "10", "--retry-base-delay", "0.05",
                                 "--judge-reasks", "6")
        stats = sim.stats()["chat_completions"]
    assert code == 0, err
    faults = stats["faults"]
    assert faults["429"] >= 10 and faults["5xx"] >= 2 and faults["timeout"] >= 1 and faults["bad_json"] >= 1, faults
    store = Store.open(tmp_path / "s")
    n = len(load_dataset(None).raw_cases)
    answers, judgments = store.read("answers"), store.read("judgments")
    assert answers.filter(answers["error"].is_null()).height == n == answers.height
    valid = judgments.filter(judgments["error"].is_null())
    assert valid.height == 2 * n and valid.select("case_id", "judge_pass").is_unique().all()
    assert judgments.height - valid.height == faults["bad_json"]  # each broken reply kept as its own row
    # every paid answer is stored once; judge calls were paid once per valid pass plus the re-asks
    assert stats["by_model"]["sim/strong"]["served_ok"] == n
    assert stats["by_model"]["sim/judge"]["served_ok"] == judgments.height
    summary = summarize(store, ["sim/strong"])["sim/strong"]
    assert summary["completed_cases"] == n and summary["errors"] == 0 and summary["judge_passes_per_answer"] == 2
    assert "retries" in out


def test_retry_after_is_honoured_and_5xx_and_timeouts_are_retried(tmp_path: Path) -> None:
    script: dict[str, list[Any]] = {
        "ans": [(429, {"error": {"message": "slow down"}}, {"Retry-After": "0.4"}),
                (503, {"error": {"message": "busy"}}), "timeout", "ok"],
    }

    def respond(body: dict[str, Any]) -> tuple:
        if body["model"] == "judge":
            return completion(judge_reply(body))
        step = script["ans"].pop(0)
        if step == "ok":
            return completion("answer")
        if step == "timeout":
            return (*completion("too late"), None, 1.0)
        return step

    with Recorder(respond) as rec:
        code, _, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                               "--judge-base-url", rec.base_url, "--store", tmp_path / "s", "--limit", "1",
                               "--timeout", "0.5", "--retry-base-delay", "0.05", "--progress", "none")
        times = [t for t, b in zip(rec.times, rec.bodies) if b["model"] == "ans"]
    assert code == 0, err
    assert len(times) == 4
    assert times[1] - times[0] >= 0.4  # Retry-After: 0.4 s is a floor
    assert times[3] - times[2] >= 0.5  # the held call was abandoned at the client timeout, then retried
    answers = Store.open(tmp_path / "s").read("answers")
    assert answers.height == 1 and answers["answer"].to_list() == ["answer"]


def test_non_retryable_status_fails_the_case_at_once_and_a_rerun_retries_it(tmp_path: Path) -> None:
    fail = {"on": True}

    def respond(body: dict[str, Any]) -> tuple:
        if body["model"] == "judge":
            return completion(judge_reply(body))
        return error(422, "unprocessable prompt") if fail["on"] else completion("fine")

    args = ("run", "--answer-model", "ans", "--judge-model", "judge", "--store", tmp_path / "s", "--limit", "1",
            "--progress", "none")
    with Recorder(respond) as rec:
        code, _, err = bedside(*args, "--base-url", rec.base_url, "--judge-base-url", rec.base_url)
        assert code == 3 and len(rec.bodies) == 1
        fail["on"] = False
        code, _, err = bedside(*args, "--base-url", rec.base_url, "--judge-base-url", rec.base_url)
    assert code == 0, err
    answers = Store.open(tmp_path / "s").read("answers").sort("attempt")
    assert answers["attempt"].to_list() == [1, 2]
    assert answers["error"][0].startswith("UnprocessableEntityError: ") and answers["error"][1] is None


def test_wrong_key_fails_fast_naming_the_variable_never_the_key(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("SIM_KEY", "sk-wrong-0123456789abcdef")
    with SimServer(SimConfig(api_key="sk-right-key-000000000000")) as sim:
        code, out, err = sim_run(sim, tmp_path / "s", "--api-key-env", "SIM_KEY", "--concurrency", "4")
        received = sim.stats()["chat_completions"]["received"]
    assert code == 1
    assert "HTTP 401" in err and "$SIM_KEY" in err and "sk-wrong" not in err + out
    assert len(err.strip().splitlines()) == 1 and received <= 4


def test_unknown_model_fails_fast(tmp_path: Path) -> None:
    with SimServer(SimConfig()) as sim:
        code, out, err = bedside("run", "--answer-model", "sim/nonexistent", "--judge-model", "sim/judge",
                                 "--base-url", sim.base_url, "--store", tmp_path / "s", "--progress", "none")
        received = sim.stats()["chat_completions"]["received"]
    assert code == 1 and received <= 16
    assert err.startswith("bedside: error: answer model 'sim/nonexistent' not found at ") and "HTTP 404" in err


def test_missing_key_variable_is_reported_before_any_call(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_ACCESS_TOKEN", raising=False)
    code, _, err = bedside("run", "--answer-model", "gpt-x", "--store", tmp_path / "s", "--limit", "1")
    assert code == 1 and "$OPENAI_API_KEY or $OPENAI_ACCESS_TOKEN" in err
    store = Store.open(tmp_path / "s")
    assert store.run_ids() == [] and store.read("cases").is_empty()  # no run row, no dataset written


def test_retry_after_headers() -> None:
    assert retry_after({"retry-after-ms": "250", "retry-after": "9"}) == 0.25
    assert retry_after({"retry-after": "2"}) == 2.0
    assert retry_after({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}) == 0.0  # a date in the past
    assert retry_after({"retry-after": "soon"}) is None and retry_after(None) is None
    assert retry_after({"retry-after": "99999"}) == 600.0


def drive(limit: AdaptiveLimit, share_at: Callable[[int], float], calls: int, seed: int = 0) -> list[int]:
    """Report ``calls`` results one after another, a 429 with probability ``share_at(permitted)``."""
    rng = random.Random(seed)
    seen = []
    for _ in range(calls):
        slot = Slot(time.monotonic())
        limit.on_result(slot, LIMITED if rng.random() < share_at(limit.permitted) else OK, 0.1)
        seen.append(limit.permitted)
    return seen


def test_limit_keeps_its_window_under_429s_it_cannot_avoid() -> None:
    # 20 % of calls rate-limited whatever the window (a shared limit, noise): plain AIMD sat at 1-2 here
    limit = AdaptiveLimit(32)
    seen = drive(limit, lambda window: 0.2, 3000)
    later = seen[500:]
    assert sum(later) / len(later) >= 0.8 * 32 and min(later) >= 0.7 * 0.7 * 32
    assert 0.1 <= limit.background <= 0.35 and limit.undone >= 1


def test_limit_finds_a_sustained_limit_and_stays_near_it() -> None:
    # a real limit: beyond 4 calls in flight the excess is refused
    share = lambda window: max(0.0, 1.0 - 4.0 / window)  # noqa: E731
    limit = AdaptiveLimit(32)
    seen = drive(limit, share, 3000, seed=1)
    later = seen[300:]
    assert max(later) <= 6 and sum(later) / len(later) >= 3.0
    assert sum(share(w) for w in later) / len(later) < 0.05  # few 429s once it is found
    assert limit.background < 0.1


def test_a_limit_found_then_lifted_is_left_behind() -> None:
    limit = AdaptiveLimit(16)
    drive(limit, lambda window: max(0.0, 1.0 - 2.0 / window), 400)
    assert limit.permitted <= 3
    seen = drive(limit, lambda window: 0.0, 2000)
    assert seen[-1] == 16


def test_slow_calls_stop_counting_against_the_window(monkeypatch) -> None:
    monkeypatch.setattr(limit_module, "SLOW_MIN_S", 0.05)

    async def scenario() -> list[Any]:
        limit = AdaptiveLimit(2)
        limit.latency = 0.001  # the usual call is fast: a call in flight for 50 ms is slow
        held = [await limit.acquire(), await limit.acquire()]
        waiter = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0.01)
        seen: list[Any] = [waiter.done()]
        await asyncio.sleep(0.1)  # both held calls are slow now: they no longer block the others
        seen += [waiter.done(), limit.in_flight + limit.slow, limit.slow >= 2]
        for slot in held:
            limit.release(slot)
        limit.release(waiter.result())
        seen += [limit.in_flight, limit.slow]
        return seen

    assert asyncio.run(scenario()) == [False, True, 3, True, 0, 0]


def test_never_more_in_flight_than_permitted() -> None:
    async def scenario() -> list[int]:
        limit = AdaptiveLimit(8)
        limit.window = 2.0
        first, second = await limit.acquire(), await limit.acquire()
        waiter = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0.01)
        seen = [int(waiter.done())]
        limit.release(first)
        await asyncio.sleep(0.01)
        seen.append(int(waiter.done()))
        limit.release(second)
        limit.release(waiter.result())
        return seen + [limit.in_flight]

    assert asyncio.run(scenario()) == [0, 1, 0]


def test_scrub_masks_a_key_and_echoed_pieces_of_it() -> None:
    key = "sk-proj-ABCDEFGHIJKLMNOP1234"
    text = f"bad key {key}; you sent sk-proj-ABCDEFGH...1234 to us"
    cleaned = scrub(text, (key,))
    assert key not in cleaned and "ABCDEFGH" not in cleaned and "bad key ***" in cleaned


@pytest.mark.parametrize("status", [401, 403])
def test_auth_failures_name_the_judge_flag(tmp_path: Path, status: int) -> None:
    def respond(body: dict[str, Any]) -> tuple:
        if body["model"] == "judge":
            return error(status, "nope")
        return completion("answer")

    with Recorder(respond) as rec:
        code, _, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                               "--judge-base-url", rec.base_url, "--store", tmp_path / "s", "--limit", "2",
                               "--concurrency", "1", "--progress", "none")
    assert code == 1 and f"HTTP {status}" in err and "judge model 'judge'" in err
    answers = Store.open(tmp_path / "s").read("answers")
    assert answers.height == 1  # the completed answer was kept


def test_adaptive_limit_survives_cancellation_and_never_leaks_a_slot() -> None:
    async def scenario() -> list[Any]:
        limit = AdaptiveLimit(1)
        slot = await limit.acquire()  # a call in flight holds the only slot
        queued = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0)
        # Ctrl-C: the queued call is cancelled and, before it runs again, the call in flight ends
        queued.cancel()
        limit.release(slot)
        outcome = (await asyncio.gather(queued, return_exceptions=True))[0]
        seen: list[Any] = [type(outcome).__name__, limit.in_flight]
        # granted a slot, then cancelled before it could use it: the slot passes to the next in line
        slot = await limit.acquire()
        granted = asyncio.create_task(limit.acquire())
        following = asyncio.create_task(limit.acquire())
        await asyncio.sleep(0)
        limit.release(slot)  # wakes ``granted``...
        granted.cancel()  # ...which is cancelled before it runs
        await asyncio.gather(granted, return_exceptions=True)
        last = await asyncio.wait_for(following, 1)
        seen += [granted.cancelled(), limit.in_flight]
        limit.release(last)
        seen.append(limit.in_flight)
        return seen

    assert asyncio.run(scenario()) == ["CancelledError", 0, True, 1, 0]


def collect_timed(sim: SimServer, store: Path, *extra: str) -> tuple[float, Store]:
    started = time.perf_counter()
    code, _, err = sim_run(sim, store, "--progress", "none", *extra)
    assert code == 0, err
    return time.perf_counter() - started, Store.open(store)


def test_a_sustained_rate_limit_is_found_then_collected_near_it(tmp_path: Path) -> None:
    # A real token bucket of 40 requests/s; 16 workers with 50 ms calls would send 320/s.
    rate = 40.0
    with SimServer(SimConfig(latency_ms=50, rate_limit_rps=rate, rate_limit_burst=10)) as sim:
        wall, store = collect_timed(sim, tmp_path / "s", "--concurrency", "16", "--judge-passes", "3")
        stats = sim.stats()["chat_completions"]
    calls = stats["served_ok"]
    assert calls == 30 * 4
    # finding the limit costs a few generations of 429s, then hardly any: far fewer than the calls made
    assert stats["faults"]["rate_limit"] <= 16 + 0.25 * calls, stats["faults"]
    # steady throughput near the limit: calls finished after the first second, per second
    finished = sorted(pl.concat([store.read(t).select(pl.col("finished_at").str.to_datetime(time_zone="UTC"))
                                 for t in ("answers", "judgments")])["finished_at"].to_list())
    start = finished[0].timestamp() + 1.0
    steady = [t.timestamp() for t in finished if t.timestamp() >= start]
    throughput = (len(steady) - 1) / (steady[-1] - steady[0])
    assert 0.6 * rate <= throughput <= 1.1 * rate, throughput


def test_faults_cost_at_most_twice_the_timeouts_alone(tmp_path: Path) -> None:
    # The benchmark's fault profile scaled down (tests/perf/collect_faults.py has the full one): 2 % of calls
    # held 2 s, then 20 % 429 with Retry-After, 5 % 5xx and 5 % broken judge JSON on top.
    common = dict(latency_ms=50, timeout_hold_s=2.0, retry_after_s=0.05, seed=5)
    # About 28 % of calls fail retryably here, so the reference's 6 attempts run out for some call in ~7 % of
    # runs (0.28^6 per call); this test is about wall time, not about giving up, so it allows more attempts,
    # and more re-asks of broken judge replies (2 run out for some judgment of the 90 in ~1 % of runs).
    args = ("--concurrency", "16", "--judge-passes", "3", "--retry-base-delay", "0.1", "--max-retries", "20",
            "--judge-reasks", "6")
    with SimServer(SimConfig(rate_timeout=0.03, **common)) as sim:
        alone, _ = collect_timed(sim, tmp_path / "a", *args)
        assert sim.stats()["chat_completions"]["faults"]["timeout"] >= 1
    with SimServer(SimConfig(rate_timeout=0.03, rate_429=0.2, rate_5xx=0.05, rate_bad_json=0.05, **common)) as sim:
        everything, store = collect_timed(sim, tmp_path / "b", *args)
        faults = sim.stats()["chat_completions"]["faults"]
    assert faults["429"] >= 10 and faults["5xx"] >= 2 and faults["timeout"] >= 1, faults
    assert store.read("judgments").filter(pl.col("error").is_null()).height == 30 * 3
    assert everything <= 2.0 * alone, (everything, alone)


def test_a_checkpoint_that_fails_while_collecting_is_committed_at_the_end(tmp_path: Path, monkeypatch) -> None:
    # The periodic checkpoint commits on a worker thread; its failure (a delta-rs commit error, a disk full
    # for a moment) once went unseen: the run exited 0 with its answer left in a journal, invisible.
    from toolkit.store import delta

    failed = threading.Event()
    real_overwrite = delta.overwrite

    def overwrite(path: Path, table: str, data: Any, predicate: str) -> None:  # a journal's data commit
        if table == "answers" and not failed.is_set():
            failed.set()
            raise StoreError(f"{path}: commit: injected failure")
        real_overwrite(path, table, data, predicate)

    def respond(body: dict[str, Any]) -> tuple:
        if body["model"] == "judge":
            failed.wait(10)  # the judgment completes after a checkpoint tried to commit the answer
            return completion(judge_reply(body))
        return completion("answer")

    monkeypatch.setattr(delta, "overwrite", overwrite)
    with Recorder(respond) as rec:
        code, _, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                               "--judge-base-url", rec.base_url, "--store", tmp_path / "s", "--limit", "1",
                               "--progress", "none")
    assert code == 0 and failed.is_set(), err
    store = Store.open(tmp_path / "s")
    assert store.read("answers")["answer"].to_list() == ["answer"]
    assert store.read("judgments").filter(pl.col("error").is_null()).height == 1
    assert not list(store.journal_dir("ans").glob("*.jsonl"))  # nothing left behind uncommitted


def test_a_journal_that_cannot_be_committed_fails_the_run_and_the_next_run_stores_it(tmp_path: Path,
                                                                                   monkeypatch) -> None:
    from toolkit.store import delta

    real_overwrite = delta.overwrite

    def overwrite(path: Path, table: str, data: Any, predicate: str) -> None:
        if table == "answers":
            raise StoreError(f"{path}: commit: injected failure")
        real_overwrite(path, table, data, predicate)

    def respond(body: dict[str, Any]) -> tuple:
        return completion(judge_reply(body) if body["model"] == "judge" else "answer")

    args = ("run", "--answer-model", "ans", "--judge-model", "judge", "--store", tmp_path / "s", "--limit", "1",
            "--progress", "none")
    with Recorder(respond) as rec:
        monkeypatch.setattr(delta, "overwrite", overwrite)
        code, _, err = bedside(*args, "--base-url", rec.base_url, "--judge-base-url", rec.base_url)
        assert code != 0 and len(err.strip().splitlines()) == 1, err
        assert "completed calls could not be stored" in err and "run the same command again" in err
        store = Store.open(tmp_path / "s")
        assert store.read("answers").is_empty() and list(store.journal_dir("ans").glob("*.jsonl"))
        monkeypatch.setattr(delta, "overwrite", real_overwrite)
        code, _, err = bedside(*args, "--base-url", rec.base_url, "--judge-base-url", rec.base_url)
    assert code == 0, err
    assert len(rec.bodies) == 2  # the journal's answer and judgment were stored, not asked for again
    assert store.read("answers")["answer"].to_list() == ["answer"]
    assert not list(store.journal_dir("ans").glob("*.jsonl"))
