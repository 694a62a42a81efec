"""Hostile providers: replies built to crash the parser or to flood memory, and URLs nobody answers at.
Each goes through `bedside run` / `bedside judge`, the real openai client and a loopback server."""

from __future__ import annotations

import asyncio
import gzip
import hashlib
import json
import socket
import time
import zlib
from pathlib import Path
from typing import Any, Callable

import pytest
from aiohttp import web

from tests.collect_support import Recorder, bedside, completion, judge_reply
from tests.test_cli_process import bedside_process
from toolkit.collect.client import CallFailed, CallStats, ChatClient, EndpointFatal
from toolkit.collect.judge import InvalidJudgeReply, parse_decisions
from toolkit.collect.limit import AdaptiveLimit
from toolkit.collect.settings import Endpoint, RetryPolicy
from toolkit.store import Store

ANSWER = "Check potassium."
DEEP = 200_000  # levels: far past the interpreter's recursion limit


class Hostile(Recorder):
    """A recorder whose ``respond(body)`` may also return raw bytes (sent as a 200 JSON body) or an
    ``async (request) -> StreamResponse`` that writes whatever it likes."""

    async def _chat(self, request: web.Request) -> web.StreamResponse:
        body = await request.json()
        self.bodies.append(body)
        self.times.append(time.monotonic())
        reply = self.respond(body)
        if isinstance(reply, bytes):
            return web.Response(body=reply, content_type="application/json")
        if callable(reply):
            return await reply(request)
        status, payload = reply[:2]
        return web.json_response(payload, status=status)


def run(rec: Recorder, store: Path, *extra: str) -> tuple[int, str, str]:
    return bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                   "--judge-base-url", rec.base_url, "--store", store, "--progress", "none",
                   "--retry-base-delay", "0", *extra)


def first_then_fine(model: str, broken: Callable[[dict[str, Any]], Any]) -> Callable[[dict[str, Any]], Any]:
    """The first reply to ``model`` is ``broken(body)``, every other reply is valid."""
    seen = {"n": 0}

    def respond(body: dict[str, Any]) -> Any:
        if body["model"] == model:
            seen["n"] += 1
            if seen["n"] == 1:
                return broken(body)
        return completion(judge_reply(body) if body["model"] == "judge" else ANSWER)

    return respond


def body_with(content: str) -> bytes:
    return json.dumps(completion(content)[1]).encode()


# -- judge replies -------------------------------------------------------------

def deep_decisions(body: dict[str, Any]) -> str:
    return '{"decisions": ' + "[" * DEEP + "]" * DEEP + "}"


def _first_id(body: dict[str, Any]) -> str:
    return json.loads(judge_reply(body))["decisions"][0]["item_id"]


HOSTILE_JUDGE = {
    "nested 200,000 deep": deep_decisions,
    "a 5,000-digit number": lambda body: judge_reply(body)[:-1] + ', "confidence": ' + "9" * 5000 + "}",
    "NaN": lambda body: judge_reply(body)[:-1] + ', "confidence": NaN}',
    "Infinity as matched": lambda body: judge_reply(body).replace("true", "Infinity", 1),
    "a float overflowing": lambda body: judge_reply(body).replace("true", "1e999", 1),
    "a lone surrogate escape": lambda body: judge_reply(body).replace(_first_id(body), "\\ud800", 1),
    "an array": lambda body: "[" + judge_reply(body) + "]",
    "null": lambda body: "null",
    "a string": lambda body: json.dumps(judge_reply(body)),
    "decisions as an object": lambda body: '{"decisions": {"x": true}}',
    "matched as text": lambda body: judge_reply(body).replace("true", '"true"', 1),
    "an unhashable item_id": lambda body: judge_reply(body).replace(f'"{_first_id(body)}"', "[1]", 1),
}


@pytest.mark.parametrize("kind", ["nested 200,000 deep", "a 5,000-digit number"])
def test_a_judge_reply_built_to_crash_the_parser_is_an_invalid_reply_asked_again(tmp_path: Path, kind: str) -> None:
    broken: dict[str, str] = {}

    def hostile(body: dict[str, Any]) -> tuple:
        broken["text"] = HOSTILE_JUDGE[kind](body)
        return completion(broken["text"])

    with Hostile(first_then_fine("judge", hostile)) as rec:
        code, out, err = run(rec, tmp_path / "s", "--limit", "2", "--concurrency", "1")
    assert code == 0, err
    store = Store.open(tmp_path / "s")
    judgments = store.read("judgments").sort("seq")
    assert judgments.height == 3 and judgments["error"].null_count() == 2
    first = judgments.row(0, named=True)
    assert first["error"].startswith("InvalidJudgeReply: ") and first["raw_reply"] == broken["text"]  # kept raw
    assert store.read("answers")["answer"].to_list() == [ANSWER, ANSWER]
    assert "2 answers, 2 judgments by judge" in out and "1 invalid judge replies re-asked" in out


