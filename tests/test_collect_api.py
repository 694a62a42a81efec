"""The Python collection API called directly, as a notebook would: ``evaluate`` collects and resumes,
``rejudge`` adds passes and judges without new answers, dry runs estimate without writing, bad
options are refused before anything is called or written."""

from __future__ import annotations

import _thread
import asyncio
import signal
import threading
import time
from pathlib import Path

import polars as pl
import pytest

from tests.conftest import snapshot
from toolkit.collect.api import evaluate, plan_evaluation, plan_rejudge, rejudge
from toolkit.collect.demo import run_demo
from toolkit.collect.progress import Tracker, View
from toolkit.sim import SimConfig, SimServer
from toolkit.collect.settings import SettingsError
from toolkit.dataset import load_dataset
from toolkit.selection import JudgeSelection
from toolkit.store import Store
from toolkit.summary import SummaryOptions, summarize

KEY = "sk-api-test-5b1e0c"
BENCHMARKS = ("drug_safety", "safety_diagnostic")  # a points benchmark and an F1 one


class CountingView(View):
    """A progress view that only records (done, total) each time the collector updates it."""

    def __init__(self, tracker: Tracker, seen: list[tuple[int, int]]):
        super().__init__(tracker)
        self.seen = seen

    def update(self) -> None:
        self.seen.append((self.tracker.done, self.tracker.total))


