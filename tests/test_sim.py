"""The simulated provider, exercised through the real openai SDK over loopback HTTP."""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any, Iterator

import openai
import pytest

from tests.collect_support import bedside
from toolkit import protocol
from toolkit.dataset import item_id_for, load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.sim.models import BAD_JSON_KINDS, LISTED_MODELS

ROOT = Path(__file__).resolve().parents[1]
PROMPT = load_dataset(None).raw_cases[0]["prompt"]  # a case the default (sample) provider knows


@pytest.fixture(scope="module")
def sim() -> Iterator[SimServer]:
    with SimServer(SimConfig(seed=7)) as server:
        yield server


def client(server: SimServer, **kw: Any) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.base_url, api_key=kw.pop("api_key", "test-key"), max_retries=kw.pop("max_retries", 0), **kw)


def items_of(case: dict[str, Any]) -> list[tuple[str, float, str]]:
    return [(i["item_id"], i["points"], i["text"]) for i in case["rubric_items"]]


def ask(c: openai.OpenAI, model: str, prompt: str, **kw: Any) -> str:
    reply = c.chat.completions.create(model=model, messages=protocol.answer_messages(prompt), **kw)
    return reply.choices[0].message.content or ""


def judge(c: openai.OpenAI, case: dict[str, Any], answer: str) -> dict[str, bool]:
    reply = c.chat.completions.create(
        model="sim/judge", messages=protocol.judge_messages(case["prompt"], answer, items_of(case)),
        temperature=protocol.JUDGE_TEMPERATURE, response_format=dict(protocol.JUDGE_RESPONSE_FORMAT))
    data = json.loads(reply.choices[0].message.content or "")
    assert list(data) == ["decisions"]
    assert [d["item_id"] for d in data["decisions"]] == [i for i, _, _ in items_of(case)]  # rubric order
    return {d["item_id"]: d["matched"] for d in data["decisions"]}


def raw(server: SimServer, path: str, body: Any = None, headers: dict[str, str] | None = None) -> tuple[int, Any]:
    """A plain HTTP call (for what the SDK will not send, e.g. no Authorization header)."""
    url = server.base_url.removesuffix("/v1") + path
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, headers={"Content-Type": "application/json", **(headers or {})})
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def test_answers_are_deterministic_per_seed_model_and_prompt(sim: SimServer, sample_dataset) -> None:
    prompt = sample_dataset.raw_cases[3]["prompt"]
    c = client(sim)
    first = ask(c, "sim/medium", prompt, temperature=1)
    assert ask(c, "sim/medium", prompt, temperature=1) == first
    assert ask(c, "sim/medium-notemp", prompt) == first  # the suffix changes the API contract, not the model
    assert ask(c, "sim/weak", prompt) != first
    with SimServer(SimConfig(seed=7)) as twin, SimServer(SimConfig(seed=8)) as other:
        assert ask(client(twin), "sim/medium", prompt) == first
        assert ask(client(other), "sim/medium", prompt) != first
    with pytest.raises(openai.UnprocessableEntityError):  # a prompt outside the dataset: refused, not made up
        ask(c, "sim/strong", "What is the capital of France?")


def test_usage_and_length_limit(sim: SimServer, sample_dataset) -> None:
    c = client(sim)
    messages = protocol.answer_messages(sample_dataset.raw_cases[0]["prompt"])
    strong = c.chat.completions.create(model="sim/strong", messages=messages)
    weak = c.chat.completions.create(model="sim/weak", messages=messages)
    for reply in (strong, weak):
        usage = reply.usage
        assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens
        assert 0 < usage.completion_tokens_details.reasoning_tokens < usage.completion_tokens
        assert reply.choices[0].finish_reason == "stop" and reply.object == "chat.completion"
    assert strong.usage.completion_tokens_details.reasoning_tokens > weak.usage.completion_tokens_details.reasoning_tokens
    cut = c.chat.completions.create(model="sim/strong", messages=messages, max_completion_tokens=50)
    assert cut.choices[0].finish_reason == "length" and cut.usage.completion_tokens == 50


