"""Text from files, stores and providers made safe to print on a terminal.

A run id, model name, item text or provider message may hold terminal controls (``ESC[2J``,
``ESC]0;title BEL``, a C1 CSI, a right-to-left override): printed raw they clear the screen, retitle
the window or reorder what is read. ``visible`` writes each such character as a Python-style escape
(``\\x1b``, ``\\x9b``, ``\\u202e``); every other character, backslashes included, stays as it is.
"""

from __future__ import annotations

import re

# C0 controls (tab and newline too: one cell, one message line), DEL, C1 controls, the bidi marks,
# embeddings, overrides and isolates, the line and paragraph separators, and lone surrogates (bytes
# of a name that were not UTF-8), which a terminal cannot be sent at all.
_UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
# What json.dumps(..., ensure_ascii=False) leaves raw: DEL, C1, bidi and separators (C0 it escapes).
_UNSAFE_IN_JSON = re.compile("[\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")


def _escape(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """``text`` with every terminal control character shown as an escape (``\\x1b``, ``\\u202e``)."""
    return _UNSAFE.sub(_escape, text)


def visible_json(text: str) -> str:
    """JSON text whose strings hold no raw terminal control: the characters ``json.dumps`` leaves as
    they are become ``\\uXXXX`` escapes, which decode to the same value (they occur only inside strings)."""
    return _UNSAFE_IN_JSON.sub(lambda m: f"\\u{ord(m.group()):04x}", text)