@pytest.mark.parametrize("kind", sorted(HOSTILE_JUDGE))
def test_every_malformed_judge_reply_is_invalid_never_another_error(kind: str) -> None:
    body = {"messages": [{}, {"content": "RUBRIC ITEMS:\n[a1] points=+1 :: x\n[a2] points=-1 :: y"}]}
    with pytest.raises(InvalidJudgeReply) as raised:
        parse_decisions(HOSTILE_JUDGE[kind](body), ["a1", "a2"])
    assert len(raised.value.error) <= 2000


# -- answer replies ------------------------------------------------------------

HOSTILE_BODIES: dict[str, Callable[[], bytes]] = {
    "nested 200,000 deep": lambda: body_with(ANSWER)[:-1] + b', "x": ' + b"[" * DEEP + b"]" * DEEP + b"}",
    "a 5,000-digit token count": lambda: body_with(ANSWER).replace(b'"prompt_tokens": 11', b'"prompt_tokens": '
                                                                   + b"7" * 5000),
    "not UTF-8": lambda: json.dumps(completion("caf\u00e9")[1], ensure_ascii=False).encode().replace(
        "\u00e9".encode(), b"\xff\xfe"),
    "choices of null": lambda: json.dumps({"choices": [None]}).encode(),
    "content a number": lambda: body_with(ANSWER).replace(b'"content": "Check potassium."', b'"content": 42'),
    "a bare string": lambda: b'"Check potassium."',
}


@pytest.mark.parametrize("kind", sorted(HOSTILE_BODIES))
def test_an_answer_body_built_to_crash_the_client_is_asked_again(tmp_path: Path, kind: str) -> None:
    with Hostile(first_then_fine("ans", lambda body: HOSTILE_BODIES[kind]())) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1")
        calls = [b["model"] for b in rec.bodies]
    assert code == 0, err
    assert calls == ["ans", "ans", "judge"]
    assert Store.open(tmp_path / "s").read("answers")["answer"].to_list() == [ANSWER]


# -- reply size ----------------------------------------------------------------

LIMIT = 100_000


def test_an_oversized_answer_is_a_failed_call_neither_stored_nor_retried(tmp_path: Path) -> None:
    huge = "word " * 60_000  # 300 KB
    with Hostile(lambda body: completion(huge) if body["model"] == "ans" else completion(judge_reply(body))) as rec:
        code, out, err = run(rec, tmp_path / "s", "--limit", "1", "--max-reply-bytes", str(LIMIT))
        calls = [b["model"] for b in rec.bodies]
    assert code == 3 and calls == ["ans"]  # not asked again: a reply that size would be paid for again
    assert "1 × ReplyTooLarge: reply over the 100000 bytes limit (--max-reply-bytes 100000)" in err
    answers = Store.open(tmp_path / "s").read("answers")
    assert answers["answer"].to_list() == [None]
    assert answers["error"][0] == ("ReplyTooLarge: reply over the 100000 bytes limit (--max-reply-bytes 100000); "
                                   "not stored")
    listing = bedside("runs", "--store", tmp_path / "s")
    assert listing[0] == 0 and "ReplyTooLarge" in listing[1]


def test_an_oversized_judge_reply_is_a_judge_error_with_its_cause(tmp_path: Path) -> None:
    def respond(body: dict[str, Any]) -> tuple:
        if body["model"] == "judge":
            return completion(judge_reply(body)[:-1] + ', "notes": "' + "x" * 200_000 + '"}')
        return completion(ANSWER)

    with Hostile(respond) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1", "--max-reply-bytes", str(LIMIT))
        assert code == 3 and "ReplyTooLarge" in err
        judged = len(rec.of_model("judge"))
        code, _, err = bedside("judge", "--run", "ans", "--judge-model", "judge", "--judge-base-url", rec.base_url,
                               "--store", tmp_path / "s", "--progress", "none", "--max-reply-bytes", str(LIMIT))
    assert code == 3 and "1 × ReplyTooLarge: reply over the 100000 bytes limit" in err
    assert judged == 1  # neither retried nor re-asked
    judgments = Store.open(tmp_path / "s").read("judgments")
    assert judgments.height == 2 and judgments["raw_reply"].null_count() == 2  # nothing of it kept


