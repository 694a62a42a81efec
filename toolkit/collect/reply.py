"""A provider's chat-completion reply, checked before anything of it is stored.

Direct calls and Batch API lines go through the same checks. A reply whose
fields have the wrong types (content given as a list of parts, no choices at
all) is an invalid response: the call is made again, as for a garbled body.
Text fields lose lone UTF-16 surrogates (``"\\ud83d"`` is valid JSON but not
encodable text): each becomes U+FFFD, so a paid answer is stored, not lost.

A refusal (``content`` null, ``refusal`` text present) is a successful answer
whose text is the refusal message: the model answered, by declining, and the
judge grades that text like any other.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

_SURROGATE = re.compile("[\ud800-\udfff]")


class InvalidResponse(ValueError):
    """A 2xx reply whose body is not a usable chat completion."""


def clean_text(text: str) -> str:
    """``text`` with each lone surrogate replaced by U+FFFD (UTF-8 cannot encode them)."""
    try:
        text.encode("utf-8")  # the common case, and far cheaper than searching the text
    except UnicodeEncodeError:
        return _SURROGATE.sub("\ufffd", text)
    return text


@dataclass(frozen=True)
class ReplyFields:
    """What is stored of a reply."""

    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None


def _count(value: Any) -> int | None:
    """A token count as reported, or None when it is not a non-negative integer."""
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def reply_fields(reply: Any) -> ReplyFields:
    """The stored fields of a chat-completion body; InvalidResponse naming what is wrong with it."""
    if not isinstance(reply, dict):
        raise InvalidResponse(f"the reply is a JSON {json_type(reply)}, not an object")
    choices = reply.get("choices")
    if not isinstance(choices, list):
        raise InvalidResponse("no 'choices' list")
    if not choices:
        raise InvalidResponse("'choices' is empty")
    choice = choices[0]
    message = choice.get("message") if isinstance(choice, dict) else None
    if not isinstance(message, dict):
        raise InvalidResponse("choices[0] has no 'message' object")
    content = message.get("content")
    if content is None and isinstance(message.get("refusal"), str):
        content = message["refusal"]
    if content is not None and not isinstance(content, str):
        raise InvalidResponse(f"message content is a JSON {json_type(content)}, not a string")
    finish = choice.get("finish_reason")
    usage = reply.get("usage") if isinstance(reply.get("usage"), dict) else {}
    details = usage.get("completion_tokens_details")
    details = details if isinstance(details, dict) else {}
    return ReplyFields(
        text=clean_text(content or ""),
        finish_reason=clean_text(finish) if isinstance(finish, str) else None,
        prompt_tokens=_count(usage.get("prompt_tokens")),
        completion_tokens=_count(usage.get("completion_tokens")),
        reasoning_tokens=_count(details.get("reasoning_tokens")),
    )


def json_type(value: object) -> str:
    """What a parsed JSON value is called in JSON (null, not NoneType), for one-line messages."""
    names = {dict: "object", list: "array", str: "string", bool: "boolean", int: "number", float: "number"}
    return "null" if value is None else names.get(type(value), type(value).__name__)
