"""Reading files a user hands us: regular files only, under a size cap, as strict JSON.

Datasets and result files come from outside. A FIFO or a device named ``*.json`` must
fail at once instead of hanging or filling memory, a number must be one a table can
hold (finite; an integer within 64 bits), nesting is bounded before the parser
recurses, and a string must be storable as UTF-8. Every refusal is an ``InputError``
naming the file, the field and what is wrong, printed by the CLI as one line.
"""

from __future__ import annotations

import json
import math
import os
import re
import stat
from itertools import accumulate
from pathlib import Path
from typing import Any, BinaryIO, Iterable

MiB = 1 << 20
GiB = 1 << 30
DATASET_FILE_LIMIT = 64 * MiB  # one case file, registry or manifest (the public split is ~2 MiB in all)
RESULT_FILE_LIMIT = 4 * GiB  # a result file of many samples of long answers is legitimately ~0.5 GiB
MAX_DEPTH = 64  # cases nest 3 levels and result rows 4; anything deeper is not one of ours
MESSAGE_LIMIT = 200  # characters of a quoted value kept in an error line

_INT64 = 1 << 63
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_JSON_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"', re.S)
_BRACKETS = re.compile(r"[\[\]{}]")
_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"), (stat.S_ISDIR, "a directory"))


class InputError(ValueError):
    """An input file refused: ``file: field: message``."""

    def __init__(self, file: str, field: str, message: str):
        self.file, self.field, self.message = file, field, message
        super().__init__(f"{file}: {field}: {message}")


def shorten(text: str, limit: int = MESSAGE_LIMIT) -> str:
    """Text cut in the middle so that a 400-digit number or a long answer keeps the line readable."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}…({len(text)} characters)…{text[-half // 2:]}"


def size_text(size: int) -> str:
    return f"{size / GiB:.1f} GiB" if size >= GiB else f"{size / MiB:.1f} MiB" if size >= MiB else f"{size} bytes"


def open_regular(path: str | os.PathLike[str], limit: int) -> BinaryIO:
    """Open ``path`` for binary reading if it is a regular file of at most ``limit`` bytes.

    Opened non-blocking (a FIFO with no writer does not block the open) and checked with
    ``fstat`` on the descriptor, so what is checked is what is read."""
    name = str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as error:
        raise InputError(name, "file", error.strerror or str(error)) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            kind = next((k for test, k in _KINDS if test(info.st_mode)), "not a regular file")
            raise InputError(name, "file", f"is {kind}, not a regular file")
        if info.st_size > limit:
            raise InputError(name, "size", f"{size_text(info.st_size)} is over the limit of {size_text(limit)}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes (also if it grows while read)."""
    with open_regular(path, limit) as handle:
        data = handle.read(limit + 1)
    if len(data) > limit:
        raise InputError(str(path), "size", f"grew past the limit of {size_text(limit)} while read")
    return data


def decode_utf8(data: bytes, file: str) -> str:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as error:
        raise InputError(file, "encoding", f"not UTF-8 (byte {error.start})") from None


def read_text(path: str | os.PathLike[str], limit: int) -> str:
    """A regular file's UTF-8 text (see ``open_regular``)."""
    return decode_utf8(read_regular(path, limit), str(path))


def inside(root: Path, path: Path) -> bool:
    """Whether ``path``, symlinks resolved, lies within ``root`` (itself resolved by the caller)."""
    try:
        return path.resolve().is_relative_to(root)
    except (OSError, RuntimeError):  # a symlink loop resolves nowhere
        return False


def is_plain_name(name: str) -> bool:
    """A single file-name segment: no separator, no '.' or '..', no NUL."""
    return bool(name) and name not in (".", "..") and not any(c in name for c in "/\\\0")


# -- strict JSON ---------------------------------------------------------------

class _Unstorable:
    """Stands in, while parsing, for a number no table can hold; found afterwards with its path."""

    __slots__ = ("text", "why")

    def __init__(self, text: str, why: str):
        self.text, self.why = text, why


_made = [0]  # markers made so far, by any thread: a parse that made none needs no search for them


def _marker(text: str, why: str) -> _Unstorable:
    _made[0] += 1
    return _Unstorable(text, why)


def _constant(name: str) -> _Unstorable:  # NaN, Infinity, -Infinity
    return _marker(name, "is not a finite number")


def _float(literal: str) -> float | _Unstorable:
    value = float(literal)
    return value if value - value == 0.0 else _marker(literal, "is not a finite number")  # inf - inf is NaN


