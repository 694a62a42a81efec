"""The runs of a store at a glance (``bedside runs``), and what removing one would remove.

What is listed of a run comes from ``toolkit.listing`` (case coverage, judges, failure causes, token sums): as
its latest commit stored them in its ``runs`` row, so that the listing reads the runs table alone, else (a run
written before they were stored) computed here by the same code. Dollars come from the price table
(``toolkit.listing.pricing``); nothing is recounted here. Outside ``toolkit.analysis``: listing runs loads none
of the analyses.
"""

from __future__ import annotations

import polars as pl

from toolkit.listing import LISTING, calls_frame, listing_facts, load_facts
from toolkit.listing.pricing import costs_of_runs, priced_calls
from toolkit.prices import PriceTable, load_prices
from toolkit.selection import per_case, read_runs
from toolkit.store import Store
from toolkit.tables import RUN_TABLES

LIST_COLUMNS = ("run_id", "source", "answer_model", "judges", "dataset", "completed", "failed", "not_attempted",
                "created", "updated")

# What the listing looks at: case coverage, judges and passes, failure causes, tokens (toolkit.listing).
_CALLS = ["run_id", "case_id", "sample", "seq", "error", "prompt_tokens", "completion_tokens", "reasoning_tokens"]
LIST_READ = {"answers": [*_CALLS, "answer_model"], "judgments": [*_CALLS, "judge_model", "judge_pass"],
             "case_scores": ["run_id", "case_id", "benchmark"]}


def list_runs(store: Store, prices: PriceTable | str | None = None) -> list[dict]:
    """One dict per run, in creation order: ``LIST_COLUMNS`` plus ``dataset_sha256`` (full), ``created_at``,
    ``updated_at`` (full ISO times), ``judge_passes`` ({judge: [passes]}), ``failure_causes``
    ([{cause, cases, first_message}]), ``damaged`` (a damaged part file, else None; its counts are None) and
    the cost (as ``toolkit.analysis.costs.run_costs``, priced by ``prices``: a table, its file, None for
    ``$BEDSIDE_PRICES``): ``cost`` (dollars, else tokens), ``cost_usd``, ``answer_usd``, ``judge_usd``, ``tokens``."""
    table = load_prices(prices)
    ids = store.run_ids()
    if not ids:
        return []
    damaged = store.damaged(ids)
    runs = store.read("runs", ids).unique("run_id", keep="last", maintain_order=True)
    readable = runs.filter(~pl.col("run_id").is_in(list(damaged)))
    facts = {r: load_facts(text) for r, text in readable.select("run_id", LISTING).iter_rows() if text is not None}
    unlisted = [r for r in readable["run_id"].to_list() if r not in facts]
    if unlisted:
        facts.update(computed_facts(store, unlisted))
    calls = priced_calls(calls_frame(facts), readable, table)
    costs = {r["run_id"]: r for r in costs_of_runs(calls, readable["run_id"].to_list()).iter_rows(named=True)}
    out = []
    for run in runs.iter_rows(named=True):
        run_id = run["run_id"]
        fact = facts.get(run_id, {})
        by_judge = fact.get("judge_passes") or {}
        if not by_judge and run["judge_model"]:
            by_judge = {run["judge_model"]: []}
        cost = costs.get(run_id, {})
        out.append({
            "run_id": run_id, "source": run["source"], "answer_model": run["answer_model"],
            "judges": "; ".join(_judge_text(j, p) for j, p in by_judge.items()),
            "dataset": run["dataset_sha256"][:12], "completed": fact.get("completed"), "failed": fact.get("failed"),
            "not_attempted": fact.get("not_attempted"),
            "created": _minute(run["created_at"]), "updated": _minute(run["updated_at"] or run["created_at"]),
            "dataset_sha256": run["dataset_sha256"], "created_at": run["created_at"],
            "updated_at": run["updated_at"] or run["created_at"], "judge_passes": by_judge,
            "failure_causes": fact.get("failure_causes", []),
            "damaged": damaged.get(run_id), "cost": cost.get("cost"), "cost_usd": cost.get("usd"),
            "answer_usd": cost.get("answer_usd"), "judge_usd": cost.get("judge_usd"), "tokens": cost.get("tokens"),
        })
    order = {r: i for i, r in enumerate(ids)}
    return sorted(out, key=lambda r: order[r["run_id"]])


def computed_facts(store: Store, run_ids: list[str]) -> dict[str, dict]:
    """``toolkit.listing.listing_facts`` of runs from their rows (for runs whose ``runs`` row holds none)."""
    # Stored case scores: the counts need no decisions, nor most columns; else every run is scored here.
    stored = not store.unscored(run_ids)
    data = read_runs(store, run_ids, texts=False, decisions=not stored, columns=LIST_READ if stored else None)
    return listing_facts(data, per_case(data))


def _judge_text(judge: str, passes: list[int]) -> str:
    if not passes:
        return f"{judge} (not judged)"
    if passes == [1]:
        return f"{judge} (1 pass)"
    return f"{judge} ({len(passes)} passes: {','.join(map(str, passes))})"


def _minute(iso: str | None) -> str:
    """``2026-11-30T21:04:25.123+00:00`` -> ``2026-11-30 21:04`` (the stored times are UTC)."""
    return "" if not iso else iso[:16].replace("T", " ")


def removal_counts(store: Store, run_id: str) -> dict[str, int]:
    """Rows a removal of the run takes away, by table (``answers``, ``judgments``, ``decisions``)."""
    store.run(run_id)  # the store's one clear line for an unknown run
    return {t: store.read(t, [run_id], columns=["run_id"]).height for t in RUN_TABLES if t != "runs"}
