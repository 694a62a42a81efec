"""The chat side of the simulated provider: auth, validation, injected faults, completions, stats.

``SimProvider`` holds everything the HTTP handlers share. ``complete()`` is the fault-free
chat logic, reused by batch processing; ``chat_handler`` adds transport faults and latency.
"""

from __future__ import annotations

import asyncio
import hmac
import json
import random
import threading
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Mapping

from aiohttp import web

from toolkit.sim import models
from toolkit.sim.stats import SimStats

if TYPE_CHECKING:
    from toolkit.sim.config import SimConfig

PROVIDER: web.AppKey[SimProvider] = web.AppKey("provider")
_RESPONSE_FORMATS = frozenset({"text", "json_object", "json_schema"})
UNKNOWN_CASE = "case_not_in_dataset"  # error code of a prompt outside the served dataset (the client stops on it)


class ChatError(Exception):
    """A request the provider refuses, with the OpenAI error body it answers."""

    def __init__(self, status: int, message: str, *, type_: str = "invalid_request_error",
                 code: str | None = None, param: str | None = None, fault: str = "bad_request"):
        super().__init__(message)
        self.status, self.message, self.type, self.code, self.param, self.fault = status, message, type_, code, param, fault

    def body(self) -> dict[str, Any]:
        return error_body(self.message, self.type, self.code, self.param)


def error_body(message: str, type_: str, code: str | None, param: str | None = None) -> dict[str, Any]:
    return {"error": {"message": message, "type": type_, "param": param, "code": code}}


@dataclass(frozen=True)
class Completion:
    """One successful chat completion and, for a deliberately broken judge reply, how it is broken."""

    body: dict[str, Any]
    bad_json: str | None


class TokenBucket:
    """A request-rate limit as providers apply one: ``rate`` tokens a second, at most ``burst`` saved up."""

    def __init__(self, rate: float, burst: int):
        self.rate = rate
        self.burst = float(burst or max(1, round(rate)))
        self.tokens = self.burst
        self.stamp = time.monotonic()
        self._lock = threading.Lock()

    def take(self) -> float:
        """0 when the request may pass, else the seconds until a token is free (the Retry-After)."""
        with self._lock:
            now = time.monotonic()
            self.tokens = min(self.burst, self.tokens + (now - self.stamp) * self.rate)
            self.stamp = now
            if self.tokens >= 1.0:
                self.tokens -= 1.0
                return 0.0
            return (1.0 - self.tokens) / self.rate


