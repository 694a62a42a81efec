"""Batch mode: answers, then judgments, through the Files + Batch API; ingested like direct calls.

One batch is in flight at a time. Its ids and the meaning of each line live in
``batch.json`` (see ``batch_state``), written before and after
``batches.create``, so a rerun after a crash or Ctrl-C picks the batch up
(finding it by its input file if the crash came between upload and create)
instead of paying for it again; its lines are stored exactly once
(``batch_lines``). Failed lines are resubmitted in a later round: retryable
statuses up to the attempt limit, temperature rejections once without
temperature, invalid judge replies up to the re-ask limit. A batch the provider
fails as a whole is reported and forgotten, so the next run submits a new one.
``cancel`` asks the provider to stop the batch in flight, stores the lines it
finished and forgets it. Per-call latency is unknown in a batch and stored as null.
"""

from __future__ import annotations

import asyncio
import io
import json
import time
from dataclasses import dataclass
from typing import Any, Callable

from toolkit import protocol
from toolkit.collect.batch_lines import BatchLines
from toolkit.collect.batch_state import load_state, save_state
from toolkit.collect.client import CallFailed, EndpointFatal, chat_body
from toolkit.collect.judge import CaseToJudge
from toolkit.collect.loop import interruptible, run_sync
from toolkit.collect.plan import make_plan, read_stored_work
from toolkit.collect.progress import Counts
from toolkit.collect.reach import refuse_unreachable
from toolkit.collect.runner import ClientPool, CollectJob, JobClients, RunReport, quarantine_notes
from toolkit.collect.journal import RunJournal
from toolkit.store import Store

TERMINAL = ("completed", "failed", "expired", "cancelled")
POLL_FIRST_S, POLL_MAX_S = 0.2, 30.0
# What an HTTP 404 on a files/batches request means (never "model not found").
NO_BATCH_API = "has no Batch API (HTTP 404 on {what}); run without --batch"
UNKNOWN_BATCH = ("does not know batch {batch_id} (HTTP 404): it has no Batch API, or the batch was submitted with "
                 "another --base-url or key (--cancel-batch forgets it)")


class BatchFailed(RuntimeError):
    """The provider rejected or failed a whole batch (reported, the run stops; the rerun starts over)."""


