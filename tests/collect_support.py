"""Helpers of the collection tests: a recording OpenAI-compatible server with scripted replies, CLI runs."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import threading
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from aiohttp import web

from toolkit.cli import main

Reply = tuple  # (status, json) or (status, json, headers) or (status, json, headers, delay_s)


def completion(content: str, model: str = "m", finish_reason: str = "stop", reasoning: int | None = None) -> Reply:
    usage: dict[str, Any] = {"prompt_tokens": 11, "completion_tokens": 7, "total_tokens": 18}
    if reasoning is not None:
        usage["completion_tokens_details"] = {"reasoning_tokens": reasoning}
    return 200, {"id": "c", "object": "chat.completion", "created": 0, "model": model, "usage": usage,
                 "choices": [{"index": 0, "finish_reason": finish_reason,
                              "message": {"role": "assistant", "content": content}}]}


def error(status: int, message: str) -> Reply:
    return status, {"error": {"message": message, "type": "invalid_request_error", "code": None}}


class Recorder:
    """An aiohttp server on loopback that records every chat request body and answers with
    ``respond(body) -> (status, json)``."""

    def __init__(self, respond: Callable[[dict[str, Any]], Reply]):
        self.respond = respond
        self.bodies: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        self.times: list[float] = []
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self.base_url = ""

    async def _chat(self, request: web.Request) -> web.Response:
        body = await request.json()
        self.bodies.append(body)
        self.headers.append(dict(request.headers))
        self.times.append(time.monotonic())
        status, payload, headers, delay = (*self.respond(body), None, None)[:4]
        if delay:
            await asyncio.sleep(delay)
        return web.json_response(payload, status=status, headers=headers)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.base_url = f"http://127.0.0.1:{self._runner.addresses[0][1]}/v1"
        self._ready.set()
        self._loop.run_forever()

    def __enter__(self) -> "Recorder":
        self._thread.start()
        self._ready.wait(10)
        return self

    def __exit__(self, *exc: object) -> None:
        asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)

    def of_model(self, model: str) -> list[dict[str, Any]]:
        return [b for b in self.bodies if b["model"] == model]


def bedside(*args: str) -> tuple[int, str, str]:
    """Run the CLI in this process: (exit code, stdout, stderr)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main([str(a) for a in args])
    return code, out.getvalue(), err.getvalue()


def files_under(root: Path) -> Iterator[Path]:
    return (p for p in root.rglob("*") if p.is_file())


def judge_reply(body: dict[str, Any], matched: bool = True) -> str:
    """A valid decision JSON for the items listed in a judge request."""
    user = body["messages"][1]["content"]
    ids = [line[1:line.index("]")] for line in user.split("RUBRIC ITEMS:\n", 1)[1].splitlines()]
    return json.dumps({"decisions": [{"item_id": i, "matched": matched} for i in ids]})
