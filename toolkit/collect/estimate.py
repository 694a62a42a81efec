"""Dry-run estimates: which calls a run would make, roughly how many tokens, and what they would cost.

Nothing here calls a provider or writes the store. Prompt tokens are counted
as characters / 4 of the exact messages (a typical answer stands in for
answers not written yet); completions use the provider table's typical lengths.
Reasoning tokens cannot be foreseen and are not included. Dollars come from the price table
(``toolkit.prices``, the one rule of tokens x prices); a model without a price is "cost unknown".
"""

from __future__ import annotations

from dataclasses import dataclass

from toolkit import protocol
from toolkit.collect.judge import CaseToJudge
from toolkit.collect.plan import Plan, StoredWork
from toolkit.collect.settings import CollectSettings, Endpoint, ProviderTable
from toolkit.prices import PriceTable, load_prices

CHARS_PER_TOKEN = 4


@dataclass(frozen=True)
class CallEstimate:
    kind: str  # "answer" or "judge"
    model: str
    endpoint: Endpoint
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float | None  # None when the model (or its batch rate) has no price in the table


def _tokens(messages: list[dict[str, str]]) -> int:
    return sum(len(m["content"]) for m in messages) // CHARS_PER_TOKEN


def estimate(plan: Plan, work: StoredWork, settings: CollectSettings, table: ProviderTable,
             batch: bool = False, prices: PriceTable | None = None) -> list[CallEstimate]:
    """The calls still due, by kind; ``prices``: the price table (default: ``load_prices()``)."""
    prices = load_prices(prices)
    by_id: dict[str, CaseToJudge] = {c.case_id: c for c in plan.cases}
    typical = table.answer_completion_tokens
    placeholder = "x" * (typical * CHARS_PER_TOKEN)
    out: list[CallEstimate] = []
    if plan.to_answer:
        assert settings.answer_endpoint is not None
        prompt = sum(_tokens(protocol.answer_messages(by_id[c].prompt)) for c, _ in plan.to_answer)
        out.append(_priced("answer", settings.answer_model, settings.answer_endpoint, len(plan.to_answer), prompt,
                           typical * len(plan.to_answer), prices, batch))
    if plan.to_judge:
        prompt = completion = 0
        for case_id, sample, _ in plan.to_judge:
            case = by_id[case_id]
            stored = work.answers.get((case_id, sample))
            prompt += _tokens(case.messages(stored.text if stored else placeholder))
            completion += table.judge_completion_tokens_per_item * len(case.items)
        out.append(_priced("judge", plan.judge_model, settings.judge_endpoint, len(plan.to_judge), prompt, completion,
                           prices, batch))
    return out


def _priced(kind: str, model: str, endpoint: Endpoint, calls: int, prompt: int, completion: int,
            prices: PriceTable, batch: bool) -> CallEstimate:
    return CallEstimate(kind, model, endpoint, calls, prompt, completion,
                        prices.dollars(model, prompt, completion, 0, batch))


def render(estimates: list[CallEstimate], plan: Plan, settings: CollectSettings, batch: bool,
           prices: PriceTable | None = None) -> list[str]:
    """The dry-run report, one line each."""
    prices = load_prices(prices)
    lines = [f"dry run of {settings.run_id!r}: no call is made and nothing is written"]
    if plan.skipped_answers or plan.skipped_judgments:
        lines.append(f"already stored: {plan.skipped_answers} answers, {plan.skipped_judgments} judgments "
                     "(a real run skips them)")
    if plan.unanswerable:
        lines.append(f"{plan.unanswerable} cases have no stored answer and would not be judged")
    if not estimates:
        lines.append("nothing to call: the run is complete")
    total_cost: float | None = 0.0
    for e in estimates:
        key = e.endpoint.key_env()
        keys = ("no key needed" if not e.endpoint.key_envs else
                f"key from ${key} (set)" if key else f"key from {' or '.join('$' + k for k in e.endpoint.key_envs)}"
                " (NOT SET)")
        cost = (f"~${e.cost_usd:,.2f}" if e.cost_usd is not None else
                "cost unknown (no batch_discount for it in the price table)" if batch and prices.price(e.model)
                else "cost unknown (model not in the price table)")
        lines.append(f"{e.kind}: {e.calls} calls to {e.model} at {e.endpoint.base_url} ({keys}); "
                     f"~{e.prompt_tokens:,} prompt + ~{e.completion_tokens:,} completion tokens; {cost}"
                     + (" at batch prices" if batch and e.cost_usd is not None else ""))
        total_cost = None if total_cost is None or e.cost_usd is None else total_cost + e.cost_usd
    if estimates and total_cost is not None:
        lines.append(f"total: ~${total_cost:,.2f} (reasoning tokens not included; prices: {prices.source})")
    if plan.to_judge and settings.judge_reasks:
        lines.append(f"invalid judge replies are asked again up to {settings.judge_reasks} more times (not counted)")
    return lines
