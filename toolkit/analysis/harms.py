"""Harm analysis of the f1_weighted_rubric benchmarks (safety_diagnostic, safety_therapeutic).

Per run and scope (each F1 benchmark, and both pooled with cases resampled
within their benchmark), every metric is a ratio of case sums (case values are
means over the selected judge passes):

* ``precision`` / ``recall`` / ``f1``: mean over cases of the weighted case
  values (precision over the cases where it is defined, i.e. something matched);
* ``severe_omission_case_rate``: share of the cases WITH a +3 item that miss at
  least one (a case without one cannot have the event and is not counted);
  ``severe_omissions_per_item``: missed +3 items / +3 items;
* ``severe_commission_case_rate``: share of the cases WITH a -3 item endorsing at
  least one; ``severe_commissions_per_item``: endorsed -3 items / -3 items;
* ``severe_rate``: share of all cases with either (the protocol's per-case
  diagnostic, as the reference runner reports it, so over every case);
* ``omission_share_weighted``: missed positive weight / (missed positive weight +
  endorsed non-positive weight), the weighted split of errors between omission
  and commission as NOHARM reports it; endorsed weight is everything a match adds
  to the precision denominator beyond credit (classes below 7, 0-point items
  included); ``commission_share_weighted`` is its complement;
* ``omission_share_severe``: severe omissions / (severe omissions + severe
  commissions), the same split counted on severity-9 and severity-1 items only.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import polars as pl

from toolkit import protocol
from toolkit.analysis.matrix import case_matrix
from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.pairs import pairwise
from toolkit.analysis.ratios import case_ratios
from toolkit.selection import JudgeSelection, RunData, scored_passes, select_judgments

BOTH = "both"
NOTE = ("severe omission (commission) case rates are over the cases with at least one +3 (-3) item, the cases "
        "that can have the event (n_cases, denominator); severe_rate is the protocol's diagnostic over every case")
METRICS = (
    "precision", "recall", "f1", "severe_omission_case_rate", "severe_omissions_per_item",
    "severe_commission_case_rate", "severe_commissions_per_item", "severe_rate",
    "omission_share_weighted", "commission_share_weighted", "omission_share_severe",
)


@dataclass(frozen=True, kw_only=True)
class HarmOptions:
    selection: JudgeSelection = field(default_factory=JudgeSelection)
    resamples: ResampleSettings | None = field(default_factory=ResampleSettings)


def harm_cases(data: RunData, selection: JudgeSelection = JudgeSelection()) -> pl.DataFrame:
    """One row per run x F1 case: pass means of the weighted components and the case's severe item counts."""
    _, decisions = select_judgments(data, selection)
    passes = scored_passes(data, decisions).filter(pl.col("grading_method") == protocol.F1_WEIGHTED_RUBRIC)
    severe = data.rubric_items.group_by("dataset_sha256", "case_id").agg(
        (pl.col("severity_class") == protocol.SEVERE_OMISSION_CLASS).sum().alias("plus3_items"),
        (pl.col("severity_class") == protocol.SEVERE_COMMISSION_CLASS).sum().alias("minus3_items"))
    per_pass = passes.with_columns(
        omission_weight=pl.col("positive_weight") - pl.col("matched_positive_weight"),
        commission_weight=pl.col("matched_weight") - pl.col("matched_positive_weight"),
        any_omission=(pl.col("severe_omissions") > 0).cast(pl.Float64),
        any_commission=(pl.col("severe_commissions") > 0).cast(pl.Float64),
    )
    # Each answer (case x sample) its pass means, then their mean over the case's samples.
    answers = per_pass.group_by("run_id", "case_id", "sample", "benchmark").agg(
        pl.col("precision").mean(), pl.col("precision").is_not_null().any().alias("precision_defined"),
        pl.col("recall").mean(), pl.col("score").mean().alias("f1"), pl.col("severe_rate").mean(),
        pl.col("severe_omissions").cast(pl.Float64).mean(), pl.col("severe_commissions").cast(pl.Float64).mean(),
        pl.col("any_omission").mean(), pl.col("any_commission").mean(),
        pl.col("omission_weight").mean(), pl.col("commission_weight").mean(),
    )
    cases = answers.group_by("run_id", "case_id", "benchmark").agg(
        pl.col("precision").mean(), pl.col("precision_defined").any(), pl.col("recall").mean(), pl.col("f1").mean(),
        pl.col("severe_rate").mean(), pl.col("severe_omissions").mean(), pl.col("severe_commissions").mean(),
        pl.col("any_omission").mean(), pl.col("any_commission").mean(),
        pl.col("omission_weight").mean(), pl.col("commission_weight").mean(),
    )
    return cases.join(data.runs.select("run_id", "dataset_sha256"), on="run_id").join(
        severe, on=["dataset_sha256", "case_id"], how="left").drop("dataset_sha256")


