"""The arithmetic of ``toolkit.analysis.variance``: per-case statistics of a balanced (cases x answers x
passes) array, the estimators as functions of their case means, worst-at-k and pass^k weights, and the
intervals (bootstrap-t for components, BCa for means) over one run's resamples (``Statistics``).

Every statistic here is a function of means over cases of per-case values, so a bootstrap that resamples
cases whole needs only those values' products with the draw counts (``SharedResamples.counts``).
"""

from __future__ import annotations

import math
from statistics import NormalDist
from typing import Callable

import numpy as np

from toolkit import scoring
from toolkit.analysis._blas import product
from toolkit.protocol import CI_HIGH, CI_LOW
from toolkit.scoring import PASS_TOLERANCE

# Rows of the per-case value matrix, in this order, then worst-at-k (k = 1..K) and pass^k (k = 1..K).
MEAN, SQUARE, WITHIN_ANSWERS, WITHIN_PASSES = range(4)
FIXED_ROWS = 4


def worst_weights(answers: int, k: int) -> np.ndarray:
    """``toolkit.scoring.worst_weights`` as an array (one implementation of the arithmetic)."""
    return np.array(scoring.worst_weights(answers, k))


def pass_fraction(passing: np.ndarray, answers: int, k: int) -> np.ndarray:
    """``toolkit.scoring.pass_share`` per case, with c = ``passing`` of its K answers passing."""
    table = np.array([scoring.pass_share(c, answers, k) for c in range(answers + 1)], dtype=np.float64)
    return table[passing]


def case_values(scores: np.ndarray, threshold: float) -> np.ndarray:
    """(FIXED_ROWS + 2K, n) per-case values of a (n, K, J) score array: the case mean, its square, the
    variance between answer means (ddof 1; NaN at K = 1), the mean over answers of the variance between
    passes (ddof 1; NaN at J = 1), then the expected minimum of k answers and the pass^k share, k = 1..K."""
    n, answers, passes = scores.shape
    samples = scores.mean(axis=2)  # (n, K): each answer's score, the mean of its passes
    mean = samples.mean(axis=1)
    rows = [mean, mean * mean,
            samples.var(axis=1, ddof=1) if answers > 1 else np.full(n, np.nan),
            scores.var(axis=2, ddof=1).mean(axis=1) if passes > 1 else np.full(n, np.nan)]
    ordered = np.sort(samples, axis=1)
    rows += [ordered @ worst_weights(answers, k) for k in range(1, answers + 1)]
    passing = (samples >= threshold - PASS_TOLERANCE).sum(axis=1)
    rows += [pass_fraction(passing, answers, k) for k in range(1, answers + 1)]
    return np.vstack(rows)


def components(answers: int, passes: int) -> tuple[str, ...]:
    """The parts a design of K answers and J passes per case can tell apart, in the order shown: all three
    when K > 1 and J > 1; otherwise the single parts that are estimable and the sum that is not split."""
    if answers > 1 and passes > 1:
        return ("case", "answer", "judge")
    if answers > 1:
        return ("case", "answer+judge")
    if passes > 1:
        return ("case+answer", "judge")
    return ("case+answer+judge",)


def estimates(means: np.ndarray, n: int, answers: int, passes: int) -> dict[str, tuple[np.ndarray, float]]:
    """Component -> (variance, divisor) from the case means of ``case_values`` rows (rows first; any trailing
    shape, e.g. resamples). variance / (divisor * n) is the part of the variance of the benchmark mean.

    between = ddof-1 variance of case means (= var_case + var_answer/K + var_judge/(K J) in expectation)."""
    between = between_variance(means, n)
    judge = means[WITHIN_PASSES]  # estimates var_judge (J > 1)
    within = means[WITHIN_ANSWERS]  # estimates var_answer + var_judge / J (K > 1)
    out: dict[str, tuple[np.ndarray, float]] = {}
    if answers > 1:
        out["case"] = (between - within / answers, 1.0)
        if passes > 1:
            out["answer"] = (within - judge / passes, answers)
            out["judge"] = (judge, answers * passes)
        else:
            out["answer+judge"] = (within, answers)
    elif passes > 1:
        out["case+answer"] = (between - judge / passes, 1.0)
        out["judge"] = (judge, passes)
    else:
        out["case+answer+judge"] = (between, 1.0)
    return out


def between_variance(means: np.ndarray, n: int) -> np.ndarray:
    """The ddof-1 variance of case means from the means of ``case_values`` rows."""
    return (means[SQUARE] - means[MEAN] ** 2) * (n / (n - 1) if n > 1 else np.nan)