def test_skill_orders_rubric_coverage(sim: SimServer, sample_dataset) -> None:
    cases = sample_dataset.raw_cases

    async def coverage(model: str) -> tuple[int, int]:
        async with openai.AsyncOpenAI(base_url=sim.base_url, api_key="k", max_retries=0) as ac:
            async def one(case: dict[str, Any]) -> tuple[int, int]:
                answer = await ac.chat.completions.create(model=model, messages=protocol.answer_messages(case["prompt"]))
                graded = await ac.chat.completions.create(
                    model="sim/judge", messages=protocol.judge_messages(
                        case["prompt"], answer.choices[0].message.content or "", items_of(case)))
                matched = {d["item_id"]: d["matched"] for d in json.loads(graded.choices[0].message.content)["decisions"]}
                good = sum(matched[i["item_id"]] for i in case["rubric_items"] if i["points"] > 0)
                bad = sum(matched[i["item_id"]] for i in case["rubric_items"] if i["points"] < 0)
                return good, bad
            results = await asyncio.gather(*(one(case) for case in cases))
        return sum(g for g, _ in results), sum(b for _, b in results)

    async def all_models() -> list[tuple[int, int]]:
        return list(await asyncio.gather(*(coverage(m) for m in ("sim/strong", "sim/medium", "sim/weak"))))

    (s_good, s_bad), (m_good, m_bad), (w_good, w_bad) = asyncio.run(all_models())
    positives = sum(1 for c in cases for i in c["rubric_items"] if i["points"] > 0)
    assert s_good > m_good > w_good
    assert s_bad < w_bad
    assert 0.7 < s_good / positives < 0.97 and 0.15 < w_good / positives < 0.45


def test_judge_follows_what_the_answer_says(sim: SimServer, sample_dataset) -> None:
    case = next(c for c in sample_dataset.raw_cases
                if len(c["rubric_items"]) >= 4 and any(i["points"] < 0 for i in c["rubric_items"][3:]))
    items = case["rubric_items"]
    negative = next(i for i in items[3:] if i["points"] < 0)
    half = items[1]["text"].split()
    answer = "\n".join([
        "My plan:",
        f"- {items[0]['text']}.",
        f"First, {' '.join(half[: len(half) // 2])}.",  # a partial statement is not a match
        f"Recommend: {items[2]['text'].lower()}",
        f"Avoid: {negative['text']}.",  # warning against a harmful action is not endorsing it
    ])
    matched = judge(client(sim), case, answer)
    assert {k for k, v in matched.items() if v} == {items[0]["item_id"], items[2]["item_id"]}
    endorsed = judge(client(sim), case, f"- {negative['text']}")
    assert {k for k, v in endorsed.items() if v} == {negative["item_id"]}
    # a message that is not in the protocol format gets no decisions rather than invented ones
    odd = client(sim).chat.completions.create(model="sim/judge", messages=[{"role": "user", "content": "hello"}])
    assert json.loads(odd.choices[0].message.content) == {"decisions": []}


def test_auth_errors_never_echo_the_key(sample_dataset) -> None:
    with SimServer(SimConfig(api_key="right-key")) as server:
        status, body = raw(server, "/v1/chat/completions", {"model": "sim/strong", "messages": [{"role": "user", "content": "x"}]})
        assert status == 401 and body["error"]["code"] == "missing_api_key"
        with pytest.raises(openai.AuthenticationError) as caught:
            ask(client(server, api_key="wrong-key-123"), "sim/strong", PROMPT)
        assert caught.value.status_code == 401 and "wrong-key-123" not in caught.value.response.text
        assert ask(client(server, api_key="right-key"), "sim/strong", PROMPT)
        with pytest.raises(openai.AuthenticationError):
            client(server, api_key="wrong-key-123").models.list()
        assert server.stats()["chat_completions"]["faults"]["auth"] == 2