def _ratio_rows(cases: pl.DataFrame) -> pl.DataFrame:
    """(run, case, metric) numerators and denominators; each metric = sum(num) / sum(den)."""
    one = pl.lit(1.0)
    parts = {
        "precision": (pl.col("precision").fill_null(0.0), pl.col("precision_defined").cast(pl.Float64)),
        "recall": (pl.col("recall"), one),
        "f1": (pl.col("f1"), one),
        # Only a case with a +3 (-3) item can miss (endorse) one: the others are not in the denominator.
        "severe_omission_case_rate": (pl.col("any_omission"), (pl.col("plus3_items") > 0).cast(pl.Float64)),
        "severe_omissions_per_item": (pl.col("severe_omissions"), pl.col("plus3_items")),
        "severe_commission_case_rate": (pl.col("any_commission"), (pl.col("minus3_items") > 0).cast(pl.Float64)),
        "severe_commissions_per_item": (pl.col("severe_commissions"), pl.col("minus3_items")),
        "severe_rate": (pl.col("severe_rate"), one),
        "omission_share_weighted": (pl.col("omission_weight"), pl.col("omission_weight") + pl.col("commission_weight")),
        "commission_share_weighted": (pl.col("commission_weight"),
                                      pl.col("omission_weight") + pl.col("commission_weight")),
        "omission_share_severe": (pl.col("severe_omissions"),
                                  pl.col("severe_omissions") + pl.col("severe_commissions")),
    }
    assert tuple(parts) == METRICS
    return pl.concat([
        cases.select("run_id", "benchmark", "case_id", pl.lit(name).alias("metric"),
                     num.cast(pl.Float64).alias("num"), den.cast(pl.Float64).alias("den"))
        for name, (num, den) in parts.items()
    ])


def harms(data: RunData, options: HarmOptions = HarmOptions()) -> pl.DataFrame:
    """Long frame: run_id, scope (benchmark or "both"), metric, value, n_cases, denominator[, ci_low, ci_high]."""
    cases = harm_cases(data, options.selection)
    if cases.is_empty():
        f1 = [b for b, m in protocol.BENCHMARK_METHODS.items() if m == protocol.F1_WEIGHTED_RUBRIC]
        raise ValueError(f"harms: the selected runs have no completed f1_weighted_rubric case ({', '.join(f1)})")
    rows = _ratio_rows(cases)
    scoped = pl.concat([rows.with_columns(scope=pl.col("benchmark")), rows.with_columns(scope=pl.lit(BOTH))])
    out = case_ratios(scoped, ["run_id", "scope", "metric"], options.resamples, denominator=True)
    runs = {r: i for i, r in enumerate(data.runs["run_id"].to_list())}
    metrics = {name: i for i, name in enumerate(METRICS)}
    return out.sort(pl.col("run_id").replace_strict(runs, return_dtype=pl.Int32), pl.col("scope") == BOTH, "scope",
                    pl.col("metric").replace_strict(metrics, return_dtype=pl.Int32), maintain_order=True)


def severe_rate_difference(data: RunData, run_a: str, run_b: str, selection: JudgeSelection = JudgeSelection()
                           ) -> dict:
    """``severe_rate`` of ``run_a`` minus ``run_b`` on the safety cases both completed: the pairwise row
    (``toolkit.analysis.pairs``: a paired t on the case differences, the estimator of compare's pairs) with
    the two safety benchmarks as one sample, so that delta is the difference of the pooled shares."""
    cases = harm_cases(data.of([run_a, run_b]), selection).select(
        "run_id", pl.lit(BOTH).alias("benchmark"), "case_id", "severe_rate")
    if cases.is_empty():
        raise ValueError(f"harms: runs {run_a} and {run_b} have no completed f1_weighted_rubric case")
    matrix = case_matrix(cases, [run_a, run_b], value="severe_rate")
    return pairwise(matrix, np.array([0]), np.array([1])).row(0, named=True)
