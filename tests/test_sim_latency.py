"""The simulated provider's latency is the time to its reply, its own work included, as a real
provider's is: making a completion does not add to ``--latency-ms``."""

from __future__ import annotations

import time

import openai

from toolkit import protocol
from toolkit.dataset import load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.sim.chat import SimProvider

LATENCY_S, WORK_S = 0.3, 0.2


def test_the_reply_leaves_the_latency_after_the_request_the_simulators_work_included(monkeypatch) -> None:
    real = SimProvider.complete

    def slow(self, *args, **kwargs):
        time.sleep(WORK_S)  # a simulator that takes long to write its answer
        return real(self, *args, **kwargs)

    monkeypatch.setattr(SimProvider, "complete", slow)
    prompt = load_dataset(None).raw_cases[0]["prompt"]
    with SimServer(SimConfig(latency_ms=LATENCY_S * 1000)) as sim:
        client = openai.OpenAI(base_url=sim.base_url, api_key="any", max_retries=0)
        client.chat.completions.create(model="sim/strong", messages=protocol.answer_messages(prompt))  # connected
        started = time.monotonic()
        reply = client.chat.completions.create(model="sim/strong", messages=protocol.answer_messages(prompt))
        took = time.monotonic() - started
        client.close()
    assert reply.choices[0].message.content
    assert LATENCY_S <= took < LATENCY_S + WORK_S * 0.75, took  # not latency + work
