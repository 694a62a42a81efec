"""Collect answers and judgments into the store: concurrent, durable as each call completes, resumable.

Each run is collected under ``Store.lock``; its journal is recovered first,
then the stored work is read so that completed answers and valid judgments
are never asked for (or paid for) again. Every completed call is appended to
the journal the moment it returns (a judgment together with its decisions,
in one write), so ``kill -9`` loses only calls in flight; a checkpoint turns
the journal into Parquet parts every few seconds and at the end. Ctrl-C
cancels the calls in flight, checkpoints and reports an interrupted run.
"""

from __future__ import annotations

import asyncio
import time
from contextlib import ExitStack
from dataclasses import dataclass
from typing import Any, Iterator

from toolkit import protocol
from toolkit.collect.client import (AdaptiveLimit, CallFailed, CallStats, ChatClient, Completion, EndpointFatal,
                                   now_iso)
from toolkit.collect.batch_state import refuse_pending
from toolkit.collect.judge import CaseToJudge, InvalidJudgeReply, parse_decisions
from toolkit.collect.loop import interruptible, quiet_gc, run_sync
from toolkit.collect.plan import Plan, StoredAnswer, StoredWork, Unit, make_plan, read_stored_work
from toolkit.collect.reach import refuse_unreachable
from toolkit.collect.progress import Counts, Tracker, View, ViewFactory, view_factory
from toolkit.collect.settings import CollectSettings, Endpoint
from toolkit.failures import Cause, causes_line, causes_of
from toolkit.collect.journal import RunJournal
from toolkit.store import Store

RAMP_STEP_S = 0.001  # workers start this far apart (see Collector._worker)
TICK_S = 1.0  # the progress view is ticked at least this often


@dataclass(frozen=True)
class RunReport:
    run_id: str
    judge_model: str
    answers_ok: int
    answer_errors: int
    judgments_ok: int
    judge_errors: int
    reasks: int
    skipped_answers: int
    skipped_judgments: int
    unanswerable: int
    interrupted: bool
    elapsed_s: float
    answering: bool = True
    notes: tuple[str, ...] = ()  # e.g. journal lines that could not be stored and were set aside
    failures: tuple[tuple[str, str], ...] = ()  # (case id, error text) of each failure, in the order they ended

    def causes(self) -> list[Cause]:
        """The cases that failed in this collection by cause (a case counts once, by its last failure)."""
        import polars as pl

        frame = pl.DataFrame({"case_id": [c for c, _ in self.failures], "error": [e for _, e in self.failures],
                              "seq": list(range(len(self.failures)))}, schema={"case_id": pl.String,
                                                                               "error": pl.String, "seq": pl.Int64})
        return causes_of(frame.group_by("case_id").agg(pl.col("error").last(), pl.col("seq").last()))

    def failure_line(self) -> str | None:
        """``3 cases failed: 2 × APITimeoutError: ..., 1 × InternalServerError 500: ...``; None without failures."""
        causes = self.causes()
        return f"{self.run_id}: {causes_line(causes)}" if causes else None

    def line(self) -> str:
        if self.answering:
            done = (f"{self.run_id}: {self.answers_ok} answers, {self.judgments_ok} judgments by {self.judge_model}"
                    f" ({self.skipped_answers} answers and {self.skipped_judgments} judgments already stored)")
        else:
            done = (f"{self.run_id}: {self.judgments_ok} judgments by {self.judge_model} of stored answers "
                    f"({self.skipped_judgments} already stored)")
        problems = [f"{n} {what}" for n, what in ((self.answer_errors, "answer errors"),
                                                  (self.judge_errors, "judge errors"),
                                                  (self.reasks, "invalid judge replies re-asked"),
                                                  (self.unanswerable, "cases without a stored answer")) if n]
        problems += self.notes
        return done + (f"; {', '.join(problems)}" if problems else "") + f" in {self.elapsed_s:.1f}s"


@dataclass(frozen=True)
class JobClients:
    """A run's clients; None where it has no calls to make (so a finished run needs no key)."""

    answer: ChatClient | None
    judge: ChatClient | None


@dataclass(frozen=True)
class CollectJob:
    """One run to collect: ``answer`` False judges stored answers only."""

    settings: CollectSettings
    cases: tuple[CaseToJudge, ...]
    answer: bool = True


