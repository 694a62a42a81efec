"""Coverage of the report's severe-error difference (``toolkit.analysis.harms.severe_rate_difference``).

It is compare's paired t (``toolkit.analysis.pairs.pairwise``) on the per-case differences of two runs'
``severe_rate`` (0/1 with one judge pass), the two safety benchmarks pooled as one sample. Here two runs'
severe-error indicators on m shared cases in each of two F1 benchmarks: run r errs on a case when
sqrt(rho) z + sqrt(1 - rho) e_r < Phi^-1(p_r,b), with z the case's own (shared) difficulty, so the rates are
exactly p_r,b and the runs' indicators correlated through the case. The true difference is the mean over the
two benchmarks of p_a,b - p_b,b (equal benchmark sizes: the pooled share). The case matrix goes through
``case_matrix`` and ``pairwise`` exactly as ``severe_rate_difference`` sends it, 4,000 replicates at once.

Monte Carlo SE of a coverage near 95% with 4,000 replicates: 0.34%. Coverage is counted over the intervals
shown: when every case difference is the same (mostly 0: both runs err on the same cases) there is no
spread and no interval, which happens at 3 cases per benchmark (1.7-19% of replicates here, the
most when the runs are equal and correlated; 0.6% at 10, never from 25). Measured (seed 1):

    scenario                               3        10       25       50   cases per benchmark
    rates .2/.4, .45/.6, rho .3          98.7     95.3     95.0     94.8
    rates .3/.3, .5/.5, rho .7 (equal)   99.6     95.0     95.7     95.0
    rates .2/.6 in both, rho 0           92.3     94.4     95.0     94.9

At 3 cases per benchmark (6 pooled cases) it under-covers a large difference (0.4: 92.3%; 91.7%
with another seed) and over-covers small ones; from 10 it holds 94-96%.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import polars as pl
import pytest

from toolkit.analysis.harms import BOTH
from toolkit.analysis.matrix import case_matrix
from toolkit.analysis.pairs import pairwise

REPLICATES = 4000
SE = (0.95 * 0.05 / REPLICATES) ** 0.5
SCENARIOS = {  # name: ((p_a, p_b) in the first benchmark, in the second), rho
    "moderate": (((0.2, 0.4), (0.45, 0.6)), 0.3),
    "null": (((0.3, 0.3), (0.5, 0.5)), 0.7),
    "large": (((0.2, 0.6), (0.2, 0.6)), 0.0),
}


def severe_indicators(rng: np.random.Generator, per_benchmark: int, rates, rho: float
                      ) -> tuple[np.ndarray, np.ndarray]:
    """(replicates, 2 m) 0/1 severe-error indicators of runs a and b on the same cases, benchmarks end to end."""
    a, b = [], []
    for p_a, p_b in rates:
        shared = np.sqrt(rho) * rng.standard_normal((REPLICATES, per_benchmark))
        for out, p in ((a, p_a), (b, p_b)):
            own = np.sqrt(1 - rho) * rng.standard_normal((REPLICATES, per_benchmark))
            out.append((shared + own < NormalDist().inv_cdf(p)).astype(np.float64))
    return np.concatenate(a, axis=1), np.concatenate(b, axis=1)


def severe_pairs(a: np.ndarray, b: np.ndarray) -> pl.DataFrame:
    """``pairwise`` rows of replicate r's run a (unit 2r) minus its run b (unit 2r + 1), pooled as
    ``severe_rate_difference`` pools the safety benchmarks."""
    reps, n = a.shape
    values = np.stack([a, b], axis=1).reshape(2 * reps, n)
    units = [str(i) for i in range(2 * reps)]
    cases = pl.DataFrame({"run_id": np.repeat(np.array(units), n), "benchmark": BOTH,
                          "case_id": np.tile(np.array([f"c{i}" for i in range(n)]), 2 * reps),
                          "severe_rate": values.ravel()})
    first = np.arange(0, 2 * reps, 2)
    return pairwise(case_matrix(cases, units, value="severe_rate"), first, first + 1)


@pytest.mark.parametrize("per_benchmark", [3, 10, 25, 50])
@pytest.mark.parametrize("scenario", list(SCENARIOS))
def test_severe_rate_difference_covers_the_true_difference(scenario: str, per_benchmark: int) -> None:
    rates, rho = SCENARIOS[scenario]
    truth = float(np.mean([p_a - p_b for p_a, p_b in rates]))
    a, b = severe_indicators(np.random.default_rng(1), per_benchmark, rates, rho)
    rows = severe_pairs(a, b)
    assert rows.height == REPLICATES
    assert np.allclose(rows["delta"].to_numpy(), (a - b).mean(axis=1))  # the pooled share's difference
    shown = rows.filter(pl.col("ci_low").is_not_null())
    constant = int((np.ptp(a - b, axis=1) == 0).sum())
    assert shown.height == REPLICATES - constant  # no interval exactly when the differences do not vary
    coverage = float(((shown["ci_low"] <= truth + 1e-12) & (shown["ci_high"] >= truth - 1e-12)).mean())
    message = (f"{scenario}, {per_benchmark} cases per benchmark: {coverage:.1%} of {shown.height} shown "
               f"(Monte Carlo SE {SE:.2%})")
    print(message)
    if per_benchmark >= 10:
        assert 0.94 - 1.96 * SE <= coverage <= 0.96 + 1.96 * SE, message
        assert shown.height >= 0.98 * REPLICATES, message
    else:  # 6 pooled cases: 92.3% for a difference of 0.4, conservative for small ones (docs/methods.md)
        assert coverage >= 0.90, message
