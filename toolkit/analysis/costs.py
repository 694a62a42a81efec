"""What the stored runs cost: their tokens from the answers and judgments tables, in dollars where priced
(``toolkit.listing.pricing`` says how: the calls counted, the rates, what stays unknown).
"""

from __future__ import annotations

import polars as pl

from toolkit.listing import CALL_COLUMNS, call_tokens
from toolkit.listing.pricing import costs_of_runs, priced_calls
from toolkit.prices import PriceTable
from toolkit.selection import RunData

COST_COLUMNS = (*CALL_COLUMNS, "usd")


def call_costs(data: RunData, prices: PriceTable) -> pl.DataFrame:
    """One row per run, kind ("answer", "judge") and model: ``COST_COLUMNS`` (``usd`` null where unknown)."""
    return priced_calls(call_tokens(data), data.runs, prices)


def usd_per_call(costs: pl.DataFrame) -> dict[str, float | None]:
    """USD per answer call and per judge call over the runs of ``costs`` (``run_costs`` rows) taken together:
    their dollars over their calls, None for a kind some run has unpriced (or no such call)."""
    out: dict[str, float | None] = {}
    for kind in ("answer", "judge"):
        usd, calls = costs[f"{kind}_usd"], int(costs[f"{kind}_calls"].sum())
        out[kind] = float(usd.sum()) / calls if usd.null_count() == 0 and calls else None
    return out


def run_costs(data: RunData, prices: PriceTable) -> pl.DataFrame:
    """Per run of ``data.runs`` (in its order): answer and judge calls, tokens (null when some call did not report
    them), ``answer_usd``, ``judge_usd``, ``usd`` (null unless every part is priced), USD per answer call and
    per judge call, and ``cost``: the dollars, else the tokens, as ``toolkit.prices.cost_text`` shows them."""
    return costs_of_runs(call_costs(data, prices), data.runs["run_id"].to_list())