class Collector:
    """The calls of one run, made by ``concurrency`` workers over its (case, sample) units in dataset order."""

    def __init__(self, job: CollectJob, journal: RunJournal, work: StoredWork, plan: Plan,
                 clients: JobClients, counts: Counts):
        self.settings = job.settings
        self.journal = journal
        self.work = work
        self.plan = plan
        self.counts = counts
        self.clients = clients
        self.by_id = {c.case_id: c for c in plan.cases}
        passes: dict[Unit, list[int]] = {}
        for case_id, sample, judge_pass in plan.to_judge:
            passes.setdefault((case_id, sample), []).append(judge_pass)
        self.passes = passes
        # Dataset order, a case's samples next to each other: the workers take them together, so cases
        # finish whole and a killed run leaves few cases with only some of their samples.
        position = {c.case_id: i for i, c in enumerate(plan.cases)}
        self.jobs: list[Unit] = sorted({*plan.to_answer, *passes}, key=lambda u: (position[u[0]], u[1]))
        counts.answers_total = len(plan.to_answer)
        counts.judgments_total = len(plan.to_judge)
        self.view: View | None = None
        self.failures: list[tuple[str, str]] = []  # (case id, error text) of answers and passes that failed

    async def run(self) -> None:
        if not self.jobs:
            return
        jobs = iter(self.jobs)
        async with asyncio.TaskGroup() as group:
            for index in range(min(self.settings.concurrency, len(self.jobs))):
                group.create_task(self._worker(jobs, index * RAMP_STEP_S))

    async def _worker(self, jobs: Iterator[Unit], delay: float) -> None:
        # Workers start RAMP_STEP_S apart: no burst of C identical requests at second 0 (the first
        # thing a provider's burst limit sees), and completions stay spread out instead of arriving
        # in lock-step waves that queue behind each other on the event loop.
        await asyncio.sleep(delay)
        for case_id, sample in jobs:  # one shared iterator: next() never awaits, so each unit goes to one worker
            await self._unit(self.by_id[case_id], sample)

    async def _unit(self, case: CaseToJudge, sample: int) -> None:
        stored = self.work.answers.get((case.case_id, sample))
        answer_started: float | None = None
        if stored is None:
            answer_started = time.monotonic()
            stored = await self._answer(case, sample)
            if stored is None:
                return
        for judge_pass in self.passes.get((case.case_id, sample), ()):
            await self._judge(case, sample, stored, judge_pass, answer_started)

    async def _answer(self, case: CaseToJudge, sample: int) -> StoredAnswer | None:
        s = self.settings
        assert self.clients.answer is not None
        unit = (case.case_id, sample)
        attempt = self.work.next_answer_attempt(unit)
        started_at = now_iso()
        row: dict[str, Any] = {"run_id": s.run_id, "case_id": case.case_id, "sample": sample, "attempt": attempt,
                               "answer_model": s.answer_model, "reasoning_effort": s.reasoning_effort}
        try:
            call = await self.clients.answer.complete(
                s.answer_model, protocol.answer_messages(case.prompt), temperature=protocol.ANSWER_TEMPERATURE,
                max_completion_tokens=protocol.ANSWER_MAX_COMPLETION_TOKENS, reasoning_effort=s.reasoning_effort)
        except CallFailed as failure:
            row.update(seq=self.work.next_seq(), started_at=started_at, finished_at=now_iso(), error=failure.error)
            self.journal.append("answers", row)
            self.failures.append((case.case_id, failure.error))
            self.counts.answer_errors += 1
            self.counts.judgments_total -= len(self.passes.get(unit, ()))  # no answer, nothing to judge
            self._advance(answers=1)
            return None
        row.update(seq=self.work.next_seq(), answer=call.text, answer_temperature=call.temperature,
                   **_call_columns(call))
        self.journal.append("answers", row)
        stored = StoredAnswer(attempt, call.text, call.latency_s)
        self.work.answers[unit] = stored
        self._advance(answers=1)
        return stored

    async def _judge(self, case: CaseToJudge, sample: int, answer: StoredAnswer, judge_pass: int,
                     answer_started: float | None) -> None:
        s, judge = self.settings, self.plan.judge_model
        assert self.clients.judge is not None
        key = (case.case_id, sample, judge, judge_pass)
        messages = case.messages(answer.text)
        last_error = "InvalidJudgeReply: no valid reply"
        for _ in range(1 + s.judge_reasks):
            attempt = self.work.next_judge_attempt(key)
            started_at = now_iso()
            row: dict[str, Any] = {"run_id": s.run_id, "case_id": case.case_id, "sample": sample, "judge_model": judge,
                                   "judge_pass": judge_pass, "attempt": attempt, "answer_attempt": answer.attempt}
            try:
                call = await self.clients.judge.complete(
                    judge, messages, temperature=protocol.JUDGE_TEMPERATURE,
                    max_completion_tokens=protocol.JUDGE_MAX_COMPLETION_TOKENS,
                    response_format=protocol.JUDGE_RESPONSE_FORMAT)
            except CallFailed as failure:  # transport retries are spent: a judge error for this run
                row.update(seq=self.work.next_seq(), started_at=started_at, finished_at=now_iso(),
                           error=failure.error)
                self.journal.append("judgments", row)
                last_error = failure.error
                break
            row.update(judge_temperature=call.temperature, raw_reply=call.text, **_call_columns(call),
                       elapsed_seconds=None if answer_started is None else time.monotonic() - answer_started)
            try:
                decisions = parse_decisions(call.text, case.item_ids)
            except InvalidJudgeReply as invalid:
                row.update(seq=self.work.next_seq(), error=invalid.error)
                self.journal.append("judgments", row)
                last_error = invalid.error
                self.counts.reasks += 1
                continue
            row.update(seq=self.work.next_seq(), error=None)
            self.journal.append_many([("judgments", row), *(
                ("decisions", {"run_id": s.run_id, "case_id": case.case_id, "sample": sample, "judge_model": judge,
                               "judge_pass": judge_pass, "item_id": item_id, "matched": matched,
                               "judgment_attempt": attempt}) for item_id, matched in decisions.items())])
            self.work.judged.add(key)
            self._advance(judgments=1)
            return
        self.failures.append((case.case_id, last_error))
        self.counts.judge_errors += 1
        self._advance(judgments=1)

    def _advance(self, answers: int = 0, judgments: int = 0) -> None:
        self.counts.answers_done += answers
        self.counts.judgments_done += judgments
        if self.view is not None:
            self.view.update()


