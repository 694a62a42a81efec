"""How large a gap between runs the judge alone could produce: judge noise against the observed gaps.

A run graded by several raters (a rater is one judge#pass: passes of one judge, or several judges) has
case scores s_cr that differ only through the judge, the answers and cases being the same. Per case,
the sample variance across its raters (ddof 1),

    w_c = var_r(s_cr),

estimates the variance of ONE rater's score of that case around what the raters give on average. Per
benchmark b, sigma2_b = mean of w_c over the run's cases in b with two or more raters (m_b of them).
The run's macro mean scored by one rater, M = (1/B) sum_b mean_{c in b} s_c, then varies by the judge
alone (answers fixed, judge errors independent across cases) with

    var_judge(M) = (1/B^2) sum_b sigma2_b / m_b,        noise_sd = sqrt(var_judge(M)).

Two runs graded independently: their gap moves by judge noise with sd sqrt(noise_sd_a^2 + noise_sd_b^2),
and a gap within ``z`` (1.96) of those is one the judge alone produces one time in twenty or more. Across
passes of one judge this is the judge's sampling noise; across different judges it also holds their
systematic disagreement (one judge reading more leniently than another), which is why the two are shown
apart. The gaps compared are the leaderboard's: macro means from each run's scored judge (``selection``),
its passes averaged; averaging K passes divides the pass-to-pass part of var_judge by K, so noise_sd (one
rater) is an upper bound for a leaderboard scored from several passes of the same judge.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from itertools import combinations

import numpy as np
import polars as pl

from toolkit.analysis.agreement import RATER
from toolkit.analysis.matrix import case_matrix
from toolkit.selection import JudgeSelection, RunData, latest_valid_decisions, per_case, scored_passes

Z95 = 1.959963984540054  # two-sided 95% normal quantile


@dataclass(frozen=True, kw_only=True)
class NoiseOptions:
    judge: str | None = None  # raters: only this judge's passes (pass-to-pass noise); default every judge
    passes: tuple[int, ...] | None = None  # raters: only these pass numbers
    selection: JudgeSelection = field(default_factory=JudgeSelection)  # whose scores make the gaps
    z: float = Z95


@dataclass(frozen=True, eq=False)
class JudgeNoise:
    runs: pl.DataFrame  # per run: raters, cases, within_sd, noise_sd, overall (leaderboard macro mean)
    pairs: pl.DataFrame  # per pair of runs, best first: gap, noise_sd of the gap, ratio, within_noise
    by_rater: pl.DataFrame  # per run x rater: the macro mean that rater alone gives
    skipped: list[str]  # runs with fewer than two raters


def rater_scores(data: RunData, judge: str | None = None, passes: tuple[int, ...] | None = None) -> pl.DataFrame:
    """run_id, rater, benchmark, case_id, score: every selected rater's case scores (latest valid replies)."""
    decisions = latest_valid_decisions(data.judgments, data.decisions)
    if judge is not None:
        decisions = decisions.filter(pl.col("judge_model") == judge)
    if passes is not None:
        decisions = decisions.filter(pl.col("judge_pass").is_in(list(passes)))
    # A rater's case score: its passes' mean over the case's samples (one sample: its pass score).
    return scored_passes(data, decisions).with_columns(RATER).group_by(
        "run_id", "rater", "benchmark", "case_id", maintain_order=True).agg(pl.col("score").mean())


def within_variance(scores: pl.DataFrame) -> pl.DataFrame:
    """Per run x benchmark of ``scores`` (run_id, rater, benchmark, case_id, score): cases with two or more
    raters and within_var, the mean over them of w_c (the variance of one rater's case score)."""
    per_case = scores.group_by("run_id", "benchmark", "case_id").agg(
        pl.len().alias("_n"), pl.col("score").var(ddof=1).alias("_w")).filter(pl.col("_n") >= 2)
    return per_case.group_by("run_id", "benchmark").agg(
        pl.len().cast(pl.Int64).alias("cases"), pl.col("_w").mean().alias("within_var")).sort("run_id", "benchmark")


