"""The arithmetic of judge-vs-physician checks, on plain numpy arrays.

* ``ppi_mean``: PPI++ mean estimation (Angelopoulos, Duchi, Zrnic 2023, "PPI++"), as ``ppi_py.ppi_mean_ci``
  computes it: lambda = cov(Y, Yhat) / ((1 + n/N) var(Yhat over all cases)), clipped to [0, 1]; estimate
  mean(lambda Yhat_unlabelled) + mean(Y - lambda Yhat); standard error
  sqrt(var(lambda Yhat_unlabelled) / N + var(Y - lambda Yhat) / n) (population variances); a normal interval.
  lambda = 0 is the labelled cases' own mean and CLT interval. By default a small-sample interval instead
  (Student t, unbiased variances, Hall's skewness correction; see ``ppi_mean``).
* ``cluster_share``: a share of item counts summed over cases, with the case-clustered (ratio-estimator)
  variance; ``share_interval`` its interval on the logit scale with Student t at cases - 1 degrees of
  freedom, so items of one case do not count as independent evidence (a logit GEE with a cluster-robust
  variance: it holds its 95% when the judge's accuracy varies between cases, where a Wilson interval at the
  effective number of items did not).
* ``rogan_gladen``: an observed match rate corrected by the judge's sensitivity and specificity, with the
  delta-method variance (Greenland 1996), clipped to [0, 1].
* ``kappa_tables`` / ``pair_kappa_tables``: Cohen's kappa of 2x2 tables and the kappa of unordered rating
  pairs (Fleiss' kappa, two ratings per item), vectorised over tables for the case bootstrap;
  ``kappa_jackknife`` the judge's kappa with its jackknife interval over cases.
* ``labels_to_halve``: labelled cases that would halve an interval's width (see the function).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from statistics import NormalDist

import numpy as np

from toolkit import _process
from toolkit.analysis._blas import product
from toolkit.analysis.items import wilson_interval
from toolkit.protocol import CI_HIGH, CI_LOW

Z = NormalDist().inv_cdf(CI_HIGH)


@dataclass(frozen=True)
class PPIMean:
    mean: float
    se: float
    lam: float
    labelled: int  # n
    unlabelled: int  # N
    rectifier_var: float  # var(Y - lambda Yhat)
    imputed_var: float  # var(lambda Yhat_unlabelled)
    df: float = math.inf  # degrees of freedom of the interval's Student t quantile (inf: normal)
    skew: float = 0.0  # the estimate's third cumulant over se^3: Hall's skewness correction (0: none)

    @property
    def half_width(self) -> float:
        # scipy's t quantile, loaded on use as every command does (``_process.student_t``)
        quantile = Z if math.isinf(self.df) else float(_process.student_t().stdtrit(self.df, CI_HIGH))
        return quantile * self.se

    def _hall(self, x: float) -> float:
        """The inverse of Hall's (1992) monotone transformation g(T) = T + a T^2 + a^2 T^3 / 3 + b of the
        studentised estimate, a = skew / 3, b = skew / 6."""
        a, b = self.skew / 3, self.skew / 6
        cube = float(np.cbrt(1 + 3 * a * (x - b)))
        return 3 * (x - b) / (cube * cube + cube + 1)  # (cube - 1) / a, without cancelling at small a

    # With a skew the interval is the union of the symmetric t interval and Hall's: it widens where the
    # scores are skewed and never narrows (Hall alone fixed scores near 1 and lost coverage elsewhere).
    @property
    def ci_low(self) -> float:
        if self.skew == 0:
            return self.mean - self.half_width
        return min(self.mean - self.half_width, self.mean - self.se * self._hall(self.half_width / self.se))

    @property
    def ci_high(self) -> float:
        if self.skew == 0:
            return self.mean + self.half_width
        return max(self.mean + self.half_width, self.mean - self.se * self._hall(-self.half_width / self.se))


def satterthwaite(terms: list[tuple[float, float]]) -> float:
    """Welch-Satterthwaite degrees of freedom of a sum of variance terms (variance, its df)."""
    total = sum(v for v, _ in terms)
    spread = sum(v * v / df for v, df in terms if df > 0 and not math.isinf(df))
    return math.inf if spread == 0 else total * total / spread


def ppi_mean(y: np.ndarray, yhat: np.ndarray, yhat_unlabelled: np.ndarray, lam: float | None = None,
             small_sample: bool = True) -> PPIMean:
    """PPI++ estimate of E[Y] from labelled (y, yhat) and unlabelled yhat; ``lam`` None: power-tuned.

    ``small_sample=False`` is ``ppi_py``'s interval exactly (population variances, normal quantile). By
    default the two variances are the unbiased ones and the quantile Student's t with Welch-Satterthwaite
    degrees of freedom: with tens of labelled cases the normal interval under-covers (the simulations of
    tests/test_physicians_coverage.py measure it); and the interval is widened to take in Hall's (1992)
    skewness-corrected one for the rectifier's third cumulant (``PPIMean.skew``): symmetric t intervals
    under-covered on one side where scores pile up near 1."""
    y, yhat, rest = (np.asarray(a, dtype=np.float64).ravel() for a in (y, yhat, yhat_unlabelled))
    n, big_n = y.size, rest.size
    if n == 0:
        raise ValueError("ppi_mean: no labelled case")
    if big_n == 0:
        lam = 0.0  # every case labelled: nothing to borrow from the judge
    if lam is None:
        var_hat = float(np.var(np.concatenate([yhat, rest]), ddof=1)) if n + big_n > 1 else 0.0
        cov = float(np.mean((y - y.mean()) * (yhat - yhat.mean())))
        lam = float(np.clip(cov / ((1 + n / big_n) * var_hat), 0.0, 1.0)) if var_hat > 0 else 0.0
        tuned = True
    else:
        tuned = False
    imputed = lam * rest
    rectifier = y - lam * yhat
    mean = (float(imputed.mean()) if big_n else 0.0) + float(rectifier.mean())
    # A lambda fitted on the labelled cases is a regression slope: the rectifier is a residual with two
    # parameters spent (mean and slope), as in ordinary least squares.
    ddof = (2 if tuned and lam > 0 else 1) if small_sample else 0
    if small_sample:  # var(Yhat) from every case's judge score: a few unlabelled cases (or one) cannot give it
        every = np.concatenate([yhat, rest])
        imputed_var = lam * lam * float(every.var(ddof=1)) if big_n and every.size > 1 else 0.0
        imputed_df = every.size - 1.0
    else:
        imputed_var, imputed_df = float(imputed.var()), big_n - 1.0
    rectifier_var = float(rectifier.var(ddof=ddof)) if n > ddof else math.nan
    terms = [(rectifier_var / n, n - float(ddof)), (imputed_var / big_n if big_n else 0.0, imputed_df)]
    df = satterthwaite(terms) if small_sample else math.inf
    se = math.sqrt(sum(v for v, _ in terms))
    skew = 0.0
    if small_sample and n >= 3 and se > 0:
        # Scores piling up near 0 or 1 make the rectifier's mean skewed, and a symmetric t interval misses
        # on one side (Beta(3, 0.8) difficulties: 91-94%); its third cumulant k3 / n^2 corrects for it.
        centred = rectifier - rectifier.mean()
        k3 = float((centred ** 3).sum()) * n / ((n - 1) * (n - 2))
        skew = k3 / (n * n * se ** 3)
    return PPIMean(mean, se, float(lam), n, big_n, rectifier_var, imputed_var, df, skew)


def cluster_share(successes: np.ndarray, trials: np.ndarray):
    """(share, variance) of sum(successes) / sum(trials) over clusters (cases, the last axis), the variance
    of a ratio estimator: k/(k-1) sum (a_c - p m_c)^2 / (sum m)^2 over the k clusters with trials; NaN
    without trials, variance NaN with one cluster. 1-D input gives floats, (..., cases) arrays per row."""
    a, m = np.asarray(successes, dtype=np.float64), np.asarray(trials, dtype=np.float64)
    keep = m > 0
    if a.ndim == 1:  # one table: sum over its clusters with trials alone, as it always has
        a, m, keep = a[keep], m[keep], keep[keep]
    total, k = m.sum(axis=-1), keep.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        p = a.sum(axis=-1) / total
        spread = ((a - np.expand_dims(p, -1) * m) ** 2).sum(axis=-1)
        variance = np.where(k >= 2, k / (k - 1) * spread / total ** 2, np.nan)
    p = np.where(total > 0, p, np.nan)
    variance = np.where(total > 0, variance, np.nan)
    return (float(p), float(variance)) if np.ndim(p) == 0 else (p, variance)


def share_interval(share, variance, clusters, trials):
    """95% interval of a case-clustered share from ``cluster_share``'s (share, variance), k cases with
    trials, n items: logit(p) +- t(k - 1) sqrt(variance (k - 1) / k) / (p (1 - p)), the intercept-only logit
    GEE with the sandwich (CR0) variance and k - 1 degrees of freedom; the t quantile is the small-sample
    correction (with CR1's k / (k - 1) as well it covered up to 97% at 10-20 cases). The Wilson interval at
    every item where the logit has no spread to work from (p 0 or 1, a zero variance, one case).
    Elementwise over arrays; tests/test_physicians_accuracy.py measures it."""
    p, v, k, n = (np.asarray(x, dtype=np.float64) for x in (share, variance, clusters, trials))
    with np.errstate(invalid="ignore", divide="ignore"):
        v = v * (k - 1) / k
        quantile = _process.student_t().stdtrit(np.maximum(k - 1, 1), CI_HIGH)
        half = quantile * np.sqrt(v) / (p * (1 - p))
        centre = np.log(p / (1 - p))
        low, high = 1 / (1 + np.exp(half - centre)), 1 / (1 + np.exp(-centre - half))
        w_low, w_high = wilson_interval(p * n, n)
    logit = (p > 0) & (p < 1) & (v > 0) & (k >= 2)
    empty = np.isnan(p) | (n <= 0)
    low = np.where(empty, np.nan, np.where(logit, low, w_low))
    high = np.where(empty, np.nan, np.where(logit, high, w_high))
    return (float(low), float(high)) if low.ndim == 0 else (low, high)


@dataclass(frozen=True)
class Corrected:
    rate: float
    variance: float
    clipped: bool


def rogan_gladen(observed: float, observed_var: float, sens: float, sens_var: float, spec: float,
                 spec_var: float) -> Corrected:
    """True rate pi = (p + spec - 1) / (sens + spec - 1), clipped to [0, 1]; delta-method variance
    [var p + pi^2 var sens + (1 - pi)^2 var spec] / (sens + spec - 1)^2. NaN when the judge is no better
    than chance on the class (sens + spec <= 1)."""
    youden = sens + spec - 1
    if not youden > 0:
        return Corrected(math.nan, math.nan, False)
    raw = (observed + spec - 1) / youden
    rate = min(max(raw, 0.0), 1.0)
    variance = (observed_var + rate ** 2 * sens_var + (1 - rate) ** 2 * spec_var) / youden ** 2
    return Corrected(rate, variance, rate != raw)


def kappa_tables(tables: np.ndarray) -> np.ndarray:
    """Cohen's kappa of 2x2 tables (..., 4) = [both yes, first yes only, second yes only, both no]; NaN when
    the chance agreement is 1 or a table is empty."""
    t = np.asarray(tables, dtype=np.float64)
    total = t.sum(axis=-1)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = (t[..., 0] + t[..., 3]) / total
        first, second = (t[..., 0] + t[..., 1]) / total, (t[..., 0] + t[..., 2]) / total
        expected = first * second + (1 - first) * (1 - second)
        return np.where(expected < 1, (observed - expected) / (1 - expected), np.nan)


def pair_kappa_tables(tables: np.ndarray) -> np.ndarray:
    """Fleiss' kappa for items rated twice by raters that vary per item, from (..., 3) = [items agreeing,
    items, 'yes' ratings]: p_o = agreeing / items, p_e = q^2 + (1 - q)^2 with q = yes / (2 items)."""
    t = np.asarray(tables, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        observed = t[..., 0] / t[..., 1]
        q = t[..., 2] / (2 * t[..., 1])
        expected = q * q + (1 - q) * (1 - q)
        return np.where(expected < 1, (observed - expected) / (1 - expected), np.nan)


def kappa_jackknife(tables: np.ndarray):
    """(kappa, low, high) of Cohen's kappa from per-case 2x2 tables (..., cases, 4): the delete-one-case
    jackknife standard error of log(1 - kappa) and Student t at cases - 1 degrees of freedom, mapped back
    (kappa is bounded by 1 and skewed near it; this scale held 95% from 10 cases where the percentile
    bootstrap of kappa did not: tests/test_physicians_accuracy.py). No interval (NaN) with fewer than 2
    cases, at kappa 1, or when leaving a case out leaves kappa undefined."""
    t = np.asarray(tables, dtype=np.float64)
    k = t.shape[-2]
    kappa = kappa_tables(t.sum(axis=-2))
    if k < 2:
        return kappa, np.full_like(kappa, np.nan), np.full_like(kappa, np.nan)
    with np.errstate(invalid="ignore", divide="ignore"):
        left_out = np.log(1 - kappa_tables(np.expand_dims(t.sum(axis=-2), -2) - t))
        spread = ((left_out - left_out.mean(axis=-1, keepdims=True)) ** 2).sum(axis=-1)
        half = float(_process.student_t().stdtrit(k - 1, CI_HIGH)) * np.sqrt((k - 1) / k * spread)
        centre = np.log(1 - kappa)
        usable = np.isfinite(centre) & np.isfinite(half)
        low = np.where(usable, np.maximum(1 - np.exp(centre + half), -1.0), np.nan)
        high = np.where(usable, 1 - np.exp(centre - half), np.nan)
    return kappa, low, high


def case_bootstrap(per_case: np.ndarray, statistic, samples: int, seed: int) -> tuple[float, float]:
    """Percentile interval of ``statistic`` over case resamples: ``per_case`` (cases, k) count rows are
    summed with multinomial case weights, so each resample is one matrix product."""
    rows = np.asarray(per_case, dtype=np.float64)
    if rows.shape[0] < 2:
        return math.nan, math.nan
    rng = np.random.default_rng(seed)
    values = []
    for start in range(0, samples, 2000):  # bounded memory: 2000 x cases weights at a time
        weights = rng.multinomial(rows.shape[0], np.full(rows.shape[0], 1 / rows.shape[0]),
                                  size=min(2000, samples - start))
        values.append(statistic(product(weights, rows)))
    drawn = np.concatenate(values)
    drawn = drawn[~np.isnan(drawn)]
    if drawn.size < samples / 2:
        return math.nan, math.nan  # mostly undefined resamples: no interval to speak of
    return float(np.quantile(drawn, CI_LOW)), float(np.quantile(drawn, CI_HIGH))


def labels_to_halve(parts: list[PPIMean], totals: list[int]) -> int | None:
    """Labelled cases in all that halve the interval of the mean of ``parts`` (one per benchmark, ``totals``
    the benchmark's scored cases): with lambda and the variances held at their estimates, the variance of
    a benchmark with m labelled cases of T is lambda^2 var(Yhat) / (T - m) + var(Y - lambda Yhat) / m; every
    benchmark's labelled count is scaled by a common factor f (m_b = ceil(f n_b), at most T_b) and the
    smallest f whose summed variance is a quarter of today's gives the answer. None when even labelling
    every case would not halve the width."""
    def variance(counts: np.ndarray) -> float:
        total = 0.0
        for part, t, m in zip(parts, totals, counts):
            total += (part.imputed_var / (t - m) if t > m else 0.0) + part.rectifier_var / m
        return total

    now = np.array([p.labelled for p in parts], dtype=np.float64)
    limit = np.array(totals, dtype=np.float64)
    target = variance(now) / 4

    def counts(factor: float) -> np.ndarray:
        return np.minimum(np.ceil(now * factor - 1e-9), limit)

    high = float((limit / now).max())
    if not variance(counts(high)) <= target:
        return None
    low = 1.0  # the variance falls as the factor grows: bisect to the smallest factor that reaches the target
    while high - low > 1e-4:
        mid = (low + high) / 2
        low, high = (low, mid) if variance(counts(mid)) <= target else (mid, high)
    return int(counts(high).sum())