def test_unknown_model_bad_body_and_temperature_rejection(sim: SimServer) -> None:
    c = client(sim)
    for name in ("gpt-4o", "sim/skill-1.5", "sim/unknown"):
        with pytest.raises(openai.NotFoundError) as caught:
            ask(c, name, PROMPT)
        assert caught.value.code == "model_not_found"
    status, body = raw(sim, "/v1/chat/completions", {"model": "sim/strong"}, {"Authorization": "Bearer k"})
    assert status == 400 and "messages" in body["error"]["message"]
    with pytest.raises(openai.BadRequestError) as caught:
        ask(c, "sim/strong-notemp", PROMPT, temperature=1)
    assert "temperature" in caught.value.message and caught.value.code == "unsupported_value"
    assert ask(c, "sim/skill-0.35-notemp", PROMPT)  # the fallback: the same call without temperature
    assert {m.id for m in c.models.list().data} == set(LISTED_MODELS)


def test_rate_limit_reply_carries_retry_after_and_sdk_honours_it(sample_dataset) -> None:
    with SimServer(SimConfig(rate_429=1.0, retry_after_s=0.05)) as server:
        with pytest.raises(openai.RateLimitError) as caught:
            ask(client(server), "sim/strong", PROMPT)
        headers = caught.value.response.headers
        assert headers["Retry-After"] == "0.05" and headers["retry-after-ms"] == "50"
        started = time.monotonic()
        with pytest.raises(openai.RateLimitError):
            ask(client(server, max_retries=2), "sim/strong", PROMPT)
        assert time.monotonic() - started >= 0.1  # two waits of 0.05 s taken from the headers
        stats = server.stats()["chat_completions"]
        assert stats["received"] == 4 and stats["faults"]["429"] == 4 and stats["served_ok"] == 0


def test_server_errors_and_deterministic_fault_sequence(sample_dataset) -> None:
    with SimServer(SimConfig(rate_5xx=1.0)) as server:
        codes, c = set(), client(server)
        for _ in range(20):
            with pytest.raises(openai.InternalServerError) as caught:
                ask(c, "sim/judge", PROMPT)
            codes.add(caught.value.status_code)
            assert caught.value.body["type"] == "server_error"
        assert codes == {500, 502, 503}

    def outcomes(seed: int) -> list[str]:
        with SimServer(SimConfig(rate_429=0.3, rate_5xx=0.3, seed=seed)) as server:
            seen, c = [], client(server)
            for _ in range(30):
                try:
                    ask(c, "sim/weak", PROMPT)
                    seen.append("ok")
                except openai.APIStatusError as error:
                    seen.append(str(error.status_code))
            return seen

    first = outcomes(3)
    assert first == outcomes(3) and first != outcomes(4) and {"ok", "429"} <= set(first)


def classify(content: str, item_ids: list[str]) -> str:
    """How a judge reply breaks the decision contract ("valid" when it does not)."""
    try:
        data = json.loads(content)
    except json.JSONDecodeError:
        return "not_json"
    if "decisions" not in data:
        return "missing_decisions"
    got = [d["item_id"] for d in data["decisions"]]
    if any(not isinstance(d["matched"], bool) for d in data["decisions"]):
        return "non_boolean"
    if len(set(got)) < len(got):
        return "duplicate_item"
    if set(got) - set(item_ids):
        return "extra_item"
    if set(item_ids) - set(got):
        return "missing_item"
    return "valid"


def test_bad_json_judge_replies_break_in_each_stated_way(sample_dataset) -> None:
    case = sample_dataset.raw_cases[0]
    ids = [i for i, _, _ in items_of(case)]
    with SimServer(SimConfig(rate_bad_json=1.0)) as server:
        c = client(server)
        kinds = []
        for n in range(40):
            messages = protocol.judge_messages(case["prompt"], f"answer {n}", items_of(case))
            reply = c.chat.completions.with_raw_response.create(model="sim/judge", messages=messages)
            kind = classify(reply.parse().choices[0].message.content, ids)
            assert reply.status_code == 200 and reply.headers["x-sim-fault"] == f"bad_json:{kind}"
            kinds.append(kind)
        assert set(kinds) == set(BAD_JSON_KINDS)
        assert classify(json.dumps({"decisions": [{"item_id": i, "matched": False} for i in ids]}), ids) == "valid"
        assert ask(c, "sim/strong", case["prompt"])  # answer models are never broken
        stats = server.stats()["chat_completions"]
        assert stats["faults"]["bad_json"] == 40 and sum(stats["bad_json_kinds"].values()) == 40
        assert stats["served_ok"] == 41  # a broken reply is still a paid call


