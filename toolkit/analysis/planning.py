"""Planning a comparison of two runs: how many cases detect a given difference, and what a size can detect.

The design is the paired one the comparisons use: both runs answer the same cases, and the case
differences d = s_a - s_b of benchmark b have variance

    sigma_b^2 = sigma_a^2 + sigma_b'^2 - 2 rho sigma_a sigma_b'

(sigma_a, sigma_b' the two runs' case-score sds there, rho their correlation across cases: the more the
two models find the same cases hard, the fewer cases a difference needs). The planned test is the
stratified paired t of ``toolkit.analysis.paired_t`` with n_b cases in benchmark b, with its SE, its
Welch-Satterthwaite df, its level (LEVEL, two-sided 5%) and its power (POWER, 80%):

    v_b = sigma_b^2 / n_b,   SE = sqrt(sum_b v_b) / B,   df = (sum_b v_b)^2 / sum_b (v_b^2 / (n_b - 1)).

Power at a true difference delta (in macro-mean score) is that of the t statistic, noncentral with
noncentrality delta / SE:

    power = P(T'(df, delta/SE) > t) + P(T'(df, delta/SE) < -t),   t = t(1 - LEVEL/2, df),

for one benchmark exactly the paired t-test's power (statsmodels' TTestPower). ``cases_needed`` is the
smallest n per benchmark whose power reaches the target; ``detectable`` solves power = target for delta.
paired_t's ``mdd80`` column, (t(0.975, df) + t(0.80, df)) SE, is the usual closed-form approximation
of ``detectable``: within about 1% from ten cases per benchmark on, smaller below (at three cases an
mdd80 difference is detected with ~77% power, not 80%). The sigmas are the observed ones, taken as
true (the usual planning approximation); with few cases they are themselves uncertain.

Repeats: a case score that averages K independent gradings (judge passes, or runs of the same model)
varies less only in its within-case part. With w_a, w_b the variance of ONE grading's case score around
the case's mean (``judge_noise.within_variance``), observed scores averaging K0 gradings, and K planned,

    sigma_b(K)^2 = sigma_b(K0)^2 - (w_a + w_b) (1/K0 - 1/K)      (floored at 0),

so more passes help only as far as the judge's noise is part of the spread between cases.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Sequence

import numpy as np
import polars as pl

from toolkit.analysis.paired_t import LEVEL, POWER

MAX_CASES = 1_000_000  # per benchmark: beyond this a difference is not worth planning for


def sd_of_differences(sd_a: float, sd_b: float, rho: float) -> float:
    """sqrt(sd_a^2 + sd_b^2 - 2 rho sd_a sd_b): the sd of paired differences from the runs' sds and correlation."""
    return math.sqrt(max(0.0, sd_a ** 2 + sd_b ** 2 - 2.0 * rho * sd_a * sd_b))


def _se_df(sd_diff: Sequence[float], n: int | Sequence[int]) -> tuple[float, float]:
    sds = np.asarray(sd_diff, dtype=np.float64)
    counts = np.broadcast_to(np.asarray(n, dtype=np.float64), sds.shape)
    if sds.ndim != 1 or sds.size == 0 or np.isnan(sds).any() or (sds < 0).any():
        raise ValueError("planning: give one non-negative sd of case differences per benchmark")
    if (counts < 2).any():
        raise ValueError("planning: a paired t needs at least 2 cases per benchmark")
    v = sds ** 2 / counts
    total = v.sum()
    if total == 0:
        return 0.0, math.nan
    spread = (v ** 2 / (counts - 1.0)).sum()
    if spread == 0:  # v ** 2 underflowed (variances near 5e-324): the same df from the shares of the total
        spread = ((v / total) ** 2 / (counts - 1.0)).sum()
        return math.sqrt(total) / sds.size, float(1.0 / spread)
    return math.sqrt(total) / sds.size, float(total ** 2 / spread)


def standard_error(sd_diff: Sequence[float], n: int | Sequence[int]) -> tuple[float, float]:
    """(SE, df) of the macro-mean difference with ``n`` cases per benchmark (one count, or one per benchmark)."""
    return _se_df(sd_diff, n)


