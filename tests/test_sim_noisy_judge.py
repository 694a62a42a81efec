"""The simulated noisy judge (the demo's second judge): through the real openai SDK over loopback, its
decisions depart from the rule-following judge's at the stated rates, a repeat of the same request draws a
fresh slip (so passes differ), and a fresh server gives the same sequence."""

from __future__ import annotations

import json

import openai

from toolkit import protocol
from toolkit.dataset import load_dataset
from toolkit.sim import SimConfig, SimServer
from toolkit.sim.models import NOISY_JUDGE_MODEL, NOISY_SLIP, answer_text, misread_rate, parse_model, rubric_index


def decisions(c: openai.OpenAI, model: str, case: dict, answer: str) -> list[bool]:
    """The model's decisions on the case's items, in rubric order."""
    items = [(i["item_id"], i["points"], i["text"]) for i in case["rubric_items"]]
    reply = c.chat.completions.create(model=model, messages=protocol.judge_messages(case["prompt"], answer, items),
                                      temperature=protocol.JUDGE_TEMPERATURE)
    found = json.loads(reply.choices[0].message.content or "")["decisions"]
    assert [d["item_id"] for d in found] == [i for i, _, _ in items]
    return [d["matched"] for d in found]


def grade_all(seed: int = 3) -> tuple[list[bool], list[bool], list[bool], list[float]]:
    """Every sample case answered by two simulated models, graded by sim/judge and twice by the noisy judge;
    and each item's points."""
    cases = load_dataset(None).raw_cases
    index = rubric_index([])
    rule, first, second, points = [], [], [], []
    with SimServer(SimConfig(seed=seed)) as sim:
        c = openai.OpenAI(base_url=sim.base_url, api_key="k", max_retries=0)
        for model in ("sim/strong", "sim/weak"):
            for case in cases:
                answer = answer_text(parse_model(model), case["prompt"], seed, index)
                rule += decisions(c, "sim/judge", case, answer)
                first += decisions(c, NOISY_JUDGE_MODEL, case, answer)
                second += decisions(c, NOISY_JUDGE_MODEL, case, answer)
                points += [i["points"] for i in case["rubric_items"]]
    return rule, first, second, points


def test_noisy_judge_departs_at_its_rates_and_its_passes_differ() -> None:
    rule, first, second, points = grade_all()
    n = len(rule)
    assert n > 400
    # one pass departs from the rule with p = m(1-s) + s(1-m), m the item's misread rate; two passes differ
    # when their slips differ
    rates = [misread_rate(p, truth) for p, truth in zip(points, rule)]
    assert len(set(rates)) == 3  # the planted bias shows: each kind of item is in the sample
    for rate in set(rates):
        at = [i for i, r in enumerate(rates) if r == rate]
        observed = sum(rule[i] != first[i] for i in at) / len(at)
        p = rate * (1 - NOISY_SLIP) + NOISY_SLIP * (1 - rate)
        assert abs(observed - p) < 4 * (p * (1 - p) / len(at)) ** 0.5, (rate, observed, p, len(at))
    flipped_first = sum(a != b for a, b in zip(rule, first)) / n
    between_passes = sum(a != b for a, b in zip(first, second)) / n
    p_pass = 2 * NOISY_SLIP * (1 - NOISY_SLIP)
    assert abs(between_passes - p_pass) < 4 * (p_pass * (1 - p_pass) / n) ** 0.5, (between_passes, p_pass)
    assert 0 < between_passes < flipped_first  # a judge agrees with itself more than with another judge


def test_the_same_sequence_of_requests_gets_the_same_replies() -> None:
    assert grade_all(seed=5) == grade_all(seed=5)
