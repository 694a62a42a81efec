"""What a provider sends back, read defensively: bounded in size, bounded in nesting, never trusted.

A chat reply is read with a byte limit: a ``Content-Length`` over it is refused before the body is
read, and the body stops being read once it holds more than the limit, counted both as sent and as
decoded (a few KB of gzip can inflate to gigabytes), error bodies included: a response hook on the
SDK's HTTP client wraps every chat reply's stream. Reply JSON nested deeper than any chat completion
is refused before the parser recurses. A reply that cannot connect at all is told apart from one
that timed out (``refusal``).
"""

from __future__ import annotations

import asyncio
import json
import socket
import ssl
import zlib
from typing import Any, AsyncIterator

import httpx2
import openai

from toolkit.inputs import MAX_DEPTH, nesting_depth, size_text

CHAT_PATH = "/chat/completions"  # files and batch downloads are not chat replies: they are not capped here


class ReplyTooLarge(openai.OpenAIError):
    """A reply over the byte limit: a failed call (not retried: a paid reply that size would be paid again)."""

    def __init__(self, limit: int):
        super().__init__(f"reply over the {size_text(limit)} limit (--max-reply-bytes {limit}); not stored")
        self.limit = limit


# zlib window bits of the content codings httpx decodes with zlib (brotli and zstd only when installed:
# their decoded size is counted by ``read_capped``, for the replies that are kept).
_WBITS = {"gzip": zlib.MAX_WBITS | 16, "x-gzip": zlib.MAX_WBITS | 16, "deflate": zlib.MAX_WBITS}


class Inflation:
    """How many bytes a gzip/deflate body decodes to, counted as it arrives; nothing decoded is kept,
    and no step decodes more than ``limit + 1`` bytes at once. Layers are undone last-applied first."""

    def __init__(self, codings: list[str], limit: int):
        self.stages = [zlib.decompressobj(_WBITS[c]) for c in reversed(codings)]
        self.raw_deflate = [c == "deflate" for c in reversed(codings)]  # httpx retries deflate without a header
        self.limit = limit
        self.decoded = 0

    def feed(self, chunk: bytes) -> bool:
        """False once the decoded size is over the limit."""
        try:
            self._push(0, chunk)
        except zlib.error:  # httpx's own decoder fails on the same bytes: it reports the broken body
            self.stages = []
        return self.decoded <= self.limit

    def _push(self, index: int, data: bytes) -> None:
        if index == len(self.stages) or self.decoded > self.limit:
            self.decoded += len(data)
            return
        while data:
            stage = self.stages[index]
            try:
                out = stage.decompress(data, self.limit + 1)
            except zlib.error:
                if not self.raw_deflate[index]:
                    raise
                self.raw_deflate[index] = False
                self.stages[index] = zlib.decompressobj(-zlib.MAX_WBITS)
                continue
            self.raw_deflate[index] = False
            data = stage.unconsumed_tail
            if out:
                self._push(index + 1, out)
            if not out or self.decoded > self.limit:
                return


class CappedStream(httpx2.AsyncByteStream):
    """A response body that raises ReplyTooLarge (and drops the connection) once past ``limit`` bytes
    as sent or as decoded (``codings``: the Content-Encoding layers httpx will undo)."""

    def __init__(self, inner: httpx2.AsyncByteStream, limit: int, codings: list[str] | None = None):
        self.inner = inner
        self.limit = limit
        self.inflation = Inflation(codings, limit) if codings else None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        size = 0
        async for chunk in self.inner:
            size += len(chunk)
            if size > self.limit or (self.inflation is not None and not self.inflation.feed(chunk)):
                await self.inner.aclose()
                raise ReplyTooLarge(self.limit)
            yield chunk

    async def aclose(self) -> None:
        await self.inner.aclose()


def cap_hook(limit: int):
    """An httpx response hook capping every chat reply body at ``limit`` raw bytes."""

    async def cap(response: httpx2.Response) -> None:
        if not response.request.url.path.endswith(CHAT_PATH):
            return
        declared = response.headers.get("content-length", "")
        if declared.strip().isdigit() and int(declared) > limit:
            raise ReplyTooLarge(limit)  # httpx closes the response unread
        if isinstance(response.stream, httpx2.AsyncByteStream):
            codings = [c.strip().lower() for c in response.headers.get("content-encoding", "").split(",")]
            response.stream = CappedStream(response.stream, limit, [c for c in codings if c in _WBITS])

    return cap


async def read_capped(response: httpx2.Response, limit: int, timeout_s: float) -> bytes:
    """The decoded body of a streamed reply, at most ``limit`` bytes (ReplyTooLarge beyond), within
    ``timeout_s`` in all (the transport's timeout is per read: a body dripped a byte at a time would
    never end); the response is closed either way. Transport faults and the deadline become the SDK's
    own errors, so they are retried and worded as when the SDK read the body."""
    parts: list[bytes] = []
    size = 0
    try:
        async with asyncio.timeout(timeout_s):
            async for chunk in response.aiter_bytes():
                size += len(chunk)
                if size > limit:
                    raise ReplyTooLarge(limit)
                parts.append(chunk)
    except (httpx2.TimeoutException, TimeoutError) as error:
        raise openai.APITimeoutError(request=response.request) from error
    except (httpx2.RequestError, ssl.SSLError) as error:
        raise openai.APIConnectionError(request=response.request) from error
    finally:
        await response.aclose()
    return b"".join(parts)


def load_reply(raw: bytes | str) -> Any:
    """A reply body (or a Batch API result line) as JSON; ValueError when it is not JSON, or nested
    deeper than any chat completion (checked before parsing: the parser recurses once per level)."""
    text = raw if isinstance(raw, str) else raw.decode(json.detect_encoding(raw), "surrogatepass")  # as json.loads
    if text.count("[") + text.count("{") > MAX_DEPTH and nesting_depth(text) > MAX_DEPTH:
        raise ValueError(f"JSON nested deeper than {MAX_DEPTH} levels")
    try:
        return json.loads(text)
    except RecursionError:  # only below MAX_DEPTH if the interpreter's recursion limit were tiny
        raise ValueError("JSON nested too deeply") from None


def refusal(error: BaseException) -> str | None:
    """'connection refused' or 'name not resolved' when ``error`` (an SDK error) was caused by one, else None.
    The SDK words both as a timeout or a connection error: the cause is found down its exception chain."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, ConnectionRefusedError):
            return "connection refused"
        if isinstance(current, socket.gaierror):
            return "name not resolved"
        current = current.__cause__ or current.__context__
    return None