class SimProvider:
    """State shared by the handlers of one server: config, rubric index, stats, fault generators."""

    def __init__(self, config: SimConfig):
        self.config = config
        self.index = models.rubric_index(config.datasets)
        self.stats = SimStats()
        self._fault_lock = threading.Lock()
        self._fault_rng = random.Random(config.seed)  # arrival-order sequence of transport faults
        self._batch_rng = random.Random(f"{config.seed}/batch")  # bad_json draws of batch lines
        self.stopping: asyncio.Event | None = None  # created on the server's loop
        self.bucket = TokenBucket(config.rate_limit_rps, config.rate_limit_burst) if config.rate_limit_rps else None
        self._asked: dict[str, int] = {}  # noisy judge, answer spread: how often each exact request was answered

    def asked_before(self, prompt: str) -> int:
        """How many times this exact request was answered before (and count this one)."""
        key = models.prompt_key(prompt)
        with self._fault_lock:
            count = self._asked.get(key, 0)
            self._asked[key] = count + 1
        return count

    # -- checks --------------------------------------------------------------

    def check_auth(self, request: web.Request) -> None:
        """Bearer auth; the error never repeats the key."""
        header = request.headers.get("Authorization", "")
        scheme, _, key = header.partition(" ")
        key = key.strip()
        if scheme.lower() != "bearer" or not key:
            raise ChatError(401, "Missing bearer authentication in header 'Authorization'.",
                            code="missing_api_key", fault="auth")
        expected = self.config.api_key
        if expected is not None and not hmac.compare_digest(key.encode(), expected.encode()):
            raise ChatError(401, "Incorrect API key provided.", code="invalid_api_key", fault="auth")

    def validate(self, body: Any) -> tuple[models.SimModel, list[dict[str, Any]]]:
        """The model and messages of a chat request; ChatError for anything the API would refuse."""
        if not isinstance(body, dict):
            raise ChatError(400, "The request body must be a JSON object.")
        name = body.get("model")
        if not isinstance(name, str) or not name:
            raise ChatError(400, "you must provide a model parameter", param="model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise ChatError(400, "'messages' must be a non-empty array of message objects.", param="messages")
        for i, message in enumerate(messages):
            if not isinstance(message, dict) or not isinstance(message.get("role"), str) \
                    or not isinstance(message.get("content"), (str, list)):
                raise ChatError(400, f"messages[{i}] needs a string 'role' and 'content'.", param=f"messages[{i}]")
        model = models.parse_model(name)
        if model is None:
            raise ChatError(404, f"The model '{name}' does not exist or you do not have access to it.",
                            code="model_not_found", param="model", fault="not_found")
        if body.get("stream"):
            raise ChatError(400, "Streaming is not supported by the simulated provider.", param="stream")
        temperature = body.get("temperature")
        if temperature is not None:
            if model.rejects_temperature:
                raise ChatError(400, f"Unsupported value: 'temperature' does not support {temperature} with this "
                                "model. Only the default (1) value is supported.",
                                code="unsupported_value", param="temperature", fault="temperature_rejected")
            if not isinstance(temperature, (int, float)) or isinstance(temperature, bool) or not 0 <= temperature <= 2:
                raise ChatError(400, "'temperature' must be a number between 0 and 2.", param="temperature")
        fmt = body.get("response_format")
        if fmt is not None and (not isinstance(fmt, dict) or fmt.get("type") not in _RESPONSE_FORMATS):
            raise ChatError(400, "Invalid 'response_format': type must be text, json_object or json_schema.",
                            param="response_format")
        for key in ("max_completion_tokens", "max_tokens"):
            limit = body.get(key)
            if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 1):
                raise ChatError(400, f"'{key}' must be a positive integer.", param=key)
        if not model.is_judge and self.index.get(models.last_user_text(messages)) is None:
            # An answer model writes from the rubric of a known case: on any other prompt it could only say
            # something generic that every judge scores 0, so it refuses instead. (The judge needs no
            # dataset: the rubric comes with each judge request.)
            raise ChatError(422, f"bedside sim: this case is not in the dataset this simulated provider serves, "
                            f"{self.index.serving}; restart it with `bedside sim serve --dataset PATH` "
                            "naming the dataset you evaluate", code=UNKNOWN_CASE, param="messages",
                            fault="unknown_case")
        return model, messages

    # -- replies -------------------------------------------------------------

    def complete(self, model: models.SimModel, body: Mapping[str, Any], messages: list[dict[str, Any]],
                 bad_json_rng: random.Random | None) -> Completion:
        """The completion a valid request gets; a judge reply is broken when ``bad_json_rng`` is given."""
        seed = self.config.seed
        prompt = models.last_user_text(messages)
        broken: str | None = None
        if model.is_judge:
            request = models.parse_judge_user(prompt)
            if bad_json_rng is not None:
                broken, content = models.broken_judge_reply(request, bad_json_rng)
            elif model.base == models.NOISY_JUDGE_MODEL and request is not None:
                content = models.judge_reply(request, models.noisy_decisions(request, seed, prompt,
                                                                             self.asked_before(prompt)))
            else:
                content = models.judge_reply(request)
        else:
            spread = self.config.answer_spread  # asks are counted per model and case only when they matter
            ask = self.asked_before(f"{model.base}\x00{prompt}") if spread > 0 else 0
            content = models.answer_text(model, prompt, seed, self.index, spread, ask)
        reasoning = models.answer_reasoning_tokens(model, models.request_rng(seed, "reasoning", model.base, prompt))
        limit = body.get("max_completion_tokens") or body.get("max_tokens")
        finish = "stop"
        visible = models.approx_tokens(content)
        if limit is not None and reasoning + visible > limit:
            # reasoning spends the budget first, as with real reasoning models
            finish, reasoning = "length", min(reasoning, limit)
            visible = limit - reasoning
            content = content[: visible * 4]
        prompt_tokens = sum(models.approx_tokens(models.message_text(m)) + 4 for m in messages)
        completion_tokens = visible + reasoning
        return Completion({
            "id": f"chatcmpl-{uuid.uuid4().hex[:24]}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": model.name,
            "choices": [{"index": 0, "message": {"role": "assistant", "content": content, "refusal": None},
                         "logprobs": None, "finish_reason": finish}],
            "usage": {"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                      "total_tokens": prompt_tokens + completion_tokens,
                      "prompt_tokens_details": {"cached_tokens": 0},
                      "completion_tokens_details": {"reasoning_tokens": reasoning}},
            "system_fingerprint": "bedside-sim",
        }, broken)

    def draw_fault(self, is_judge: bool) -> tuple[str | None, random.Random]:
        """The injected fault of the next request (None, "429", "5xx", "timeout", "bad_json") and a
        generator for its details. Same number of draws per request, so the sequence is fixed."""
        c = self.config
        with self._fault_lock:
            u, bad, detail_seed = self._fault_rng.random(), self._fault_rng.random(), self._fault_rng.getrandbits(64)
        detail = random.Random(detail_seed)
        for kind, rate in (("429", c.rate_429), ("5xx", c.rate_5xx), ("timeout", c.rate_timeout)):
            if u < rate:
                return kind, detail
            u -= rate
        if is_judge and bad < c.rate_bad_json:
            return "bad_json", detail
        return None, detail

    def batch_bad_json_rng(self, is_judge: bool) -> random.Random | None:
        if not is_judge:
            return None
        with self._fault_lock:
            bad, detail_seed = self._batch_rng.random(), self._batch_rng.getrandbits(64)
        return random.Random(detail_seed) if bad < self.config.rate_bad_json else None

    async def hold(self, seconds: float) -> None:
        """Sleep, but end early when the server stops (a cancelled handler just unwinds)."""
        assert self.stopping is not None
        try:
            await asyncio.wait_for(self.stopping.wait(), timeout=seconds)
        except asyncio.TimeoutError:
            pass


