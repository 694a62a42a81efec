"""What the stored runs cost: their tokens from the answers and judgments tables, in dollars where priced.

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
from toolkit.selection import RunData

TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")
COST_COLUMNS = ("run_id", "kind", "model", "calls", "unreported", "prompt_tokens", "completion_tokens",
                "reasoning_tokens", "usd")


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


def _calls(frame: pl.DataFrame, kind: str, model: str, text: str) -> pl.DataFrame:
    """Per run and model: calls, calls that replied without usage, token sums."""
    reported = pl.col("prompt_tokens").is_not_null() | pl.col("completion_tokens").is_not_null()
    replied = pl.col("error").is_null() | pl.col(text).is_not_null() if text in frame.columns else \
        pl.col("error").is_null()
    return (frame.filter(reported | replied)
            .group_by("run_id", pl.col(model).alias("model"))
            .agg(pl.len().cast(pl.Int64).alias("calls"),
                 (~reported).sum().cast(pl.Int64).alias("unreported"),
                 *(pl.col(c).fill_null(0).sum().cast(pl.Int64).alias(c) for c in TOKEN_COLUMNS))
            .with_columns(kind=pl.lit(kind)))


def call_costs(data: RunData, prices: PriceTable) -> pl.DataFrame:
    """One row per run, kind ("answer", "judge") and model: ``COST_COLUMNS`` (``usd`` null where unknown)."""
    answers = data.answers
    if "answer_model" in answers.columns:
        answers = answers.join(data.runs.select("run_id", pl.col("answer_model").alias("_run_model")), on="run_id",
                               how="left").with_columns(answer_model=pl.coalesce("answer_model", "_run_model"))
    parts = [_calls(answers, "answer", "answer_model", "answer"),
             _calls(data.judgments, "judge", "judge_model", "raw_reply")]
    frame = pl.concat([p.select(COST_COLUMNS[:-1]) for p in parts]).sort("run_id", "kind", "model")
    batch = {r: batch_mode(st, se) for r, st, se in data.runs.select("run_id", "steps", "settings").iter_rows()}
    usd = []
    for row in frame.iter_rows(named=True):
        mode = batch.get(row["run_id"], False)
        usd.append(None if row["unreported"] or mode is None else
                   prices.dollars(row["model"], row["prompt_tokens"], row["completion_tokens"],
                                  row["reasoning_tokens"], mode))
    return frame.with_columns(usd=pl.Series(usd, dtype=pl.Float64))


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
    calls = call_costs(data, prices)  # sorted by run and kind: each run's rows of a kind are one slice
    spans: dict[tuple[str, str], list[int]] = {}
    for i, key in enumerate(zip(calls["run_id"].to_list(), calls["kind"].to_list())):
        spans.setdefault(key, [i, 0])[1] += 1
    rows = []
    for run_id in data.runs["run_id"].to_list():
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
