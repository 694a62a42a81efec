"""The arithmetic of ``toolkit.analysis.variance``: per-case statistics of a balanced (cases x answers x
passes) array, the estimators as functions of their case means, worst-at-k and pass^k weights.

Every statistic here is a function of means over cases of per-case values, so a bootstrap that resamples
cases whole needs only those values' resampled sums (``SharedResamples.stratum_sums``).
"""

from __future__ import annotations

import math

import numpy as np

# Rows of the per-case value matrix, in this order, then worst-at-k (k = 1..K) and pass^k (k = 1..K).
MEAN, SQUARE, WITHIN_ANSWERS, WITHIN_PASSES = range(4)
FIXED_ROWS = 4
PASS_TOLERANCE = 1e-12  # a sample score this close below the threshold passes (means of exact 1.0 stay 1.0)


def worst_weights(answers: int, k: int) -> np.ndarray:
    """Weights of the sorted scores s_(1) <= ... <= s_(K) in E[min of k of the K], all k-subsets equally likely:
    w_i = C(K - i, k - 1) / C(K, k), i = 1..K (the subsets whose smallest member is the i-th)."""
    total = math.comb(answers, k)
    return np.array([math.comb(answers - i, k - 1) / total for i in range(1, answers + 1)])


def pass_fraction(passing: np.ndarray, answers: int, k: int) -> np.ndarray:
    """C(c, k) / C(K, k) per case with c of its K answers passing: the share of k-subsets that all pass."""
    table = np.array([math.comb(c, k) for c in range(answers + 1)], dtype=np.float64) / math.comb(answers, k)
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


def estimates(means: np.ndarray, n: int, answers: int, passes: int, resampled: bool = False
              ) -> dict[str, tuple[np.ndarray, float]]:
    """Component -> (variance, divisor) from the case means of ``case_values`` rows (rows first; any trailing
    shape, e.g. resamples). variance / (divisor * n) is the part of the variance of the benchmark mean.

    between = ddof-1 variance of case means (= var_case + var_answer/K + var_judge/(K J) in expectation);
    a resample's own (n - 1)/n shrink is undone when ``resampled``, so the bootstrap centres on the estimate."""
    between = between_variance(means, n)
    if resampled and n > 1:
        between = between * n / (n - 1)
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
