"""Judge replies: strict validation into one boolean per supplied rubric item, or a stated reason why not.

Nothing is repaired or guessed: a reply that is not a JSON object with a
``decisions`` list holding exactly one boolean ``matched`` per supplied
``item_id`` is invalid, and the caller asks again or records a judge error.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolkit import protocol


class InvalidJudgeReply(ValueError):
    """Why a judge reply was rejected (stored as the judgments row's error)."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason

    @property
    def error(self) -> str:
        return f"InvalidJudgeReply: {self.reason}"[: protocol.ERROR_TEXT_LIMIT]


@dataclass(frozen=True)
class CaseToJudge:
    """What the judge needs of one case: the prompt and its rubric in rubric order."""

    case_id: str
    prompt: str
    items: tuple[tuple[str, float, str], ...]  # (item_id, points, text)

    @property
    def item_ids(self) -> list[str]:
        return [i for i, _, _ in self.items]

    def messages(self, answer: str) -> list[dict[str, str]]:
        return protocol.judge_messages(self.prompt, answer, list(self.items))


def case_to_judge(case: dict[str, Any]) -> CaseToJudge:
    """From a dataset case object (rubric items in their stored order)."""
    return CaseToJudge(case["case_id"], case["prompt"],
                       tuple((i["item_id"], float(i["points"]), i["text"]) for i in case["rubric_items"]))


def parse_decisions(reply: str | None, item_ids: list[str]) -> dict[str, bool]:
    """item_id -> matched, in ``item_ids`` order; InvalidJudgeReply naming the first problem."""
    if reply is not None and not isinstance(reply, str):
        raise InvalidJudgeReply(f"the reply is {type(reply).__name__}, not text")
    if reply is None or not reply.strip():
        raise InvalidJudgeReply("empty reply")
    try:
        data = json.loads(reply)
    except json.JSONDecodeError as error:
        raise InvalidJudgeReply(f"not JSON ({error.msg} at line {error.lineno} column {error.colno})") from None
    if not isinstance(data, dict):
        raise InvalidJudgeReply(f"expected a JSON object, got {type(data).__name__}")
    decisions = data.get("decisions")
    if not isinstance(decisions, list):
        raise InvalidJudgeReply("no 'decisions' list" if decisions is None else "'decisions' is not a list")
    wanted = set(item_ids)
    found: dict[str, bool] = {}
    for index, entry in enumerate(decisions):
        if not isinstance(entry, dict) or not isinstance(entry.get("item_id"), str):
            raise InvalidJudgeReply(f"decisions[{index}] has no string item_id")
        item_id = entry["item_id"]
        if item_id not in wanted:
            raise InvalidJudgeReply(f"decisions[{index}]: unknown item_id {item_id!r}")
        if item_id in found:
            raise InvalidJudgeReply(f"decisions[{index}]: duplicate decision for {item_id!r}")
        matched = entry.get("matched")
        if not isinstance(matched, bool):
            raise InvalidJudgeReply(f"decisions[{index}]: matched for {item_id!r} is {json.dumps(matched)}, "
                                    "not a boolean")
        found[item_id] = matched
    missing = [i for i in item_ids if i not in found]
    if missing:
        raise InvalidJudgeReply(f"no decision for {len(missing)} of {len(item_ids)} item(s), first {missing[0]!r}")
    return {i: found[i] for i in item_ids}
