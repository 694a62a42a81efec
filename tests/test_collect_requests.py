"""What goes on the wire: exact request bodies, the temperature fallback and every judge failure mode,
through the real openai SDK and `bedside run` against a recording loopback server."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from tests.collect_support import Recorder, bedside, completion, error, judge_reply
from toolkit import protocol
from toolkit.collect.judge import InvalidJudgeReply, parse_decisions
from toolkit.dataset import load_dataset
from toolkit.store import Store
from toolkit.summary import summarize

ANSWER = "Check potassium. Start an ACE inhibitor."


@pytest.fixture(scope="module")
def sample():
    return load_dataset(None)


def items_of(case: dict[str, Any]) -> list[tuple[str, float, str]]:
    return [(i["item_id"], float(i["points"]), i["text"]) for i in case["rubric_items"]]


def honest(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    if body["model"] == "judge":
        return completion(judge_reply(body), "judge")
    return completion(ANSWER, body["model"], reasoning=5)


def run(recorder: Recorder, store: Path, *extra: str) -> tuple[int, str, str]:
    return bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", recorder.base_url,
                   "--judge-base-url", recorder.base_url, "--store", store, "--progress", "none", *extra)


def test_answer_and_judge_bodies_are_exactly_the_protocol(tmp_path: Path, sample) -> None:
    with Recorder(honest) as rec:
        code, out, err = run(rec, tmp_path / "s", "--limit", "2", "--concurrency", "1")
    assert code == 0, err
    cases = [sample.case(c) for c in sample.select(limit=2)]
    answers, judges = rec.of_model("ans"), rec.of_model("judge")
    assert answers == [{"model": "ans", "messages": protocol.answer_messages(c["prompt"]), "temperature": 1,
                        "max_completion_tokens": 32000} for c in cases]
    assert list(answers[0]) == ["model", "messages", "temperature", "max_completion_tokens"]
    assert answers[0]["messages"][1]["content"] == cases[0]["prompt"]  # the prompt unchanged
    assert judges == [{"model": "judge", "messages": protocol.judge_messages(c["prompt"], ANSWER, items_of(c)),
                       "temperature": 0, "max_completion_tokens": 5000, "response_format": {"type": "json_object"}}
                      for c in cases]
    user = judges[0]["messages"][1]["content"]
    first = cases[0]["rubric_items"][0]
    assert f"[{first['item_id']}] points={first['points']:+g} :: {first['text']}" in user
    assert "reasoning_effort" not in answers[0]
    # accounting: latency, tokens, finish reason per call
    store = Store.open(tmp_path / "s")
    row = store.read("answers").row(0, named=True)
    assert row["answer_temperature"] == 1.0 and row["prompt_tokens"] == 11 and row["completion_tokens"] == 7
    assert row["reasoning_tokens"] == 5 and row["finish_reason"] == "stop" and row["latency_s"] > 0
    judged = store.read("judgments").row(0, named=True)
    assert judged["judge_temperature"] == 0.0 and judged["latency_s"] > 0 and judged["elapsed_seconds"] > 0
    settings = json.loads(store.run("ans")["settings"])
    assert settings["answer_endpoint"]["base_url"] == rec.base_url


def test_the_messages_are_the_documented_text_and_layout() -> None:
    # docs/grading_protocol.md of BedsideBench, section 1, and the reference runner's judge user message
    [system, user] = protocol.answer_messages("A 70-year-old with AF: anticoagulate?")
    assert system == {"role": "system", "content":
                      "You are a physician answering a clinical question. Give a direct, self-contained answer that "
                      "addresses the requested evaluation or management. Explain essential reasoning, calculations, "
                      "safety precautions, and follow-up. Do not mention benchmarks, rubrics, or grading."}
    assert user == {"role": "user", "content": "A 70-year-old with AF: anticoagulate?"}
    items = [("ab12_0", 2.0, "Recommends a DOAC"), ("ab12_1", -3.0, "Recommends aspirin alone"),
             ("ab12_2", 0.5, "Mentions CHA2DS2-VASc"), ("ab12_3", 0.0, "Neutral")]
    judge = protocol.judge_messages("Prompt line 1\nline 2", "Start apixaban.", items)
    assert judge[1] == {"role": "user", "content":
                        "CLINICAL PROMPT:\nPrompt line 1\nline 2\n\nANSWER:\nStart apixaban.\n\nRUBRIC ITEMS:\n"
                        "[ab12_0] points=+2 :: Recommends a DOAC\n"
                        "[ab12_1] points=-3 :: Recommends aspirin alone\n"
                        "[ab12_2] points=+0.5 :: Mentions CHA2DS2-VASc\n"
                        "[ab12_3] points=+0 :: Neutral"}
    assert judge[0]["role"] == "system" and judge[0]["content"].startswith(
        "You are grading a clinical answer against independent rubric items.\n\nFor every rubric item, decide")


def test_reasoning_effort_is_sent_only_to_the_answer_model(tmp_path: Path) -> None:
    with Recorder(honest) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1", "--reasoning-effort", "high")
    assert code == 0, err
    assert rec.of_model("ans")[0]["reasoning_effort"] == "high"
    assert "reasoning_effort" not in rec.of_model("judge")[0]
    assert Store.open(tmp_path / "s").read("answers")["reasoning_effort"].to_list() == ["high"]


def test_temperature_rejection_falls_back_and_records_null(tmp_path: Path) -> None:
    def picky(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if "temperature" in body:
            return error(400, f"Unsupported value: 'temperature' does not support {body['temperature']}")
        return honest(body)

    with Recorder(picky) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "3", "--concurrency", "1")
    assert code == 0, err
    # one rejected call per model, then no temperature at all (the model is remembered)
    assert [("temperature" in b) for b in rec.of_model("ans")] == [True, False, False, False]
    assert [("temperature" in b) for b in rec.of_model("judge")] == [True, False, False, False]
    store = Store.open(tmp_path / "s")
    assert store.read("answers")["answer_temperature"].to_list() == [None] * 3
    assert store.read("judgments")["judge_temperature"].to_list() == [None] * 3
    summary = summarize(store, ["ans"])["ans"]
    assert summary["answer_temperature"] is None and summary["judge_temperature"] is None
    assert summary["completed_cases"] == 3


BROKEN = {
    "not_json": lambda ids: "Sure! Here are the decisions: item 0 matched.",
    "missing_decisions": lambda ids: json.dumps({"verdicts": [{"item_id": i, "matched": True} for i in ids]}),
    "missing_item": lambda ids: json.dumps({"decisions": [{"item_id": i, "matched": True} for i in ids[1:]]}),
    "extra_item": lambda ids: json.dumps({"decisions": [{"item_id": i, "matched": True} for i in ids]
                                          + [{"item_id": "item_99", "matched": True}]}),
    "duplicate_item": lambda ids: json.dumps({"decisions": [{"item_id": i, "matched": True} for i in ids]
                                              + [{"item_id": ids[0], "matched": False}]}),
    "non_boolean": lambda ids: json.dumps({"decisions": [{"item_id": i, "matched": "true"} for i in ids]}),
}


def _ids(body: dict[str, Any]) -> list[str]:
    return [d["item_id"] for d in json.loads(judge_reply(body))["decisions"]]


@pytest.mark.parametrize("kind", sorted(BROKEN))
def test_invalid_judge_reply_is_reasked_and_every_raw_reply_kept(tmp_path: Path, kind: str) -> None:
    def once_broken(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body["model"] == "judge" and len(rec.of_model("judge")) == 1:
            return completion(BROKEN[kind](_ids(body)), "judge")
        return honest(body)

    with Recorder(once_broken) as rec:
        code, out, err = run(rec, tmp_path / "s", "--limit", "1")
    assert code == 0, err
    assert len(rec.of_model("judge")) == 2 and rec.of_model("judge")[0] == rec.of_model("judge")[1]
    store = Store.open(tmp_path / "s")
    judgments = store.read("judgments").sort("attempt")
    assert judgments["attempt"].to_list() == [1, 2]
    assert judgments["answer_attempt"].to_list() == [1, 1]
    first, second = judgments.rows(named=True)
    assert first["error"].startswith("InvalidJudgeReply: ") and first["raw_reply"] == BROKEN[kind](_ids(rec.of_model("judge")[0]))
    assert second["error"] is None and json.loads(second["raw_reply"])["decisions"]
    decisions = store.read("decisions")
    assert decisions["judgment_attempt"].unique().to_list() == [2]
    assert decisions.height == len(_ids(rec.of_model("judge")[0]))
    assert summarize(store, ["ans"])["ans"]["completed_cases"] == 1


def test_persistently_invalid_judge_makes_a_judge_error_and_never_a_decision(tmp_path: Path) -> None:
    def broken(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        if body["model"] == "judge":
            return completion(BROKEN["missing_item"](_ids(body)), "judge")
        return honest(body)

    with Recorder(broken) as rec:
        code, out, err = run(rec, tmp_path / "s", "--limit", "2", "--judge-reasks", "2")
    assert code == 3, err  # finished, incomplete
    assert "run the same command again" in err
    store = Store.open(tmp_path / "s")
    judgments = store.read("judgments")
    assert judgments.height == 6 and judgments["error"].null_count() == 0  # 1 + 2 re-asks per case
    assert judgments["raw_reply"].null_count() == 0
    assert judgments.group_by("case_id").agg(pl.col("attempt").sort()).sort("case_id")["attempt"].to_list() \
        == [[1, 2, 3], [1, 2, 3]]
    assert store.read("decisions").height == 0
    summary = summarize(store, ["ans"])["ans"]
    assert summary["completed_cases"] == 0 and summary["errors"] == 2


def test_parse_decisions_accepts_exactly_one_boolean_per_item() -> None:
    ids = ["a_0", "a_1"]
    assert parse_decisions('{"decisions":[{"item_id":"a_1","matched":false},{"item_id":"a_0","matched":true,'
                           '"why":"x"}]}', ids) == {"a_0": True, "a_1": False}
    for reply, reason in [
        (None, "empty reply"), ("", "empty reply"), ("[1]", "expected a JSON object"),
        ('{"decisions": {}}', "not a list"), ('{"decisions":[{"item_id":"a_0","matched":1},'
                                              '{"item_id":"a_1","matched":true}]}', "not a boolean"),
        ('{"decisions":[{"item_id":"a_0","matched":true}]}', "no decision for 1 of 2"),
        ('{"decisions":[{"matched":true}]}', "no string item_id"),
        ("```json\n{}\n```", "not JSON"),
    ]:
        with pytest.raises(InvalidJudgeReply, match=reason):
            parse_decisions(reply, ids)
