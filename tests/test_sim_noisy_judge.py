"""The simulated noisy judge (the demo's second judge): through the real openai SDK over loopback, its
decisions depart from the rule-following judge's at the stated rates, a repeat of the same request draws a
fresh slip (so passes differ), and a fresh server gives the same sequence."""

from __future__ import annotations

import json

import openai

from toolkit import protocol
from toolkit.dataset import load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.sim.models import NOISY_JUDGE_MODEL, NOISY_MISREAD, NOISY_SLIP, answer_text, parse_model, rubric_index


def decisions(c: openai.OpenAI, model: str, case: dict, answer: str) -> list[bool]:
    items = [(i["item_id"], i["points"], i["text"]) for i in case["rubric_items"]]
    reply = c.chat.completions.create(model=model, messages=protocol.judge_messages(case["prompt"], answer, items),
                                      temperature=protocol.JUDGE_TEMPERATURE)
    found = json.loads(reply.choices[0].message.content or "")["decisions"]
    assert [d["item_id"] for d in found] == [i for i, _, _ in items]
    return [d["matched"] for d in found]


def grade_all(seed: int = 3) -> tuple[list[bool], list[bool], list[bool]]:
    """Every sample case answered by two simulated models, graded by sim/judge and twice by the noisy judge."""
    cases = load_dataset(None).raw_cases
    index = rubric_index([])
    rule, first, second = [], [], []
    with SimServer(SimConfig(seed=seed)) as sim:
        c = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0)
        for model in ("sim/strong", "sim/weak"):
            for case in cases:
                answer = answer_text(parse_model(model), case["prompt"], seed, index)
                rule += decisions(c, "sim/judge", case, answer)
                first += decisions(c, NOISY_JUDGE_MODEL, case, answer)
                second += decisions(c, NOISY_JUDGE_MODEL, case, answer)
    return rule, first, second


def test_noisy_judge_departs_at_its_rates_and_its_passes_differ() -> None:
    rule, first, second = grade_all()
    n = len(rule)
    assert n > 400
    flipped_first = sum(a != b for a, b in zip(rule, first)) / n
    between_passes = sum(a != b for a, b in zip(first, second)) / n
    # one pass departs from the rule with p = m(1-s) + s(1-m); two passes differ when their slips differ
    p_rule = NOISY_MISREAD * (1 - NOISY_SLIP) + NOISY_SLIP * (1 - NOISY_MISREAD)
    p_pass = 2 * NOISY_SLIP * (1 - NOISY_SLIP)
    for observed, p in ((flipped_first, p_rule), (between_passes, p_pass)):
        sd = (p * (1 - p) / n) ** 0.5
        assert abs(observed - p) < 4 * sd, (observed, p)
    assert 0 < between_passes < flipped_first  # a judge agrees with itself more than with another judge


def test_the_same_sequence_of_requests_gets_the_same_replies() -> None:
    assert grade_all(seed=5) == grade_all(seed=5)
