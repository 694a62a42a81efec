"""`bedside run --answer-samples K`: K answers per case, each judged, stored with their sample index;
resumable up to K, crash-safe under kill -9, and the default of one sample unchanged."""

from __future__ import annotations

import json
import signal
from collections import Counter
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from tests.collect_support import Recorder, bedside, completion, error, judge_reply
from tests.test_collect_resume import ROOT, journal_lines, wait_for
from toolkit.collect.api import evaluate, plan_evaluation, rejudge
from toolkit.collect.journal import pending_rows
from toolkit.failures import failure_causes
from toolkit.sim import SimConfig, SimServer
from toolkit.store import Store
from toolkit.tables import TABLES

RUN = "sim/strong"


def answer_calls(sim: SimServer, model: str = RUN) -> int:
    return sim.stats()["chat_completions"]["by_model"].get(model, {}).get("received", 0)


def assert_whole(store: Store, cases: int, samples: int, passes: int = 1) -> None:
    """Every (case, sample) answered once and judged by every pass; no key twice."""
    for table in ("answers", "judgments", "decisions"):
        frame = store.read(table, [RUN])
        assert frame.select(TABLES[table].key).is_unique().all(), f"duplicate keys in {table}"
    answers = store.read("answers", [RUN]).filter(pl.col("error").is_null())
    assert answers.height == cases * samples
    assert answers.group_by("case_id").agg(pl.col("sample").sort())["sample"].to_list() == \
        [list(range(samples))] * cases
    valid = store.read("judgments", [RUN]).filter(pl.col("error").is_null())
    assert valid.height == cases * samples * passes
    assert set(valid.select("case_id", "sample").iter_rows()) == set(answers.select("case_id", "sample").iter_rows())
    decided = store.read("decisions", [RUN]).select("case_id", "sample").unique()
    assert set(decided.iter_rows()) == set(answers.select("case_id", "sample").iter_rows())


def test_k_samples_are_asked_judged_and_stored_with_their_index(tmp_path: Path) -> None:
    with SimServer(SimConfig(answer_spread=1.0, seed=3)) as sim:
        report = evaluate(RUN, "sim/judge", store=tmp_path / "s", base_url=sim.base_url, limit=4, answer_samples=3,
                          judge_passes=2, progress="none")
        assert answer_calls(sim) == 12 and answer_calls(sim, "sim/judge") == 24
    assert (report.answers_ok, report.judgments_ok) == (12, 24)
    store = Store.open(tmp_path / "s")
    assert_whole(store, 4, 3, passes=2)
    judged = store.read("judgments", [RUN]).join(store.read("answers", [RUN]), on=["case_id", "sample"])
    assert (judged["answer_attempt"] == judged["attempt_right"]).all()  # each judgment names its own sample's answer
    answers = store.read("answers", [RUN]).group_by("case_id").agg(pl.col("answer").n_unique())
    assert (answers["answer"] > 1).all()  # with a spread, the samples of a case differ
    assert json.loads(store.run(RUN)["settings"])["answer_samples"] == 3


def test_one_sample_is_the_default_and_leaves_the_runs_row_as_it_was(tmp_path: Path) -> None:
    with SimServer(SimConfig()) as sim:
        evaluate(RUN, "sim/judge", store=tmp_path / "s", base_url=sim.base_url, limit=3, progress="none")
        assert answer_calls(sim) == 3
    store = Store.open(tmp_path / "s")
    assert_whole(store, 3, 1)
    assert "answer_samples" not in json.loads(store.run(RUN)["settings"])