def test_evaluate_collects_resumes_and_rejudge_adds_passes_and_judges(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("BEDSIDE_API_TEST_KEY", KEY)
    store_dir = tmp_path / "store"
    dataset = load_dataset(None)
    chosen = dataset.select(benchmarks=BENCHMARKS)
    n = len(chosen)
    assert n >= 4
    with SimServer(SimConfig(api_key=KEY, seed=5)) as sim:
        common = dict(base_url=sim.base_url, api_key_env="BEDSIDE_API_TEST_KEY")
        seen: list[tuple[int, int]] = []
        first = evaluate("sim/medium", "sim/judge", store=store_dir, dataset=dataset, benchmarks=BENCHMARKS,
                         run_id="medium", progress=lambda tracker: CountingView(tracker, seen), **common)
        assert seen and seen[-1] == (2 * n, 2 * n)  # the view factory given was used
        again = evaluate("sim/medium", "sim/judge", store=str(store_dir), dataset=dataset, benchmarks=list(BENCHMARKS),
                         run_id="medium", progress="none", **common)
        second_pass = rejudge("medium", "sim/judge", store=store_dir, passes=2, progress="none")
        other = rejudge("medium", "sim/judge-notemp", store=Store.open(store_dir), progress="none",
                        judge_api_key_env="BEDSIDE_API_TEST_KEY")
        served = sim.stats()["chat_completions"]["by_model"]
        assert sim.stats()["chat_completions"]["faults"]["auth"] == 0  # the key named by api_key_env was sent

    assert (first.answers_ok, first.judgments_ok, first.answer_errors, first.judge_errors) == (n, n, 0, 0)
    assert not first.interrupted
    assert (again.answers_ok, again.judgments_ok, again.skipped_answers, again.skipped_judgments) == (0, 0, n, n)
    assert (second_pass.judgments_ok, second_pass.skipped_judgments, second_pass.answering) == (n, 0, False)
    assert other.judgments_ok == n and other.judge_errors == 0
    assert served["sim/medium"]["served_ok"] == n  # answers were never asked for again
    assert served["sim/judge"]["served_ok"] == 2 * n and served["sim/judge-notemp"]["served_ok"] == n

    store = Store.open(store_dir)
    assert store.run_ids() == ["medium"]
    run = store.run("medium")
    assert (run["answer_model"], run["judge_model"], run["dataset_sha256"]) == ("sim/medium", "sim/judge",
                                                                               dataset.sha256)
    answers = store.read("answers", ["medium"])
    assert answers.height == n and answers["error"].null_count() == n
    assert sorted(answers["case_id"].to_list()) == sorted(chosen)
    counts = store.read("judgments", ["medium"]).filter(pl.col("error").is_null()).group_by(
        "judge_model", "judge_pass").len().sort("judge_model", "judge_pass")
    assert counts.rows() == [("sim/judge", 1, n), ("sim/judge", 2, n), ("sim/judge-notemp", 1, n)]
    summary = summarize(store, ["medium"])["medium"]
    assert summary["completed_cases"] == n and summary["judge_passes_per_answer"] == 2
    assert sorted(summary["benchmarks"]) == sorted(BENCHMARKS)
    notemp = summarize(store, ["medium"], SummaryOptions(selection=JudgeSelection(judge="sim/judge-notemp")))
    assert notemp["medium"]["completed_cases"] == n and notemp["medium"]["judge_temperature"] is None


def test_dry_runs_estimate_what_is_due_and_write_nothing(tmp_path: Path) -> None:
    store_dir = tmp_path / "store"
    fresh = plan_evaluation("sim/strong", "sim/judge", store=store_dir, base_url="http://127.0.0.1:9/v1", limit=3,
                            judge_passes=2).dry_run()
    assert not store_dir.exists()
    assert [(e.kind, e.calls) for e in fresh.estimates] == [("answer", 3), ("judge", 6)] and fresh.calls == 9
    assert fresh.lines()[0] == "dry run of 'sim/strong': no call is made and nothing is written"
    assert any(line.startswith("answer: 3 calls to sim/strong at http://127.0.0.1:9/v1") for line in fresh.lines())

    with SimServer(SimConfig(seed=1)) as sim:
        evaluate("sim/strong", "sim/judge", store=store_dir, base_url=sim.base_url, limit=3, progress="none")
    before = snapshot(store_dir)
    done = plan_evaluation("sim/strong", "sim/judge", store=store_dir, base_url="http://127.0.0.1:9/v1",
                           limit=3).dry_run()
    assert done.calls == 0 and done.cost_usd == 0 and "nothing to call: the run is complete" in done.lines()
    more = plan_rejudge("sim/strong", "sim/judge", store=store_dir, judge_passes=3).dry_run()
    assert [(e.kind, e.calls) for e in more.estimates] == [("judge", 6)]  # passes 2 and 3 of three answers
    assert more.plan.skipped_judgments == 3
    assert snapshot(store_dir) == before


def test_bad_options_are_refused_before_anything_is_written(tmp_path: Path, monkeypatch) -> None:
    store_dir = tmp_path / "store"
    url = "http://127.0.0.1:9/v1"  # nothing listens: a refused option must fail before any call
    with pytest.raises(ValueError, match=r"concurrency=0: must be an integer 1\.\.1000"):
        evaluate("m", "j", store=store_dir, base_url=url, judge_base_url=url, concurrency=0, progress="none")
    with pytest.raises(ValueError, match=r"timeout=0: must be a number at least 0\.1"):
        evaluate("m", "j", store=store_dir, base_url=url, judge_base_url=url, timeout=0, progress="none")
    with pytest.raises(ValueError, match=r"limit=0: must be an integer at least 1"):
        plan_evaluation("m", "j", store=store_dir, base_url=url, judge_base_url=url, limit=0)
    with pytest.raises(ValueError, match="progress='fancy': choose one of auto, rich, plain, none"):
        evaluate("m", "j", store=store_dir, base_url=url, judge_base_url=url, limit=1, progress="fancy")
    with pytest.raises(ValueError, match="give passes or judge_passes, not both"):
        rejudge("m", "j", store=store_dir, passes=(2,), judge_passes=2)
    with pytest.raises(ValueError, match=r"judge_passes=101: must be an integer 1\.\.100"):
        plan_rejudge("m", "j", store=store_dir, passes=[1, 101])
    monkeypatch.delenv("BEDSIDE_API_UNSET_KEY", raising=False)
    with pytest.raises(SettingsError, match=r"no API key for the answer model .*\$BEDSIDE_API_UNSET_KEY"):
        evaluate("m", "j", store=store_dir, base_url=url, judge_base_url=url, api_key_env="BEDSIDE_API_UNSET_KEY",
                 limit=1, progress="none")
    assert Store.open(store_dir).run_ids() == []  # no runs row, no dataset: nothing half-written
    assert list(store_dir.rglob("*.parquet")) == []


def test_the_api_runs_inside_a_running_event_loop_as_in_a_notebook(tmp_path: Path) -> None:
    # A Jupyter cell runs inside the kernel's event loop, where asyncio.run() refuses to start.
    async def cell() -> tuple:
        with SimServer(SimConfig(seed=3)) as sim:
            direct = evaluate("sim/strong", "sim/judge", store=tmp_path / "s", base_url=sim.base_url, limit=2,
                              progress="none")
            batch = evaluate("sim/weak", "sim/judge", store=tmp_path / "s", base_url=sim.base_url, limit=2,
                             batch=True, progress="none")
        return direct, batch, run_demo(str(tmp_path / "demo"), latency_ms=0)

    direct, batch, (store, reports, board) = asyncio.run(cell())
    assert (direct.answers_ok, direct.judgments_ok, batch.answers_ok, batch.judgments_ok) == (2, 2, 2, 2)
    # four answer runs, then the second judge's passes over each of them
    assert len(reports) == 8 and not any(r.interrupted for r in reports) and board is not None
    assert board.height == 4 and board["cases"].to_list() == [30] * 4


def test_a_kernel_interrupt_stops_a_collection_running_inside_an_event_loop(tmp_path: Path) -> None:
    store_dir = tmp_path / "s"

    async def cell() -> object:
        # Jupyter's interrupt is a plain KeyboardInterrupt in the thread that runs the cell
        signal.signal(signal.SIGINT, signal.default_int_handler)

        def interrupt_once_calls_complete() -> None:
            while not list(store_dir.rglob("*.jsonl")):
                time.sleep(0.005)
            _thread.interrupt_main()  # as the kernel does: KeyboardInterrupt in the main thread

        with SimServer(SimConfig(latency_ms=100)) as sim:
            threading.Thread(target=interrupt_once_calls_complete, daemon=True).start()
            return evaluate("sim/strong", "sim/judge", store=store_dir, base_url=sim.base_url, concurrency=2,
                            progress="none")

    report = asyncio.run(cell())
    assert report.interrupted
    answers = Store.open(store_dir).read("answers")
    assert 0 < answers.height < 30 and not list(store_dir.rglob("*.jsonl"))  # what completed is stored
