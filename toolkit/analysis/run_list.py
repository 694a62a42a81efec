"""The runs of a store at a glance (``bedside runs``), and what removing one would remove.

Counts come from ``toolkit.analysis.runs.case_coverage`` (the same completed / failed / not-attempted
cases the comparison shows), failure causes from ``toolkit.failures`` and costs from
``toolkit.analysis.costs``; nothing is recounted here.
"""

from __future__ import annotations

import polars as pl

from toolkit.analysis.costs import run_costs
from toolkit.analysis.runs import case_coverage
from toolkit.failures import causes_by_run, failed_cases
from toolkit.prices import PriceTable, load_prices
from toolkit.selection import per_case, read_runs
from toolkit.store import Store
from toolkit.tables import RUN_TABLES

LIST_COLUMNS = ("run_id", "source", "answer_model", "judges", "dataset", "completed", "failed", "not_attempted",
                "created", "updated")

# What the listing looks at: case coverage, judges and passes, failure causes, tokens (analysis.costs).
_CALLS = ["run_id", "case_id", "sample", "seq", "error", "prompt_tokens", "completion_tokens", "reasoning_tokens"]
LIST_READ = {"answers": [*_CALLS, "answer_model"], "judgments": [*_CALLS, "judge_model", "judge_pass"],
             "case_scores": ["run_id", "case_id", "benchmark"]}


def list_runs(store: Store, prices: PriceTable | str | None = None) -> list[dict]:
    """One dict per run, in creation order: ``LIST_COLUMNS`` plus ``dataset_sha256`` (full), ``created_at``,
    ``updated_at`` (full ISO times), ``judge_passes`` ({judge: [passes]}), ``failure_causes``
    ([{cause, cases, first_message}]), ``damaged`` (a damaged part file, else None; its counts are None) and
    the cost (``toolkit.analysis.costs.run_costs``, priced by ``prices``: a table, its file, None for
    ``$BEDSIDE_PRICES``): ``cost`` (dollars, else tokens), ``cost_usd``, ``answer_usd``, ``judge_usd``, ``tokens``."""
    table = load_prices(prices)
    ids = store.run_ids()
    if not ids:
        return []
    damaged = store.damaged(ids)
    readable = [r for r in ids if r not in damaged]
    runs = store.read("runs", ids).unique("run_id", keep="last", maintain_order=True)
    facts: dict[str, dict] = {}
    costs: dict[str, dict] = {}
    judges: dict[str, dict[str, list[int]]] = {}
    causes_of_run: dict = {}
    if readable:
        # Stored case scores: the counts need no decisions, nor most columns; else every run is scored here.
        stored = not store.unscored(readable)
        data = read_runs(store, readable, texts=False, decisions=not stored, columns=LIST_READ if stored else None)
        facts = {r["run_id"]: r for r in case_coverage(data, per_case(data)).iter_rows(named=True)}
        costs = {r["run_id"]: r for r in run_costs(data, table).iter_rows(named=True)}
        passes = (data.judgments.group_by("run_id", "judge_model")
                  .agg(pl.col("judge_pass").unique().sort()).sort("run_id", "judge_model"))
        for run_id, judge, numbers in passes.iter_rows():
            judges.setdefault(run_id, {})[judge] = list(numbers)
        # Every run's, in one pass, over the cases with an error row (a failed case has one: the same result).
        key = ["run_id", "case_id"]
        erred = pl.concat([f.filter(pl.col("error").is_not_null()).select(key) for f in (data.answers, data.judgments)]
                          ).unique()
        causes_of_run = causes_by_run(failed_cases(data.answers.join(erred, on=key, how="semi"),
                                                   data.judgments.join(erred, on=key, how="semi")))
    out = []
    for run in runs.iter_rows(named=True):
        run_id = run["run_id"]
        fact = facts.get(run_id, {})
        by_judge = judges.get(run_id, {})
        if not by_judge and run["judge_model"]:
            by_judge = {run["judge_model"]: []}
        causes = causes_of_run.get(run_id, []) if fact.get("failed") else []
        cost = costs.get(run_id, {})
        out.append({
            "run_id": run_id, "source": run["source"], "answer_model": run["answer_model"],
            "judges": "; ".join(_judge_text(j, p) for j, p in by_judge.items()),
            "dataset": run["dataset_sha256"][:12], "completed": fact.get("completed"), "failed": fact.get("failed"),
            "not_attempted": fact.get("not_attempted"),
            "created": _minute(run["created_at"]), "updated": _minute(run["updated_at"] or run["created_at"]),
            "dataset_sha256": run["dataset_sha256"], "created_at": run["created_at"],
            "updated_at": run["updated_at"] or run["created_at"], "judge_passes": by_judge,
            "failure_causes": [{"cause": c.cause, "cases": c.cases, "first_message": c.first_message} for c in causes],
            "damaged": damaged.get(run_id), "cost": cost.get("cost"), "cost_usd": cost.get("usd"),
            "answer_usd": cost.get("answer_usd"), "judge_usd": cost.get("judge_usd"), "tokens": cost.get("tokens"),
        })
    order = {r: i for i, r in enumerate(ids)}
    return sorted(out, key=lambda r: order[r["run_id"]])


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
