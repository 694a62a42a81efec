"""One chat-completion call, made to survive a real provider: retries, back-off, adaptive concurrency.

The openai SDK does the HTTP (its own retries are off: ``max_retries=0``) so
that every retry is ours: retryable statuses and transport faults back off
exponentially with full jitter, a ``Retry-After`` / ``retry-after-ms`` header
is obeyed as a pause of that call, the permitted concurrency follows ``AdaptiveLimit``
(toolkit.collect.limit), and wrong keys, unknown models or an endpoint that refuses every connection
stop the whole run at once instead of failing every case. Replies are read with a byte limit and
parsed with bounded nesting (toolkit.collect.wire).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import email.utils
import random
import re
import time
from dataclasses import dataclass
from typing import Any, Awaitable, Callable, Mapping, TypeVar

import httpx2
import openai

from toolkit import protocol
from toolkit.collect.limit import FAILED, LIMITED, OK, AdaptiveLimit
from toolkit.collect.reply import InvalidResponse, ReplyFields, clean_text, reply_fields
from toolkit.collect.settings import DEFAULT_MAX_REPLY_BYTES, Endpoint, RetryPolicy
from toolkit.collect.wire import cap_hook, load_reply, read_capped, refusal

MAX_RETRY_AFTER_S = 600.0
# Error codes by which an endpoint says it cannot serve this evaluation at all (every other case would get
# the same answer): the run stops with the provider's message instead of failing case after case.
ENDPOINT_REFUSALS = frozenset({"case_not_in_dataset"})  # the simulated provider asked for a case it does not know
T = TypeVar("T")


class CallFailed(Exception):
    """A call that ended in failure after its retries; ``error`` is the stored 'Type: message' text."""

    def __init__(self, error: str):
        super().__init__(error)
        self.error = error


class EndpointFatal(Exception):
    """Wrong key, no permission, no quota or unknown model: retrying cannot help, the run stops."""

    def __init__(self, message: str, not_found: bool = False):
        super().__init__(message)
        self.not_found = not_found  # an HTTP 404 on a files/batches request


@dataclass
class CallStats:
    """Counters the progress display reads (single event loop: plain ints suffice)."""

    ok: int = 0
    failed: int = 0
    retries: int = 0
    rate_limited: int = 0  # 429s seen
    waiting_rate_limit: int = 0  # calls sleeping on a 429 right now
    reached: bool = False  # an HTTP reply came back: a refused connection from now on is an outage, retried


@dataclass(frozen=True)
class Completion:
    text: str
    finish_reason: str | None
    prompt_tokens: int | None
    completion_tokens: int | None
    reasoning_tokens: int | None
    latency_s: float
    started_at: str
    finished_at: str
    temperature: float | None  # as sent; None when the provider default was used


def now_iso() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat()


def scrub(text: str, secrets: tuple[str, ...]) -> str:
    """``text`` with every secret, and any 8+ character piece of one a provider echoed, masked."""
    for secret in secrets:
        if secret and len(secret) >= 4:
            text = text.replace(secret, "***")
            text = re.sub(r"[A-Za-z0-9_\-]{8,}", lambda m: "***" if m.group(0) in secret else m.group(0), text)
    return text


def retry_after(headers: Mapping[str, str] | None) -> float | None:
    """Seconds a provider asked us to wait (``retry-after-ms`` first, then ``Retry-After``)."""
    if not headers:
        return None
    try:
        if headers.get("retry-after-ms"):
            return min(MAX_RETRY_AFTER_S, max(0.0, float(headers["retry-after-ms"]) / 1000.0))
    except ValueError:
        pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return min(MAX_RETRY_AFTER_S, max(0.0, float(value)))
    except ValueError:
        pass
    try:
        parsed = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if parsed.tzinfo is None:
        parsed = parsed.replace(tzinfo=dt.timezone.utc)
    return min(MAX_RETRY_AFTER_S, max(0.0, (parsed - dt.datetime.now(dt.timezone.utc)).total_seconds()))


def mentions_temperature(status: int, message: str) -> bool:
    """A 400 that rejects the temperature parameter (the call is then made without one)."""
    return status == 400 and "temperature" in message.lower()


def chat_body(model: str, messages: list[dict[str, str]], *, temperature: float | None, max_completion_tokens: int,
              response_format: Mapping[str, str] | None = None, reasoning_effort: str | None = None) -> dict[str, Any]:
    """The request body of a chat completion, key for key as the protocol has it."""
    body: dict[str, Any] = {"model": model, "messages": messages}
    if temperature is not None:
        body["temperature"] = temperature
    body["max_completion_tokens"] = max_completion_tokens
    if response_format is not None:
        body["response_format"] = dict(response_format)
    if reasoning_effort is not None:
        body["reasoning_effort"] = reasoning_effort
    return body


def backoff_delay(policy: RetryPolicy, attempt: int, asked: float | None) -> float:
    """Full-jitter exponential back-off; a server's Retry-After is a floor, never shortened."""
    if asked is not None:
        return asked + random.uniform(0, min(1.0, asked * 0.1))
    return random.uniform(0, min(policy.max_delay, policy.base_delay * 2 ** (attempt - 1)))


