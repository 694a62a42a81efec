"""The Files and Batch API of the simulated provider (OpenAI-compatible shapes).

A batch walks validating -> in_progress -> finalizing -> completed, pausing ``batch_delay_s`` in
the first and third so clients can observe the statuses. Lines run through the same chat logic
as direct calls, without transport faults; ``rate_bad_json`` still breaks judge lines.
"""

from __future__ import annotations

import asyncio
import json
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web

from toolkit.sim.chat import PROVIDER, ChatError, SimProvider, json_reply, read_json

BATCH_ENDPOINT = "/v1/chat/completions"
_ACTIVE = ("validating", "in_progress", "finalizing")


@dataclass
class SimFile:
    id: str
    filename: str
    purpose: str
    data: bytes
    created_at: int

    def obj(self) -> dict[str, Any]:
        return {"id": self.id, "object": "file", "bytes": len(self.data), "created_at": self.created_at,
                "filename": self.filename, "purpose": self.purpose, "status": "processed",
                "expires_at": None, "status_details": None}


@dataclass
class SimBatch:
    id: str
    input_file_id: str
    completion_window: str
    metadata: dict[str, str] | None
    created_at: int
    status: str = "validating"
    times: dict[str, int | None] = field(default_factory=dict)
    total: int = 0
    completed: int = 0
    failed: int = 0
    output_file_id: str | None = None
    error_file_id: str | None = None
    errors: dict[str, Any] | None = None
    usage: dict[str, int] = field(default_factory=lambda: {"input": 0, "output": 0, "reasoning": 0})
    cancel_requested: bool = False

    def mark(self, status: str, stamp: str | None = None) -> None:
        self.status = status
        self.times[stamp or f"{status}_at"] = int(time.time())

    def obj(self) -> dict[str, Any]:
        stamps = ("in_progress_at", "finalizing_at", "completed_at", "failed_at", "expired_at",
                  "cancelling_at", "cancelled_at")
        u = self.usage
        return {
            "id": self.id, "object": "batch", "endpoint": BATCH_ENDPOINT, "errors": self.errors,
            "input_file_id": self.input_file_id, "completion_window": self.completion_window,
            "status": self.status, "output_file_id": self.output_file_id, "error_file_id": self.error_file_id,
            "created_at": self.created_at, "expires_at": self.created_at + 86_400,
            **{s: self.times.get(s) for s in stamps},
            "request_counts": {"total": self.total, "completed": self.completed, "failed": self.failed},
            "usage": {"input_tokens": u["input"], "input_tokens_details": {"cached_tokens": 0},
                      "output_tokens": u["output"], "output_tokens_details": {"reasoning_tokens": u["reasoning"]},
                      "total_tokens": u["input"] + u["output"]},
            "metadata": self.metadata,
        }


