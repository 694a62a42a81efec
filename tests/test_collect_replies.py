"""Replies a provider should not send: wrong field types, lone surrogates, no choices, refusals, an exhausted
quota; and a journal holding a line that cannot be stored. None of them may lose a paid answer or wedge a run."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from aiohttp import web

from tests.collect_support import Recorder, bedside, completion, error, judge_reply
from toolkit.collect.journal import RunJournal
from toolkit.store import Store
from toolkit.summary import summarize

ANSWER = "Check potassium."


def run(recorder: Recorder, store: Path, *extra: str) -> tuple[int, str, str]:
    return bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", recorder.base_url,
                   "--judge-base-url", recorder.base_url, "--store", store, "--progress", "none",
                   "--retry-base-delay", "0", *extra)


def first_then_fine(broken: Any) -> Any:
    """A responder whose first reply of each model is ``broken(body)``, the rest valid."""
    seen: dict[str, int] = {}

    def respond(body: dict[str, Any]) -> tuple:
        seen[body["model"]] = seen.get(body["model"], 0) + 1
        if seen[body["model"]] == 1:
            return broken(body)
        return completion(judge_reply(body) if body["model"] == "judge" else ANSWER)

    return respond


def with_content(body: dict[str, Any], content: Any, **usage: Any) -> tuple:
    status, payload = completion(judge_reply(body) if body["model"] == "judge" else ANSWER)
    payload["choices"][0]["message"]["content"] = content
    payload["usage"].update(usage)
    return status, payload


def test_content_that_is_not_text_is_asked_again_for_both_models(tmp_path: Path) -> None:
    parts = [{"type": "text", "text": "an answer in parts"}]
    with Recorder(first_then_fine(lambda body: with_content(body, parts))) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1")
        calls = [b["model"] for b in rec.bodies]
    assert code == 0, err
    assert calls == ["ans", "ans", "judge", "judge"]  # each invalid reply retried like a garbled body
    store = Store.open(tmp_path / "s")
    assert store.read("answers")["answer"].to_list() == [ANSWER]
    assert summarize(store, ["ans"])["ans"]["completed_cases"] == 1


def test_content_never_text_is_an_answer_error_and_the_run_is_not_wedged(tmp_path: Path) -> None:
    with Recorder(lambda body: with_content(body, [{"type": "text", "text": "x"}])) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1", "--max-retries", "2")
        assert code == 3, err
        code, _, err = run(rec, tmp_path / "s", "--limit", "1", "--max-retries", "2")  # the rerun works too
    assert code == 3, err
    answers = Store.open(tmp_path / "s").read("answers").sort("attempt")
    assert answers["attempt"].to_list() == [1, 2] and answers["answer"].to_list() == [None, None]
    assert answers["error"][0] == "InvalidResponse: message content is a JSON array, not a string"


def test_token_counts_of_the_wrong_type_are_stored_as_unknown(tmp_path: Path) -> None:
    def odd(body: dict[str, Any]) -> tuple:
        content = judge_reply(body) if body["model"] == "judge" else ANSWER
        return with_content(body, content, prompt_tokens="11", completion_tokens=7.5)

    with Recorder(odd) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1")
    assert code == 0, err
    row = Store.open(tmp_path / "s").read("answers").row(0, named=True)
    assert (row["answer"], row["prompt_tokens"], row["completion_tokens"]) == (ANSWER, None, None)


class RawRecorder(Recorder):
    """Answers the answer model with raw bytes (JSON the json module would never write)."""

    raw = b""

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        if body["model"] == "judge":
            return web.json_response(completion(judge_reply(body))[1])
        return web.Response(body=self.raw, content_type="application/json")


def test_a_lone_surrogate_in_a_reply_is_stored_as_a_replacement_character(tmp_path: Path) -> None:
    reply = completion("broken emoji \\ud83d here")[1]
    with RawRecorder(lambda body: ()) as rec:
        rec.raw = json.dumps(reply).replace("\\\\ud83d", "\\ud83d").encode()
        code, _, err = run(rec, tmp_path / "s", "--limit", "1")
        judged = [b for b in rec.bodies if b["model"] == "judge"]
    assert code == 0, err
    assert Store.open(tmp_path / "s").read("answers")["answer"].to_list() == ["broken emoji \ufffd here"]
    assert "broken emoji \ufffd here" in judged[0]["messages"][1]["content"]  # the judge saw the stored text


def test_empty_choices_are_asked_again_and_a_refusal_is_the_answer(tmp_path: Path) -> None:
    def no_choices(body: dict[str, Any]) -> tuple:
        status, payload = completion("x")
        payload["choices"] = []
        return status, payload

    with Recorder(first_then_fine(no_choices)) as rec:
        code, _, err = run(rec, tmp_path / "a", "--limit", "1")
        assert code == 0, err
        assert [b["model"] for b in rec.bodies] == ["ans", "ans", "judge", "judge"]
    refusal = "I can't help with that request."

    def refusing(body: dict[str, Any]) -> tuple:
        if body["model"] == "judge":
            return completion(judge_reply(body, matched=False))
        status, payload = with_content(body, None)
        payload["choices"][0]["message"]["refusal"] = refusal
        return status, payload

    with Recorder(refusing) as rec:
        code, _, err = run(rec, tmp_path / "b", "--limit", "1")
        judged = rec.of_model("judge")
    assert code == 0, err
    assert Store.open(tmp_path / "b").read("answers")["answer"].to_list() == [refusal]
    assert f"ANSWER:\n{refusal}\n\nRUBRIC ITEMS:" in judged[0]["messages"][1]["content"]


def test_an_exhausted_quota_fails_fast_instead_of_retrying(tmp_path: Path) -> None:
    def broke(body: dict[str, Any]) -> tuple:
        status, payload = error(429, "You exceeded your current quota, please check your plan and billing details.")
        payload["error"].update(type="insufficient_quota", code="insufficient_quota")
        return status, payload

    with Recorder(broke) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "3", "--concurrency", "1", "--max-retries", "6")
        calls = len(rec.bodies)
    assert code == 1 and calls == 1
    assert "has no quota left (HTTP 429 insufficient_quota, answer model 'ans')" in err
    assert len(err.strip().splitlines()) == 1


def test_a_journal_line_that_cannot_be_stored_is_set_aside_and_the_rest_recovered(tmp_path: Path) -> None:
    with Recorder(first_then_fine(lambda body: completion(ANSWER))) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "2")
        assert code == 0, err
        # what a killed writer of an older version could leave: a good line and a line no table can hold
        store = Store.open(tmp_path / "s")
        folder = RunJournal(store, "ans").folder
        good = {"t": "judgments", "r": {"run_id": "ans", "case_id": "c-extra", "judge_model": "judge2",
                                        "judge_pass": 1, "attempt": 1, "seq": 99, "error": "InvalidJudgeReply: x"}}
        bad = {"t": "answers", "r": {"run_id": "ans", "case_id": "c-bad", "attempt": 1, "seq": 98,
                                     "answer": [{"type": "text", "text": "parts"}]}}
        journal = folder / "0123abcd.jsonl"
        journal.write_text(json.dumps([good]) + "\n" + json.dumps([bad]) + "\n")
        code, out, err = run(rec, tmp_path / "s", "--limit", "2")
        again = run(rec, tmp_path / "s", "--limit", "2")
    assert code == 0, err
    assert f"1 journal line(s) that could not be stored were moved to {folder / '0123abcd.bad'}" in out
    assert (folder / "0123abcd.bad").read_text() == json.dumps([bad]) + "\n" and not journal.exists()
    judgments = store.read("judgments")
    assert judgments.filter(judgments["case_id"] == "c-extra").height == 1  # the good line was stored
    assert "c-bad" not in store.read("answers")["case_id"].to_list()
    assert again[0] == 0 and "journal line" not in again[1]  # reported once, never blocks a later run