@dataclass
class BatchRun(BatchLines):
    cancel: bool = False  # cancel the batch in flight, store what it finished, submit nothing new

    def load_state(self) -> dict[str, Any] | None:
        return load_state(self.journal.folder)

    def save_state(self, state: dict[str, Any] | None) -> None:
        save_state(self.journal.folder, state)

    async def run(self) -> None:
        by_id = {c.case_id: c for c in self.plan.cases}
        pending = self.load_state()
        if pending is not None:
            for meta in pending["requests"].values():  # attempts reserved by the interrupted batch
                self.reserve(meta)
            if self.cancel and not await self._request_cancel(pending):
                return
        while True:
            if pending is None:
                pending = None if self.cancel else self._next_batch(by_id)
                if pending is None:
                    return
            await self._submit_and_wait(pending, by_id)
            self.save_state(None)
            self.journal.checkpoint()
            pending = None

    def _next_batch(self, by_id: dict[str, CaseToJudge]) -> dict[str, Any] | None:
        s = self.job.settings
        lines: list[dict[str, Any]] = []
        requests: dict[str, dict[str, Any]] = {}
        todo = [u for u in self.plan.to_answer if u not in self.work.answers
                and self.answer_tries.get(u, 0) < s.retry.max_attempts and u not in self._gave_up]
        kind = "answer" if todo else "judge"
        model = s.answer_model if kind == "answer" else self.plan.judge_model
        no_temperature = self.client(kind).no_temperature
        if kind == "answer":
            for case_id, sample in todo:
                temperature = None if model in no_temperature else protocol.ANSWER_TEMPERATURE
                body = chat_body(model, protocol.answer_messages(by_id[case_id].prompt),
                                 temperature=temperature, max_completion_tokens=protocol.ANSWER_MAX_COMPLETION_TOKENS,
                                 reasoning_effort=s.reasoning_effort)
                meta = {"kind": "answer", "case_id": case_id, "sample": sample,
                        "attempt": self.work.next_answer_attempt((case_id, sample))}
                self.answer_tries[(case_id, sample)] = self.answer_tries.get((case_id, sample), 0) + 1
                lines.append(self._line(requests, meta, body))
        else:
            for case_id, sample, judge_pass in self.plan.to_judge:
                stored = self.work.answers.get((case_id, sample))
                key = (case_id, sample, judge_pass)
                if (stored is None or (case_id, sample, model, judge_pass) in self.work.judged
                        or self.judge_tries.get(key, 0) >= 1 + s.judge_reasks or key in self._gave_up_judging):
                    continue
                temperature = None if model in no_temperature else protocol.JUDGE_TEMPERATURE
                body = chat_body(model, by_id[case_id].messages(stored.text), temperature=temperature,
                                 max_completion_tokens=protocol.JUDGE_MAX_COMPLETION_TOKENS,
                                 response_format=protocol.JUDGE_RESPONSE_FORMAT)
                meta = {"kind": "judge", "case_id": case_id, "sample": sample, "pass": judge_pass,
                        "answer_attempt": stored.attempt, "judge_model": model,
                        "attempt": self.work.next_judge_attempt((case_id, sample, model, judge_pass))}
                self.judge_tries[key] = self.judge_tries.get(key, 0) + 1
                lines.append(self._line(requests, meta, body))
        if not lines:
            return None
        payload = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        return {"kind": kind, "model": model, "requests": requests, "payload_lines": len(lines),
                "input_file_id": None, "batch_id": None, "payload": payload}

    @staticmethod
    def _line(requests: dict[str, dict[str, Any]], meta: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        custom_id = f"{meta['kind'][0]}{len(requests)}"
        requests[custom_id] = {**meta, "temperature": body.get("temperature")}
        return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}

    async def _submit_and_wait(self, state: dict[str, Any], by_id: dict[str, CaseToJudge]) -> None:
        client, model, run_id = self.client(state["kind"]), self.model(state), self.job.settings.run_id
        sdk = client.sdk
        if state["batch_id"] is None:
            if state["input_file_id"] is None:
                data = state["payload"].encode()
                uploaded = await client.retrying(model, lambda: sdk.files.create(
                    file=("bedside-batch.jsonl", io.BytesIO(data)), purpose="batch"),
                    NO_BATCH_API.format(what="POST /files"))
                state["input_file_id"] = uploaded.id
                self.save_state(state)
            batch_id = await self._find_batch(state)
            if batch_id is None:
                created = await client.retrying(model, lambda: sdk.batches.create(
                    input_file_id=state["input_file_id"], endpoint="/v1/chat/completions", completion_window="24h",
                    metadata={"bedside_run": run_id[:500], "kind": state["kind"]}),
                    NO_BATCH_API.format(what="POST /batches"))
                batch_id = created.id
                self.say(f"{run_id}: {state['kind']} batch {batch_id} submitted ({len(state['requests'])} requests)")
            else:
                self.say(f"{run_id}: {state['kind']} batch {batch_id} was already submitted; collecting it")
            state["batch_id"] = batch_id
            state.pop("payload", None)  # the provider holds it now; keep the state file small
            self.save_state(state)
        batch = await self._wait(state)
        if batch.status == "failed":
            errors = getattr(getattr(batch, "errors", None), "data", None) or []
            detail = "; ".join(client.scrub(f"{e.code}: {e.message}") for e in errors[:3]) or "no detail"
            self.save_state(None)  # forgotten: a rerun submits a new batch instead of polling this one forever
            raise BatchFailed(f"{state['kind']} batch {batch.id} of {model!r} failed at the provider: {detail}; "
                              "run the same command again to submit a new batch")
        await self.ingest_results(state, batch, by_id)

    async def _find_batch(self, state: dict[str, Any]) -> str | None:
        """A batch already created from our upload (crash between create and saving its id)."""
        client = self.client(state["kind"])
        page = await client.retrying(self.model(state), lambda: client.sdk.batches.list(limit=100),
                                     NO_BATCH_API.format(what="GET /batches"))
        for batch in page.data:
            if batch.input_file_id == state["input_file_id"] and batch.status not in ("failed", "cancelled", "expired"):
                return batch.id
        return None

    async def _request_cancel(self, state: dict[str, Any]) -> bool:
        """Ask the provider to stop the batch in flight; False when there is none left to wait for."""
        client, model, run_id = self.client(state["kind"]), self.model(state), self.job.settings.run_id
        if state.get("batch_id") is None and state.get("input_file_id") is not None:
            state["batch_id"] = await self._find_batch(state)
        batch_id = state.get("batch_id")
        if batch_id is None:  # uploaded at most, never created: nothing runs at the provider
            self.save_state(None)
            self.say(f"{run_id}: the {state['kind']} batch was never created; forgotten")
            return False
        try:
            await client.retrying(model, lambda: client.sdk.batches.cancel(batch_id),
                                  UNKNOWN_BATCH.format(batch_id=batch_id))
        except CallFailed:
            pass  # it finished already: nothing left to cancel, its lines are collected below
        except EndpointFatal as fatal:
            if not fatal.not_found:
                raise
            self.save_state(None)
            self.say(f"{run_id}: the endpoint does not know {state['kind']} batch {batch_id}; forgotten")
            return False
        self.say(f"{run_id}: {state['kind']} batch {batch_id} cancelled; storing the lines it finished")
        return True

    async def _wait(self, state: dict[str, Any]) -> Any:
        client, batch_id, kind = self.client(state["kind"]), state["batch_id"], state["kind"]
        delay, last = POLL_FIRST_S, ""
        while True:
            batch = await client.retrying(self.model(state), lambda: client.sdk.batches.retrieve(batch_id),
                                          UNKNOWN_BATCH.format(batch_id=batch_id))
            counts = batch.request_counts
            status = f"{batch.status} {counts.completed + counts.failed}/{counts.total}" if counts else batch.status
            if status != last:
                self.say(f"{self.job.settings.run_id}: {kind} batch {batch_id}: {status}")
                last = status
            if batch.status in TERMINAL:
                return batch
            await asyncio.sleep(delay)
            delay = min(POLL_MAX_S, delay * 1.5)