def _call_columns(call: Completion) -> dict[str, Any]:
    return {"started_at": call.started_at, "finished_at": call.finished_at, "latency_s": call.latency_s,
            "prompt_tokens": call.prompt_tokens, "completion_tokens": call.completion_tokens,
            "reasoning_tokens": call.reasoning_tokens, "finish_reason": call.finish_reason}


class ClientPool:
    """SDK clients by endpoint; runs on the same endpoint (URL and key) share one adaptive limit,
    because a provider's rate limit belongs to the key, not to the run."""

    def __init__(self, concurrency: int):
        self.concurrency = concurrency
        self._limits: dict[tuple[str, tuple[str, ...]], tuple[AdaptiveLimit, CallStats]] = {}
        self._clients: dict[tuple[str, str, tuple[str, ...], int], ChatClient] = {}
        self._sdks: dict[tuple[str, tuple[str, ...], int], Any] = {}

    def client(self, endpoint: Endpoint, role: str, settings: CollectSettings) -> ChatClient:
        where = (endpoint.base_url, endpoint.key_envs)
        # the reply limit is the SDK's (its HTTP client caps the bodies): one SDK per endpoint and limit
        sdk_key = (*where, settings.max_reply_bytes)
        if (role, *sdk_key) not in self._clients:
            limit, stats = self._limits.setdefault(where, (AdaptiveLimit(self.concurrency), CallStats()))
            client = ChatClient(endpoint, role, settings.retry, limit, stats, self._sdks.get(sdk_key),
                                settings.max_reply_bytes)
            self._sdks[sdk_key] = client.sdk  # one connection pool per endpoint
            self._clients[(role, *sdk_key)] = client
        return self._clients[(role, *sdk_key)]

    def for_job(self, settings: CollectSettings, plan: Plan) -> JobClients:
        """Clients of one run, created only where calls are due (so a finished run needs no key)."""
        answer = judge = None
        if plan.to_answer:
            assert settings.answer_endpoint is not None
            answer = self.client(settings.answer_endpoint, "answer", settings)
        if plan.to_answer or plan.to_judge:
            judge = self.client(settings.judge_endpoint, "judge", settings)
        return JobClients(answer, judge)

    @property
    def stats(self) -> list[CallStats]:
        return [s for _, s in self._limits.values()]

    @property
    def limits(self) -> list[AdaptiveLimit]:
        return [lim for lim, _ in self._limits.values()]

    async def close(self) -> None:
        for sdk in self._sdks.values():
            await sdk.close()