def gradient(name: str, means: np.ndarray, n: int, answers: int, passes: int) -> np.ndarray:
    """(4, ...) derivative of ``estimates(...)[name]`` by the means of the first FIXED_ROWS rows (the case
    mean, its square, the two within-case variances): the delta method's weights for its standard error."""
    scale = n / (n - 1) if n > 1 else np.nan
    zero, one = np.zeros_like(means[MEAN]), np.ones_like(means[MEAN])
    between = [-2.0 * means[MEAN] * scale, scale * one]  # d between / d(mean, square)
    rows = {"case": [*between, -one / answers, zero], "answer": [zero, zero, one, -one / passes],
            "judge": [zero, zero, zero, one], "answer+judge": [zero, zero, one, zero],
            "case+answer": [*between, zero, -one / passes], "case+answer+judge": [*between, zero, zero]}[name]
    return np.stack(rows)


def moment_products(values: np.ndarray) -> np.ndarray:
    """(FIXED_ROWS**2, n) per-case products of the first FIXED_ROWS rows (NaN rows, unused by the design, as 0):
    their means give the rows' covariance, whence a statistic's standard error (``gradient``)."""
    fixed = np.nan_to_num(values[:FIXED_ROWS], nan=0.0)
    return (fixed[:, None, :] * fixed[None, :, :]).reshape(FIXED_ROWS * FIXED_ROWS, -1)


def standard_error(weights: np.ndarray, means: np.ndarray, products: np.ndarray, n: int) -> np.ndarray:
    """Delta-method standard error over n cases: sqrt(g' Cov g / n), Cov = E[v v'] - E[v] E[v]' of the rows."""
    mu = np.nan_to_num(means[:FIXED_ROWS], nan=0.0)
    second = products.reshape((FIXED_ROWS, FIXED_ROWS) + products.shape[1:])
    cov = second - mu[:, None] * mu[None, :]
    return np.sqrt(np.maximum(np.einsum("k...,kl...,l...->...", weights, cov, weights), 0.0) / n)


def studentized_intervals(rows: list[tuple[float, float, np.ndarray, np.ndarray]], low: float, high: float
                          ) -> tuple[np.ndarray, np.ndarray]:
    """Bootstrap-t per (estimate, se, resampled estimates, resampled ses): [est - t_high * se, est - t_low * se],
    t the quantiles of (est* - est) / se* over resamples with a standard error; no spread: the estimate."""
    if not rows:
        return np.empty(0), np.empty(0)
    point = np.array([r[0] for r in rows])
    se = np.array([r[1] for r in rows])
    with np.errstate(invalid="ignore", divide="ignore"):
        t = (np.vstack([r[2] for r in rows]) - point[:, None]) / np.vstack([r[3] for r in rows])
    t[~np.isfinite(t)] = np.nan
    t_low, t_high = np.full(len(rows), np.nan), np.full(len(rows), np.nan)
    whole = ~np.isnan(t).any(axis=1)  # one quantile call for these; nanquantile goes row by row
    if whole.any():
        t_low[whole], t_high[whole] = np.quantile(t[whole], [low, high], axis=1)
    for i in np.flatnonzero(~whole & ~np.isnan(t).all(axis=1)):
        t_low[i], t_high[i] = np.nanquantile(t[i], [low, high])
    lows, highs = point - t_high * se, point - t_low * se
    flat = se == 0
    return np.where(flat, point, lows), np.where(flat, point, highs)


_NORMAL = NormalDist()


def leave_one_out(values: np.ndarray) -> np.ndarray:
    """(rows, n) case means of ``values`` (rows, n) with each case left out in turn (NaN when n < 2)."""
    n = values.shape[1]
    if n < 2:
        return np.full(values.shape, np.nan)
    return (values.sum(axis=1, keepdims=True) - values) / (n - 1)


def bca_interval(point: np.ndarray, boot: list[np.ndarray], jack: list[np.ndarray], low: float, high: float
                 ) -> tuple[np.ndarray, np.ndarray]:
    """Per statistic i: the BCa interval (Efron 1987) at levels ``low``/``high`` from its estimate point[i], its
    resamples boot[i] and its jackknife values jack[i]. z0 = Phi^-1(share of resamples below the estimate, ties
    half), acceleration a = sum d^3 / (6 (sum d^2)^1.5) with d = mean(jack) - jack; the interval is the
    resamples' quantiles (linear) at Phi(z0 + (z0 + z) / (1 - a (z0 + z))), z = Phi^-1(level). NaN resamples
    drop out; a statistic without spread gets its one value at both ends."""
    point = np.asarray(point, dtype=np.float64)
    if not len(point):
        return np.empty(0), np.empty(0)
    draws = np.vstack(boot)
    ordered = np.sort(draws, axis=1)  # NaN last
    valid = (~np.isnan(ordered)).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        below = ((draws < point[:, None]).sum(axis=1) + 0.5 * (draws == point[:, None]).sum(axis=1)) / valid
    below = np.clip(np.nan_to_num(below, nan=0.5), 0.5 / np.maximum(valid, 1), 1 - 0.5 / np.maximum(valid, 1))
    z0 = np.array([_NORMAL.inv_cdf(float(b)) for b in below])
    accel = np.zeros(len(point))
    for i, values in enumerate(jack):
        d = values[~np.isnan(values)]
        d = d.mean() - d if d.size else d
        spread = float((d ** 2).sum())
        accel[i] = float((d ** 3).sum()) / (6.0 * spread ** 1.5) if spread > 0 else 0.0
    ends = []
    for level in (low, high):
        z = z0 + _NORMAL.inv_cdf(level)
        safe = accel * z < 1
        adjusted = np.array([_NORMAL.cdf(float(v)) for v in np.where(safe, z0 + z / np.where(safe, 1 - accel * z, 1),
                                                                         0.0)])
        adjusted = np.where(safe, adjusted, 0.0 if level < 0.5 else 1.0)
        position = adjusted * np.maximum(valid - 1, 0)
        below_index = np.floor(position).astype(np.int64)
        above_index = np.minimum(below_index + 1, np.maximum(valid - 1, 0))
        rows = np.arange(len(point))
        lower, upper = ordered[rows, below_index], ordered[rows, above_index]
        ends.append(lower + (position - below_index) * (upper - lower))
    lows, highs = ends
    flat = ordered[np.arange(len(point)), 0] == ordered[np.arange(len(point)), np.maximum(valid - 1, 0)]
    lows, highs = np.where(flat, ordered[:, 0], lows), np.where(flat, ordered[:, 0], highs)
    missing = (valid == 0) | np.isnan(point)
    return np.where(missing, np.nan, lows), np.where(missing, np.nan, highs)