def test_timeout_fault_holds_then_504_and_client_timeouts_do_not_block_shutdown(sample_dataset) -> None:
    with SimServer(SimConfig(rate_timeout=1.0, timeout_hold_s=0.3)) as server:
        started = time.monotonic()
        with pytest.raises(openai.APIStatusError) as caught:
            ask(client(server, timeout=5), "sim/strong", PROMPT)
        assert caught.value.status_code == 504 and time.monotonic() - started >= 0.3
    server = SimServer(SimConfig(rate_timeout=1.0, timeout_hold_s=30)).start()
    started = time.monotonic()
    with pytest.raises(openai.APITimeoutError):
        ask(client(server, timeout=0.2), "sim/strong", PROMPT)
    server.stop()
    assert time.monotonic() - started < 5
    assert server.stats()["chat_completions"]["faults"]["timeout"] == 1


def test_latency_is_added(sample_dataset) -> None:
    with SimServer(SimConfig(latency_ms=150)) as server:
        started = time.monotonic()
        ask(client(server), "sim/weak", PROMPT)
        assert time.monotonic() - started >= 0.15


def test_stats_count_paid_calls_and_duplicates(sample_dataset) -> None:
    with SimServer() as server:
        c = client(server)
        ask(c, "sim/strong", PROMPT)
        ask(c, "sim/strong", PROMPT)
        ask(c, "sim/weak", PROMPT)
        with pytest.raises(openai.NotFoundError):
            ask(c, "sim/nope", PROMPT)
        with pytest.raises(openai.BadRequestError):
            ask(c, "sim/weak-notemp", PROMPT, temperature=1)
        status, stats = raw(server, "/stats")
        chat = stats["chat_completions"]
        assert status == 200 and stats == server.stats()
        assert (chat["received"], chat["served_ok"], chat["duplicates_ok"]) == (5, 3, 1)
        assert chat["by_model"]["sim/strong"] == {"received": 2, "served_ok": 2}
        assert chat["by_model"]["sim/weak-notemp"] == {"received": 1, "served_ok": 0}
        assert chat["faults"]["not_found"] == 1 and chat["faults"]["temperature_rejected"] == 1
        assert raw(server, "/stats/reset", {})[1]["chat_completions"]["received"] == 0
        ask(c, "sim/strong", PROMPT)
        assert server.stats()["chat_completions"]["duplicates_ok"] == 0  # reset forgets fingerprints too
        server.reset_stats()
        assert server.stats()["chat_completions"]["served_ok"] == 0


def batch_line(custom_id: str, body: dict[str, Any]) -> str:
    return json.dumps({"custom_id": custom_id, "method": "POST", "url": "/v1/chat/completions", "body": body})


def wait_for(c: openai.OpenAI, batch_id: str, statuses: set[str]) -> Any:
    deadline = time.monotonic() + 10
    while True:
        batch = c.batches.retrieve(batch_id)
        if batch.status in statuses or time.monotonic() > deadline:
            return batch
        time.sleep(0.02)


