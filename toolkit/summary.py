"""The reference summary object of a run, exactly as the reference runner writes it.

Two orders: ``reference`` takes each benchmark's scores in completion order
(the first successful row of a case fixes its place) and the score written by
the source file when there is one, as the reference runner does; ``dataset``
takes them in dataset order, recomputed, so identical results give identical
intervals however they were collected. ``auto`` (the default) uses ``reference``
for imported runs and ``dataset`` for collected ones.
"""

from __future__ import annotations

import math
import os
from concurrent.futures import ThreadPoolExecutor, wait
from dataclasses import dataclass
from typing import Any, Literal

import polars as pl

from toolkit.bootstrap import BootstrapSettings, reference_intervals
from toolkit.scoring import with_sample
from toolkit.selection import JudgeSelection, RunData, per_case, read_runs, select_judgments
from toolkit.store import Store

Order = Literal["auto", "reference", "dataset"]
SUMMARY_FIELDS = (
    "protocol_version", "dataset_sha256", "answer_model", "judge_model", "answer_temperature",
    "judge_temperature", "judge_passes_per_answer", "started_at", "finished_at", "completed_cases",
    "errors", "overall_macro_mean", "overall_ci95", "benchmarks", "bootstrap_samples", "bootstrap_seed",
)


# The reference summary's interval, named wherever bedside prints or stores it (never in the reference's own
# summary object): `compare` and the report show another, the stratified t (docs/methods.md).
CI_METHOD = "percentile bootstrap"


def ci_method(bootstrap: BootstrapSettings) -> str:
    """The reference interval's method in words: 'percentile bootstrap (reference, 10,000 resamples)'."""
    return f"{CI_METHOD} (reference, {bootstrap.samples:,} resamples)"


@dataclass(frozen=True, kw_only=True)
class SummaryOptions:
    order: Order = "auto"
    bootstrap: BootstrapSettings = BootstrapSettings()
    selection: JudgeSelection = JudgeSelection()

    @property
    def is_stored(self) -> bool:
        """Whether the stored score tables answer for these options: the stored selection, the auto order."""
        return self.selection.is_stored and self.order == "auto"


def summarize(store: Store, run_ids: list[str], options: SummaryOptions = SummaryOptions()) -> dict[str, dict]:
    """run id -> reference summary object (fields and field order of the reference runner)."""
    data = read_runs(store, run_ids, texts=False)
    return summarize_data(data, run_ids, options)


def summarize_data(data: RunData, run_ids: list[str], options: SummaryOptions) -> dict[str, dict]:
    cases = per_case(data, options.selection)
    facts = run_facts(data, options.selection)
    runs = {run["run_id"]: run for run in data.runs.iter_rows(named=True)}
    orders = {run_id: resolve_order(options.order, runs[run_id]) for run_id in run_ids}
    # Only the orders in use are sorted, each split by run once (rather than a filter per run).
    frames: dict[str, dict[str, pl.DataFrame]] = {}
    for order in set(orders.values()):
        ordered = ordered_cases(cases, order)
        frames[order] = {key[0]: part for key, part in ordered.partition_by("run_id", as_dict=True).items()}
    empty = cases.clear()

    def one(run_id: str) -> dict[str, Any]:
        return _summary(runs[run_id], frames[orders[run_id]].get(run_id, empty), facts.get(run_id, {}), options)

    unique = list(dict.fromkeys(run_ids))
    if len(unique) < 2 or (os.cpu_count() or 1) < 2:
        return {run_id: one(run_id) for run_id in unique}
    # Runs are independent, and most of a run's bootstrap is numpy work that leaves the GIL (only the
    # draw scan's loop holds it): two threads, one core each.
    pool = ThreadPoolExecutor(max_workers=2)
    try:
        futures = [pool.submit(one, run_id) for run_id in unique]
        out = {}
        for run_id, future in zip(unique, futures):
            while not future.done():
                # A Ctrl-C that another thread of the process took is seen by this one only when it runs: a wait
                # with no end would hold it until a run is done.
                wait([future], timeout=0.05)
            out[run_id] = future.result()
        return out
    finally:
        # Ctrl-C or a failing run reaches the caller at once: the runs not begun are dropped, and the (at most
        # two) under way are not waited for (``with`` would summarise every run first).
        pool.shutdown(wait=False, cancel_futures=True)


def ordered_cases(cases: pl.DataFrame, order: Literal["reference", "dataset"]) -> pl.DataFrame:
    """``per_case`` rows as a summary in ``order`` takes them: reference order scores a case by the score its
    source file reported, where it did, and puts the cases in completion order; dataset order in dataset order."""
    if order == "reference":
        return cases.with_columns(score=pl.coalesce("reported_score", "score")).sort("run_id", "first_success_seq")
    return cases.sort("run_id", "position")


def benchmark_means(values: dict[str, list[float]]) -> dict[str, tuple[int, float]]:
    """Benchmark -> (n, mean) of its case scores: ``math.fsum`` / n, as the reference runner computes it."""
    return {name: (len(v), math.fsum(v) / len(v)) for name, v in values.items()}


def macro_mean(means: list[float]) -> float:
    """The overall score: the benchmark means' fsum / their number (NaN when there is none)."""
    return math.fsum(means) / len(means) if means else math.nan