def _int(literal: str) -> int | _Unstorable:
    if len(literal) < 19:  # the hot path: fits in 64 bits whatever the digits
        return int(literal)
    digits = len(literal.lstrip("-"))
    if digits <= 19 and -_INT64 <= int(literal) < _INT64:
        return int(literal)
    return _marker(literal, f"is out of range (an integer of {digits} digits)")


def _keys_once(pairs: list[tuple[str, Any]]) -> dict:
    """An object whose keys are each given once; a key given twice holds a marker (JSON keeps the last)."""
    out = dict(pairs)
    if len(out) < len(pairs):
        seen: set[str] = set()
        for key, _ in pairs:
            if key in seen:
                out[key] = _marker("", "given twice in one object")
            seen.add(key)
    return out


# One decoder for every parse (json.loads with hooks would build a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_constant, parse_float=_float, parse_int=_int)
_DECODER_ONCE = json.JSONDecoder(parse_constant=_constant, parse_float=_float, parse_int=_int,
                                 object_pairs_hook=_keys_once)


def field_path(parts: Iterable[Any], empty: str = "row") -> str:
    """``rubric_items[0].points`` from (``rubric_items``, 0, ``points``)."""
    out = ""
    for part in parts:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or empty


def nesting_depth(text: str) -> int:
    """Deepest bracket nesting of JSON text, strings skipped (exact for valid JSON)."""
    marks = _BRACKETS.findall(_JSON_STRING.sub('""', text))
    return max(accumulate(1 if m in "[{" else -1 for m in marks), default=0)


def parse_json(text: str, file: str, position: str = "line {line} column {column}", empty: str = "row",
               invalid: str = "invalid JSON", keys_once: bool = False) -> Any:
    """Parse JSON that a table will hold. ``InputError(file, field, message)`` for invalid JSON (the
    field is ``position`` filled with the error's line and column), nesting deeper than
    ``MAX_DEPTH``, NaN / Infinity / a float overflowing to infinity, an integer beyond 64 bits, or
    a lone surrogate escape (not storable as UTF-8); those name the value's field path. ``keys_once``:
    also a key given twice in one object (of which JSON would keep the last)."""
    if text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH:
        raise InputError(file, "nesting", f"JSON nested deeper than {MAX_DEPTH} levels")
    made = _made[0]
    try:
        value = (_DECODER_ONCE if keys_once else _DECODER).decode(text)
    except json.JSONDecodeError as error:
        where = position.format(line=error.lineno, column=error.colno)
        if text.startswith("\ufeff"):  # Windows editors' byte order mark: JSON does not allow it
            raise InputError(file, where, f"{invalid}: starts with a UTF-8 byte order mark (BOM); save the "
                                          "file as UTF-8 without BOM") from None
        # json's messages end "... at" where it formats the position itself; ours is in ``where`` already
        raise InputError(file, where, f"{invalid}: {re.sub(r' (starting )?at$', '', error.msg)}") from None
    except RecursionError:  # only reachable if the interpreter's recursion limit is below MAX_DEPTH
        raise InputError(file, "nesting", "JSON nested too deeply") from None
    if _made[0] != made:  # this parse (or another thread's) made a marker: find ours, if any
        found = next(((p, v) for p, v in _walk(value) if isinstance(v, _Unstorable)), None)
        if found is not None:
            raise InputError(file, field_path(found[0], empty),
                             f"{shorten(found[1].text, 40)} {found[1].why}".lstrip())
    if _SURROGATE_ESCAPE.search(text):
        for path, item in _walk(value):
            if isinstance(item, str) and not _encodable(item):
                raise InputError(file, field_path(path, empty), "contains a lone surrogate escape (\\ud800-\\udfff), "
                                                                 "which UTF-8 cannot store")
    return value


def _encodable(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def _walk(value: Any) -> Iterable[tuple[tuple, Any]]:
    """(path, value) of every node, depth first in document order, without recursion. Object keys
    are walked too: a key can hold a lone surrogate."""
    stack: list[tuple[tuple, Any]] = [((), value)]
    while stack:
        path, node = stack.pop()
        yield path, node
        if isinstance(node, dict):
            for key in node:
                yield path, key
            stack.extend(reversed([(path + (k,), v) for k, v in node.items()]))
        elif isinstance(node, list):
            stack.extend(reversed([(path + (i,), v) for i, v in enumerate(node)]))


def finite_or_none(value: Any) -> Any:
    """A JSON-ready copy with every non-finite float replaced by None (null), recursively; for
    output whose NaN means "no value" (a mean over no cases)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {k: finite_or_none(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [finite_or_none(v) for v in value]
    return value


def dumps(value: Any, **options: Any) -> str:
    """Valid JSON text (RFC 8259: no NaN or Infinity): non-finite floats become null."""
    return json.dumps(finite_or_none(value), allow_nan=False, **options)