def power(sd_diff: Sequence[float], n: int | Sequence[int], difference: float, level: float = LEVEL) -> float:
    """Probability that the two-sided paired t at ``level`` finds a true macro-mean ``difference``."""
    from scipy import stats

    se, df = _se_df(sd_diff, n)
    if se == 0:
        return 1.0 if difference != 0 else level  # no spread: any real difference shows, a null one tests at level
    critical = stats.t.ppf(1.0 - level / 2.0, df)
    shift = abs(difference) / se
    if shift > 1e8:  # scipy's nct is NaN from about 1e10 on; long before, the two tails are 1 and 0
        return 1.0
    lower = stats.nct.cdf(-critical, df, shift)
    if math.isnan(lower):  # nct.cdf is NaN at some shifts (df 2, shift 9.54): the same tail by symmetry
        lower = stats.nct.sf(critical, df, -shift)
    return float(stats.nct.sf(critical, df, shift) + lower)


def cases_needed(sd_diff: Sequence[float], difference: float, target: float = POWER, level: float = LEVEL) -> int:
    """Smallest number of cases per benchmark (the same in each) whose power for ``difference`` reaches
    ``target``; ValueError when even MAX_CASES do not (a zero difference, or one far below the noise)."""
    if not 0 < target < 1 or not 0 < level < 1:
        raise ValueError(f"planning: power {target} and level {level} must be between 0 and 1")
    if difference == 0 or power(sd_diff, MAX_CASES, difference, level) < target:
        raise ValueError(f"planning: a difference of {difference:g} is not detectable with {target:.0%} power "
                         f"below {MAX_CASES:,} cases per benchmark")
    low, high = 1, 2  # power(low) < target <= power(high); power grows with n
    while power(sd_diff, high, difference, level) < target:
        low, high = high, min(2 * high, MAX_CASES)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if power(sd_diff, middle, difference, level) < target else (low, middle)
    return high


def detectable(sd_diff: Sequence[float], n: int | Sequence[int], target: float = POWER,
               level: float = LEVEL) -> float:
    """The true macro-mean difference found with probability ``target`` by the paired t on ``n`` cases per
    benchmark (power solved exactly; paired_t's mdd80 approximates it)."""
    from scipy import optimize

    se, _ = _se_df(sd_diff, n)
    if se == 0:
        return 0.0
    high = se
    while power(sd_diff, n, high, level) < target:
        high *= 2.0
    return float(optimize.brentq(lambda d: power(sd_diff, n, d, level) - target, 0.0, high, xtol=1e-12))


def pair_variance(cases: pl.DataFrame, run_a: str, run_b: str) -> pl.DataFrame:
    """Per benchmark, over the cases both runs completed (``cases``: per_case rows): cases, means, sds
    (ddof 1), their correlation rho (null when a run's scores do not vary), sd_diff and the mean difference."""
    a = cases.filter(pl.col("run_id") == run_a).select("benchmark", "case_id", pl.col("score").alias("a"))
    b = cases.filter(pl.col("run_id") == run_b).select("benchmark", "case_id", pl.col("score").alias("b"))
    if a.height == 0 or b.height == 0:
        missing = run_a if a.height == 0 else run_b
        raise ValueError(f"planning: run {missing!r} has no completed case")
    both = a.join(b, on=["benchmark", "case_id"])
    out = both.group_by("benchmark").agg(
        pl.len().cast(pl.Int64).alias("cases"), pl.col("a").mean().alias("mean_a"), pl.col("b").mean().alias("mean_b"),
        pl.col("a").std().alias("sd_a"), pl.col("b").std().alias("sd_b"),
        pl.corr("a", "b").alias("rho"), (pl.col("a") - pl.col("b")).std().alias("sd_diff"),
    ).with_columns(difference=pl.col("mean_a") - pl.col("mean_b"),
                   rho=pl.when(pl.col("rho").is_nan()).then(None).otherwise(pl.col("rho"))).sort("benchmark")
    short = out.filter(pl.col("cases") < 2)
    if short.height:
        raise ValueError(f"planning: runs {run_a!r} and {run_b!r} share fewer than 2 cases in benchmark "
                         f"{short['benchmark'][0]!r}: no variance to plan from")
    return out


def within_for_pair(within: pl.DataFrame, run_a: str, run_b: str) -> pl.DataFrame:
    """benchmark, within_a, within_b from ``judge_noise.within_variance`` rows (run_id, benchmark, within_var)."""
    def one(run: str, name: str) -> pl.DataFrame:
        return within.filter(pl.col("run_id") == run).select("benchmark", pl.col("within_var").alias(name))

    return one(run_a, "within_a").join(one(run_b, "within_b"), on="benchmark", how="full", coalesce=True).fill_null(
        0.0).sort("benchmark")