def collect(store: Store, jobs: list[CollectJob], views: ViewFactory | None = None,
            label: str | None = None, prepare: Any = None) -> list[RunReport]:
    """Collect several runs in one event loop (each under its lock); reports in job order.

    ``prepare(store, job)`` runs under the lock once the journal is recovered and the keys are found
    (the CLI uses it to write the dataset and the runs row, or to refuse a mismatched resume). Raises
    EndpointFatal on a wrong key or unknown model, after checkpointing what completed (EndpointUnreachable,
    before anything is written, when an endpoint with calls due refuses connections or does not resolve),
    and PendingBatch when a run has a batch in flight (a direct run would pay for its calls again). Runs on
    a thread of its own when called inside a running event loop (a notebook).
    """
    started = time.monotonic()
    refuse_unreachable(store, jobs)  # before the store is touched: a wrong URL leaves nothing behind
    concurrency = max(j.settings.concurrency for j in jobs)
    pool = ClientPool(concurrency)
    with ExitStack() as stack:
        # Entered first, left last: the one refresh at the end comes after the final checkpoint and compaction.
        stack.enter_context(store.batch(min(j.settings.db_refresh_s for j in jobs)))
        collectors: list[Collector] = []
        journals: list[RunJournal] = []
        for job in jobs:
            stack.enter_context(store.lock(job.settings.run_id))
            journal = RunJournal(store, job.settings.run_id)
            journal.recover()
            journals.append(journal)
            refuse_pending(journal.folder, job.settings.run_id)
            work = read_stored_work(store, job.settings.run_id)
            plan = make_plan(list(job.cases), work, job.settings.judge_model, job.settings.judge_passes, job.answer,
                             job.settings.answer_samples, job.settings.run_id)
            clients = pool.for_job(job.settings, plan)  # a missing key fails here, before anything is written
            if prepare is not None:
                prepare(store, job)
            collectors.append(Collector(job, journal, work, plan, clients, Counts()))
        tracker = Tracker(label or (jobs[0].settings.run_id if len(jobs) == 1 else f"{len(jobs)} runs"),
                          stats=pool.stats, limits=pool.limits, runs=[c.counts for c in collectors])
        view = (views or view_factory("none"))(tracker)
        for c in collectors:
            c.view = view
        interval = min(j.settings.checkpoint_s for j in jobs)
        try:
            with quiet_gc():
                interrupted = run_sync(lambda: _drive(collectors, journals, pool, view, interval))
        finally:
            failed: Exception | None = None
            for journal in journals:  # every run's journal committed, also after another's failed
                try:
                    journal.close()
                except Exception as error:  # noqa: BLE001 - raised below, once the others are stored
                    failed = failed or error
            if failed is not None:
                raise failed
    elapsed = time.monotonic() - started
    return [RunReport(c.settings.run_id, c.plan.judge_model, c.counts.answers_done - c.counts.answer_errors,
                      c.counts.answer_errors, c.counts.judgments_done - c.counts.judge_errors, c.counts.judge_errors,
                      c.counts.reasks, c.plan.skipped_answers, c.plan.skipped_judgments, c.plan.unanswerable,
                      interrupted, elapsed, c.plan.answering, quarantine_notes(c.journal), tuple(c.failures))
            for c in collectors]


def quarantine_notes(journal: RunJournal) -> tuple[str, ...]:
    """Report-line notes about journal lines ``recover`` could not store and set aside."""
    return tuple(f"{n} journal line(s) that could not be stored were moved to {path}"
                 for path, n in journal.quarantined.items())


async def _drive(collectors: list[Collector], journals: list[RunJournal], pool: ClientPool, view: View,
                 interval: float) -> bool:
    """Run the collectors, checkpointing every ``interval`` s; True when stopped by a signal."""

    async def checkpoints() -> None:
        # The progress view ticks at least every TICK_S whatever the checkpoint interval.
        tick = min(interval, TICK_S)
        due = time.monotonic() + interval
        while True:
            await asyncio.sleep(min(tick, max(0.0, due - time.monotonic())))
            if time.monotonic() >= due:
                for journal in journals:  # the store commits on a thread: calls keep completing meanwhile
                    journal.rotate()
                    try:
                        await asyncio.to_thread(journal.commit_rotated)
                    except Exception:  # noqa: BLE001 - it stays pending: the next checkpoint tries again, and
                        pass  # the last one (``RunJournal.close``) fails the run, never leaving rows unseen
                due = time.monotonic() + interval
            view.tick()

    async def everything() -> None:
        async with asyncio.TaskGroup() as group:
            for collector in collectors:
                group.create_task(collector.run())

    ticker = asyncio.create_task(checkpoints())
    view.start()
    try:
        return await interruptible(everything(), (EndpointFatal,))
    finally:
        ticker.cancel()
        view.stop()
        await pool.close()
