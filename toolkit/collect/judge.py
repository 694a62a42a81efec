"""Judge replies: strict validation into one boolean per supplied rubric item, or a stated reason why not.

Nothing is repaired or guessed: a reply that is not a JSON object with a
``decisions`` list holding exactly one boolean ``matched`` per supplied
``item_id`` is invalid, and the caller asks again or records a judge error.
The reply is parsed as strict JSON (toolkit.inputs.parse_json): nesting is
bounded before the parser recurses, and NaN, Infinity, integers beyond 64 bits
and lone surrogate escapes make it invalid too, never an exception of another kind.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from toolkit import protocol
from toolkit.inputs import InputError, parse_json, shorten
from toolkit.collect.reply import json_type

_SYNTAX = "not JSON"  # parse_json's prefix of a syntax error (its other refusals name a field)


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
    if reply.startswith("\ufeff"):
        raise InvalidJudgeReply(f"{_SYNTAX} (starts with a byte order mark)")
    try:
        data = parse_json(reply, "judge reply", empty="reply", invalid=_SYNTAX)
    except InputError as error:
        if error.message.startswith(f"{_SYNTAX}: "):  # worded as json words a syntax error
            raise InvalidJudgeReply(f"{_SYNTAX} ({error.message[len(_SYNTAX) + 2:]} at {error.field})") from None
        raise InvalidJudgeReply(f"{error.field}: {error.message}") from None
    if not isinstance(data, dict):
        raise InvalidJudgeReply(f"expected a JSON object, got {json_type(data)}")
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
            raise InvalidJudgeReply(f"decisions[{index}]: unknown item_id {shorten(repr(item_id))}")
        if item_id in found:
            raise InvalidJudgeReply(f"decisions[{index}]: duplicate decision for {shorten(repr(item_id))}")
        matched = entry.get("matched")
        if not isinstance(matched, bool):
            raise InvalidJudgeReply(f"decisions[{index}]: matched for {item_id!r} is {shorten(json.dumps(matched))}, "
                                    "not a boolean")
        found[item_id] = matched
    missing = [i for i in item_ids if i not in found]
    if missing:
        raise InvalidJudgeReply(f"no decision for {len(missing)} of {len(item_ids)} item(s), first {missing[0]!r}")
    return {i: found[i] for i in item_ids}