def test_an_endless_reply_is_cut_off_at_the_limit_not_read_to_its_end(tmp_path: Path) -> None:
    sent = {"bytes": 0}

    async def endless(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})  # chunked: no length
        await response.prepare(request)
        head = body_with("")[:-1].rsplit(b'"content": ""', 1)[0] + b'"content": "'
        await response.write(head)
        try:
            for _ in range(800):  # 50 MB if nobody stops reading
                await response.write(b"a" * 65536)
                sent["bytes"] += 65536
        except (ConnectionError, RuntimeError):
            pass
        return response

    with Hostile(lambda body: endless if body["model"] == "ans" else completion(judge_reply(body))) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1", "--max-reply-bytes", str(LIMIT))
    assert code == 3 and "ReplyTooLarge" in err
    assert sent["bytes"] < 20_000_000  # the client hung up; a few socket buffers' worth got out meanwhile


def test_a_reply_dripped_a_byte_at_a_time_is_abandoned_at_the_timeout_and_asked_again(tmp_path: Path) -> None:
    async def dripping(request: web.Request) -> web.StreamResponse:
        response = web.StreamResponse(headers={"Content-Type": "application/json"})
        await response.prepare(request)
        for index in range(0, len(text := body_with(ANSWER)), 20):  # each piece well within the per-read timeout
            await response.write(text[index:index + 20])
            await asyncio.sleep(0.2)
        return response

    started = time.monotonic()
    with Hostile(first_then_fine("ans", lambda body: dripping)) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1", "--timeout", "1")
        calls = [b["model"] for b in rec.bodies]
    assert code == 0, err
    assert calls == ["ans", "ans", "judge"] and time.monotonic() - started < 6  # the drip lasts ~2.6 s
    assert Store.open(tmp_path / "s").read("answers")["answer"].to_list() == [ANSWER]


def raw_deflate(data: bytes) -> bytes:
    packer = zlib.compressobj(wbits=-zlib.MAX_WBITS)
    return packer.compress(data) + packer.flush()


@pytest.mark.parametrize("codings, encode", [
    (["gzip"], gzip.compress), (["deflate"], zlib.compress), (["deflate"], raw_deflate),
    (["gzip", "deflate"], lambda data: zlib.compress(gzip.compress(data)))])
def test_the_decoded_size_is_counted_exactly_and_stops_at_the_limit(codings: list[str], encode) -> None:
    from toolkit.collect.wire import Inflation

    data = bytes(range(256)) * 4000 + b" " * 3_000_000  # ~4 MB, partly incompressible
    wire = encode(data)
    counted = Inflation(codings, 10 * len(data))
    assert all(counted.feed(wire[i:i + 16384]) for i in range(0, len(wire), 16384))
    assert counted.decoded == len(data)
    capped = Inflation(codings, 100_000)
    assert not all(capped.feed(wire[i:i + 16384]) for i in range(0, len(wire), 16384))
    assert capped.decoded <= 100_000 + 2 * 100_001


@pytest.mark.parametrize("status, coding", [(200, "gzip"), (500, "gzip"), (200, "gzip, gzip"), (429, "deflate")])
def test_a_compressed_reply_is_capped_at_its_decoded_size(tmp_path: Path, status: int, coding: str) -> None:
    bomb = body_with(" " * 5_000_000)  # 5 MB decoded, a few KB on the wire
    for layer in coding.split(", "):
        bomb = gzip.compress(bomb) if layer == "gzip" else zlib.compress(bomb)

    async def compressed(request: web.Request) -> web.Response:
        return web.Response(body=bomb, status=status,
                            headers={"Content-Type": "application/json", "Content-Encoding": coding})

    with Hostile(lambda body: compressed if body["model"] == "ans" else completion(judge_reply(body))) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1", "--max-reply-bytes", str(LIMIT))
        calls = [b["model"] for b in rec.bodies]
    assert code == 3 and "1 × ReplyTooLarge" in err and calls == ["ans"]  # error bodies too: never decoded whole
    assert len(bomb) < LIMIT


def test_a_compressed_reply_under_the_limit_is_read_as_before(tmp_path: Path) -> None:
    async def compressed(request: web.Request) -> web.Response:
        return web.Response(body=gzip.compress(body_with(ANSWER)),
                            headers={"Content-Type": "application/json", "Content-Encoding": "gzip"})

    with Hostile(lambda body: compressed if body["model"] == "ans" else completion(judge_reply(body))) as rec:
        code, _, err = run(rec, tmp_path / "s", "--limit", "1")
    assert code == 0, err
    assert Store.open(tmp_path / "s").read("answers")["answer"].to_list() == [ANSWER]