def resolve_order(order: Order, run: dict) -> Literal["reference", "dataset"]:
    """``auto`` -> reference order for imported runs (to reproduce their source), dataset otherwise."""
    if order == "auto":
        return "reference" if run["source"] == "imported" else "dataset"
    return order


def _summary(run: dict, frame: pl.DataFrame, facts: dict, options: SummaryOptions) -> dict[str, Any]:
    values = {b[0]: s["score"].to_list() for b, s in frame.group_by("benchmark", maintain_order=True)}
    names = sorted(values)
    intervals = reference_intervals({n: values[n] for n in names}, options.bootstrap)
    means = benchmark_means({n: values[n] for n in names})
    benchmarks = {n: {"n": means[n][0], "mean": means[n][1], "ci95": list(intervals.benchmarks[n])} for n in names}
    overall = macro_mean([b["mean"] for b in benchmarks.values()])
    summary = {
        "protocol_version": run["protocol_version"],
        "dataset_sha256": run["dataset_sha256"],
        "answer_model": facts.get("answer_model"),
        "judge_model": facts.get("judge_model"),
        "answer_temperature": json_number(facts.get("answer_temperature")),
        "judge_temperature": json_number(facts.get("judge_temperature")),
        "judge_passes_per_answer": facts.get("passes", 1),
        "started_at": facts.get("started_at"),
        "finished_at": facts.get("finished_at"),
        "completed_cases": frame.height,
        "errors": facts.get("errors", 0),
        "overall_macro_mean": overall,
        "overall_ci95": list(intervals.overall),
        "benchmarks": benchmarks,
        "bootstrap_samples": options.bootstrap.samples,
        "bootstrap_seed": options.bootstrap.seed,
    }
    assert tuple(summary) == SUMMARY_FIELDS
    return summary


def json_number(value: float | None) -> float | int | None:
    """Temperatures as the reference writes them: the protocol's integers stay integers."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return None
    return int(value) if float(value).is_integer() else value


def run_facts(data: RunData, selection: JudgeSelection) -> dict[str, dict]:
    """Per run: models and temperatures of the successful rows (null when they disagree), time span,
    passes, and errors (cases whose latest event is a failure), over cases of the run's dataset."""
    judgments, _ = select_judgments(data, selection)
    in_dataset = data.runs.select("run_id", "dataset_sha256").join(
        data.cases.select("dataset_sha256", "case_id"), on="dataset_sha256").drop("dataset_sha256")
    answers = with_sample(data.answers).join(in_dataset, on=["run_id", "case_id"])
    judgments = with_sample(judgments).join(in_dataset, on=["run_id", "case_id"])
    # Like the reference, only each answer's winning (last successful) row speaks for models and temperatures.
    winners = judgments.filter(pl.col("error").is_null()).sort("seq").group_by(
        "run_id", "case_id", "sample", "judge_model", "judge_pass").last()
    ok = winners.join(
        answers.select("run_id", "case_id", "sample", pl.col("attempt").alias("answer_attempt"), "answer_model",
                       "answer_temperature"), on=["run_id", "case_id", "sample", "answer_attempt"], how="left")
    pairs = ok.group_by("run_id").agg(
        pl.struct("answer_model", "judge_model").unique().alias("models"),
        pl.struct("answer_temperature", "judge_temperature").unique().alias("temps"),
        pl.col("judge_pass").n_unique().alias("passes"),
    )
    # Latest event per answer: answers and judgments share seq on imported rows; the judgment is later. A case
    # is an error when the latest event of one of its samples is.
    events = pl.concat([
        answers.select("run_id", "case_id", "sample", "seq", pl.lit(0).alias("stage"), "error", "started_at",
                       "finished_at"),
        judgments.select("run_id", "case_id", "sample", "seq", pl.lit(1).alias("stage"), "error", "started_at",
                         "finished_at"),
    ])
    latest = events.sort("seq", "stage").group_by("run_id", "case_id", "sample").agg(pl.col("error").last())
    failed = latest.group_by("run_id", "case_id").agg(pl.col("error").is_not_null().any())
    errors = failed.group_by("run_id").agg(pl.col("error").sum().alias("errors"))
    span = events.group_by("run_id").agg(
        pl.col("started_at").filter(pl.col("started_at") != "").min(),
        pl.col("finished_at").filter(pl.col("finished_at") != "").max(),
    )
    facts: dict[str, dict] = {}
    for row in pairs.iter_rows(named=True):
        one_model = row["models"][0] if len(row["models"]) == 1 else {}
        one_temp = row["temps"][0] if len(row["temps"]) == 1 else {}
        facts[row["run_id"]] = {
            "answer_model": one_model.get("answer_model"), "judge_model": one_model.get("judge_model"),
            "answer_temperature": one_temp.get("answer_temperature"),
            "judge_temperature": one_temp.get("judge_temperature"), "passes": row["passes"],
        }
    for row in errors.iter_rows(named=True):
        facts.setdefault(row["run_id"], {})["errors"] = row["errors"]
    for row in span.iter_rows(named=True):
        facts.setdefault(row["run_id"], {}).update(started_at=row["started_at"], finished_at=row["finished_at"])
    return facts
