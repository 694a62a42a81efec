"""What ``bedside runs`` lists of each run, computed from its rows: case coverage, judges and their passes,
failure causes and token sums. The store's scorer stores these facts in the run's ``runs`` row (``listing``) in
each commit, and the listing computes them here for a run that has none stored: one implementation for both.

Dollars are not facts of the rows: they come from the price table when the run is listed
(``toolkit.listing.pricing``). ``toolkit.listing.run_list`` is the listing itself.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING

import polars as pl

from toolkit.failures import causes_by_run, failed_cases

if TYPE_CHECKING:
    from toolkit.selection import RunData

TOKEN_COLUMNS = ("prompt_tokens", "completion_tokens", "reasoning_tokens")
CALL_COLUMNS = ("run_id", "kind", "model", "calls", "unreported", *TOKEN_COLUMNS)
CALL_SCHEMA = {"run_id": pl.String, "kind": pl.String, "model": pl.String, "calls": pl.Int64,
               "unreported": pl.Int64, **{c: pl.Int64 for c in TOKEN_COLUMNS}}
LISTING = "listing"  # the runs column holding them


def case_coverage(data: "RunData", cases: pl.DataFrame) -> pl.DataFrame:
    """One row per run of ``data.runs``: run_id, ``completed`` the cases with a score (``cases`` is the
    ``per_case`` frame); ``failed`` the cases of the run's dataset that were attempted (an answer or judge
    row exists) but have no score under this selection; ``not_attempted`` the cases of its dataset without
    any answer or judge row; ``benchmarks_missing`` the benchmarks of its dataset where it has no completed
    case (sorted, comma-separated, "" when none). Reads answers and judgments, never decisions."""
    completed = cases.group_by("run_id").agg(pl.len().cast(pl.Int64).alias("completed"))
    in_dataset = data.runs.select("run_id", "dataset_sha256").join(
        data.cases.select("dataset_sha256", "case_id", "benchmark"), on="dataset_sha256").drop("dataset_sha256")
    attempted = pl.concat([data.answers.select("run_id", "case_id"), data.judgments.select("run_id", "case_id")]
                          ).unique().join(in_dataset.drop("benchmark"), on=["run_id", "case_id"])
    failed = attempted.join(cases.select("run_id", "case_id"), on=["run_id", "case_id"], how="anti").group_by(
        "run_id").agg(pl.len().cast(pl.Int64).alias("failed"))
    # attempted holds dataset cases only, each once: the rest of the dataset was not attempted
    untouched = in_dataset.group_by("run_id").agg(pl.len().cast(pl.Int64).alias("not_attempted")).join(
        attempted.group_by("run_id").agg(pl.len().cast(pl.Int64).alias("_tried")), on="run_id", how="left").select(
        "run_id", pl.col("not_attempted") - pl.col("_tried").fill_null(0))
    missing = in_dataset.select("run_id", "benchmark").unique().join(
        cases.select("run_id", "benchmark").unique(), on=["run_id", "benchmark"], how="anti").group_by("run_id").agg(
        pl.col("benchmark").sort().str.join(",").alias("benchmarks_missing"))
    return (
        data.runs.select("run_id")
        .join(completed, on="run_id", how="left", maintain_order="left")
        .join(failed, on="run_id", how="left", maintain_order="left")
        .join(untouched, on="run_id", how="left", maintain_order="left")
        .join(missing, on="run_id", how="left", maintain_order="left")
        .with_columns(pl.col("completed").fill_null(0), pl.col("failed").fill_null(0),
                      pl.col("not_attempted").fill_null(0), pl.col("benchmarks_missing").fill_null(""))
    )


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


def call_tokens(data: "RunData") -> pl.DataFrame:
    """One row per run, kind ("answer", "judge") and model: ``CALL_COLUMNS``, sorted by run, kind and model
    (an answer row without its own model counts under the run's answer model)."""
    answers = data.answers
    if "answer_model" in answers.columns:
        answers = answers.join(data.runs.select("run_id", pl.col("answer_model").alias("_run_model")), on="run_id",
                               how="left").with_columns(answer_model=pl.coalesce("answer_model", "_run_model"))
    parts = [_calls(answers, "answer", "answer_model", "answer"),
             _calls(data.judgments, "judge", "judge_model", "raw_reply")]
    return pl.concat([p.select(CALL_COLUMNS) for p in parts]).sort("run_id", "kind", "model")


def listing_facts(data: "RunData", cases: pl.DataFrame) -> dict[str, dict]:
    """Run id -> what the listing shows of each run of ``data.runs`` (``cases``: its ``per_case`` frame):
    ``completed``, ``failed``, ``not_attempted`` (``case_coverage``), ``judge_passes`` ({judge: [passes]}),
    ``failure_causes`` ([{cause, cases, first_message}], none unless a case failed) and ``calls`` (the
    ``call_tokens`` rows without run_id). Plain JSON values (``dump_facts``)."""
    coverage = {r["run_id"]: r for r in case_coverage(data, cases).iter_rows(named=True)}
    judges: dict[str, dict[str, list[int]]] = {}
    passes = (data.judgments.group_by("run_id", "judge_model")
              .agg(pl.col("judge_pass").unique().sort()).sort("run_id", "judge_model"))
    for run_id, judge, numbers in passes.iter_rows():
        judges.setdefault(run_id, {})[judge] = list(numbers)
    # Every run's, in one pass, over the cases with an error row (a failed case has one: the same result).
    key = ["run_id", "case_id"]
    erred = pl.concat([f.filter(pl.col("error").is_not_null()).select(key) for f in (data.answers, data.judgments)]
                      ).unique()
    causes = causes_by_run(failed_cases(data.answers.join(erred, on=key, how="semi"),
                                        data.judgments.join(erred, on=key, how="semi")))
    calls: dict[str, list[dict]] = {}
    for row in call_tokens(data).iter_rows(named=True):
        calls.setdefault(row.pop("run_id"), []).append(row)
    out = {}
    for run_id in data.runs["run_id"].to_list():
        fact = coverage[run_id]
        out[run_id] = {
            "completed": fact["completed"], "failed": fact["failed"], "not_attempted": fact["not_attempted"],
            "judge_passes": judges.get(run_id, {}),
            "failure_causes": [{"cause": c.cause, "cases": c.cases, "first_message": c.first_message}
                               for c in causes.get(run_id, [])] if fact["failed"] else [],
            "calls": calls.get(run_id, []),
        }
    return out


def dump_facts(facts: dict) -> str:
    return json.dumps(facts, ensure_ascii=False, separators=(",", ":"))


def load_facts(text: str) -> dict:
    return json.loads(text)


def calls_frame(facts: dict[str, dict]) -> pl.DataFrame:
    """The ``call_tokens`` rows of runs' facts (run id -> facts), in its order."""
    rows = [{"run_id": run_id, **call} for run_id, fact in facts.items() for call in fact["calls"]]
    return pl.DataFrame(rows, schema=CALL_SCHEMA).select(CALL_COLUMNS).sort("run_id", "kind", "model")