class BatchState:
    """Uploaded files and batches of one server, all in memory."""

    def __init__(self, provider: SimProvider):
        self.provider = provider
        self.files: dict[str, SimFile] = {}
        self.batches: dict[str, SimBatch] = {}
        self.tasks: set[asyncio.Task[None]] = set()
        self.failures_left = provider.config.batch_failures

    def add_file(self, filename: str, purpose: str, data: bytes) -> SimFile:
        made = SimFile(f"file-{uuid.uuid4().hex[:24]}", filename, purpose, data, int(time.time()))
        self.files[made.id] = made
        return made

    def file(self, file_id: str) -> SimFile:
        if file_id not in self.files:
            raise ChatError(404, f"No such File object: {file_id}", param="id", fault="not_found")
        return self.files[file_id]

    def batch(self, batch_id: str) -> SimBatch:
        if batch_id not in self.batches:
            raise ChatError(404, f"No batch found with id '{batch_id}'.", param="batch_id", fault="not_found")
        return self.batches[batch_id]

    async def work(self, batch: SimBatch) -> None:
        provider, stats = self.provider, self.provider.stats
        await provider.hold(provider.config.batch_delay_s)
        if batch.cancel_requested:
            return self._cancelled(batch, [], [])
        lines, problems = _parse_input(self.files[batch.input_file_id].data)
        if self.failures_left > 0 and not problems:
            self.failures_left -= 1
            problems = [{"code": "server_error", "message": "The batch could not be processed (simulated failure).",
                         "param": None, "line": None}]
        if problems:
            batch.errors = {"object": "list", "data": problems}
            batch.mark("failed")
            stats.batch_event("failed")
            return
        batch.total = len(lines)
        batch.mark("in_progress")
        done: list[dict[str, Any]] = []
        failed: list[dict[str, Any]] = []
        for custom_id, body in lines:
            if batch.cancel_requested or provider.stopping is None or provider.stopping.is_set():
                return self._cancelled(batch, done, failed)
            status, reply = self._run_line(batch, body)
            line = {"id": f"batch_req_{uuid.uuid4().hex[:24]}", "custom_id": custom_id,
                    "response": {"status_code": status, "request_id": f"req_{uuid.uuid4().hex}", "body": reply},
                    "error": None}
            (done if status == 200 else failed).append(line)
            batch.completed, batch.failed = len(done), len(failed)
            await asyncio.sleep(0)  # let status polls and other requests in between lines
        batch.mark("finalizing")
        await provider.hold(provider.config.batch_delay_s)
        self._write_results(batch, done, failed)
        if batch.cancel_requested:
            return self._cancelled(batch, done, failed)
        batch.mark("completed")
        stats.batch_event("completed")

    def _run_line(self, batch: SimBatch, body: Any) -> tuple[int, dict[str, Any]]:
        provider, stats = self.provider, self.provider.stats
        name = body.get("model") if isinstance(body.get("model"), str) else None
        try:
            model, messages = provider.validate(body)
        except ChatError as error:
            stats.batch_line(name, ok=False)
            return error.status, error.body()
        completion = provider.complete(model, body, messages, provider.batch_bad_json_rng(model.is_judge))
        stats.batch_line(name, ok=True)
        stats.served(model.name, messages, batch=True)
        if completion.bad_json:
            stats.batch_event("bad_json")
        usage = completion.body["usage"]
        batch.usage["input"] += usage["prompt_tokens"]
        batch.usage["output"] += usage["completion_tokens"]
        batch.usage["reasoning"] += usage["completion_tokens_details"]["reasoning_tokens"]
        return 200, completion.body

    def _write_results(self, batch: SimBatch, done: list[dict[str, Any]], failed: list[dict[str, Any]]) -> None:
        if batch.output_file_id is not None:
            return
        if done:
            batch.output_file_id = self.add_file(f"{batch.id}_output.jsonl", "batch_output", _jsonl(done)).id
        if failed:
            batch.error_file_id = self.add_file(f"{batch.id}_error.jsonl", "batch_output", _jsonl(failed)).id

    def _cancelled(self, batch: SimBatch, done: list[dict[str, Any]], failed: list[dict[str, Any]]) -> None:
        self._write_results(batch, done, failed)  # like the real API, finished lines stay available
        batch.mark("cancelled")
        self.provider.stats.batch_event("cancelled")


BATCH_STATE: web.AppKey[BatchState] = web.AppKey("batch_state")


