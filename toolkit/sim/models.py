"""What the simulated models say: answer prose driven by the rubric, and a rule-following judge.

Pure functions, no HTTP. Every random choice comes from a ``random.Random`` seeded with a
SHA-256 of (server seed, model, prompt), so a reply never depends on request order. The
exceptions draw per call and also take how many times this very request was asked before (the
server counts): the noisy judge's slip (a real judge samples anew on each call even at temperature
0), and, with an answer spread, an answer's redrawn items (the request of a case's second answer
is the same as its first's: only the count tells them apart).
"""

from __future__ import annotations

import hashlib
import json
import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Iterable, Mapping

from toolkit.dataset import load_dataset

JUDGE_MODEL = "sim/judge"
# A second, imperfect judge: the rule-following decisions, each one misread with a probability fixed per
# (answer, item) -- the same in every pass, a judge's own view -- and slipped with a fresh probability on
# every call, so its passes disagree a little with each other and more with sim/judge.
NOISY_JUDGE_MODEL = "sim/judge-noisy"
NOISY_MISREAD = 0.08
NOISY_SLIP = 0.03
# Its planted bias, which physician labels (the simulator's truth) reveal: it reads harms into answers that do
# not commit them (misread rate on negative items not met) and misses what answers do state (positive items met).
NOISY_FALSE_HARM = 0.25
NOISY_MISSED = 0.10
_JUDGES = (JUDGE_MODEL, NOISY_JUDGE_MODEL)
NAMED_SKILLS: Mapping[str, float] = {"sim/strong": 0.85, "sim/medium": 0.6, "sim/weak": 0.3}
NOTEMP_SUFFIX = "-notemp"  # the model refuses any request that carries `temperature`
LISTED_MODELS: tuple[str, ...] = (*NAMED_SKILLS, *_JUDGES, *(f"{m}{NOTEMP_SUFFIX}" for m in (*NAMED_SKILLS, *_JUDGES)))
_SKILL_NAME = re.compile(r"sim/skill-(\d+(?:\.\d+)?|\.\d+)")
BAD_JSON_KINDS: tuple[str, ...] = (
    "not_json", "missing_item", "extra_item", "duplicate_item", "non_boolean", "missing_decisions")

# Line openers of the answer model. A judge must treat the warning forms as NOT endorsing.
_STATE = ("- ", "Recommend: ", "Key point: ", "Importantly, ")
_WARN = ("Avoid: ", "I would not advise this: ", "Do not follow this: ")
# Rubric criteria are phrased for graders ("Identifies that X"); an answer just says X.
_GRADER_VERB = re.compile(
    r"(?:identifies|recognizes|recognises|notes|mentions|states|recommends|advises|explains|describes|"
    r"calculates|reports|suggests|acknowledges|emphasizes|emphasises|warns|counsels|says)(?: that)?\s+",
    re.IGNORECASE)
# Words that, before an item's text in the same clause, turn a mention into a rejection.
_NEGATION_CUES = frozenset({"avoid", "not", "never", "don", "dont", "no", "against", "instead", "refrain", "nor"})
_WORD = re.compile(r"\d+(?:\.\d+)*|[a-z]+")
_CLAUSE_END = re.compile(r"[.!?;](?:\s|$)")


@dataclass(frozen=True)
class SimModel:
    """A parsed model name. ``skill`` is None for the judge."""

    name: str
    base: str  # the name without the -notemp suffix; answers depend on this, not on the suffix
    skill: float | None
    rejects_temperature: bool

    @property
    def is_judge(self) -> bool:
        return self.skill is None


def parse_model(name: str) -> SimModel | None:
    """The simulated model behind a name, or None for an unknown name."""
    base = name[: -len(NOTEMP_SUFFIX)] if name.endswith(NOTEMP_SUFFIX) else name
    notemp = base != name
    if base in _JUDGES:
        return SimModel(name, base, None, notemp)
    if base in NAMED_SKILLS:
        return SimModel(name, base, NAMED_SKILLS[base], notemp)
    match = _SKILL_NAME.fullmatch(base)
    if match and 0.0 <= float(match.group(1)) <= 1.0:
        return SimModel(name, base, float(match.group(1)), notemp)
    return None


