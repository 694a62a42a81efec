"""The simulated provider's answer spread: repeated answers to a case differ by about the share of rubric
items set by ``--answer-spread``, reproducibly; the default spread keeps every answer byte for byte."""

from __future__ import annotations

import hashlib

import pytest
from openai import OpenAI

from tests.collect_support import bedside
from toolkit import protocol
from toolkit.dataset import load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.sim.models import answer_text, parse_model, rubric_index

# sha256 over the answers of three models on the bundled sample at seeds 0 and 7, as the provider gave them
# before it had a spread: a default provider must keep giving exactly these.
BEFORE_SPREAD = "b83a23cd1ad2db00b10c90fce462c514a681de82f1fe4d57cf0a8fac136773d7"


def test_the_default_spread_keeps_every_answer_byte_for_byte() -> None:
    index = rubric_index(())
    digest = hashlib.sha256()
    for seed in (0, 7):
        for name in ("sim/strong", "sim/weak", "sim/skill-0.45"):
            for case in load_dataset(None).raw_cases:
                digest.update(answer_text(parse_model(name), case["prompt"], seed, index).encode() + b"\0")
    assert digest.hexdigest() == BEFORE_SPREAD
    assert SimConfig().answer_spread == 0.0


def asks(config: SimConfig, prompts: list[str], times: int) -> list[list[str]]:
    """The answers of ``times`` asks of each prompt, in that order, over HTTP."""
    with SimServer(config) as sim:
        client = OpenAI(base_url=sim.base_url, api_key="x")
        return [[client.chat.completions.create(
            model="sim/medium", messages=protocol.answer_messages(prompt),
            temperature=protocol.ANSWER_TEMPERATURE).choices[0].message.content or "" for _ in range(times)]
            for prompt in prompts]


def changed_lines(a: str, b: str) -> int:
    return len(set(a.splitlines()) ^ set(b.splitlines()))


def test_repeated_asks_differ_by_the_spread_and_replay_the_same() -> None:
    prompts = [c["prompt"] for c in load_dataset(None).raw_cases[:6]]
    fixed = asks(SimConfig(seed=2), prompts, 2)
    assert all(a == b for a, b in fixed)  # no spread: one answer per case, however often asked
    half = asks(SimConfig(seed=2, answer_spread=0.5), prompts, 3)
    assert sum(len(set(a)) == 3 for a in half) >= 5  # three different answers to (nearly) every case
    assert asks(SimConfig(seed=2, answer_spread=0.5), prompts, 3) == half  # a fresh server replays them
    assert asks(SimConfig(seed=3, answer_spread=0.5), prompts, 3) != half  # another seed does not
    some = asks(SimConfig(seed=2, answer_spread=0.1), prompts, 3)
    full = asks(SimConfig(seed=2, answer_spread=1.0), prompts, 3)
    moved = [sum(changed_lines(a[0], a[k]) for a in answers for k in (1, 2)) for answers in (some, half, full)]
    assert 0 < moved[0] < moved[1] < moved[2]  # more spread, more of each answer drawn afresh


@pytest.mark.parametrize("bad", [-0.1, 1.5])
def test_a_spread_outside_0_1_is_refused(bad: float) -> None:
    with pytest.raises(ValueError, match="answer_spread"):
        SimConfig(answer_spread=bad)
    code, _, err = bedside("sim", "serve", "--answer-spread", str(bad))
    assert code == 2 and "--answer-spread" in err


def test_sim_serve_by_default_gives_a_case_asked_again_another_answer_as_the_demo_does() -> None:
    """`bedside run --answer-samples 3` against `bedside sim serve` (no --answer-spread) got one answer three
    times; the command's default is now the demo's spread (the API's SimConfig keeps 0, byte for byte)."""
    import subprocess
    import sys
    from pathlib import Path

    from toolkit.collect.demo import DEMO_ANSWER_SPREAD

    proc = subprocess.Popen([sys.executable, "-m", "toolkit", "sim", "serve", "--port", "0"],
                            cwd=Path(__file__).resolve().parents[1], stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, text=True)
    try:
        client = OpenAI(base_url=proc.stdout.readline().strip(), api_key="x")
        prompts = [c["prompt"] for c in load_dataset(None).raw_cases[:2]]
        served = [[client.chat.completions.create(
            model="sim/medium", messages=protocol.answer_messages(prompt),
            temperature=protocol.ANSWER_TEMPERATURE).choices[0].message.content or "" for _ in range(3)]
            for prompt in prompts]
    finally:
        proc.terminate()
        proc.wait(10)
    assert served == asks(SimConfig(answer_spread=DEMO_ANSWER_SPREAD), prompts, 3)
    assert all(len(set(answers)) > 1 for answers in served)