def _jsonl(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode()


def _parse_input(data: bytes) -> tuple[list[tuple[str, dict[str, Any]]], list[dict[str, Any]]]:
    """Lines of a batch input file and the problems that fail the whole batch (as the API does)."""
    lines: list[tuple[str, dict[str, Any]]] = []
    problems: list[dict[str, Any]] = []
    seen: set[str] = set()

    def problem(number: int, code: str, message: str) -> None:
        problems.append({"code": code, "message": message, "param": None, "line": number})

    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        problem(1, "invalid_file_format", "The input file is not UTF-8 text.")
        return [], problems
    for number, raw in enumerate(text.splitlines(), start=1):
        if not raw.strip():
            continue
        try:
            row = json.loads(raw)
        except json.JSONDecodeError:
            problem(number, "invalid_json_line", "This line is not valid JSON.")
            continue
        if not isinstance(row, dict) or not isinstance(row.get("custom_id"), str) or not row["custom_id"]:
            problem(number, "missing_required_parameter", "Each line needs a string 'custom_id'.")
            continue
        if row["custom_id"] in seen:
            problem(number, "duplicate_custom_id", f"custom_id {row['custom_id']!r} appears more than once.")
        seen.add(row["custom_id"])
        if row.get("method") != "POST":
            problem(number, "invalid_method", "'method' must be POST.")
        if row.get("url") != BATCH_ENDPOINT:
            problem(number, "invalid_url", f"'url' must be {BATCH_ENDPOINT}, matching the batch endpoint.")
        if not isinstance(row.get("body"), dict):
            problem(number, "missing_required_parameter", "Each line needs an object 'body'.")
            continue
        lines.append((row["custom_id"], row["body"]))
    if not lines and not problems:
        problem(1, "empty_file", "The input file has no requests.")
    return lines, problems


# -- handlers --------------------------------------------------------------

def _state(request: web.Request) -> BatchState:
    return request.app[BATCH_STATE]


def _guarded(handler: Any) -> Any:
    """Auth first; a ChatError becomes its OpenAI error reply."""
    async def wrapped(request: web.Request) -> web.Response:
        try:
            _state(request).provider.check_auth(request)
            return await handler(request)
        except ChatError as error:
            return json_reply(error.status, error.body())
    return wrapped


async def upload_file(request: web.Request) -> web.Response:
    if not request.content_type.startswith("multipart/"):
        raise ChatError(400, "Upload a file as multipart/form-data with fields 'purpose' and 'file'.")
    form = await request.post()
    purpose, upload = form.get("purpose"), form.get("file")
    if purpose != "batch":
        raise ChatError(400, f"Unsupported purpose {purpose!r}: the simulated provider accepts 'batch'.",
                        param="purpose")
    if not isinstance(upload, web.FileField):
        raise ChatError(400, "The multipart field 'file' is missing.", param="file")
    made = _state(request).add_file(upload.filename or "upload.jsonl", purpose, upload.file.read())
    _state(request).provider.stats.batch_event("files_uploaded")
    return json_reply(200, made.obj())


async def get_file(request: web.Request) -> web.Response:
    return json_reply(200, _state(request).file(request.match_info["file_id"]).obj())


async def file_content(request: web.Request) -> web.Response:
    found = _state(request).file(request.match_info["file_id"])
    return web.Response(body=found.data, content_type="application/octet-stream")


async def delete_file(request: web.Request) -> web.Response:
    state = _state(request)
    found = state.file(request.match_info["file_id"])
    del state.files[found.id]
    return json_reply(200, {"id": found.id, "object": "file", "deleted": True})


async def create_batch(request: web.Request) -> web.Response:
    state = _state(request)
    body = await read_json(request)
    if not isinstance(body, dict):
        raise ChatError(400, "The request body must be a JSON object.")
    if body.get("endpoint") != BATCH_ENDPOINT:
        raise ChatError(400, f"Unsupported endpoint {body.get('endpoint')!r}: only {BATCH_ENDPOINT}.", param="endpoint")
    if body.get("completion_window") != "24h":
        raise ChatError(400, "completion_window must be '24h'.", param="completion_window")
    metadata = body.get("metadata")
    if metadata is not None and not (isinstance(metadata, dict) and all(isinstance(v, str) for v in metadata.values())):
        raise ChatError(400, "metadata must map strings to strings.", param="metadata")
    source = state.file(str(body.get("input_file_id")))
    if source.purpose != "batch":
        raise ChatError(400, f"File {source.id} was not uploaded with purpose 'batch'.", param="input_file_id")
    batch = SimBatch(f"batch_{uuid.uuid4().hex[:24]}", source.id, "24h", metadata, int(time.time()))
    state.batches[batch.id] = batch
    state.provider.stats.batch_event("created")
    task = asyncio.get_running_loop().create_task(state.work(batch))
    state.tasks.add(task)
    task.add_done_callback(state.tasks.discard)
    return json_reply(200, batch.obj())


async def get_batch(request: web.Request) -> web.Response:
    return json_reply(200, _state(request).batch(request.match_info["batch_id"]).obj())


async def list_batches(request: web.Request) -> web.Response:
    data = [b.obj() for b in reversed(list(_state(request).batches.values()))]
    return json_reply(200, {"object": "list", "data": data, "has_more": False,
                            "first_id": data[0]["id"] if data else None, "last_id": data[-1]["id"] if data else None})


async def cancel_batch(request: web.Request) -> web.Response:
    batch = _state(request).batch(request.match_info["batch_id"])
    if batch.status not in _ACTIVE and batch.status != "cancelling":
        raise ChatError(400, f"Cannot cancel a batch with status '{batch.status}'.")
    if not batch.cancel_requested:
        batch.cancel_requested = True
        batch.mark("cancelling")
    return json_reply(200, batch.obj())


async def _stop_workers(app: web.Application) -> None:
    tasks = list(app[BATCH_STATE].tasks)
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


def add_batch_routes(app: web.Application) -> None:
    app[BATCH_STATE] = BatchState(app[PROVIDER])
    app.on_shutdown.append(_stop_workers)
    r = app.router
    r.add_post("/v1/files", _guarded(upload_file))
    r.add_get("/v1/files/{file_id}", _guarded(get_file))
    r.add_delete("/v1/files/{file_id}", _guarded(delete_file))
    r.add_get("/v1/files/{file_id}/content", _guarded(file_content))
    r.add_post("/v1/batches", _guarded(create_batch))
    r.add_get("/v1/batches", _guarded(list_batches))
    r.add_get("/v1/batches/{batch_id}", _guarded(get_batch))
    r.add_post("/v1/batches/{batch_id}/cancel", _guarded(cancel_batch))