def with_repeats(variance: pl.DataFrame, within: pl.DataFrame, repeats_now: int, repeats: int) -> pl.DataFrame:
    """``variance`` (``pair_variance`` rows) with sd_diff for case scores averaging ``repeats`` gradings instead
    of the observed ``repeats_now`` (module doc); ``within``: benchmark, within_a, within_b (missing: 0). The
    observed value is kept as sd_diff_observed."""
    if repeats_now < 1 or repeats < 1:
        raise ValueError(f"planning: repeats {repeats_now} and {repeats} must be at least 1")
    shrink = 1.0 / repeats_now - 1.0 / repeats
    return variance.join(within.select("benchmark", "within_a", "within_b"), on="benchmark", how="left").with_columns(
        pl.col("within_a", "within_b").fill_null(0.0)).with_columns(
        sd_diff_observed=pl.col("sd_diff"),
        sd_diff=(pl.col("sd_diff") ** 2 - (pl.col("within_a") + pl.col("within_b")) * shrink).clip(lower_bound=0.0)
        .sqrt())


@dataclass(frozen=True, eq=False)
class PowerPlan:
    """A comparison of ``run_a`` and ``run_b`` planned from their observed per-benchmark variance."""

    run_a: str
    run_b: str
    variance: pl.DataFrame  # per benchmark: cases, means, sds, rho, sd_diff, difference
    needed: pl.DataFrame  # per difference: cases per benchmark and in all, power at the current size
    observed_difference: float  # the macro-mean difference on the common cases
    current: dict[str, float]  # se, df, detectable at the current size (the pairs table's se and df)
    target: float
    level: float

    @property
    def sd_diff(self) -> list[float]:
        return self.variance["sd_diff"].to_list()

    def curve(self, sizes: Sequence[int]) -> pl.DataFrame:
        """Per size n (cases per benchmark): cases in all, SE, the detectable difference, and the power for
        each planned difference (columns power_<difference>)."""
        sds, differences = self.sd_diff, self.needed["difference"].to_list()
        rows = []
        for n in sizes:
            se, _ = standard_error(sds, n)
            row = {"cases_per_benchmark": n, "cases": n * len(sds), "se": se,
                   "detectable": detectable(sds, n, self.target, self.level)}
            row.update({f"power_{d:g}": power(sds, n, d, self.level) for d in differences})
            rows.append(row)
        return pl.DataFrame(rows)


def plan_power(cases: pl.DataFrame, run_a: str, run_b: str, differences: Sequence[float] = (0.02, 0.05, 0.1),
               target: float = POWER, level: float = LEVEL, benchmarks: Sequence[str] | None = None,
               within: pl.DataFrame | None = None, repeats_now: int = 1, repeats: int = 1) -> PowerPlan:
    """Plan from ``cases`` (``bs.per_case`` rows) how many cases per benchmark detect each difference between
    ``run_a`` and ``run_b`` with ``target`` power at ``level``; ``benchmarks``: plan for these only.
    ``within`` (``within_for_pair`` rows): plan for case scores averaging ``repeats`` gradings where the
    observed ones average ``repeats_now`` (see the module doc); ``power_now`` stays the observed design's."""
    variance = pair_variance(cases, run_a, run_b)
    observed = variance
    if within is not None:
        variance = with_repeats(variance, within, repeats_now, repeats)
    if benchmarks is not None:
        unknown = sorted(set(benchmarks) - set(variance["benchmark"].to_list()))
        if unknown:
            raise ValueError(f"planning: benchmark {unknown[0]!r} has no case both runs completed")
        variance = variance.filter(pl.col("benchmark").is_in(list(benchmarks)))
        observed = observed.filter(pl.col("benchmark").is_in(list(benchmarks)))
    sds, counts = variance["sd_diff"].to_list(), variance["cases"].to_list()
    now = observed["sd_diff"].to_list()
    se, df = standard_error(now, counts)
    rows = []
    for d in differences:
        n = cases_needed(sds, d, target, level)
        rows.append({"difference": float(d), "cases_per_benchmark": n, "cases": n * len(sds),
                     "power_now": power(now, counts, d, level)})
    return PowerPlan(run_a, run_b, variance, pl.DataFrame(rows), float(variance["difference"].mean()),
                     {"se": se, "df": df, "detectable": detectable(now, counts, target, level)}, target, level)