def collect_batch(store: Store, job: CollectJob, say: Callable[[str], None], prepare: Any = None,
                  cancel: bool = False) -> RunReport:
    """Collect one run through the Batch API (under its lock); resumable like direct collection.

    ``cancel``: instead, cancel the run's batch in flight, store the lines it finished and forget it.
    """
    started = time.monotonic()
    s = job.settings
    if s.answer_endpoint is not None and s.answer_endpoint != s.judge_endpoint:
        raise ValueError("--batch needs the answer and judge models on the same endpoint "
                         f"({s.answer_endpoint.base_url} vs {s.judge_endpoint.base_url})")
    if not cancel:
        refuse_unreachable(store, [job])  # before the store is touched (a cancel asks only about a batch in flight)
    pool = ClientPool(1)
    with store.lock(s.run_id):
        journal = RunJournal(store, s.run_id)
        journal.recover()
        work = read_stored_work(store, s.run_id)
        plan = make_plan(list(job.cases), work, s.judge_model, s.judge_passes, job.answer, s.answer_samples,
                         s.run_id)
        counts = Counts(answers_total=len(plan.to_answer), judgments_total=len(plan.to_judge))
        interrupted = False
        pending = load_state(journal.folder) is not None
        busy = pending if cancel else pending or bool(plan.to_answer or plan.to_judge)
        clients = JobClients(None, None)
        if busy:  # a missing key fails here
            answer = pool.client(s.answer_endpoint, "answer", s) if s.answer_endpoint is not None else None
            clients = JobClients(answer, pool.client(s.judge_endpoint, "judge", s))
        elif cancel:
            say(f"{s.run_id}: no batch in flight, nothing to cancel")
        if prepare is not None:
            prepare(store, job)
        try:
            if busy:
                runner = BatchRun(job, journal, work, plan, clients, counts, say, cancel=cancel)

                async def go() -> bool:
                    try:
                        return await interruptible(runner.run())
                    finally:
                        await pool.close()

                interrupted = run_sync(go)
                if interrupted and runner.load_state() is not None:
                    say(f"{s.run_id}: the batch keeps running at the provider; re-run the same command to collect it")
        except CallFailed as failure:
            raise BatchFailed(f"batch request failed: {failure.error}") from None
        finally:
            journal.close()
    if not interrupted and not cancel:  # what is still missing after every round failed
        counts.answer_errors = sum(1 for u in plan.to_answer if u not in work.answers)
        counts.judge_errors = sum(1 for c, k, p in plan.to_judge
                                  if (c, k) in work.answers and (c, k, plan.judge_model, p) not in work.judged)
    return RunReport(s.run_id, plan.judge_model, counts.answers_done, counts.answer_errors, counts.judgments_done,
                     counts.judge_errors, counts.reasks, plan.skipped_answers, plan.skipped_judgments,
                     plan.unanswerable, interrupted, time.monotonic() - started, plan.answering,
                     quarantine_notes(journal))
