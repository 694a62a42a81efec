"""Coverage of the judge's accuracy intervals (sensitivity, specificity, agreement, Cohen's kappa) when its
accuracy varies between cases, the situation the case clustering exists for.

Simulation (vectorised: every replicate in one array): k labelled cases of 6 items; the physician finds an
item met with probability t ~ Beta(2, 2) of its case; the judge is right on a met item with probability
expit(logit(0.90) + u) and on an unmet one with expit(logit(0.75) + u), u ~ N(0, sd) one per case (sd 0: no
heterogeneity). The truths are the population values the estimators converge to: sensitivity E[expit(logit
0.90 + u)], by Gauss-Hermite quadrature (the met count is independent of u), likewise specificity, and
kappa of the expected 2x2 table. 2,000 replicates: a coverage's Monte Carlo standard error is
sqrt(0.95 * 0.05 / 2000) = 0.49%, and the test accepts the 94-96% band widened by 1.96 of it (93.0-97.0%).

Measured (seed 1 + k + 10 sd; sd 0 / 1 / 2):
  sensitivity  k=10 96.5 / 94.7 / 96.5   k=20 96.3 / 95.8 / 95.5   k=50 96.0 / 95.0 / 94.5   k=100 94.7 / 95.5 / 94.4
  specificity  k=10 95.5 / 95.3 / 94.7   k=20 95.8 / 95.5 / 95.7   k=50 94.8 / 94.7 / 95.3   k=100 95.2 / 95.1 / 95.5
  kappa        k=10 96.1 / 95.8 / 95.9   k=20 95.4 / 95.7 / 96.7   k=50 94.9 / 95.5 / 95.3   k=100 95.0 / 95.2 / 95.9
What they replace, in the same model (other draws; docs/methods.md): Wilson at the clustered effective size 90.6-96.3% (91.1% for
sensitivity at k=10, sd 2); the case-bootstrap percentile interval of kappa 89.5-95.0% (89.5% at k=10, sd 1).
The figures printed with ``pytest -s`` are the ones in docs/methods.md.
"""

from __future__ import annotations

import numpy as np
import pytest

from toolkit.analysis.physician_stats import cluster_share, kappa_jackknife, kappa_tables, share_interval

REPLICATES = 2000
ITEMS, SENSITIVITY, SPECIFICITY = 6, 0.90, 0.75
MC_SE = (0.95 * 0.05 / REPLICATES) ** 0.5
BAND = (0.94 - 1.96 * MC_SE, 0.96 + 1.96 * MC_SE)


def _logit(p: float) -> float:
    return float(np.log(p / (1 - p)))


def _expected_accuracy(base: float, sd: float) -> float:
    nodes, weights = np.polynomial.hermite_e.hermegauss(80)
    return float((weights / (1 + np.exp(-(_logit(base) + sd * nodes)))).sum() / weights.sum())


def _tables(k: int, sd: float, seed: int) -> np.ndarray:
    """(replicates, cases, 4) per-case counts [tp, fn, fp, tn] (physician first, judge second)."""
    rng = np.random.default_rng(seed)
    t = rng.beta(2.0, 2.0, size=(REPLICATES, k, 1))
    met = rng.random((REPLICATES, k, ITEMS)) < t
    u = rng.normal(0.0, sd, size=(REPLICATES, k, 1))
    right = rng.random((REPLICATES, k, ITEMS)) < 1 / (1 + np.exp(-(np.where(met, _logit(SENSITIVITY),
                                                                             _logit(SPECIFICITY)) + u)))
    return np.stack([(met & right).sum(-1), (met & ~right).sum(-1), (~met & ~right).sum(-1),
                     (~met & right).sum(-1)], axis=-1).astype(np.float64)


def _coverage(low: np.ndarray, high: np.ndarray, truth: float) -> float:
    return float(np.mean((low <= truth) & (truth <= high)))


@pytest.mark.parametrize("cases", [10, 20, 50, 100])
def test_accuracy_and_kappa_intervals_cover_with_and_without_case_heterogeneity(cases: int) -> None:
    failures = []
    for sd in (0.0, 1.0, 2.0):
        tables = _tables(cases, sd, seed=1 + cases + int(10 * sd))
        tp, fn, fp, tn = np.moveaxis(tables, -1, 0)
        sens, spec = _expected_accuracy(SENSITIVITY, sd), _expected_accuracy(SPECIFICITY, sd)
        truths = {"sensitivity": (tp, tp + fn, sens), "specificity": (tn, tn + fp, spec),
                  "agreement": (tp + tn, tables.sum(-1), (sens + spec) / 2)}
        line = []
        for name, (hits, trials, truth) in truths.items():
            share, variance = cluster_share(hits, trials)
            low, high = share_interval(share, variance, (trials > 0).sum(-1), trials.sum(-1))
            line.append((name, _coverage(low, high, truth)))
        expected = np.array([3 * sens, 3 * (1 - sens), 3 * (1 - spec), 3 * spec])  # E[met items] = 6 E[t] = 3
        kappa, low, high = kappa_jackknife(tables)
        assert np.isnan(low).mean() < 0.01  # an interval for (nearly) every replicate
        line.append(("kappa", _coverage(low, high, float(kappa_tables(expected)))))
        print(f"cases {cases} sd {sd:g}: " + ", ".join(f"{n} {c:.1%}" for n, c in line)
              + f" (MC SE {MC_SE:.2%})")
        failures += [(sd, n, c) for n, c in line if not BAND[0] <= c <= BAND[1]]
    assert not failures, f"outside 94-96% widened by 1.96 Monte Carlo SE ({MC_SE:.2%}): {failures}"