def test_a_run_gains_the_samples_it_lacks_and_never_asks_a_stored_one_again(tmp_path: Path) -> None:
    store_dir = tmp_path / "s"
    with SimServer(SimConfig(answer_spread=0.5)) as sim:
        run = ("run", "--answer-model", RUN, "--judge-model", "sim/judge", "--base-url", sim.base_url,
               "--store", store_dir, "--limit", "5", "--progress", "none")
        assert bedside(*run)[0] == 0
        first = Store.open(store_dir).read("answers", [RUN]).select("case_id", "sample", "answer")
        due = plan_evaluation(RUN, "sim/judge", store=store_dir, base_url=sim.base_url, limit=5,
                              answer_samples=3).dry_run()
        assert [(e.kind, e.calls) for e in due.estimates] == [("answer", 10), ("judge", 10)]
        code, out, err = bedside(*run, "--answer-samples", "3")
        assert code == 0, err
        assert "10 answers, 10 judgments" in out and "(5 answers and 5 judgments already stored)" in out
        assert answer_calls(sim) == 15
        assert bedside(*run, "--answer-samples", "3")[0] == 0 and answer_calls(sim) == 15  # complete: no call
        code, out, err = bedside(*run)  # fewer samples than stored: refused, nothing called
        assert answer_calls(sim) == 15
    assert code != 0 and out == ""
    assert err.strip().splitlines() == [f"bedside: error: run {RUN!r} holds 3 answer samples per case, more than "
                                        "the 1 asked for: give --answer-samples 3 (or more) to resume it"]
    store = Store.open(store_dir)
    assert_whole(store, 5, 3)
    kept = store.read("answers", [RUN]).filter(pl.col("sample") == 0).select("case_id", "sample", "answer")
    assert kept.sort("case_id").equals(first.sort("case_id"))  # sample 0 was never asked again


@pytest.mark.parametrize("bad", ["0", "101", "x"])
def test_an_impossible_sample_count_is_one_line_before_anything_is_touched(tmp_path: Path, bad: str) -> None:
    code, out, err = bedside("run", "--answer-model", RUN, "--base-url", "http://127.0.0.1:9/v1",
                             "--store", tmp_path / "s", "--answer-samples", bad)
    assert code == 2 and "--answer-samples" in err and "Traceback" not in err
    assert not (tmp_path / "s").exists()
    with pytest.raises(ValueError, match="answer_samples=0: must be an integer 1..100"):
        plan_evaluation(RUN, store=tmp_path / "s", base_url="http://127.0.0.1:9/v1", answer_samples=0)


def test_judging_again_judges_every_sample(tmp_path: Path) -> None:
    with SimServer(SimConfig(answer_spread=1.0)) as sim:
        evaluate(RUN, "sim/judge", store=tmp_path / "s", base_url=sim.base_url, limit=3, answer_samples=2,
                 progress="none")
        report = rejudge(RUN, "sim/judge", store=tmp_path / "s", passes=2, judge_base_url=sim.base_url,
                         progress="none")
    assert report.judgments_ok == 6 and report.unanswerable == 0
    assert_whole(Store.open(tmp_path / "s"), 3, 2, passes=2)


def test_batch_mode_collects_k_samples(tmp_path: Path) -> None:
    with SimServer(SimConfig(answer_spread=1.0, batch_delay_s=0.02)) as sim:
        code, _, err = bedside("run", "--answer-model", RUN, "--judge-model", "sim/judge", "--base-url", sim.base_url,
                               "--store", tmp_path / "s", "--limit", "3", "--answer-samples", "2", "--batch",
                               "--progress", "none")
    assert code == 0, err
    assert_whole(Store.open(tmp_path / "s"), 3, 2)


def answered_units(store: Store) -> set[tuple[str, int]]:
    """(case, sample) answered in Parquet or in the journal a killed run left, read without recovering it."""
    stored = store.read("answers", [RUN]).filter(pl.col("error").is_null()).select("case_id", "sample")
    pending = pending_rows(store, RUN).get("answers", [])
    return {*stored.iter_rows(), *((r["case_id"], r["sample"]) for r in pending if r.get("error") is None)}