def json_reply(status: int, payload: Any, headers: Mapping[str, str] | None = None) -> web.Response:
    merged = {"x-request-id": f"req_{uuid.uuid4().hex}", **(headers or {})}
    return web.json_response(payload, status=status, headers=merged)


async def read_json(request: web.Request) -> Any:
    try:
        return json.loads(await request.read())
    except (json.JSONDecodeError, UnicodeDecodeError):
        raise ChatError(400, "We could not parse the JSON body of your request.") from None


async def until(deadline: float) -> None:
    """Sleep until ``deadline`` on the loop's clock (at once when it has passed)."""
    await asyncio.sleep(max(0.0, deadline - asyncio.get_running_loop().time()))


async def chat_handler(request: web.Request) -> web.Response:
    provider = request.app[PROVIDER]
    config = provider.config
    # The reply leaves ``latency_ms`` after the request came in: the simulator's own work is part of the
    # model's latency, as a provider's is, instead of adding to it when many replies fall due at once.
    due = asyncio.get_running_loop().time() + config.latency_ms / 1000
    try:
        body = await read_json(request)
    except ChatError as error:
        provider.stats.received(None)
        provider.stats.fault(error.fault)
        await until(due)
        return json_reply(error.status, error.body())
    name = body.get("model") if isinstance(body, dict) and isinstance(body.get("model"), str) else None
    provider.stats.received(name)
    try:
        provider.check_auth(request)
        model, messages = provider.validate(body)
    except ChatError as error:
        provider.stats.fault(error.fault)
        await until(due)
        return json_reply(error.status, error.body())
    wait = provider.bucket.take() if provider.bucket is not None else 0.0
    if wait > 0:  # over the request-rate limit: refused at once, like a provider's gateway does
        provider.stats.fault("rate_limit")
        return json_reply(429, error_body("Rate limit reached for requests per second. Please try again in "
                                          f"{wait * 1000:.0f}ms.", "requests", "rate_limit_exceeded"),
                          {"Retry-After": f"{wait:.3f}", "retry-after-ms": f"{wait * 1000:.0f}",
                           "x-sim-fault": "rate_limit"})
    fault, detail = provider.draw_fault(model.is_judge)
    if fault == "timeout":
        provider.stats.fault("timeout")
        await provider.hold(config.timeout_hold_s)
        return json_reply(504, error_body("The server timed out waiting for the model.", "server_error", "timeout"),
                          {"x-sim-fault": "timeout"})
    completion = reply = None
    if fault in (None, "bad_json"):  # made while the latency runs
        completion = provider.complete(model, body, messages, detail if fault == "bad_json" else None)
        reply = json_reply(200, completion.body,
                           {"x-sim-fault": f"bad_json:{completion.bad_json}"} if completion.bad_json else None)
    await until(due)
    if fault == "429":
        provider.stats.fault("429")
        wait = config.retry_after_s
        return json_reply(429, error_body("Rate limit reached for requests. Please try again shortly.",
                                          "requests", "rate_limit_exceeded"),
                          {"Retry-After": f"{wait:g}", "retry-after-ms": f"{wait * 1000:g}", "x-sim-fault": "429"})
    if fault == "5xx":
        provider.stats.fault("5xx")
        status = detail.choice((500, 502, 503))
        return json_reply(status, error_body(f"The simulated server had an error ({status}).", "server_error", None),
                          {"x-sim-fault": "5xx"})
    assert completion is not None and reply is not None
    if completion.bad_json:
        provider.stats.fault("bad_json", completion.bad_json)
    provider.stats.served(model.name, messages)
    return reply


async def models_handler(request: web.Request) -> web.Response:
    provider = request.app[PROVIDER]
    try:
        provider.check_auth(request)
    except ChatError as error:
        return json_reply(error.status, error.body())
    created = 1_700_000_000
    listing = [{"id": m, "object": "model", "created": created, "owned_by": "bedside-sim"} for m in models.LISTED_MODELS]
    wanted = request.match_info.get("model")
    if wanted is None:
        return json_reply(200, {"object": "list", "data": listing})
    if models.parse_model(wanted) is None:
        return json_reply(404, error_body(f"The model '{wanted}' does not exist.", "invalid_request_error",
                                          "model_not_found", "model"))
    return json_reply(200, {"id": wanted, "object": "model", "created": created, "owned_by": "bedside-sim"})


async def stats_handler(request: web.Request) -> web.Response:
    provider = request.app[PROVIDER]
    if request.method == "POST":
        provider.stats.reset()
    return web.json_response(provider.stats.snapshot())