# -- endpoints nobody answers at -----------------------------------------------

def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def checksum(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*")):
        digest.update(str(path.relative_to(root)).encode() + b"\0")
        if path.is_file():
            digest.update(path.read_bytes())
    return digest.hexdigest()


@pytest.fixture(scope="module")
def one_run(tmp_path_factory) -> Path:
    """A store holding one collected run (ans, one case)."""
    store = tmp_path_factory.mktemp("hostile") / "s"
    with Hostile(first_then_fine("ans", lambda body: completion(ANSWER))) as rec:
        code, _, err = run(rec, store, "--limit", "1")
    assert code == 0, err
    return store


@pytest.mark.parametrize("url, why", [(None, "connection refused"),
                                      ("http://nonexistent.invalid/v1", "name not resolved")])
def test_an_endpoint_nobody_answers_at_is_fatal_at_once_and_leaves_the_store_as_it_was(one_run: Path, url, why) -> None:
    url = url or f"http://127.0.0.1:{free_port()}/v1"
    line = f"bedside: error: cannot connect to {url}: {why}\n"
    before = checksum(one_run)
    done = bedside_process(["run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", url,
                            "--store", str(one_run), "--progress", "none", "--run-id", "new"])
    assert done.returncode == 1 and done.stderr == line
    assert checksum(one_run) == before
    started = time.monotonic()  # in this process: the time of the command, not of importing the SDK
    code, _, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", url,
                           "--store", one_run, "--progress", "none", "--limit", "3")  # more cases of the stored run
    assert code == 1 and err == line and time.monotonic() - started < 5  # the old retries slept 18.6 s
    code, _, err = bedside("judge", "--run", "ans", "--judge-model", "judge2", "--judge-base-url", url,
                           "--store", one_run, "--progress", "none")
    assert code == 1 and err == line
    assert checksum(one_run) == before


def test_a_judge_endpoint_nobody_answers_at_stops_the_run_before_any_answer_is_paid_for(tmp_path: Path) -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"
    with Hostile(lambda body: completion(ANSWER)) as rec:
        code, _, err = bedside("run", "--answer-model", "ans", "--judge-model", "judge", "--base-url", rec.base_url,
                               "--judge-base-url", url, "--store", tmp_path / "s", "--limit", "2",
                               "--progress", "none")
        calls = len(rec.bodies)
    assert code == 1 and err == f"bedside: error: cannot connect to {url}: connection refused\n" and calls == 0
    assert not (tmp_path / "s").exists()


def test_a_refusal_after_the_endpoint_has_answered_is_an_outage_and_retried() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1"

    async def call(reached: bool) -> BaseException:
        stats = CallStats(reached=reached)
        client = ChatClient(Endpoint("custom", url, ()), "answer", RetryPolicy(2, 0.0, timeout_s=5),
                            AdaptiveLimit(1), stats)
        try:
            await client.complete("ans", [{"role": "user", "content": "x"}], temperature=1.0,
                                  max_completion_tokens=10)
        except (CallFailed, EndpointFatal) as error:
            return error
        finally:
            await client.close()
        raise AssertionError("the call succeeded")

    fatal = asyncio.run(call(False))
    assert isinstance(fatal, EndpointFatal) and str(fatal) == f"cannot connect to {url}: connection refused"
    outage = asyncio.run(call(True))
    assert isinstance(outage, CallFailed) and outage.error.startswith("APITimeoutError")


def test_batch_result_lines_built_to_crash_the_ingest_are_skipped_and_the_rest_stored(tmp_path: Path,
                                                                                      monkeypatch) -> None:
    from toolkit.collect.api import evaluate
    from toolkit.sim import SimConfig, SimServer
    from toolkit.sim import batch as sim_batch

    hostile = [b"[" * DEEP + b"]" * DEEP, b'{"custom_id": ' + b"7" * 5000 + b"}", b'{"custom_id": [1]}', b"NaN"]
    add_file = sim_batch.BatchState.add_file

    def with_hostile_lines(self, filename: str, purpose: str, data: bytes):
        if purpose == "batch_output":
            data = b"\n".join(hostile) + b"\n" + data
        return add_file(self, filename, purpose, data)

    monkeypatch.setattr(sim_batch.BatchState, "add_file", with_hostile_lines)
    with SimServer(SimConfig(seed=3)) as sim:
        report = evaluate("sim/strong", "sim/judge", store=tmp_path / "s", base_url=sim.base_url, limit=2,
                          batch=True, progress="none", say=lambda line: None)
    assert (report.answers_ok, report.judgments_ok, report.answer_errors, report.judge_errors) == (2, 2, 0, 0)