def noise_by_run(scores: pl.DataFrame) -> pl.DataFrame:
    """Per run of ``scores`` (run_id, rater, benchmark, case_id, score) with two or more raters: raters,
    cases (with two or more raters), benchmarks, within_sd (sqrt of the mean w_c) and noise_sd."""
    per_benchmark = within_variance(scores).rename({"cases": "_m", "within_var": "_w"})
    raters = scores.group_by("run_id").agg(pl.col("rater").n_unique().alias("raters"))
    return per_benchmark.group_by("run_id").agg(
        pl.col("_m").sum().alias("cases"), pl.len().alias("benchmarks"),
        ((pl.col("_w") * pl.col("_m")).sum() / pl.col("_m").sum()).sqrt().alias("within_sd"),
        ((pl.col("_w") / pl.col("_m")).sum().sqrt() / pl.len()).alias("noise_sd"),
    ).join(raters, on="run_id").select("run_id", "raters", "cases", "benchmarks", "within_sd", "noise_sd").with_columns(
        pl.col("raters", "cases", "benchmarks").cast(pl.Int64))


def rater_means(scores: pl.DataFrame) -> pl.DataFrame:
    """Per run x rater: the macro mean (benchmark means, then their mean) that rater's scores give."""
    return (scores.group_by("run_id", "rater", "benchmark").agg(pl.col("score").mean())
            .group_by("run_id", "rater").agg(pl.col("score").mean().alias("overall"))
            .sort("run_id", "rater"))


def judge_noise(data: RunData, options: NoiseOptions = NoiseOptions()) -> JudgeNoise:
    """Judge noise of every run with two or more raters, and the leaderboard gaps between those runs."""
    scores = rater_scores(data, options.judge, options.passes)
    runs = noise_by_run(scores)
    order = data.runs["run_id"].to_list()
    kept = set(runs["run_id"].to_list())
    skipped = [r for r in order if r not in kept]
    if not kept:
        raise ValueError("judge noise: no selected run has two or more judge passes or judges "
                         f"(runs: {', '.join(skipped)})")
    cases = per_case(data, options.selection)
    ids = [r for r in order if r in kept]
    matrix = case_matrix(cases.filter(pl.col("run_id").is_in(ids)), ids)
    overall = pl.DataFrame({"run_id": list(matrix.units), "overall": matrix.overall()})
    runs = overall.join(runs, on="run_id").sort("overall", descending=True, nulls_last=True)
    return JudgeNoise(runs, gaps(runs, options.z), rater_means(scores).filter(pl.col("run_id").is_in(ids)), skipped)


def gaps(runs: pl.DataFrame, z: float = Z95) -> pl.DataFrame:
    """Every pair of ``runs`` (run_id, overall, noise_sd; best first): gap = overall_a - overall_b, the gap's
    judge-noise sd, noise_band = z times it, ratio = gap / sd, and within_noise = |gap| <= noise_band."""
    rows = []
    for (a, mean_a, sd_a), (b, mean_b, sd_b) in combinations(runs.select("run_id", "overall", "noise_sd").rows(), 2):
        sd = math.hypot(sd_a, sd_b)
        gap = mean_a - mean_b
        ratio = gap / sd if sd > 0 else (math.inf if gap else math.nan)
        rows.append({"run_a": a, "run_b": b, "gap": gap, "noise_sd": sd, "noise_band": z * sd, "ratio": ratio,
                     "within_noise": bool(abs(gap) <= z * sd)})
    schema = {"run_a": pl.Utf8, "run_b": pl.Utf8, "gap": pl.Float64, "noise_sd": pl.Float64,
              "noise_band": pl.Float64, "ratio": pl.Float64, "within_noise": pl.Boolean}
    return pl.DataFrame(rows, schema=schema)


def noise_sd(case_scores: np.ndarray, sizes: dict[str, int]) -> float:
    """noise_sd of one run from a (raters x cases) array whose columns are benchmarks of ``sizes`` laid end to
    end (no missing values): the module's formula, for checks and planning by hand."""
    scores = np.asarray(case_scores, dtype=np.float64)
    stops = np.cumsum(list(sizes.values()))
    parts = [scores[:, stop - n:stop] for stop, n in zip(stops, sizes.values())]
    return float(math.sqrt(sum(part.var(axis=0, ddof=1).mean() / part.shape[1] for part in parts)) / len(parts))
