"""Per rubric item: how often runs match it, which items drive scores, and which separate strong runs
from weak ones.

``matched`` of a run on an item is the share of the selected judge passes that
found it matched (0 or 1 with one pass). For a positive item (points > 0) a
match is credit and a miss an omission; for a negative item a match is an
endorsement of something harmful or wrong.

Discrimination: the Pearson correlation, across runs, between a run's
``matched`` on the item and the run's overall score (macro mean over
benchmarks), i.e. the point-biserial correlation with one pass. A high value
means strong runs match the item and weak ones do not; for negative items a
negative value is the expected sign. It needs at least 3 runs with the item's
case completed and is null when the item or the scores do not vary.

Intervals: an item's own rate across runs gets a Wilson score interval over
its runs (runs treated as exchangeable draws, each contributing its pass-mean match); rates pooled
over many items (per run, per points value) resample cases whole within their
benchmark (``toolkit.analysis.ratios``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from statistics import NormalDist

import numpy as np
import polars as pl

from toolkit.analysis.paired import ResampleSettings
from toolkit.analysis.ratios import case_ratios
from toolkit.protocol import CI_HIGH
from toolkit.scoring import with_sample
from toolkit.selection import JudgeSelection, RunData, per_case, select_judgments

ALL_RUNS = "(all runs)"
ITEM_COLUMNS = ("item_id", "case_id", "benchmark", "grading_method", "points", "severity_class", "text")


@dataclass(frozen=True, kw_only=True)
class ItemOptions:
    selection: JudgeSelection = field(default_factory=JudgeSelection)
    benchmark: str | None = None  # restrict to one benchmark
    top: int = 10
    resamples: ResampleSettings | None = None  # intervals when given


@dataclass(frozen=True, eq=False)
class ItemAnalysis:
    items: pl.DataFrame  # one row per item: rates across runs, discrimination
    missed: pl.DataFrame  # top positive items by miss rate
    endorsed: pl.DataFrame  # top negative items by endorsement rate
    discriminating: pl.DataFrame  # top items by |discrimination|
    by_points: pl.DataFrame  # run x points value: match rate
    runs: pl.DataFrame  # per run: positive match rate, negative endorsement rate
    item_runs: pl.DataFrame  # per run x item: matched share (``item_rates``)

    def sections(self) -> dict[str, pl.DataFrame]:
        return {"missed": self.missed, "endorsed": self.endorsed, "discriminating": self.discriminating,
                "by_points": self.by_points, "runs": self.runs, "items": self.items, "item_runs": self.item_runs}


def item_rates(data: RunData, selection: JudgeSelection = JudgeSelection()) -> pl.DataFrame:
    """One row per run x rubric item of a completed case: matched share and pass count, with the item's
    benchmark, grading method, points, severity class and text."""
    _, decisions = select_judgments(data, selection)
    # Each answer (case x sample) its pass mean, then their mean: an item's share weighs answers alike.
    per_item = with_sample(decisions).group_by("run_id", "case_id", "item_id", "sample").agg(
        pl.col("matched").cast(pl.Float64).mean().alias("matched"), pl.len().cast(pl.Int64).alias("passes")
    ).group_by("run_id", "case_id", "item_id").agg(pl.col("matched").mean(), pl.col("passes").sum())
    items = data.runs.select("run_id", "dataset_sha256").join(
        data.rubric_items.select("dataset_sha256", *ITEM_COLUMNS), on="dataset_sha256")
    return per_item.join(items, on=["run_id", "case_id", "item_id"]).drop("dataset_sha256")


def run_overall(cases: pl.DataFrame) -> pl.DataFrame:
    """run_id, overall: macro mean over benchmarks of a ``per_case`` frame."""
    # Rows in a fixed order first: a float mean depends on the order it adds in.
    return cases.sort("run_id", "benchmark", "case_id").group_by("run_id", "benchmark", maintain_order=True).agg(
        pl.col("score").mean()).group_by("run_id", maintain_order=True).agg(pl.col("score").mean().alias("overall"))


def analyse_items(data: RunData, options: ItemOptions = ItemOptions()) -> ItemAnalysis:
    rates = item_rates(data, options.selection)
    if options.benchmark is not None:
        known = data.rubric_items["benchmark"].unique().to_list()
        if options.benchmark not in known:
            raise ValueError(f"items: unknown benchmark {options.benchmark!r} (known: {', '.join(sorted(known))})")
        rates = rates.filter(pl.col("benchmark") == options.benchmark)
    if rates.is_empty():
        raise ValueError("items: the selected runs have no judged rubric item to analyse")
    summary = item_summary(rates, run_overall(per_case(data, options.selection)), options.resamples is not None)
    top = options.top
    missed = summary.filter(pl.col("points") > 0).with_columns(miss_rate=1 - pl.col("match_rate")).sort(
        ["miss_rate", "points", "item_id"], descending=[True, True, False]).head(top)
    endorsed = summary.filter(pl.col("points") < 0).sort(
        ["match_rate", "points", "item_id"], descending=[True, False, False]).head(top)
    discriminating = summary.filter(pl.col("discrimination").is_not_null()).sort(
        [pl.col("discrimination").abs(), "item_id"], descending=[True, False]).head(top)
    item_runs = rates.select("run_id", "item_id", "benchmark", "case_id", "points", "matched", "passes").sort(
        "run_id", "benchmark", "case_id", "item_id")
    return ItemAnalysis(summary, missed, endorsed, discriminating, by_points(rates, options.resamples),
                        run_rates(rates, options.resamples), item_runs)


def item_summary(rates: pl.DataFrame, overall: pl.DataFrame, wilson: bool = False) -> pl.DataFrame:
    """One row per item: runs, match rate (mean over runs), discrimination; Wilson interval when asked."""
    # In a fixed row order: the mean and the correlation add in the order of a group's rows, which a hash
    # join leaves to chance (the last digit of discrimination changed from one command to the next).
    joined = rates.join(overall, on="run_id", how="left").sort("benchmark", "case_id", "item_id", "run_id")
    out = joined.group_by(ITEM_COLUMNS, maintain_order=True).agg(
        pl.len().cast(pl.Int64).alias("n_runs"),
        pl.col("matched").mean().alias("match_rate"),
        pl.when(pl.len() >= 3).then(pl.corr("matched", "overall")).alias("discrimination"),
    ).sort("benchmark", "case_id", "item_id")
    if wilson:
        # Each run is one trial whose success is its pass-mean match: the interval is centred like match_rate.
        lo, hi = wilson_interval((out["match_rate"] * out["n_runs"]).to_numpy(), out["n_runs"].to_numpy())
        out = out.with_columns(ci_low=pl.Series(lo), ci_high=pl.Series(hi))
    return out.with_columns(pl.col(pl.Float64).fill_nan(None)).select(
        "item_id", "benchmark", "case_id", "points", "severity_class", "n_runs", "match_rate",
        *(["ci_low", "ci_high"] if wilson else []), "discrimination", "grading_method", "text")


def wilson_interval(successes: np.ndarray, trials: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Wilson score interval per element, two-sided at the protocol's CI_HIGH quantile."""
    z = NormalDist().inv_cdf(CI_HIGH)
    n = trials.astype(np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = successes / n
        centre = (p + z * z / (2 * n)) / (1 + z * z / n)
        half = z * np.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return centre - half, centre + half


def _with_all_runs(frame: pl.DataFrame) -> pl.DataFrame:
    """The rows again under run_id ALL_RUNS, so pooled rates come out of the same computation."""
    return pl.concat([frame, frame.with_columns(run_id=pl.lit(ALL_RUNS))])


def by_points(rates: pl.DataFrame, settings: ResampleSettings | None = None) -> pl.DataFrame:
    """Match rate per run (and over all runs) x grading method x points value (severity class for F1)."""
    cells = _with_all_runs(rates).select(
        "run_id", "grading_method", "points", "severity_class", "benchmark", "case_id",
        pl.col("matched").alias("num"), pl.lit(1.0).alias("den"))
    out = case_ratios(cells, ["run_id", "grading_method", "points", "severity_class"], settings)
    return out.rename({"value": "match_rate"}).sort(
        pl.col("run_id") == ALL_RUNS, "run_id", "grading_method", "points",
        descending=[False, False, False, True], maintain_order=True)


def run_rates(rates: pl.DataFrame, settings: ResampleSettings | None = None) -> pl.DataFrame:
    """Per run (and over all runs): share of positive items matched and of negative items endorsed."""
    kinds = rates.filter(pl.col("points") != 0).select(
        "run_id", "benchmark", "case_id", pl.col("matched").alias("num"), pl.lit(1.0).alias("den"),
        pl.when(pl.col("points") > 0).then(pl.lit("positive_matched")).otherwise(pl.lit("negative_endorsed"))
        .alias("rate"))
    out = case_ratios(_with_all_runs(kinds), ["run_id", "rate"], settings)
    return out.sort(pl.col("run_id") == ALL_RUNS, "run_id", "rate", descending=[False, False, True],
                    maintain_order=True).rename({"value": "share"})
