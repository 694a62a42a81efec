"""Storing the lines of a finished batch, exactly once each, like the replies of direct calls.

Both result files are downloaded before anything is appended, and a line whose
row is already stored (its key: case, sample and attempt for answers; case,
sample, judge, pass and attempt for judgments) is skipped, so a rerun after a crash or
Ctrl-C in the middle of ingesting stores the rest and nothing twice.
"""

from __future__ import annotations

import datetime as dt
import json
from dataclasses import dataclass
from typing import Any, Callable

from toolkit import protocol
from toolkit.collect.client import ChatClient, mentions_temperature, now_iso
from toolkit.collect.judge import CaseToJudge, InvalidJudgeReply, parse_decisions
from toolkit.collect.plan import Plan, StoredAnswer, StoredWork
from toolkit.collect.progress import Counts
from toolkit.collect.reply import InvalidResponse, reply_fields
from toolkit.collect.wire import load_reply
from toolkit.collect.runner import CollectJob, JobClients
from toolkit.collect.journal import RunJournal

Tries = dict[Any, int]


def _unit(meta: dict[str, Any]) -> tuple[str, int]:
    """The (case, sample) of a batch line (a batch submitted before samples existed: sample 0)."""
    return meta["case_id"], meta.get("sample", 0)


@dataclass
class BatchLines:
    job: CollectJob
    journal: RunJournal
    work: StoredWork
    plan: Plan
    clients: JobClients  # on one endpoint: the answer and judge models must share it in batch mode
    counts: Counts
    say: Callable[[str], None]

    def __post_init__(self) -> None:
        self._gave_up: set[tuple[str, int]] = set()  # (case, sample) failed for good this time (non-retryable)
        self._gave_up_judging: set[tuple[str, int, int]] = set()
        self.answer_tries: Tries = {}  # (case, sample) -> lines submitted by this process
        self.judge_tries: Tries = {}  # (case, sample, pass) -> lines submitted by this process

    def client(self, kind: str) -> ChatClient:
        """The client whose role names the right model and flags in messages."""
        chosen = self.clients.answer if kind == "answer" else self.clients.judge
        fallback = self.clients.judge or self.clients.answer
        assert fallback is not None
        return chosen or fallback

    def model(self, state: dict[str, Any]) -> str:
        return self.job.settings.answer_model if state["kind"] == "answer" else state.get("model",
                                                                                          self.plan.judge_model)

    def judge_of(self, meta: dict[str, Any]) -> str:
        """The judge a line was sent to (states written before it was recorded: the plan's)."""
        return meta.get("judge_model") or self.plan.judge_model

    def reserve(self, meta: dict[str, Any]) -> None:
        """Attempt numbers of a batch still to be collected are taken: later calls get higher ones."""
        if meta["kind"] == "answer":
            self.work.answer_attempts[_unit(meta)] = max(self.work.answer_attempts.get(_unit(meta), 0),
                                                         meta["attempt"])
        else:
            key = (*_unit(meta), self.judge_of(meta), meta["pass"])
            self.work.judge_attempts[key] = max(self.work.judge_attempts.get(key, 0), meta["attempt"])

    async def ingest_results(self, state: dict[str, Any], batch: Any, by_id: dict[str, CaseToJudge]) -> None:
        """Download the output and error files of a finished batch, then store each line not yet stored."""
        client, model = self.client(state["kind"]), self.model(state)
        texts = []
        for file_id in (batch.output_file_id, batch.error_file_id):
            if file_id:
                content = await client.retrying(model, lambda: client.sdk.files.content(file_id),
                                                f"has no result file {file_id} of batch {batch.id} (HTTP 404)")
                texts.append(content.text)
        finished = now_iso()
        started = dt.datetime.fromtimestamp(batch.created_at, dt.timezone.utc).isoformat()
        seen: set[str] = set()
        for text in texts:
            for raw in text.splitlines():
                try:
                    line = load_reply(raw) if raw.strip() else None
                except ValueError:  # not JSON, nested too deep, a number too long to convert
                    line = None  # a broken line is asked for again in the next round
                custom_id = line.get("custom_id") if isinstance(line, dict) else None
                meta = state["requests"].get(custom_id) if isinstance(custom_id, str) else None  # ids are text
                if meta is None or line["custom_id"] in seen:
                    continue
                seen.add(line["custom_id"])
                if not self._stored(meta):
                    self._ingest(meta, line, by_id, started, finished)
        # Lines of an expired or cancelled batch that never ran are simply asked for in the next round.

    def _stored(self, meta: dict[str, Any]) -> bool:
        if meta["kind"] == "answer":
            return (*_unit(meta), meta["attempt"]) in self.work.answer_keys
        return (*_unit(meta), self.judge_of(meta), meta["pass"], meta["attempt"]) in self.work.judgment_keys

    def _ingest(self, meta: dict[str, Any], line: dict[str, Any], by_id: dict[str, CaseToJudge], started: str,
                finished: str) -> None:
        response = line.get("response") if isinstance(line.get("response"), dict) else {}
        status = response.get("status_code")
        status = status if isinstance(status, int) else 0
        body = response.get("body") if isinstance(response.get("body"), dict) else {}
        client = self.client(meta["kind"])
        if status != 200:
            error = body.get("error") if isinstance(body.get("error"), dict) else {}
            message = error.get("message") if isinstance(error.get("message"), str) else None
            message = message or json.dumps(line.get("error") or body)
            if meta["temperature"] is not None and mentions_temperature(status, message):
                model = self.job.settings.answer_model if meta["kind"] == "answer" else self.judge_of(meta)
                client.no_temperature.add(model)
                self._refund(meta)
                return
            text = client.scrub(f"BatchLineError: HTTP {status or '?'}: {message}")[: protocol.ERROR_TEXT_LIMIT]
            self._failed(meta, text, started, finished)
            if not (status in protocol.RETRYABLE_STATUS or status == 0):
                self._give_up(meta)
            return
        try:
            fields = reply_fields(body)
        except InvalidResponse as invalid:  # retried in the next round, like a garbled direct reply
            self._failed(meta, client.error_text(invalid), started, finished)
            return
        columns = {"started_at": started, "finished_at": finished, "latency_s": None,
                   "prompt_tokens": fields.prompt_tokens, "completion_tokens": fields.completion_tokens,
                   "reasoning_tokens": fields.reasoning_tokens, "finish_reason": fields.finish_reason}
        text = fields.text
        temperature = None if meta["temperature"] is None else float(meta["temperature"])
        s = self.job.settings
        if meta["kind"] == "answer":
            self.journal.append("answers", {
                "run_id": s.run_id, "case_id": meta["case_id"], "sample": _unit(meta)[1], "attempt": meta["attempt"],
                "seq": self.work.next_seq(), "answer_model": s.answer_model, "answer": text,
                "answer_temperature": temperature, "reasoning_effort": s.reasoning_effort, **columns})
            self.work.answer_keys.add((*_unit(meta), meta["attempt"]))
            self.work.answers[_unit(meta)] = StoredAnswer(meta["attempt"], text, None)
            self.counts.answers_done += 1
            return
        judge = self.judge_of(meta)
        row = {"run_id": s.run_id, "case_id": meta["case_id"], "sample": _unit(meta)[1], "judge_model": judge,
               "judge_pass": meta["pass"],
               "attempt": meta["attempt"], "answer_attempt": meta["answer_attempt"], "judge_temperature": temperature,
               "raw_reply": text, **columns}
        key = (*_unit(meta), judge, meta["pass"], meta["attempt"])
        try:
            decisions = parse_decisions(text, by_id[meta["case_id"]].item_ids)
        except InvalidJudgeReply as invalid:
            self.journal.append("judgments", {**row, "seq": self.work.next_seq(), "error": invalid.error})
            self.work.judgment_keys.add(key)
            self.counts.reasks += 1
            return
        self.journal.append_many([("judgments", {**row, "seq": self.work.next_seq()}), *(
            ("decisions", {"run_id": s.run_id, "case_id": meta["case_id"], "sample": _unit(meta)[1],
                           "judge_model": judge,
                           "judge_pass": meta["pass"], "item_id": i, "matched": m, "judgment_attempt": meta["attempt"]})
            for i, m in decisions.items())])
        self.work.judgment_keys.add(key)
        self.work.judged.add((*_unit(meta), judge, meta["pass"]))
        self.counts.judgments_done += 1

    def _failed(self, meta: dict[str, Any], error: str, started: str, finished: str) -> None:
        s = self.job.settings
        common = {"run_id": s.run_id, "case_id": meta["case_id"], "sample": _unit(meta)[1], "attempt": meta["attempt"],
                  "seq": self.work.next_seq(), "started_at": started, "finished_at": finished, "error": error}
        if meta["kind"] == "answer":
            self.journal.append("answers", {**common, "answer_model": s.answer_model,
                                            "reasoning_effort": s.reasoning_effort})
            self.work.answer_keys.add((*_unit(meta), meta["attempt"]))
        else:
            judge = self.judge_of(meta)
            self.journal.append("judgments", {**common, "judge_model": judge, "judge_pass": meta["pass"],
                                              "answer_attempt": meta["answer_attempt"]})
            self.work.judgment_keys.add((*_unit(meta), judge, meta["pass"], meta["attempt"]))

    def _refund(self, meta: dict[str, Any]) -> None:
        """A try that does not count (temperature rejected: asked again without it next round)."""
        tries, key = ((self.answer_tries, _unit(meta)) if meta["kind"] == "answer"
                      else (self.judge_tries, (*_unit(meta), meta["pass"])))
        if key in tries:  # (a batch resumed from an earlier process counted nothing here)
            tries[key] -= 1

    def _give_up(self, meta: dict[str, Any]) -> None:
        if meta["kind"] == "answer":
            self._gave_up.add(_unit(meta))
        else:
            self._gave_up_judging.add((*_unit(meta), meta["pass"]))
