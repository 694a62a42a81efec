"""What the progress displays say: rate limiting in the plain lines, a rich bar on a terminal, a clean line
after the bar on anything else, and totals that reach 100% when answers fail."""

from __future__ import annotations

import io
import re
from pathlib import Path
from typing import Any

from tests.collect_support import Recorder, bedside, completion, error, judge_reply
from toolkit.collect.api import evaluate
from toolkit.collect.judge import case_to_judge
from toolkit.collect.plan import ensure_run
from toolkit.collect.progress import PlainView, RichView, Tracker, View
from toolkit.collect.runner import CollectJob, collect
from toolkit.collect.settings import CollectSettings, Endpoint, RetryPolicy
from toolkit.sim import SimConfig, SimServer
from toolkit.dataset import load_dataset
from toolkit.store import Store

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def rate_limited_run(store: Path, views: Any) -> None:
    """Ten cases against a provider that answers every other call with a 429 and a 0.3 s Retry-After;
    progress ticks every 50 ms."""
    dataset = load_dataset(None)
    with SimServer(SimConfig(rate_429=0.5, retry_after_s=0.3, latency_ms=20, seed=4)) as sim:
        endpoint = Endpoint("sim", sim.base_url, ())
        # Half the calls get a 429: the reference's 6 attempts would run out for some call in a few % of runs
        # (0.5^6 per call); this test is about the progress line, so it allows more attempts.
        settings = CollectSettings("r", "sim/strong", "sim/judge", endpoint, endpoint, concurrency=8,
                                   checkpoint_s=0.05, retry=RetryPolicy(max_attempts=30))
        job = CollectJob(settings, tuple(case_to_judge(c) for c in dataset.raw_cases[:10]))
        [report] = collect(Store.open(store), [job], views, prepare=lambda s, j: ensure_run(s, j.settings,
                                                                                            dataset.sha256))
    assert report.answers_ok == 10 and report.judgments_ok == 10


def test_plain_progress_says_when_calls_wait_on_the_rate_limit(tmp_path: Path) -> None:
    out = io.StringIO()
    rate_limited_run(tmp_path / "s", lambda tracker: PlainView(tracker, out, interval=0.0))
    lines = out.getvalue().splitlines()
    assert any("waiting on rate limit (" in line and "concurrency " in line for line in lines), lines
    assert lines[-1].startswith("r: 20/20 calls (answers 10/10, judgments 10/10)")


def test_rich_progress_on_a_terminal_draws_the_bar_and_the_rate_limit(tmp_path: Path) -> None:
    out = io.StringIO()
    rate_limited_run(tmp_path / "s", lambda tracker: RichView(tracker, out, force_terminal=True))
    drawn = out.getvalue()
    assert ANSI.search(drawn)  # a live display, redrawn in place
    plain = ANSI.sub("", drawn)
    assert "waiting on rate limit (" in plain and "20/20" in plain and "100%" in plain


def test_rich_progress_off_a_terminal_ends_its_line_before_the_report(tmp_path: Path) -> None:
    with Recorder(lambda b: completion(judge_reply(b)) if b["model"] == "judge" else completion("x")) as rec:
        code, out, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                                 "--judge-base-url", rec.base_url, "--store", tmp_path / "s", "--limit", "2",
                                 "--progress", "rich")
    assert code == 0, err
    assert any(line.startswith("ans: 2 answers, 2 judgments by judge") for line in out.splitlines()), out


class Totals(View):
    def __init__(self, tracker: Tracker, seen: list[tuple[int, int]]):
        super().__init__(tracker)
        self.seen = seen

    def stop(self) -> None:
        self.seen.append((self.tracker.done, self.tracker.total))


def test_a_failed_answer_takes_its_judge_passes_out_of_the_total(tmp_path: Path) -> None:
    failing: set[str] = set()

    def respond(body: dict[str, Any]) -> tuple:
        if body["model"] == "judge":
            return completion(judge_reply(body))
        prompt = body["messages"][1]["content"]
        if not failing or prompt in failing:
            failing.add(prompt)
            return error(422, "unprocessable prompt")  # the first case's answer fails for good
        return completion("fine")

    seen: list[tuple[int, int]] = []
    with Recorder(respond) as rec:
        report = evaluate("ans", "judge", store=tmp_path / "s", base_url=rec.base_url, judge_base_url=rec.base_url,
                          limit=3, judge_passes=2, concurrency=1, progress=lambda t: Totals(t, seen))
    assert report.answer_errors == 1 and report.judgments_ok == 4
    assert seen == [(7, 7)]  # 3 answers + 2 x 2 judgments: the bar reaches 100%