def make_sdk(base_url: str, key: str, retry: RetryPolicy,
             max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES) -> openai.AsyncOpenAI:
    """The SDK client of an endpoint, with its own retries off (ours are in ChatClient) and chat reply
    bodies capped at ``max_reply_bytes``."""
    aiohttp_client = getattr(openai, "DefaultAioHttpClient", None)
    hooks = {"response": [cap_hook(max_reply_bytes)]}
    if aiohttp_client is not None:
        # The SDK's aiohttp transport: at high concurrency its connection pool costs far less CPU per call
        # than the default one (tests/perf/collect_throughput.py). A plain-http endpoint (a local server,
        # the simulator) has no TLS to verify: the CA bundle is not loaded for it.
        http = aiohttp_client(timeout=retry.timeout_s, verify=not base_url.startswith("http://"), event_hooks=hooks)
    else:
        http = openai.DefaultAsyncHttpxClient(timeout=retry.timeout_s, event_hooks=hooks)
    return openai.AsyncOpenAI(base_url=base_url, api_key=key, max_retries=0, timeout=retry.timeout_s, http_client=http)


class ChatClient:
    """Chat completions against one endpoint, sharing one adaptive limit and one set of counters."""

    def __init__(self, endpoint: Endpoint, role: str, retry: RetryPolicy, limit: AdaptiveLimit, stats: CallStats,
                 sdk: openai.AsyncOpenAI | None = None, max_reply_bytes: int = DEFAULT_MAX_REPLY_BYTES):
        self.endpoint = endpoint
        self.role = role  # "answer" or "judge": names the flags in fatal messages
        self.retry = retry
        self.limit = limit
        self.stats = stats
        key = endpoint.api_key(role)
        self._secrets = (key,)
        self.no_temperature: set[str] = set()  # models that rejected a temperature once
        self.max_reply_bytes = max_reply_bytes
        self.sdk = sdk or make_sdk(endpoint.base_url, key, retry, max_reply_bytes)

    async def close(self) -> None:
        await self.sdk.close()

    def scrub(self, text: str) -> str:
        return scrub(clean_text(text), self._secrets)

    def error_text(self, error: BaseException) -> str:
        return self.scrub(f"{type(error).__name__}: {error}")[: protocol.ERROR_TEXT_LIMIT]

    async def complete(self, model: str, messages: list[dict[str, str]], *, temperature: float | None,
                       max_completion_tokens: int, response_format: Mapping[str, str] | None = None,
                       reasoning_effort: str | None = None) -> Completion:
        """One logical call: retried per the policy; CallFailed or EndpointFatal when it cannot succeed."""
        body = chat_body(model, messages, temperature=None if model in self.no_temperature else temperature,
                         max_completion_tokens=max_completion_tokens, response_format=response_format,
                         reasoning_effort=reasoning_effort)
        attempt = 0
        while True:
            attempt += 1
            slot = await self.limit.acquire()
            started, started_at = time.monotonic(), now_iso()
            delay: float | None = None
            rate_limited = False
            try:
                try:
                    # ``post`` sends the body exactly as built; ``chat.completions.create`` would re-walk it
                    # against its typed schema and build a pydantic reply: CPU on every call for no
                    # change on the wire. Status errors still come back as the SDK's exceptions. The body
                    # is streamed so that it is read with a limit (ReplyTooLarge: failed, not retried).
                    response = await self.sdk.post("/chat/completions", body=body, cast_to=httpx2.Response,
                                                   stream=True)
                    self.stats.reached = True
                    raw = await read_capped(response, self.max_reply_bytes, self.retry.timeout_s)
                    fields = reply_fields(load_reply(raw))  # ValueError (retried) when it is no usable reply
                except openai.APIStatusError as error:
                    self.stats.reached = True
                    if "temperature" in body and mentions_temperature(error.status_code,
                                                                      f"{error.message} {error.body}"):
                        # The provider accepts only its default temperature: ask again without one (no retry).
                        self.no_temperature.add(model)
                        del body["temperature"]
                        attempt -= 1
                        continue
                    self.check_fatal(error, model)
                    rate_limited = error.status_code == 429
                    self.limit.on_result(slot, LIMITED if rate_limited else FAILED)
                    if error.status_code not in protocol.RETRYABLE_STATUS or attempt >= self.retry.max_attempts:
                        self.stats.failed += 1
                        raise CallFailed(self.error_text(error)) from None
                    delay = retry_after(error.response.headers if error.response is not None else None)
                    if rate_limited:
                        self.stats.rate_limited += 1
                        # A 429 is a pause of this call, taken in its slot: the pause itself lowers the rate
                        # the window sends at, and the window changes only on a generation's share of 429s.
                        await self._back_off(attempt, delay, True)
                        continue
                except (openai.APIConnectionError, ValueError) as error:  # timeouts, drops, garbled bodies
                    self.check_refused(error)
                    self.limit.on_result(slot, FAILED)
                    if attempt >= self.retry.max_attempts:
                        self.stats.failed += 1
                        if isinstance(error, ValueError) and not isinstance(error, InvalidResponse):
                            error = InvalidResponse(str(error))  # a garbled body: stored as an invalid response
                        raise CallFailed(self.error_text(error)) from None
                except openai.OpenAIError as error:
                    self.stats.failed += 1
                    raise CallFailed(self.error_text(error)) from None
                else:
                    latency = time.monotonic() - started
                    self.limit.on_result(slot, OK, latency)
                    self.stats.ok += 1
                    return _completion(fields, latency, started_at, body.get("temperature"))
            finally:
                self.limit.release(slot)
            await self._back_off(attempt, delay, rate_limited)  # 5xx and transport faults: outside the window

    async def retrying(self, model: str, factory: Callable[[], Awaitable[T]], not_found: str) -> T:
        """A files/batches request with the same retries and fatal checks as a chat call;
        ``not_found`` says what an HTTP 404 means for this request (EndpointFatal)."""
        attempt = 0
        while True:
            attempt += 1
            asked: float | None = None
            try:
                return await factory()
            except openai.APIStatusError as error:
                if error.status_code == 404:
                    detail = self.scrub(str(error.message))[:200]
                    raise EndpointFatal(f"{self.endpoint.base_url} {not_found}: {detail}", True) from None
                self.check_fatal(error, model)
                if error.status_code not in protocol.RETRYABLE_STATUS or attempt >= self.retry.max_attempts:
                    raise CallFailed(self.error_text(error)) from None
                asked = retry_after(error.response.headers if error.response is not None else None)
            except openai.APIConnectionError as error:
                self.check_refused(error)
                if attempt >= self.retry.max_attempts:
                    raise CallFailed(self.error_text(error)) from None
            await self._back_off(attempt, asked, asked is not None)

    async def _back_off(self, attempt: int, asked: float | None, rate_limited: bool) -> None:
        self.stats.retries += 1
        delay = backoff_delay(self.retry, attempt, asked)
        if rate_limited:
            self.stats.waiting_rate_limit += 1
        try:
            await asyncio.sleep(delay)
        finally:
            if rate_limited:
                self.stats.waiting_rate_limit -= 1

    def check_refused(self, error: BaseException) -> None:
        """EndpointFatal when a connection was refused (or the host name did not resolve) before the endpoint
        ever replied: a wrong URL. Once it has replied, a refusal is an outage and is retried."""
        why = None if self.stats.reached else refusal(error)
        if why is not None:
            raise EndpointFatal(f"cannot connect to {self.endpoint.base_url}: {why}")

    def check_fatal(self, error: openai.APIStatusError, model: str) -> None:
        """EndpointFatal for 401/403/404 and an exhausted quota, naming the key's variable (never the key)."""
        status = error.status_code
        if 400 <= status < 500 and error.code in ENDPOINT_REFUSALS:
            said = error.body.get("message") if isinstance(error.body, dict) else None
            detail = self.scrub(said if isinstance(said, str) else str(error.message))[:protocol.ERROR_TEXT_LIMIT]
            raise EndpointFatal(f"{self.endpoint.base_url} refused {self.role} model {model!r} (HTTP {status} "
                                f"{error.code}): {detail}")
        quota = status == 429 and "insufficient_quota" in (error.code, error.type)
        if status not in (401, 403, 404) and not quota:
            return
        detail = self.scrub(str(error.message))[:200]
        flag = "--judge-api-key-env" if self.role == "judge" else "--api-key-env"
        url_flag = "--judge-base-url" if self.role == "judge" else "--base-url"
        key_env = self.endpoint.key_env()
        if quota:  # retrying cannot help until the account is topped up
            where = f"the key in ${key_env}" if key_env else "this client"
            raise EndpointFatal(f"{self.endpoint.base_url}: {where} has no quota left (HTTP 429 insufficient_quota, "
                                f"{self.role} model {model!r}): {detail}")
        if status == 401:
            where = f"the key in ${key_env}" if key_env else f"no key (pass {flag} NAME)"
            raise EndpointFatal(f"{self.endpoint.base_url} rejected {where} (HTTP 401, {self.role} model "
                                f"{model!r}): {detail}")
        if status == 403:
            where = f"the key in ${key_env}" if key_env else "this client"
            raise EndpointFatal(f"{self.endpoint.base_url} refused {where} access to {self.role} model {model!r} "
                                f"(HTTP 403): {detail}")
        raise EndpointFatal(f"{self.role} model {model!r} not found at {self.endpoint.base_url} (HTTP 404; "
                            f"check the model name and {url_flag}): {detail}")


def _completion(fields: ReplyFields, latency: float, started_at: str, temperature: float | None) -> Completion:
    return Completion(
        text=fields.text,
        finish_reason=fields.finish_reason,
        prompt_tokens=fields.prompt_tokens,
        completion_tokens=fields.completion_tokens,
        reasoning_tokens=fields.reasoning_tokens,
        latency_s=latency,
        started_at=started_at,
        finished_at=now_iso(),
        temperature=None if temperature is None else float(temperature),
    )