class Statistics:
    """Statistics of one run as functions of per-benchmark case means: estimate, resamples and jackknife per
    benchmark and macro, collected so that their BCa intervals are computed together."""

    def __init__(self, values: list[np.ndarray], counts: tuple[np.ndarray, ...]) -> None:
        self.sizes = [v.shape[1] for v in values]
        self.jack = [leave_one_out(v) for v in values]
        rows = values[0].shape[0] if values else 0
        # The values and their moment products resampled in one product per benchmark.
        stacked = [np.vstack([v, moment_products(v)]) for v in values]
        means = [np.hstack([m.mean(axis=1)[:, None], product(m, c) / m.shape[1]]) for m, c in zip(stacked, counts)]
        self.both = [m[:rows] for m in means]  # column 0: the sample, then one column per resample
        self.both_second = [m[rows:] for m in means]
        self.point = [m[:, :1] for m in self.both]
        self.rows: list[tuple[float, np.ndarray, np.ndarray]] = []
        self.parts: dict[tuple[str, int], tuple[float, float, np.ndarray, np.ndarray]] = {}
        self.student: list[tuple[float, float, np.ndarray, np.ndarray]] = []

    def component(self, name: str, members: list[int], answers: int, passes: int) -> int:
        """Index of the component ``name`` averaged over ``members`` for its bootstrap-t interval: its
        delta-method standard error, in the sample and in every resample, from the per-case moment rows."""
        point = boot = 0.0
        variance = boot_variance = 0.0
        for b in members:
            value, se, values, ses = self._part(name, b, answers, passes)
            point, boot = point + value, boot + values
            variance, boot_variance = variance + se ** 2, boot_variance + ses ** 2
        count = len(members)
        self.student.append((float(point) / count, math.sqrt(variance) / count, boot / count,
                             np.sqrt(boot_variance) / count))
        return len(self.student) - 1

    def component_intervals(self) -> tuple[np.ndarray, np.ndarray]:
        """Bootstrap-t lows and highs of every component added, in order."""
        return studentized_intervals(self.student, CI_LOW, CI_HIGH)

    def add(self, fn: Callable[[np.ndarray, int], np.ndarray], members: list[int]) -> int:
        """Index of the statistic mean_b fn(case means of benchmark b, n_b) over ``members``."""
        count = len(members)
        both = [fn(self.both[b], self.sizes[b]) for b in members]
        points = [float(x[0]) for x in both]
        point = sum(points) / count
        boot = sum(x[1:] for x in both) / count
        jack = np.concatenate([point + (fn(self.jack[b], self.sizes[b] - 1) - p) / count
                               for b, p in zip(members, points)])
        self.rows.append((point, boot, jack))
        return len(self.rows) - 1

    def _part(self, name: str, b: int, answers: int, passes: int) -> tuple[float, float, np.ndarray, np.ndarray]:
        """Component ``name`` of benchmark b: estimate, standard error, and both in every resample."""
        key = (name, b)
        if key not in self.parts:
            n = self.sizes[b]

            means = self.both[b]
            value = estimates(means, n, answers, passes)[name][0]
            se = standard_error(gradient(name, means, n, answers, passes), means, self.both_second[b], n)
            self.parts[key] = (float(value[0]), float(se[0]), value[1:], se[1:])
        return self.parts[key]

    def intervals(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Estimates, BCa lows and highs of every statistic added, in order."""
        point = np.array([r[0] for r in self.rows])
        low, high = bca_interval(point, [r[1] for r in self.rows], [r[2] for r in self.rows], CI_LOW, CI_HIGH)
        return point, low, high