def request_rng(seed: int, *parts: str) -> random.Random:
    """A generator private to one (seed, parts...) combination."""
    digest = hashlib.sha256("\x00".join((str(seed), *parts)).encode()).digest()
    return random.Random(int.from_bytes(digest[:16], "big"))


@dataclass(frozen=True)
class RubricIndex:
    """The rubrics the answer models know, by prompt, and a description of where they come from."""

    rubrics: Mapping[str, list[dict[str, Any]]]  # prompt_key(prompt) -> rubric items
    serving: str  # e.g. "data/sample (10 cases, sha256 1a2b3c4d5e6f)"

    def get(self, prompt: str) -> list[dict[str, Any]] | None:
        return self.rubrics.get(prompt_key(prompt))


def prompt_key(prompt: str) -> str:
    return hashlib.md5(prompt.encode()).hexdigest()


def rubric_index(dataset_paths: Iterable[str]) -> RubricIndex:
    """The rubric of every case of the given datasets (default: the bundled sample)."""
    paths = list(dataset_paths) or [None]
    rubrics: dict[str, list[dict[str, Any]]] = {}
    described = []
    for path in paths:
        dataset = load_dataset(path)
        for case in dataset.raw_cases:
            rubrics[prompt_key(case["prompt"])] = list(case["rubric_items"])
        name = "the bundled sample" if path is None else str(dataset.source)
        described.append(f"{name} ({len(dataset.raw_cases)} cases, sha256 {dataset.sha256[:12]})")
    return RubricIndex(rubrics, "; ".join(described))


def message_text(message: Mapping[str, Any]) -> str:
    """The text of a chat message whose content is a string or a list of text parts."""
    content = message.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, dict))
    return ""


def last_user_text(messages: list[Mapping[str, Any]]) -> str:
    for message in reversed(messages):
        if message.get("role") == "user":
            return message_text(message)
    return ""


# -- answer model ----------------------------------------------------------

def answer_text(model: SimModel, prompt: str, seed: int, index: RubricIndex, spread: float = 0.0,
                ask: int = 0) -> str:
    """Prose whose content follows the rubric of a known prompt with probabilities set by the skill.

    The case's own answer is drawn once per (seed, model, prompt). With ``spread`` S > 0 each rubric
    item's line is drawn afresh, with probability S, for the ``ask``-th time the case is asked: the
    answers to a case differ by about S of their items (S = 1: independent answers), and a case's
    answers are still the same set whatever order the asks come in. S = 0 gives today's one answer.
    An unknown prompt gets generic prose (batch lines and direct callers check ``index`` first)."""
    assert model.skill is not None
    rng = request_rng(seed, model.base, prompt)
    items = index.get(prompt)
    if items is None:
        return _generic_answer(rng)
    order = rng.sample(range(len(items)), len(items))  # answers rarely follow rubric order
    fixed = [_item_line(items[i], model.skill, rng) for i in order]
    opener = rng.choice(("Assessment and plan:", "Here is how I would approach this patient:",
                         "Summary of the key points:"))
    closer = rng.choice(("Arrange follow-up and reassess if the situation changes.",
                         "Document the plan and review the response at the next visit.",
                         "Escalate care promptly if the patient deteriorates."))
    lines = fixed
    if spread > 0:
        fresh_rng, coin = (request_rng(seed, model.base, prompt, what, str(ask)) for what in ("ask", "redraw"))
        fresh = [_item_line(items[i], model.skill, fresh_rng) for i in order]
        lines = [new if coin.random() < spread else old for old, new in zip(fixed, fresh)]
    return "\n".join([opener, *(line for line in lines if line is not None), closer])