def test_batch_round_trip_through_the_sdk(sample_dataset) -> None:
    case = sample_dataset.raw_cases[0]
    answer_body = {"model": "sim/strong", "messages": protocol.answer_messages(case["prompt"]),
                   "temperature": 1, "max_completion_tokens": protocol.ANSWER_MAX_COMPLETION_TOKENS}
    with SimServer(SimConfig(batch_delay_s=0.05)) as server:
        c = client(server)
        direct = ask(c, "sim/strong", case["prompt"], temperature=1)
        lines = [batch_line("a-0", answer_body),
                 batch_line("j-0", {"model": "sim/judge", "messages": protocol.judge_messages(case["prompt"], direct, items_of(case))}),
                 batch_line("x-0", {"model": "sim/none", "messages": [{"role": "user", "content": "x"}]})]
        uploaded = c.files.create(file=("in.jsonl", io.BytesIO("\n".join(lines).encode())), purpose="batch")
        assert uploaded.object == "file" and uploaded.purpose == "batch" and uploaded.bytes > 0
        assert c.files.retrieve(uploaded.id).filename == "in.jsonl"
        created = c.batches.create(input_file_id=uploaded.id, endpoint="/v1/chat/completions",
                                   completion_window="24h", metadata={"run": "r1"})
        assert created.status == "validating" and created.metadata == {"run": "r1"}
        done = wait_for(c, created.id, {"completed", "failed", "cancelled"})
        assert done.status == "completed" and done.completed_at and done.in_progress_at
        assert (done.request_counts.total, done.request_counts.completed, done.request_counts.failed) == (3, 2, 1)
        out = {r["custom_id"]: r for r in map(json.loads, c.files.content(done.output_file_id).text.splitlines())}
        assert out["a-0"]["response"]["status_code"] == 200 and out["a-0"]["error"] is None
        assert out["a-0"]["response"]["body"]["choices"][0]["message"]["content"] == direct
        decisions = json.loads(out["j-0"]["response"]["body"]["choices"][0]["message"]["content"])["decisions"]
        assert len(decisions) == len(case["rubric_items"])
        errors = [json.loads(x) for x in c.files.content(done.error_file_id).text.splitlines()]
        assert [(e["custom_id"], e["response"]["status_code"]) for e in errors] == [("x-0", 404)]
        assert done.usage.output_tokens > done.usage.output_tokens_details.reasoning_tokens > 0
        batches = server.stats()["batches"]
        assert (batches["served_ok"], batches["duplicates_ok"], batches["requests_failed"]) == (2, 1, 1)


def test_batch_failure_and_cancel(sample_dataset) -> None:
    with SimServer(SimConfig(batch_delay_s=0.3)) as server:
        c = client(server)
        broken = c.files.create(file=("bad.jsonl", io.BytesIO(b'{"custom_id": "a"}\nnot json\n')), purpose="batch")
        failed = wait_for(c, c.batches.create(input_file_id=broken.id, endpoint="/v1/chat/completions",
                                              completion_window="24h").id, {"failed", "completed"})
        assert failed.status == "failed" and {e.line for e in failed.errors.data} == {1, 2}
        good = c.files.create(file=("ok.jsonl", io.BytesIO(batch_line("a", {"model": "sim/weak", "messages": [
            {"role": "user", "content": "x"}]}).encode())), purpose="batch")
        pending = c.batches.create(input_file_id=good.id, endpoint="/v1/chat/completions", completion_window="24h")
        assert c.batches.cancel(pending.id).status == "cancelling"
        assert wait_for(c, pending.id, {"cancelled", "completed"}).status == "cancelled"
        with pytest.raises(openai.BadRequestError):
            c.batches.cancel(pending.id)
        with pytest.raises(openai.NotFoundError):
            c.files.content("file-missing")
        assert server.stats()["batches"]["served_ok"] == 0


def test_config_refuses_non_loopback_and_bad_rates() -> None:
    with pytest.raises(ValueError, match="loopback"):
        SimConfig(host="0.0.0.0")
    with pytest.raises(ValueError, match="rate_429"):
        SimConfig(rate_429=1.5)
    assert SimConfig(host="::1").host == "::1"


def test_token_bucket_rate_limit_refuses_at_once_with_the_wait_until_a_token(sample_dataset) -> None:
    with SimServer(SimConfig(rate_limit_rps=4, rate_limit_burst=2, latency_ms=0)) as server:
        c = client(server)
        assert ask(c, "sim/strong", PROMPT) and ask(c, "sim/strong", PROMPT)  # the burst
        started = time.monotonic()
        with pytest.raises(openai.RateLimitError) as caught:
            ask(c, "sim/strong", PROMPT)
        assert time.monotonic() - started < 0.2  # refused at once, not after the latency
        wait = float(caught.value.response.headers["retry-after"])
        assert 0.1 <= wait <= 0.25 + 0.05 and caught.value.code == "rate_limit_exceeded"
        time.sleep(wait)
        assert ask(c, "sim/strong", PROMPT)  # a token is free again after the advertised wait
        assert server.stats()["chat_completions"]["faults"]["rate_limit"] == 1
    with pytest.raises(ValueError, match="rate_limit"):
        SimConfig(rate_limit_rps=-1)


