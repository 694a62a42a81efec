"""Batch mode: answers, then judgments, through the Files + Batch API; ingested like direct calls.

One batch is in flight at a time. Its ids and the meaning of each line
(case, attempt, pass, temperature) live in ``batch.json`` in the run's journal
folder, written before and after ``batches.create``, so a rerun after a crash
or Ctrl-C picks the batch up (finding it by its input file if the crash came
between upload and create) instead of paying for it again. Failed lines are
resubmitted in a later round: retryable statuses up to the attempt limit,
temperature rejections once without temperature, invalid judge replies up to
the re-ask limit. Per-call latency is unknown in a batch and stored as null.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import io
import json
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from toolkit import protocol
from toolkit.collect.client import CallFailed, ChatClient, chat_body, mentions_temperature, now_iso
from toolkit.collect.judge import CaseToJudge, InvalidJudgeReply, parse_decisions
from toolkit.collect.plan import Plan, StoredAnswer, StoredWork, make_plan, read_stored_work
from toolkit.collect.progress import Counts
from toolkit.collect.runner import ClientPool, CollectJob, RunReport, interruptible
from toolkit.journal import RunJournal
from toolkit.store import Store

TERMINAL = ("completed", "failed", "expired", "cancelled")
POLL_FIRST_S, POLL_MAX_S = 0.2, 30.0


class BatchFailed(RuntimeError):
    """The provider rejected or failed a whole batch (reported, the run stops; the rerun starts over)."""


@dataclass
class BatchRun:
    job: CollectJob
    journal: RunJournal
    work: StoredWork
    plan: Plan
    client: ChatClient  # one endpoint: the answer and judge models must share it in batch mode
    counts: Counts
    say: Callable[[str], None]

    def __post_init__(self) -> None:
        self._gave_up: set[str] = set()  # failed for good this time (non-retryable status)
        self._gave_up_judging: set[tuple[str, int]] = set()

    @property
    def state_path(self) -> Path:
        return self.journal.folder / "batch.json"

    # -- state ---------------------------------------------------------------

    def load_state(self) -> dict[str, Any] | None:
        try:
            return json.loads(self.state_path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return None

    def save_state(self, state: dict[str, Any] | None) -> None:
        if state is None:
            self.state_path.unlink(missing_ok=True)
            return
        tmp = self.state_path.with_suffix(".tmp")
        with open(tmp, "w", encoding="utf-8") as handle:
            json.dump(state, handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, self.state_path)

    # -- rounds ----------------------------------------------------------------

    async def run(self) -> None:
        by_id = {c.case_id: c for c in self.plan.cases}
        answer_tries: dict[str, int] = {}
        judge_tries: dict[tuple[str, int], int] = {}
        pending = self.load_state()
        if pending is not None:
            for meta in pending["requests"].values():  # attempts reserved by the interrupted batch
                self._reserve(meta)
        while True:
            if pending is None:
                pending = self._next_batch(by_id, answer_tries, judge_tries)
                if pending is None:
                    return
            await self._submit_and_wait(pending, by_id, answer_tries, judge_tries)
            self.save_state(None)
            self.journal.checkpoint()
            pending = None

    def _reserve(self, meta: dict[str, Any]) -> None:
        if meta["kind"] == "answer":
            self.work.answer_attempts[meta["case_id"]] = max(self.work.answer_attempts.get(meta["case_id"], 0),
                                                             meta["attempt"])
        else:
            key = (meta["case_id"], self.plan.judge_model, meta["pass"])
            self.work.judge_attempts[key] = max(self.work.judge_attempts.get(key, 0), meta["attempt"])

    def _next_batch(self, by_id: dict[str, CaseToJudge], answer_tries: dict[str, int],
                    judge_tries: dict[tuple[str, int], int]) -> dict[str, Any] | None:
        s = self.job.settings
        lines: list[dict[str, Any]] = []
        requests: dict[str, dict[str, Any]] = {}
        todo = [c for c in self.plan.to_answer if c not in self.work.answers
                and answer_tries.get(c, 0) < s.retry.max_attempts and c not in self._gave_up]
        kind = "answer" if todo else "judge"
        if kind == "answer":
            for case_id in todo:
                temperature = None if s.answer_model in self.client.no_temperature else protocol.ANSWER_TEMPERATURE
                body = chat_body(s.answer_model, protocol.answer_messages(by_id[case_id].prompt),
                                 temperature=temperature, max_completion_tokens=protocol.ANSWER_MAX_COMPLETION_TOKENS,
                                 reasoning_effort=s.reasoning_effort)
                meta = {"kind": "answer", "case_id": case_id, "attempt": self.work.next_answer_attempt(case_id)}
                answer_tries[case_id] = answer_tries.get(case_id, 0) + 1
                lines.append(self._line(requests, meta, body))
        else:
            judge = self.plan.judge_model
            for case_id, judge_pass in self.plan.to_judge:
                stored = self.work.answers.get(case_id)
                key = (case_id, judge_pass)
                if (stored is None or (case_id, judge, judge_pass) in self.work.judged
                        or judge_tries.get(key, 0) >= 1 + s.judge_reasks or key in self._gave_up_judging):
                    continue
                temperature = None if judge in self.client.no_temperature else protocol.JUDGE_TEMPERATURE
                body = chat_body(judge, by_id[case_id].messages(stored.text), temperature=temperature,
                                 max_completion_tokens=protocol.JUDGE_MAX_COMPLETION_TOKENS,
                                 response_format=protocol.JUDGE_RESPONSE_FORMAT)
                meta = {"kind": "judge", "case_id": case_id, "pass": judge_pass, "answer_attempt": stored.attempt,
                        "attempt": self.work.next_judge_attempt((case_id, judge, judge_pass))}
                judge_tries[key] = judge_tries.get(key, 0) + 1
                lines.append(self._line(requests, meta, body))
        if not lines:
            return None
        payload = "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines)
        return {"kind": kind, "requests": requests, "payload_lines": len(lines), "input_file_id": None,
                "batch_id": None, "payload": payload}

    @staticmethod
    def _line(requests: dict[str, dict[str, Any]], meta: dict[str, Any], body: dict[str, Any]) -> dict[str, Any]:
        custom_id = f"{meta['kind'][0]}{len(requests)}"
        requests[custom_id] = {**meta, "temperature": body.get("temperature")}
        return {"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body}

    async def _submit_and_wait(self, state: dict[str, Any], by_id: dict[str, CaseToJudge],
                               answer_tries: dict[str, int], judge_tries: dict[tuple[str, int], int]) -> None:
        sdk = self.client.sdk
        model = self.job.settings.answer_model if state["kind"] == "answer" else self.plan.judge_model
        if state["batch_id"] is None:
            if state["input_file_id"] is None:
                data = state["payload"].encode()
                uploaded = await self.client.retrying(model, lambda: sdk.files.create(
                    file=("bedside-batch.jsonl", io.BytesIO(data)), purpose="batch"))
                state["input_file_id"] = uploaded.id
                self.save_state(state)
            batch_id = await self._find_batch(model, state["input_file_id"])
            if batch_id is None:
                created = await self.client.retrying(model, lambda: sdk.batches.create(
                    input_file_id=state["input_file_id"], endpoint="/v1/chat/completions", completion_window="24h",
                    metadata={"bedside_run": self.job.settings.run_id[:500], "kind": state["kind"]}))
                batch_id = created.id
            state["batch_id"] = batch_id
            state.pop("payload", None)  # the provider holds it now; keep the state file small
            self.save_state(state)
            self.say(f"{self.job.settings.run_id}: {state['kind']} batch {batch_id} submitted "
                     f"({len(state['requests'])} requests)")
        batch = await self._wait(model, state["batch_id"], state["kind"])
        if batch.status == "failed":
            errors = getattr(getattr(batch, "errors", None), "data", None) or []
            detail = "; ".join(self.client.scrub(f"{e.code}: {e.message}") for e in errors[:3]) or "no detail"
            raise BatchFailed(f"{state['kind']} batch {batch.id} failed: {detail}")
        finished = now_iso()
        started = dt.datetime.fromtimestamp(batch.created_at, dt.timezone.utc).isoformat()
        seen: set[str] = set()
        for file_id in (batch.output_file_id, batch.error_file_id):
            if not file_id:
                continue
            content = await self.client.retrying(model, lambda: sdk.files.content(file_id))
            for raw in content.text.splitlines():
                if raw.strip():
                    line = json.loads(raw)
                    meta = state["requests"].get(line.get("custom_id"))
                    if meta is not None and line["custom_id"] not in seen:
                        seen.add(line["custom_id"])
                        self._ingest(meta, line, by_id, started, finished, answer_tries, judge_tries)
        # Lines of an expired or cancelled batch that never ran are simply asked for in the next round.

    async def _find_batch(self, model: str, input_file_id: str) -> str | None:
        """A batch already created from our upload (crash between create and saving its id)."""
        page = await self.client.retrying(model, lambda: self.client.sdk.batches.list(limit=100))
        for batch in page.data:
            if batch.input_file_id == input_file_id and batch.status not in ("failed", "cancelled", "expired"):
                return batch.id
        return None

    async def _wait(self, model: str, batch_id: str, kind: str) -> Any:
        delay, last = POLL_FIRST_S, ""
        while True:
            batch = await self.client.retrying(model, lambda: self.client.sdk.batches.retrieve(batch_id))
            counts = batch.request_counts
            status = f"{batch.status} {counts.completed + counts.failed}/{counts.total}" if counts else batch.status
            if status != last:
                self.say(f"{self.job.settings.run_id}: {kind} batch {batch_id}: {status}")
                last = status
            if batch.status in TERMINAL:
                return batch
            await asyncio.sleep(delay)
            delay = min(POLL_MAX_S, delay * 1.5)

    # -- ingesting lines -------------------------------------------------------------

    def _ingest(self, meta: dict[str, Any], line: dict[str, Any], by_id: dict[str, CaseToJudge], started: str,
                finished: str, answer_tries: dict[str, int], judge_tries: dict[tuple[str, int], int]) -> None:
        response = line.get("response") or {}
        status = int(response.get("status_code") or 0)
        body = response.get("body") if isinstance(response.get("body"), dict) else {}
        if status != 200:
            error = (body.get("error") or {}) if isinstance(body, dict) else {}
            message = error.get("message") if isinstance(error, dict) else None
            message = message or json.dumps(line.get("error") or body)
            if meta["temperature"] is not None and mentions_temperature(status, message):
                model = self.job.settings.answer_model if meta["kind"] == "answer" else self.plan.judge_model
                self.client.no_temperature.add(model)
                self._refund(meta, answer_tries, judge_tries)
                return
            text = self.client.scrub(f"BatchLineError: HTTP {status or '?'}: {message}")[: protocol.ERROR_TEXT_LIMIT]
            retry = status in protocol.RETRYABLE_STATUS or status == 0
            self._failed(meta, text, started, finished)
            if not retry:
                self._give_up(meta)
            return
        choice = (body.get("choices") or [{}])[0]
        usage = body.get("usage") or {}
        columns = {"started_at": started, "finished_at": finished, "latency_s": None,
                   "prompt_tokens": usage.get("prompt_tokens"), "completion_tokens": usage.get("completion_tokens"),
                   "reasoning_tokens": (usage.get("completion_tokens_details") or {}).get("reasoning_tokens"),
                   "finish_reason": choice.get("finish_reason")}
        text = (choice.get("message") or {}).get("content") or ""
        temperature = None if meta["temperature"] is None else float(meta["temperature"])
        s = self.job.settings
        if meta["kind"] == "answer":
            self.journal.append("answers", {
                "run_id": s.run_id, "case_id": meta["case_id"], "attempt": meta["attempt"],
                "seq": self.work.next_seq(), "answer_model": s.answer_model, "answer": text,
                "answer_temperature": temperature, "reasoning_effort": s.reasoning_effort, **columns})
            self.work.answers[meta["case_id"]] = StoredAnswer(meta["attempt"], text, None)
            self.counts.answers_done += 1
            return
        judge = self.plan.judge_model
        row = {"run_id": s.run_id, "case_id": meta["case_id"], "judge_model": judge, "judge_pass": meta["pass"],
               "attempt": meta["attempt"], "answer_attempt": meta["answer_attempt"], "judge_temperature": temperature,
               "raw_reply": text, **columns}
        try:
            decisions = parse_decisions(text, by_id[meta["case_id"]].item_ids)
        except InvalidJudgeReply as invalid:
            self.journal.append("judgments", {**row, "seq": self.work.next_seq(), "error": invalid.error})
            self.counts.reasks += 1
            return
        self.journal.append_many([("judgments", {**row, "seq": self.work.next_seq()}), *(
            ("decisions", {"run_id": s.run_id, "case_id": meta["case_id"], "judge_model": judge,
                           "judge_pass": meta["pass"], "item_id": i, "matched": m, "judgment_attempt": meta["attempt"]})
            for i, m in decisions.items())])
        self.work.judged.add((meta["case_id"], judge, meta["pass"]))
        self.counts.judgments_done += 1

    def _failed(self, meta: dict[str, Any], error: str, started: str, finished: str) -> None:
        s = self.job.settings
        common = {"run_id": s.run_id, "case_id": meta["case_id"], "attempt": meta["attempt"],
                  "seq": self.work.next_seq(), "started_at": started, "finished_at": finished, "error": error}
        if meta["kind"] == "answer":
            self.journal.append("answers", {**common, "answer_model": s.answer_model,
                                            "reasoning_effort": s.reasoning_effort})
        else:
            self.journal.append("judgments", {**common, "judge_model": self.plan.judge_model,
                                              "judge_pass": meta["pass"], "answer_attempt": meta["answer_attempt"]})

    @staticmethod
    def _refund(meta: dict[str, Any], answer_tries: dict[str, int], judge_tries: dict[tuple[str, int], int]) -> None:
        """A try that does not count (temperature rejected: asked again without it next round)."""
        tries, key = ((answer_tries, meta["case_id"]) if meta["kind"] == "answer"
                      else (judge_tries, (meta["case_id"], meta["pass"])))
        if key in tries:  # (a batch resumed from an earlier process counted nothing here)
            tries[key] -= 1

    def _give_up(self, meta: dict[str, Any]) -> None:
        if meta["kind"] == "answer":
            self._gave_up.add(meta["case_id"])
        else:
            self._gave_up_judging.add((meta["case_id"], meta["pass"]))


def collect_batch(store: Store, job: CollectJob, say: Callable[[str], None], prepare: Any = None) -> RunReport:
    """Collect one run through the Batch API (under its lock); resumable like direct collection."""
    started = time.monotonic()
    s = job.settings
    if s.answer_endpoint is not None and s.answer_endpoint != s.judge_endpoint:
        raise ValueError("--batch needs the answer and judge models on the same endpoint "
                         f"({s.answer_endpoint.base_url} vs {s.judge_endpoint.base_url})")
    pool = ClientPool(1)
    with store.lock(s.run_id):
        journal = RunJournal(store, s.run_id)
        journal.recover()
        work = read_stored_work(store, s.run_id)
        plan = make_plan(list(job.cases), work, s.judge_model, s.judge_passes, job.answer)
        counts = Counts(answers_total=len(plan.to_answer), judgments_total=len(plan.to_judge))
        interrupted = False
        busy = bool(plan.to_answer or plan.to_judge) or (journal.folder / "batch.json").exists()
        client = pool.client(s.judge_endpoint, "judge", s) if busy else None  # a missing key fails here
        if prepare is not None:
            prepare(store, job)
        try:
            if client is not None:
                runner = BatchRun(job, journal, work, plan, client, counts, say)

                async def go() -> bool:
                    try:
                        return await interruptible(runner.run())
                    finally:
                        await pool.close()

                interrupted = asyncio.run(go())
                if interrupted and runner.load_state() is not None:
                    say(f"{s.run_id}: the batch keeps running at the provider; re-run the same command to collect it")
        except CallFailed as failure:
            raise BatchFailed(f"batch request failed: {failure.error}") from None
        finally:
            journal.close()
    if not interrupted:  # what is still missing after every round failed
        counts.answer_errors = sum(1 for c in plan.to_answer if c not in work.answers)
        counts.judge_errors = sum(1 for c, p in plan.to_judge
                                  if c in work.answers and (c, plan.judge_model, p) not in work.judged)
    return RunReport(s.run_id, plan.judge_model, counts.answers_done, counts.answer_errors, counts.judgments_done,
                     counts.judge_errors, counts.reasks, plan.skipped_answers, plan.skipped_judgments,
                     plan.unanswerable, interrupted, time.monotonic() - started, plan.answering)