def _item_line(item: Mapping[str, Any], skill: float, rng: random.Random) -> str | None:
    """What an answer says about one rubric item (None: nothing)."""
    text, points = criterion_core(item["text"]).rstrip("."), item["points"]
    if points > 0:
        if rng.random() < skill:
            return rng.choice(_STATE) + _vary_case(text, rng) + "."
        if rng.random() < 0.3 and len(text.split()) >= 6:
            # a partial statement: a judge must not count it (protocol rule 3)
            words = text.split()
            return rng.choice(_STATE) + _vary_case(" ".join(words[: len(words) // 2]), rng) + "."
    elif points < 0:
        if rng.random() < (1 - skill) * 0.5:
            return rng.choice(_STATE) + _vary_case(text, rng) + "."
        if rng.random() < 0.5:
            return rng.choice(_WARN) + _vary_case(text, rng) + "."
    elif rng.random() < 0.5:
        return rng.choice(_STATE) + _vary_case(text, rng) + "."
    return None


def criterion_core(text: str) -> str:
    """The criterion without a leading grader verb, when at least three words remain."""
    text = " ".join(text.split())
    match = _GRADER_VERB.match(text)
    core = text[match.end():] if match else text
    return core if len(core.split()) >= 3 else text


def _vary_case(text: str, rng: random.Random) -> str:
    # vary capitalisation a little; the judge compares words case-insensitively
    return text[0].upper() + text[1:] if text and rng.random() < 0.5 else text


def _generic_answer(rng: random.Random) -> str:
    return rng.choice((
        "This presentation needs a focused history, examination and targeted tests before treatment. "
        "Review current medicines for interactions and arrange follow-up.",
        "Confirm the diagnosis with appropriate investigations, treat according to current guidelines, "
        "and reassess the patient within a few days.",
        "Start with stabilisation and a careful assessment; choose therapy once the key results are back, "
        "and give clear safety-net advice.",
    ))


def answer_reasoning_tokens(model: SimModel, rng: random.Random) -> int:
    """Hidden reasoning effort: stronger simulated models think longer."""
    if model.skill is None:
        return 0
    return int(100 + 900 * model.skill) + rng.randrange(0, 100)


# -- judge -----------------------------------------------------------------

_RUBRIC_LINE = re.compile(r"\[(?P<id>[^\]]+)\] points=(?P<points>[+-]?\d+(?:\.\d+)?) :: (?P<text>.*)")


@dataclass(frozen=True)
class JudgeRequest:
    answer: str
    items: tuple[tuple[str, float, str], ...]  # (item_id, points, text) in rubric order


def parse_judge_user(text: str) -> JudgeRequest | None:
    """Split a protocol judge message into answer and rubric items; None when it is not one."""
    if not text.startswith("CLINICAL PROMPT:\n"):
        return None
    answer_at = text.find("\n\nANSWER:\n")
    rubric_at = text.rfind("\n\nRUBRIC ITEMS:\n")
    if answer_at < 0 or rubric_at < answer_at:
        return None
    answer = text[answer_at + len("\n\nANSWER:\n"):rubric_at]
    items: list[tuple[str, float, str]] = []
    for line in text[rubric_at + len("\n\nRUBRIC ITEMS:\n"):].split("\n"):
        match = _RUBRIC_LINE.fullmatch(line)
        if match:
            items.append((match["id"], float(match["points"]), match["text"]))
        elif items and line.strip():  # a criterion that wrapped onto another line
            item_id, points, item_text = items[-1]
            items[-1] = (item_id, points, f"{item_text}\n{line}")
    return JudgeRequest(answer, tuple(items))


def _words(text: str) -> list[str]:
    return _WORD.findall(text.lower())


@lru_cache(maxsize=512)
def _tagged_lines(answer: str) -> tuple[tuple[tuple[str, ...], tuple[int, ...]], ...]:
    """Per line of an answer: its words and each word's clause number. Cached: a judge request asks
    about every rubric item of one answer, and tokenising once per answer keeps the sim's CPU low."""
    lines = []
    for line in answer.split("\n"):
        words: list[str] = []
        clauses: list[int] = []
        clause, start = 0, 0
        for end_match in [*_CLAUSE_END.finditer(line), None]:
            stop = end_match.end() if end_match else len(line)
            found = _words(line[start:stop])
            words += found
            clauses += [clause] * len(found)
            clause, start = clause + 1, stop
        lines.append((tuple(words), tuple(clauses)))
    return tuple(lines)


def answer_states(answer: str, criterion: str) -> bool:
    """True when some clause of the answer contains every word of the criterion (grader verb such as
    "Identifies that" optional), in order and contiguously, with no rejection cue ("Avoid:", "do not",
    ...) before it in that clause."""
    target = tuple(_words(criterion_core(criterion)))
    if not target:
        return False
    n = len(target)
    for words, clauses in _tagged_lines(answer):
        for at in range(len(words) - n + 1):
            if words[at] != target[0] or words[at:at + n] != target:
                continue
            own_clause = clauses[at]
            # a cue only negates its own clause
            before = {w for w, c in zip(words[:at], clauses[:at]) if c == own_clause}
            if not before & _NEGATION_CUES:
                return True
    return False


def judge_decisions(request: JudgeRequest) -> list[dict[str, Any]]:
    return [{"item_id": item_id, "matched": answer_states(request.answer, text)}
            for item_id, _, text in request.items]


def misread_rate(points: float, matched: bool) -> float:
    """How often the noisy judge misreads an item, by the item's sign and whether the answer truly meets it."""
    if points < 0 and not matched:
        return NOISY_FALSE_HARM
    if points > 0 and matched:
        return NOISY_MISSED
    return NOISY_MISREAD


def noisy_decisions(request: JudgeRequest, seed: int, prompt: str, asked_before: int) -> list[dict[str, Any]]:
    """The noisy judge: each rule-following decision flipped when misread (drawn per answer and item, at
    ``misread_rate``) or slipped (drawn per call: ``asked_before`` is how often this exact request came
    before)."""
    misread = request_rng(seed, NOISY_JUDGE_MODEL, prompt)
    slip = request_rng(seed, NOISY_JUDGE_MODEL, prompt, str(asked_before))
    return [{"item_id": d["item_id"], "matched": d["matched"] ^ ((misread.random() < misread_rate(points, d["matched"]))
                                                                ^ (slip.random() < NOISY_SLIP))}
            for d, (_, points, _) in zip(judge_decisions(request), request.items)]


def judge_reply(request: JudgeRequest | None, decisions: list[dict[str, Any]] | None = None) -> str:
    """The judge's JSON reply (``decisions``: given, else the rule-following ones); a message that is not a
    protocol judge message gets no decisions."""
    if decisions is None:
        decisions = judge_decisions(request) if request is not None else []
    return json.dumps({"decisions": decisions}, separators=(",", ":"))


def broken_judge_reply(request: JudgeRequest | None, rng: random.Random) -> tuple[str, str]:
    """(kind, reply): a 200 judge reply that breaks the decision contract in one of BAD_JSON_KINDS."""
    decisions = judge_decisions(request) if request is not None else []
    kinds = [k for k in BAD_JSON_KINDS if decisions or k in ("not_json", "extra_item", "missing_decisions")]
    kind = rng.choice(kinds)
    if kind == "not_json":
        whole = json.dumps({"decisions": decisions})
        return kind, "Here is my grading: " + whole[: max(1, len(whole) // 2)]
    if kind == "missing_decisions":
        return kind, json.dumps({"items": decisions})
    changed = [dict(d) for d in decisions]
    at = rng.randrange(len(changed)) if changed else 0
    if kind == "missing_item":
        del changed[at]
    elif kind == "extra_item":
        changed.append({"item_id": f"unknown_item_{rng.randrange(1000)}", "matched": False})
    elif kind == "duplicate_item":
        changed.insert(at + 1, dict(changed[at]))
    else:  # non_boolean
        changed[at]["matched"] = "yes"
    return kind, json.dumps({"decisions": changed})


def approx_tokens(text: str) -> int:
    """A tokenizer-free estimate (about four characters a token)."""
    return max(1, (len(text) + 3) // 4)