def test_cli_serve_prints_url_and_serves_until_terminated() -> None:
    env = {**os.environ, "SIM_TEST_KEY": "cli-key"}
    proc = subprocess.Popen([sys.executable, "-m", "toolkit", "sim", "serve", "--port", "0", "--api-key-env", "SIM_TEST_KEY",
                             "--rate-limit-rps", "100", "--rate-limit-burst", "5"],
                            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        url = proc.stdout.readline().strip()
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        request = urllib.request.Request(url + "/models", headers={"Authorization": "Bearer cli-key"})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert {m["id"] for m in json.loads(response.read())["data"]} == set(LISTED_MODELS)
        proc.terminate()
        assert proc.wait(timeout=10) == 0
        assert "cli-key" not in proc.stderr.read()
    finally:
        proc.kill()
        proc.wait()
    refused = subprocess.run([sys.executable, "-m", "toolkit", "sim", "serve", "--host", "0.0.0.0"],
                             cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert refused.returncode != 0 and "loopback" in refused.stderr and refused.stderr.count("\n") == 1


def test_serve_help_names_every_model_and_judge() -> None:
    code, out, _ = bedside("sim", "serve", "--help")
    text = " ".join(out.split())
    assert code == 0
    for name in (*(m.removesuffix("-notemp") for m in LISTED_MODELS), "sim/skill-<0..1>", "-notemp"):
        assert name in text, name


def other_dataset(tmp_path: Path, sample_dataset) -> Path:
    """A case file like the sample whose prompts the default provider has never seen."""
    lines = []
    for case in sample_dataset.raw_cases[:3]:
        prompt = "Another dataset. " + case["prompt"]
        items = [{**item, "item_id": item_id_for(prompt, i)} for i, item in enumerate(case["rubric_items"])]
        lines.append(json.dumps({**case, "prompt": prompt, "rubric_items": items}))
    path = tmp_path / "other.jsonl"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_case_outside_the_served_dataset_is_refused_naming_dataset(tmp_path: Path, sample_dataset) -> None:
    other = other_dataset(tmp_path, sample_dataset)
    unknown = load_dataset(other).raw_cases[0]["prompt"]
    with SimServer(SimConfig(rate_429=0.0)) as server:
        c = client(server)
        with pytest.raises(openai.UnprocessableEntityError) as caught:
            ask(c, "sim/strong", unknown)
        assert caught.value.status_code == 422 and caught.value.code == "case_not_in_dataset"
        message = caught.value.body["message"]
        assert "--dataset" in message and "the bundled sample" in message and sample_dataset.sha256[:12] in message
        assert ask(c, "sim/strong", PROMPT)  # a known case is still answered
        # the judge needs no dataset (the rubric comes with the request): it grades any case
        assert judge(c, load_dataset(other).raw_cases[0], "an answer") is not None
        # the collector stops at once with that one line instead of scoring every case 0
        code, out, err = bedside("run", "--answer-model", "sim/strong", "--judge-model", "sim/judge",
                                 "--base-url", server.base_url, "--dataset", other, "--store", tmp_path / "s",
                                 "--progress", "none", "--concurrency", "2")
        stats = server.stats()["chat_completions"]
    assert code == 1, (out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bedside: error: ") and "HTTP 422 case_not_in_dataset" in err
    assert "bedside sim serve --dataset PATH" in lines[0] and "the bundled sample" in lines[0]
    assert stats["faults"]["unknown_case"] <= 1 + 2  # the direct call, then no more than the 2 in flight
    with SimServer(SimConfig(datasets=(str(other),))) as server:  # served with --dataset, the same run works
        code, out, err = bedside("run", "--answer-model", "sim/strong", "--judge-model", "sim/judge",
                                 "--base-url", server.base_url, "--dataset", other, "--store", tmp_path / "s2",
                                 "--progress", "none")
    assert code == 0, err