def test_kill_9_twice_then_resume_leaves_exactly_k_answers_per_case(tmp_path: Path, shared_bench: Path) -> None:
    """Issue 19: 250 cases x 3 samples; two SIGKILLs and a resume leave exactly 750 answers, each judged,
    and the provider was asked at most 750 + 2 x concurrency times for answers."""
    cases, samples, concurrency = 250, 3, 16
    store_dir = tmp_path / "store"
    with SimServer(SimConfig(latency_ms=10, answer_spread=0.5, datasets=(str(shared_bench),))) as sim:
        command = [sys.executable, "-m", "toolkit", "run", "--answer-model", RUN, "--judge-model", "sim/judge",
                   "--base-url", sim.base_url, "--store", str(store_dir), "--dataset", str(shared_bench),
                   "--answer-samples", str(samples), "--concurrency", str(concurrency), "--progress", "none"]
        for served in (200, 500):  # answers served before each kill
            proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
            wait_for(lambda: answer_calls(sim) >= served or proc.poll() is not None, timeout=60)
            proc.send_signal(signal.SIGKILL)
            assert proc.wait(10) == -signal.SIGKILL, proc.stderr.read() if proc.stderr else ""
            per_case = Counter(case for case, _ in answered_units(Store.open(store_dir)))
            assert sum(n < samples for n in per_case.values()) <= concurrency  # a case's samples are asked together
        assert journal_lines(store_dir) > 0  # the second kill left calls only its journal holds
        resumed = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=120)
        calls = answer_calls(sim)
    assert resumed.returncode == 0, resumed.stderr
    store = Store.open(store_dir)
    assert store.read("answers", [RUN]).height == cases * samples  # no failed attempt either
    assert_whole(store, cases, samples)
    assert cases * samples <= calls <= cases * samples + 2 * concurrency


def test_a_journal_line_written_before_samples_is_stored_as_sample_0(tmp_path: Path) -> None:
    """A collector of an older version killed mid-run left lines without a sample: the resume stores them
    (as sample 0) instead of setting them aside and paying for the call again."""
    store_dir = tmp_path / "s"
    with SimServer(SimConfig()) as sim:
        evaluate(RUN, "sim/judge", store=store_dir, base_url=sim.base_url, limit=1, progress="none")
        store = Store.open(store_dir)
        first = store.read("answers", [RUN]).drop("sample").to_dicts()[0]
        case = plan_evaluation(RUN, "sim/judge", store=store_dir, base_url=sim.base_url, limit=2).job.cases[1]
        old = {**first, "case_id": case.case_id, "seq": 99}
        (store.journal_dir(RUN) / "0123456789abcdef0123456789abcdef.jsonl").write_text(
            json.dumps([{"t": "answers", "r": old}]) + "\n", encoding="utf-8")
        report = evaluate(RUN, "sim/judge", store=store_dir, base_url=sim.base_url, limit=2, progress="none")
        assert answer_calls(sim) == 1  # the journalled answer was not asked for again
    assert report.notes == () and report.judgments_ok == 1
    assert_whole(Store.open(store_dir), 2, 1)


def test_a_failed_sample_of_an_answered_case_is_a_failure_of_that_case(tmp_path: Path) -> None:
    """Sample 1 fails for good while sample 0 is answered: the run is incomplete and says why, on the
    command line and in the stored failure causes (``bedside runs``)."""
    asked: dict[str, int] = {}

    def respond(body: dict) -> tuple:
        if body["model"] == "judge":
            return completion(judge_reply(body))
        prompt = body["messages"][-1]["content"]
        asked[prompt] = asked.get(prompt, 0) + 1
        return completion("fine") if asked[prompt] == 1 else error(422, "unprocessable prompt")

    with Recorder(respond) as rec:
        code, _, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--store", tmp_path / "s",
                               "--limit", "1", "--answer-samples", "2", "--progress", "none", "--base-url",
                               rec.base_url, "--judge-base-url", rec.base_url)
    assert code == 3 and "ans: 1 case failed: 1 × UnprocessableEntityError 422" in err, err
    causes = failure_causes(Store.open(tmp_path / "s"), "ans")
    assert [(c.cause, c.cases) for c in causes] == [("UnprocessableEntityError 422", 1)]
