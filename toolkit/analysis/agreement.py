"""Judge agreement within runs that have several judge passes or several judges.

A rater is one (judge model, pass) of a run, labelled ``judge#pass``; a unit is
one rubric item of one case. Per run: item-level percent agreement, Cohen's
kappa (two raters), Fleiss' kappa (items every rater decided) and
Krippendorff's alpha (nominal, every item at least two raters decided), see
``toolkit.analysis.reliability``; per rater pair the same for the two; the case
score difference between raters per benchmark and overall with paired t
intervals and p-values (the comparison engine with raters in place of runs, Holm
and BH within one run's rows of one family, its overall rows or its per-benchmark
rows, so a run's verdict never depends on which other runs were selected); and the
cases whose score moves the most between raters.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import polars as pl

from toolkit.analysis.compare import compare_cases
from toolkit.analysis.paired import ResampleSettings, small_sample_note
from toolkit.analysis.reliability import (category_counts, cohen_kappa, fleiss_kappa, krippendorff_alpha_nominal,
                                          percent_agreement)
from toolkit.scoring import with_sample
from toolkit.selection import RunData, latest_valid_decisions, scored_passes

RATER = pl.format("{}#{}", pl.col("judge_model"), pl.col("judge_pass")).alias("rater")


@dataclass(frozen=True, kw_only=True)
class AgreementOptions:
    judge: str | None = None  # only this judge's passes (default: every judge)
    passes: tuple[int, ...] | None = None
    resamples: ResampleSettings = field(default_factory=ResampleSettings)
    top: int = 10


@dataclass(frozen=True, eq=False)
class Agreement:
    summary: pl.DataFrame  # per run
    pairs: pl.DataFrame  # per run x rater pair
    scores: pl.DataFrame  # per run x rater pair x (overall, benchmark): score difference
    flips: pl.DataFrame  # cases whose score varies most between raters
    skipped: list[str]  # runs with a single rater
    notes: list[str] = field(default_factory=list)  # small benchmarks, rater pairs without a common case

    def sections(self) -> dict[str, pl.DataFrame]:
        return {"summary": self.summary, "pairs": self.pairs, "scores": self.scores, "flips": self.flips}


def _decisions(data: RunData, options: AgreementOptions) -> pl.DataFrame:
    # Every rater is scored from its latest valid reply per case, as everywhere else: the decisions
    # table also keeps the replies that a later valid one replaced.
    out = latest_valid_decisions(data.judgments, data.decisions)
    if options.judge is not None:
        out = out.filter(pl.col("judge_model") == options.judge)
    if options.passes is not None:
        out = out.filter(pl.col("judge_pass").is_in(list(options.passes)))
    return out


def judge_agreement(data: RunData, options: AgreementOptions = AgreementOptions()) -> Agreement:
    decisions = _decisions(data, options)
    raters = decisions.group_by("run_id").agg(pl.struct("judge_model", "judge_pass").n_unique().alias("n"))
    multi = set(raters.filter(pl.col("n") >= 2)["run_id"].to_list())
    run_ids = [r for r in data.runs["run_id"].to_list() if r in multi]
    skipped = [r for r in data.runs["run_id"].to_list() if r not in multi]
    if not run_ids:
        raise ValueError("agreement: no selected run has two or more judge passes or judges "
                         f"(runs: {', '.join(skipped)})")
    summaries, pairs, scores, flips, notes = [], [], [], [], []
    smallest: list[int] = []
    # A rater's case score: its passes' mean over the case's samples (one sample: its pass score).
    passes = scored_passes(data, decisions.filter(pl.col("run_id").is_in(run_ids))).with_columns(RATER).group_by(
        "run_id", "rater", "benchmark", "case_id", maintain_order=True).agg(pl.col("score").mean())
    for run_id in run_ids:
        mine = decisions.filter(pl.col("run_id") == run_id).with_columns(RATER)
        summary, pair_frame = _item_agreement(mine)
        summaries.append(summary.with_columns(run_id=pl.lit(run_id)))
        pairs.append(pair_frame.with_columns(run_id=pl.lit(run_id)))
        run_passes = passes.filter(pl.col("run_id") == run_id)
        order = sorted(run_passes["rater"].unique().to_list())
        # Raters of one run share its cases: a benchmark of one case still gives a pair to read.
        compared = compare_cases(run_passes.select("rater", "benchmark", "case_id", "score"), order,
                                 options.resamples, per_benchmark=True, unit="rater", min_cases=1)
        scores.append(compared.pairwise.rename({"run_a": "rater_a", "run_b": "rater_b"})
                      .with_columns(run_id=pl.lit(run_id), family=pl.format("{}, run {}", "family", pl.lit(run_id))))
        # Raters get no tie groups in any output, so the separability note would describe nothing shown.
        notes += [f"run {run_id}: {note}" for note in compared.notes if not note.startswith("separability:")]
        smallest += [compared.smallest_benchmark] if compared.smallest_benchmark is not None else []
        flips.append(_flips(run_passes, mine).with_columns(run_id=pl.lit(run_id)))
    def lead(frame: pl.DataFrame) -> pl.DataFrame:
        return frame.select("run_id", pl.exclude("run_id"))

    return Agreement(
        lead(pl.concat(summaries)),
        lead(pl.concat(pairs)),
        lead(pl.concat(scores)),
        lead(pl.concat(flips).sort(["score_range", "items_disagreeing"], descending=True, maintain_order=True)
             .head(options.top)),
        skipped,
        notes + small_sample_note(min(smallest, default=None), bootstrap=True),
    )


def _ratings(decisions: pl.DataFrame) -> tuple[list[str], np.ndarray]:
    """Rater labels and the (items x raters) 0/1 matrix with NaN where a rater has no decision."""
    # One unit per answer's item: each sample of a case is rated on its own.
    wide = with_sample(decisions).select("case_id", "sample", "item_id", "rater", pl.col("matched").cast(pl.Float64)
                                         ).pivot(on="rater", index=["case_id", "sample", "item_id"], values="matched",
                                                 aggregate_function="first")
    labels = sorted(c for c in wide.columns if c not in ("case_id", "sample", "item_id"))
    return labels, wide.select(labels).fill_null(np.nan).to_numpy().astype(np.float64)


def _item_agreement(decisions: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    labels, ratings = _ratings(decisions)
    counts, _ = category_counts(ratings)
    complete = ~np.isnan(ratings).any(axis=1)
    rated = (~np.isnan(ratings)).sum(axis=1)
    summary = pl.DataFrame({
        "raters": [len(labels)], "rater_labels": [", ".join(labels)],
        "items": [int((rated >= 2).sum())], "percent_agreement": [percent_agreement(counts)],
        "cohen_kappa": [cohen_kappa(ratings[:, 0], ratings[:, 1]) if len(labels) == 2 else np.nan],
        "fleiss_kappa": [fleiss_kappa(counts[complete]) if complete.any() else np.nan],
        "krippendorff_alpha": [krippendorff_alpha_nominal(counts)],
    })
    rows = []
    for i, j in combinations(range(len(labels)), 2):
        a, b = ratings[:, i], ratings[:, j]
        both = ~np.isnan(a) & ~np.isnan(b)
        rows.append({"rater_a": labels[i], "rater_b": labels[j], "items": int(both.sum()),
                     "percent_agreement": float(np.mean(a[both] == b[both])) if both.any() else np.nan,
                     "cohen_kappa": cohen_kappa(a, b)})
    return summary.with_columns(pl.col(pl.Float64).fill_nan(None)), pl.DataFrame(rows).with_columns(
        pl.col(pl.Float64).fill_nan(None))


def _flips(passes: pl.DataFrame, decisions: pl.DataFrame) -> pl.DataFrame:
    """Per case: raters, score min/max/range/sd across raters, and items the raters did not all agree on."""
    disagree = with_sample(decisions).group_by("case_id", "sample", "item_id").agg(
        pl.col("matched").n_unique().alias("_values")).group_by(
        "case_id").agg((pl.col("_values") > 1).sum().cast(pl.Int64).alias("items_disagreeing"))
    return passes.group_by("case_id", "benchmark").agg(
        pl.len().cast(pl.Int64).alias("raters"), pl.col("score").min().alias("score_min"),
        pl.col("score").max().alias("score_max"), pl.col("score").std().alias("score_sd"),
    ).with_columns(score_range=pl.col("score_max") - pl.col("score_min")).join(
        disagree, on="case_id", how="left").sort("case_id").select(
        "case_id", "benchmark", "raters", "score_min", "score_max", "score_range", "score_sd", "items_disagreeing")
