"""What stored calls cost: token sums by run, kind and model (``toolkit.listing.call_tokens``) in dollars where
priced, and per run (``toolkit.analysis.costs`` from a run's rows, ``bedside runs`` from its stored facts).

Every stored call counts, retries and invalid judge replies included (each was paid for), by the tokens its
provider reported. A failed call that reported no usage (no reply came back) counts as no tokens; a call
that did reply but reported none (an imported file without usage) leaves the run's tokens unknown. Dollars
come from ``toolkit.prices`` (the one tokens x prices rule), per model, and are null wherever the model is
unpriced, a token count is unknown, or the batch rate is (never a guess: callers show tokens instead).

A run is priced at batch rates when its collection steps ran through the Batch API (``batch`` in their
settings), at direct rates when none did, and not at all when some did and some did not (which rows came
from which step is not stored). ``bedside judge`` steps record no batch setting and count as direct.
"""

from __future__ import annotations

import json

import polars as pl

from toolkit.prices import PriceTable, cost_text


def batch_mode(steps: str | None, settings: str | None) -> bool | None:
    """True: collected through the Batch API; False: directly; None: both (module doc)."""
    try:
        listed = json.loads(steps) if steps else []
    except ValueError:
        listed = []
    modes = {bool((s.get("settings") or {}).get("batch")) for s in listed
             if isinstance(s, dict) and s.get("kind") == "run"}
    if not modes:
        try:
            modes = {bool(json.loads(settings or "{}").get("batch"))}
        except (ValueError, AttributeError):
            modes = {False}
    return None if len(modes) > 1 else modes.pop()


def priced_calls(calls: pl.DataFrame, runs: pl.DataFrame, prices: PriceTable) -> pl.DataFrame:
    """``calls`` (``toolkit.listing.call_tokens`` rows) with their ``usd``, priced at each run's rates (its
    ``runs`` row's steps and settings)."""
    batch = {r: batch_mode(st, se) for r, st, se in runs.select("run_id", "steps", "settings").iter_rows()}
    usd = []
    for row in calls.iter_rows(named=True):
        mode = batch.get(row["run_id"], False)
        usd.append(None if row["unreported"] or mode is None else
                   prices.dollars(row["model"], row["prompt_tokens"], row["completion_tokens"],
                                  row["reasoning_tokens"], mode))
    return calls.with_columns(usd=pl.Series(usd, dtype=pl.Float64))


def costs_of_runs(calls: pl.DataFrame, run_ids: list[str]) -> pl.DataFrame:
    """``run_costs`` of ``run_ids`` from their priced calls (``call_costs`` rows, sorted by run and kind)."""
    spans: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(calls["run_id"].to_list(), calls["kind"].to_list())):
        spans.setdefault(key, [i, 0])[1] += 1
    rows = []
    for run_id in run_ids:
        mine = {kind: calls.slice(*spans.get((run_id, kind), (0, 0))) for kind in ("answer", "judge")}
        row: dict = {"run_id": run_id}
        known_tokens = all(part["unreported"].sum() == 0 for part in mine.values())
        for kind, part in mine.items():
            n = int(part["calls"].sum())
            usd = None if part["usd"].null_count() or not part.height else float(part["usd"].sum())
            row[f"{kind}_calls"] = n
            row[f"{kind}_usd"] = usd if part.height else 0.0
            row[f"usd_per_{kind}_call"] = usd / n if usd is not None and n else None
        tokens = int(sum(part["prompt_tokens"].sum() + part["completion_tokens"].sum() for part in mine.values()))
        row["tokens"] = tokens if known_tokens else None
        row["usd"] = (None if row["answer_usd"] is None or row["judge_usd"] is None
                      else row["answer_usd"] + row["judge_usd"])
        row["cost"] = cost_text(row["usd"], row["tokens"])
        rows.append(row)
    schema = {"run_id": pl.String, "answer_calls": pl.Int64, "answer_usd": pl.Float64,
              "usd_per_answer_call": pl.Float64, "judge_calls": pl.Int64, "judge_usd": pl.Float64,
              "usd_per_judge_call": pl.Float64, "tokens": pl.Int64, "usd": pl.Float64, "cost": pl.String}
    return pl.DataFrame(rows, schema=schema)
